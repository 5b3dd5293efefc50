#!/usr/bin/env bash
# Builds example/counter.wasm, a node pack using the Go guest SDK, as a wasip1
# reactor (Go >= 1.24). -trimpath and -buildvcs=false make the output
# byte-identical across checkouts and commits; sdk_test.go checks it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/example"
GOOS=wasip1 GOARCH=wasm go build -trimpath -buildvcs=false -buildmode=c-shared -o "${1:-counter.wasm}" .
