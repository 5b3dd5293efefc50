#!/usr/bin/env bash
# Builds counter.wasm from counter.c and fetch/fetch.wasm from fetch/fetch.c
# with the SDK (../packrun.c) as wasm32-wasi reactors. Usage: ./build.sh
# [OUT]   (OUT replaces counter.wasm and skips fetch; a relative OUT is
# relative to this directory). Set CC to pick another clang.
# Needs clang + lld, the wasi-libc sysroot and the wasm32 compiler-rt builtins
# (Debian: clang lld wasi-libc libclang-rt-14-dev-wasm32). Output is
# byte-identical across rebuilds with the same toolchain.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
"${CC:-clang}" --target=wasm32-wasi -O2 -mexec-model=reactor -Wl,--strip-all \
	-I.. -o "${1:-counter.wasm}" counter.c ../packrun.c
if [[ $# -eq 0 ]]; then
	"${CC:-clang}" --target=wasm32-wasi -O2 -mexec-model=reactor -Wl,--strip-all \
		-I.. -o fetch/fetch.wasm fetch/fetch.c ../packrun.c
fi
