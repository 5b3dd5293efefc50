#!/usr/bin/env bash
# Builds counter.wasm from counter.c and the SDK (../packrun.c) as a
# wasm32-wasi reactor. Usage: ./build.sh [OUT]   (OUT defaults to counter.wasm;
# a relative OUT is relative to this directory). Set CC to pick another clang.
# Needs clang + lld, the wasi-libc sysroot and the wasm32 compiler-rt builtins
# (Debian: clang lld wasi-libc libclang-rt-14-dev-wasm32). Output is
# byte-identical across rebuilds with the same toolchain.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
"${CC:-clang}" --target=wasm32-wasi -O2 -mexec-model=reactor -Wl,--strip-all \
	-I.. -o "${1:-counter.wasm}" counter.c ../packrun.c
