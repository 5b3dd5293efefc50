// Package examples holds the example node packs. Each directory has its
// source, build script, built module and pack.json; the tests build and run
// them all. The packs `packrun demo` installs are embedded here.
package examples

import "embed"

// Demo holds the packs `packrun demo` signs and installs: the C hello skill
// and the demo pack (memory counter, sensor, adapter-backed summarizer).
//
//go:embed hello-c/pack.json hello-c/hello.wasm demo-c/pack.json demo-c/demo.wasm
var Demo embed.FS

// DemoPacks returns the directories of Demo, in install order.
func DemoPacks() []string { return []string{"hello-c", "demo-c"} }
