#!/usr/bin/env bash
# Builds hello-extism.wasm, the Extism-plugin twin of examples/hello-c, used to
# benchmark packrun against the Extism go-sdk. Same toolchain and flags as
# examples/hello-c/build.sh.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
"${CC:-clang}" --target=wasm32-wasi -O2 -mexec-model=reactor -Wl,--strip-all -o hello-extism.wasm hello-extism.c
wat2wasm memloop.wat -o memloop.wasm
"${CC:-clang}" --target=wasm32-wasi -O2 -mexec-model=reactor -Wl,--strip-all -o publoop.wasm publoop.c
