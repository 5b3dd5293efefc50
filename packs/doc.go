// Package packs is the pack format: the pack.json manifest (decoding,
// validation that reports every problem at once, and its published JSON
// Schema) and the .pack archive, a deterministic gzip-compressed tar that
// Pack writes and Read checks defensively, as untrusted input.
//
// # What goes into a pack
//
// The manifest decides. A pack holds exactly pack.json, the modules listed
// in runtime.modules, and every file under assets/ (dotfiles included).
// Read refuses an archive holding anything else ("not declared").
//
// A pack directory is usually also the source directory (examples/hello-c
// holds hello.c, build.sh and README.md next to pack.json and hello.wasm).
// Pack therefore applies the same rule as a selection instead of refusing
// the directory: it packs what the manifest declares and leaves the rest
// out. Nothing is left out silently: Collect returns what it did not pack in
// Source.Skipped, for the CLI to print. What Pack refuses is what would make
// the archive wrong: an invalid manifest, a listed module that is missing or
// does not match its sha256, a symbolic link or other non-regular file among
// what it packs, and non-portable file names. Turned down: refusing
// undeclared files in the directory (every pack would need a separate
// staging directory), a "files" list in the manifest (one more list to keep
// in sync, not in openwop), ignore files (a second rule to learn, when
// assets/ already says "ship this").
//
// # openwop packs
//
// Read also takes an openwop registry tarball as published: its entries'
// "./" prefix is dropped (and the "./" directory skipped), and a pack.json
// in openwop's format (IsOpenwopManifest) is translated into packrun's model
// by TranslateOpenwop, Manifest.Openwop recording what the translation read
// and decided. Such a pack may hold files the manifest does not name
// (README.md, schemas/, keys/, pack.json.sig): they are kept and never run.
// Its signatures are the registry package's business.
//
// # Paths
//
// A path inside a pack is relative, slash-separated, clean (no "." or ".."
// components, no repeated or trailing slash), valid UTF-8 without control
// characters, backslashes or colons, at most 1024 bytes, and no two paths
// differ only in case. A leading "./" is read as nothing.
//
// # Digests
//
// Archive.SHA256 is the digest of the archive bytes, what signatures cover.
// SourceDigest is the digest of the packed content alone (independent of
// compression), the source digest of a pack's SLSA provenance.
package packs
