#!/usr/bin/env bash
# Builds counter.wasm, an Extism plugin written with the Extism Go PDK
# (github.com/extism/go-pdk, pinned in the repository's go.mod), with
# standard Go. Reproducible: the same Go release gives the same bytes.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
GOOS=wasip1 GOARCH=wasm go build -trimpath -buildvcs=false -buildmode=c-shared -o counter.wasm .
