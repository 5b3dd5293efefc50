package main

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/packrun/packrun/abi/guest"
)

// A project made by packrun init depends on its language's SDK as a
// package (a Cargo path dependency, an npm file: dependency, a Go module
// replaced by a directory, an include directory for C), kept in the
// project under sdk/<lang>/ so that it builds offline and anywhere; packrun
// sdk upgrade replaces that directory with the SDK this binary carries.

// sdkDir is where a language's SDK package lives in a project.
func sdkDir(lang string) string { return "sdk/" + lang }

// sdkVersionFile records, in the project's SDK directory, which SDK
// version it holds.
const sdkVersionFile = "SDK-VERSION"

// sdkPlacement moves the files of guest.SDK matching glob to the project:
// the part of their path after strip goes under to.
type sdkPlacement struct{ glob, strip, to string }

// sdkPlacements lists, per language, what its SDK package is made of.
// Languages without an SDK package (wat, extism-go) have none.
var sdkPlacements = map[string][]sdkPlacement{
	"c": {{"c/*", "c/", "sdk/c"}},
	// The Go SDK keeps its import path, github.com/packrun/packrun/abi/guest/go/packrun:
	// sdk/go is a module of that name (go.mod below) holding only it, and
	// the project's go.mod replaces the module by that directory.
	"go":             {{"go/packrun/*.go", "go/", "sdk/go/abi/guest/go"}, {"go/LICENSE", "go/", "sdk/go"}},
	"rust":           {{"rust/packrun/*", "rust/packrun/", "sdk/rust"}, {"rust/packrun/src/*", "rust/packrun/", "sdk/rust"}},
	"assemblyscript": {{"assemblyscript/*", "assemblyscript/", "sdk/assemblyscript"}, {"assemblyscript/assembly/*", "assemblyscript/", "sdk/assemblyscript"}},
}

// sdkGoModule is the module path the Go SDK is imported from.
const sdkGoModule = "github.com/packrun/packrun"

// sdkPackageFiles returns the files of lang's SDK package as they go into
// a project (none for a language without one).
func sdkPackageFiles(lang string) ([]projectFile, error) {
	places, ok := sdkPlacements[lang]
	if !ok {
		return nil, nil
	}
	var files []projectFile
	for _, pl := range places {
		matches, err := fs.Glob(guest.SDK, pl.glob)
		if err != nil {
			return nil, err
		}
		n := 0
		for _, p := range matches {
			if d, err := fs.Stat(guest.SDK, p); err != nil || d.IsDir() || strings.HasSuffix(p, "_test.go") {
				continue
			}
			b, err := fs.ReadFile(guest.SDK, p)
			if err != nil {
				return nil, err
			}
			files = append(files, projectFile{path.Join(pl.to, strings.TrimPrefix(p, pl.strip)), b, 0o644})
			n++
		}
		if n == 0 {
			return nil, fmt.Errorf("init: no SDK files match %s", pl.glob)
		}
	}
	if lang == "go" {
		files = append(files, projectFile{"sdk/go/go.mod", []byte("module " + sdkGoModule + "\n\ngo 1.24\n"), 0o644})
	}
	files = append(files, projectFile{path.Join(sdkDir(lang), sdkVersionFile), []byte(guest.Version + "\n"), 0o644})
	return files, nil
}

func (a *app) sdkCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sdk",
		Short: "The guest SDK packages: which version this packrun carries, and upgrading a project's",
		Long: `A project made by packrun init depends on its language's SDK as a package kept in
the project under sdk/<lang>/ (the Rust crate packrun, the npm package @packrun/as-sdk,
the Go package github.com/packrun/packrun/abi/guest/go/packrun, the C SDK's header and
source), so it builds offline and anywhere. packrun sdk upgrade replaces that directory
with the SDK this packrun carries.`,
	}
	var asJSON bool
	version := &cobra.Command{
		Use:   "version",
		Short: "Print the version of the SDK packages this packrun carries, and their languages",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			langs := make([]string, 0, len(sdkPlacements))
			for l := range sdkPlacements {
				langs = append(langs, l)
			}
			slices.Sort(langs)
			if asJSON {
				return a.emit(struct {
					Version   string   `json:"version"`
					Languages []string `json:"languages"`
				}{guest.Version, langs})
			}
			fmt.Fprintf(a.stdout, "%s (%s)\n", guest.Version, strings.Join(langs, ", "))
			return nil
		},
	}
	outputVar(version.Flags(), &asJSON)
	cmd.AddCommand(version)
	cmd.AddCommand(&cobra.Command{
		Use:   "upgrade DIR",
		Short: "Replace the SDK package in project DIR (DIR/sdk/<lang>) with the one this packrun carries",
		Long: `Replace DIR/sdk/<lang> with the SDK package this packrun carries and print the
versions before and after. The new files are written beside the old directory first
and swapped in with renames, so an interrupted upgrade leaves the old SDK or the new
one, never a mix. Local edits to the SDK files are replaced: keep your code outside sdk/.`,
		Example: "  packrun sdk upgrade hello && packrun build hello",
		Args:    cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			return a.upgradeSDK(args[0])
		},
	})
	return cmd
}

// upgradeSDK replaces every SDK package found in the project dir.
func (a *app) upgradeSDK(dir string) error {
	var langs []string
	for lang := range sdkPlacements {
		if fi, err := os.Stat(filepath.Join(dir, filepath.FromSlash(sdkDir(lang)))); err == nil && fi.IsDir() {
			langs = append(langs, lang)
		}
	}
	if len(langs) == 0 {
		return usageError("%s has no SDK package (sdk/c, sdk/go, sdk/rust or sdk/assemblyscript): is it a project made by packrun init?", dir)
	}
	slices.Sort(langs)
	for _, lang := range langs {
		target := filepath.Join(dir, filepath.FromSlash(sdkDir(lang)))
		old := "unknown"
		if b, err := os.ReadFile(filepath.Join(target, sdkVersionFile)); err == nil {
			old = strings.TrimSpace(string(b))
		}
		files, err := sdkPackageFiles(lang)
		if err != nil {
			return err
		}
		same, err := sameFiles(target, files, sdkDir(lang))
		if err != nil {
			return err
		}
		if same {
			fmt.Fprintf(a.stdout, "%s: %s, up to date\n", sdkDir(lang), guest.Version)
			continue
		}
		if err := replaceDir(target, files, sdkDir(lang)); err != nil {
			return fmt.Errorf("sdk upgrade %s: %w", target, err)
		}
		fmt.Fprintf(a.stdout, "%s: %s -> %s\n", sdkDir(lang), old, guest.Version)
	}
	return nil
}

// sameFiles reports whether dir holds exactly files (paths relative to
// the project, all under prefix).
func sameFiles(dir string, files []projectFile, prefix string) (bool, error) {
	want := map[string][]byte{}
	for _, f := range files {
		want[filepath.FromSlash(strings.TrimPrefix(f.path, prefix+"/"))] = f.data
	}
	n := 0
	same := true
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !same {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		w, ok := want[rel]
		same = ok && bytes.Equal(w, b)
		n++
		return nil
	})
	return same && n == len(want), err
}

// replaceDir writes files into a new directory beside dir, then swaps it
// in: dir moves aside, the new one takes its name, the old one is removed.
func replaceDir(dir string, files []projectFile, prefix string) error {
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "."+filepath.Base(dir)+".new-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	for _, f := range files {
		p := filepath.Join(tmp, filepath.FromSlash(strings.TrimPrefix(f.path, prefix+"/")))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, f.data, f.mode); err != nil {
			return err
		}
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	aside := tmp + ".old"
	if err := os.Rename(dir, aside); err != nil {
		return err
	}
	if err := os.Rename(tmp, dir); err != nil {
		if rerr := os.Rename(aside, dir); rerr != nil {
			return errors.Join(err, rerr)
		}
		return err
	}
	return os.RemoveAll(aside)
}
