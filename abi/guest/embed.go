// Package guest gives access to the guest SDK sources, so that tools (packrun
// init) can copy them into a new pack project. The SDKs themselves live in the
// subdirectories: c, go, rust, assemblyscript and wat.
package guest

import "embed"

// SDK holds the sources a pack project vendors, under their paths in this
// directory:
//
//	c/packrun.h, c/packrun.c              C SDK
//	go/packrun/*.go                       Go SDK (package packrun)
//	rust/packrun/src/lib.rs               Rust SDK (crate packrun)
//	assemblyscript/assembly/*.ts          AssemblyScript SDK
//
//go:embed c/packrun.h c/packrun.c
//go:embed go/packrun/*.go
//go:embed rust/packrun/src/lib.rs
//go:embed assemblyscript/assembly/*.ts
var SDK embed.FS
