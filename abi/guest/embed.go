// Package guest gives access to the guest SDK packages, so that tools
// (packrun init, packrun sdk upgrade) can place them in a pack project. The
// SDKs themselves live in the subdirectories: c, go, rust, assemblyscript
// and wat.
package guest

import "embed"

// Version is the version of every SDK package here: the Rust crate's
// Cargo.toml and the npm package's package.json say the same (a test
// checks), and a project records it in its dependency on the SDK.
const Version = "0.1.0"

// SDK holds each SDK package under its path in this directory:
//
//	c/packrun.h, c/packrun.c, c/LICENSE                  C SDK
//	go/packrun/*.go, go/LICENSE                          Go SDK (package packrun)
//	rust/packrun/{Cargo.toml,src/lib.rs,LICENSE}         Rust SDK (crate packrun)
//	assemblyscript/{package.json,assembly/*,LICENSE}     AssemblyScript SDK (@packrun/as-sdk)
//
//go:embed c/packrun.h c/packrun.c c/LICENSE
//go:embed go/packrun/*.go go/LICENSE
//go:embed rust/packrun/Cargo.toml rust/packrun/src/lib.rs rust/packrun/LICENSE
//go:embed assemblyscript/package.json assemblyscript/assembly/*.ts assemblyscript/LICENSE
var SDK embed.FS
