#!/usr/bin/env bash
# Builds fetch.wasm, an Extism plugin written with the Extism Go PDK
# (github.com/extism/go-pdk, pinned in the repository's go.mod) that calls
# Extism's own http_request. Reproducible with the same Go release.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
GOOS=wasip1 GOARCH=wasm go build -trimpath -buildvcs=false -buildmode=c-shared -o fetch.wasm .
