package storecore

import (
	"strings"
	"testing"
	"testing/fstest"
)

func TestMigrationsInOrder(t *testing.T) {
	fsys := fstest.MapFS{
		"m/0002_second.sql": {Data: []byte("B;")},
		"m/0001_first.sql":  {Data: []byte("A;")},
	}
	got, err := Migrations(fsys, "m")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, "|") != "A;|B;" {
		t.Fatalf("got %q", got)
	}
}

func TestMigrationsRefusesGapsAndBadNames(t *testing.T) {
	for name, fsys := range map[string]fstest.MapFS{
		"gap":       {"m/0001_a.sql": {}, "m/0003_c.sql": {}},
		"no number": {"m/0001_a.sql": {}, "m/second.sql": {}},
		"not sql":   {"m/0001_a.txt": {}},
		"short":     {"m/001_a.sql": {}},
		"empty":     {"m/.keep": {}},
	} {
		if _, err := Migrations(fsys, "m"); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
