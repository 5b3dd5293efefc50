#!/usr/bin/env bash
# Builds goal.wasm (or OUT) from goal.wat with wabt's wat2wasm (deterministic output).
set -euo pipefail
out="$(realpath -m "${1:-$(dirname "${BASH_SOURCE[0]}")/goal.wasm}")"
cd "$(dirname "${BASH_SOURCE[0]}")"
wat2wasm goal.wat -o "$out"
