#!/usr/bin/env bash
# Builds demo.wasm (the pack `packrun demo` runs).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
"${CC:-clang}" --target=wasm32-wasi -O2 -mexec-model=reactor -Wl,--strip-all -o demo.wasm demo.c
