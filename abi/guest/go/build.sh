#!/usr/bin/env bash
# Builds example/counter.wasm and fetch/fetch.wasm, node packs using the Go
# guest SDK, as wasip1 reactors (Go >= 1.24). -trimpath and -buildvcs=false
# make the output byte-identical across checkouts and commits; sdk_test.go
# checks it. Usage: ./build.sh [OUT]   (OUT replaces counter.wasm only).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
(cd example && GOOS=wasip1 GOARCH=wasm go build -trimpath -buildvcs=false -buildmode=c-shared -o "${1:-counter.wasm}" .)
if [[ $# -eq 0 ]]; then
	(cd fetch && GOOS=wasip1 GOARCH=wasm go build -trimpath -buildvcs=false -buildmode=c-shared -o fetch.wasm .)
fi
