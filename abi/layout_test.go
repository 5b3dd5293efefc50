package abi

import (
	"go/build"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const modulePath = "github.com/packrun/packrun"

// TestDependencyDirection keeps the layout of docs/ARCHITECTURE.md: abi <-
// runtime <- root <- cmd; packs <- registry <- root; host (domain types and
// store interfaces) <- internal/* <- root. abi imports nothing of ours,
// runtime reaches no store, pack or trust code, and nothing below the root
// imports it (checked apart, below).
func TestDependencyDirection(t *testing.T) {
	allowed := map[string][]string{
		"abi":      {},
		"runtime":  {"abi", "internal/textclip"}, // a leaf: it imports nothing of ours
		"host":     {"abi", "internal/textclip"},
		"packs":    {"abi", "internal"},
		"registry": {"abi", "packs", "host", "internal"}, // host: the one ErrNotFound
		// The implementations: anything but the root and the CLI.
		"internal": {"abi", "runtime", "host", "packs", "registry", "internal"},
		// The installed packs in memory, below both the Host and the
		// dispatcher: it reads the store, nothing else of ours.
		"internal/packindex": {"abi", "host", "packs", "internal/textclip"},
		// The openwop run scheduler: below the root, it runs nodes through
		// the dispatcher's request type and finds packs in the index.
		"internal/runs": {"abi", "runtime", "host", "internal/dispatch", "internal/packindex", "internal/replay"},
		// Test support (a runtime.Services fake, module helpers): only
		// tests import it.
		"internal/testing/hosttest": {"abi", "runtime"},
		"examples":                  {"abi"},
	}
	for pkg, ok := range allowed {
		filepath.WalkDir(filepath.Join("..", pkg), func(dir string, d os.DirEntry, err error) error {
			if err != nil || !d.IsDir() || d.Name() == "testdata" {
				return nil
			}
			if sub, _ := filepath.Rel("..", dir); filepath.ToSlash(sub) != pkg && allowed[filepath.ToSlash(sub)] != nil {
				return filepath.SkipDir // it has its own rule
			}
			p, err := build.ImportDir(dir, 0)
			if err != nil {
				return nil // no Go files
			}
			for _, imp := range p.Imports {
				rel, ours := strings.CutPrefix(imp, modulePath+"/")
				if !ours {
					continue
				}
				top := strings.SplitN(rel, "/", 2)[0]
				if top == pkg {
					continue
				}
				permitted := false
				for _, a := range ok {
					permitted = permitted || a == top || a == rel
				}
				if !permitted {
					t.Errorf("%s imports %s: not allowed by the layout", dir, imp)
				}
			}
			return nil
		})
	}
}

// TestNothingImportsTheRoot: the root package (the Host) is the top of the
// library; only the CLI (and tests of the root itself) may import it.
func TestNothingImportsTheRoot(t *testing.T) {
	filepath.WalkDir("..", func(dir string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel("..", dir)
		rel = filepath.ToSlash(rel)
		if rel == "." || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") {
			if rel != "." {
				return filepath.SkipDir
			}
			return nil
		}
		if rel == "cmd" {
			return filepath.SkipDir
		}
		p, err := build.ImportDir(dir, 0)
		if err != nil {
			return nil
		}
		for _, imp := range p.Imports {
			if imp == modulePath {
				t.Errorf("%s imports the root package %s: only cmd may", dir, modulePath)
			}
		}
		return nil
	})
}

// TestOnlySQLiteOpensPackrunDB: the SQLite driver (and so packrun.db) is
// internal/store/sqlite's alone. Any other package reads a SQLite store through
// it: a store migration through its export stream (internal/store/storemove).
func TestOnlySQLiteOpensPackrunDB(t *testing.T) {
	const driver = "github.com/mattn/go-sqlite3"
	var importers []string
	filepath.WalkDir("..", func(dir string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		if dir != ".." && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		p, err := build.ImportDir(dir, 0)
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel("..", dir)
		for _, imps := range [][]string{p.Imports, p.TestImports, p.XTestImports} {
			if slices.Contains(imps, driver) {
				importers = append(importers, filepath.ToSlash(rel))
				break
			}
		}
		return nil
	})
	if !slices.Equal(importers, []string{"internal/store/sqlite"}) {
		t.Errorf("packages importing %s: %v, want only internal/store/sqlite", driver, importers)
	}
}
