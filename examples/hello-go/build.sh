#!/usr/bin/env bash
# Builds hello.wasm from the Go sources as a wasip1 reactor (needs Go >= 1.24
# for //go:wasmexport and -buildmode=c-shared on wasip1).
# -trimpath and -buildvcs=false keep the output byte-identical across checkouts
# and commits.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
GOOS=wasip1 GOARCH=wasm go build -trimpath -buildvcs=false -buildmode=c-shared -o hello.wasm .
