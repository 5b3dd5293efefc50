package guest

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
)

// sdkPackages are the SDK directories that ship as packages of their own;
// each carries the project's licence.
var sdkPackages = []string{"c", "go", "rust/packrun", "assemblyscript", "wat"}

// TestSDKPackagesCarryTheLicence: the root LICENSE is Apache-2.0 and every
// SDK package has the same text, and the package metadata says so.
func TestSDKPackagesCarryTheLicence(t *testing.T) {
	root, err := os.ReadFile("../../LICENSE")
	if err != nil {
		t.Fatalf("the repository has no LICENSE: %v", err)
	}
	if !bytes.Contains(root, []byte("Apache License")) || !bytes.Contains(root, []byte("Version 2.0, January 2004")) {
		t.Fatal("LICENSE is not the Apache License 2.0")
	}
	for _, dir := range sdkPackages {
		got, err := os.ReadFile(filepath.Join(dir, "LICENSE"))
		if err != nil {
			t.Errorf("SDK %s: %v", dir, err)
			continue
		}
		if !bytes.Equal(got, root) {
			t.Errorf("SDK %s: LICENSE differs from the repository's", dir)
		}
	}
	cargo, err := os.ReadFile("rust/packrun/Cargo.toml")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`name = "packrun"`, `license = "Apache-2.0"`, `version = "` + Version + `"`} {
		if !bytes.Contains(cargo, []byte(want)) {
			t.Errorf("rust/packrun/Cargo.toml lacks %s", want)
		}
	}
	var pkg struct {
		Name    string            `json:"name"`
		Version string            `json:"version"`
		License string            `json:"license"`
		Private bool              `json:"private"`
		Exports map[string]string `json:"exports"`
		Files   []string          `json:"files"`
	}
	b, err := os.ReadFile("assemblyscript/package.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &pkg); err != nil {
		t.Fatalf("assemblyscript/package.json: %v", err)
	}
	if pkg.Name != "@packrun/as-sdk" || pkg.Version != Version || pkg.License != "Apache-2.0" || pkg.Private || !slices.Contains(pkg.Files, "LICENSE") {
		t.Errorf("assemblyscript/package.json: %+v", pkg)
	}
	// Every export names a file that exists (a wildcard its directory).
	for key, target := range pkg.Exports {
		if m, _ := filepath.Glob(filepath.Join("assemblyscript", target)); len(m) == 0 {
			t.Errorf("package.json export %q names %s, which does not exist", key, target)
		}
	}
}

// TestASPackagePacks: `npm pack` of the AssemblyScript SDK ships its
// sources, README and LICENSE (and nothing of the example or the build).
func TestASPackagePacks(t *testing.T) {
	if _, err := exec.LookPath("npm"); err != nil {
		t.Skip("npm not installed")
	}
	cmd := exec.Command("npm", "pack", "--dry-run", "--json", "--ignore-scripts")
	cmd.Dir = "assemblyscript"
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("npm pack: %v\n%s", err, out)
	}
	var packs []struct {
		Files []struct{ Path string } `json:"files"`
	}
	if err := json.Unmarshal(out, &packs); err != nil || len(packs) != 1 {
		t.Fatalf("npm pack --json: %v\n%s", err, out)
	}
	var files []string
	for _, f := range packs[0].Files {
		files = append(files, f.Path)
	}
	for _, want := range []string{"LICENSE", "README.md", "package.json", "assembly/index.ts", "assembly/exports.ts"} {
		if !slices.Contains(files, want) {
			t.Errorf("npm pack leaves out %s: %v", want, files)
		}
	}
	sdkFile := regexp.MustCompile(`^(LICENSE|README\.md|package\.json|assembly/[a-z]+\.(ts|json))$`)
	for _, f := range files {
		if !sdkFile.MatchString(f) {
			t.Errorf("npm pack ships %s, which is not part of the SDK", f)
		}
	}
}
