#!/usr/bin/env bash
# Builds template.wasm from template.wat with wabt's wat2wasm (deterministic
# output). Usage: ./build.sh [OUT]   (OUT defaults to template.wasm; a
# relative OUT is relative to this directory). Set WAT2WASM to use another
# wat2wasm.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
"${WAT2WASM:-wat2wasm}" template.wat -o "${1:-template.wasm}"
