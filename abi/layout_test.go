package abi

import (
	"go/build"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const modulePath = "github.com/packrun/packrun"

// TestDependencyDirection keeps the layout of DESIGN.md: abi <- runtime <-
// host <- cmd and packs <- registry <- cmd; abi imports nothing of ours and
// runtime never reaches registry, packs or host.
func TestDependencyDirection(t *testing.T) {
	allowed := map[string][]string{
		"abi":      {},
		"runtime":  {"abi", "internal/textclip"}, // a leaf: it imports nothing of ours
		"host":     {"abi", "runtime", "packs", "internal"},
		"packs":    {"abi", "internal"},
		"registry": {"abi", "packs", "internal"},
		"internal": {},
		// Test support (a runtime.Services fake, module helpers): only
		// tests import it.
		"internal/hosttest": {"abi", "runtime"},
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
