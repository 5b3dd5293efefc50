#!/usr/bin/env bash
# Builds hello.wasm from hello.c as a wasm32-wasi reactor.
# Needs clang + lld with the wasi-libc sysroot and the wasm32 compiler-rt
# builtins (Debian/Ubuntu: clang lld wasi-libc libclang-rt-dev-wasm32).
# Set CC to pick another clang, e.g. CC=clang-18 ./build.sh.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
"${CC:-clang}" --target=wasm32-wasi -O2 -mexec-model=reactor -Wl,--strip-all -o hello.wasm hello.c
