// Package packs will hold the pack format: the pack.json manifest schema and
// its validation, and the deterministic .pack archive reader and writer.
//
// Status: not built yet; `packrun invoke` runs raw .wasm modules.
package packs
