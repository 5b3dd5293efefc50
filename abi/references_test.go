package abi

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// numberedRef matches a reference to a tracker issue or to one of the
// user's numbered source documents ("issue 20", "seed 003 §10",
// "seeds 000–002", also wrapped over two comment lines). Code names the
// spec and section it follows (the agent runtime schema §10, the AgentOS
// message schema...) or the RATIONALE.md section of a decision: a number
// means nothing to a reader without the tracker (CONTRIBUTING.md).
var numberedRef = regexp.MustCompile(`(?i)\bissues?(?:[ \t]|\n[ \t]*//)+[0-9]+\b|\bseeds?(?:[ \t-]|\n[ \t]*//)+00[0-9]\b`)

// refsElsewhere are the folders other work is rewriting; their references
// go when that work lands.
var refsElsewhere = []string{"internal/store", "internal/evidence"}

// refsKept are references that are data, not prose: changing them changes
// what the program stores or prints (and what its tests assert).
var refsKept = map[string]string{
	// The detail of events recorded before workflows existed: stored rows
	// carry it as written.
	"host/sensors.go": `workflows arrive with issue 17"`,
	// The demo's report line, which the CLI's tests read back.
	"cmd/packrun/demo.go": `messages (seed 002, delivered crisis-first); demo.responder answered %d with seed-001 responses"`,
}

// TestNoNumberedReferences keeps issue and seed numbers out of the
// non-test Go files (CONTRIBUTING.md, "Rules the tests check").
func TestNoNumberedReferences(t *testing.T) {
	checked := 0
	err := filepath.WalkDir("..", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := filepath.ToSlash(strings.TrimPrefix(path, ".."+string(filepath.Separator)))
		if d.IsDir() {
			name := d.Name()
			if name == "testdata" || name == "node_modules" || (strings.HasPrefix(name, ".") && path != "..") {
				return filepath.SkipDir
			}
			for _, dir := range refsElsewhere {
				if rel == dir {
					return filepath.SkipDir
				}
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		checked++
		src := string(b)
		if kept, ok := refsKept[rel]; ok {
			if !strings.Contains(src, kept) {
				t.Errorf("%s: the kept reference %q is gone: drop it from refsKept", rel, kept)
			}
			src = strings.Replace(src, kept, "", 1)
		}
		for _, loc := range numberedRef.FindAllStringIndex(src, -1) {
			line := 1 + strings.Count(src[:loc[0]], "\n")
			t.Errorf("%s:%d: %q: name the spec and section, or the RATIONALE.md section, instead of a number", rel, line, src[loc[0]:loc[1]])
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Fatalf("checked %d Go files: the walk missed the module", checked)
	}
}
