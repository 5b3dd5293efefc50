#!/usr/bin/env bash
# Builds counter.wasm from counter.rs (and, without OUT, fetch/fetch.wasm
# from fetch/fetch.rs) and the SDK crate (../packrun) for
# wasm32-unknown-unknown. Usage: ./build.sh [OUT]   (OUT defaults to
# counter.wasm; a relative OUT is relative to this directory).
# Needs Debian's rustc 1.63 with the wasm32 std (apt-get install rustc
# libstd-rust-dev-wasm32); set RUSTC to use another rustc with the
# wasm32-unknown-unknown target. No cargo, no crates.io. Sources are passed
# with paths relative to this directory (they end up in panic messages), so
# the output is byte-identical across rebuilds with the same rustc.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
RUSTC="${RUSTC:-/usr/bin/rustc}"
out="${1:-counter.wasm}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
flags=(--edition 2021 --target wasm32-unknown-unknown -C opt-level=s -C codegen-units=1)
"$RUSTC" "${flags[@]}" --crate-type rlib --crate-name packrun -o "$tmp/libpackrun.rlib" ../packrun/src/lib.rs
"$RUSTC" "${flags[@]}" --crate-type cdylib --crate-name counter -C strip=symbols \
	--extern packrun="$tmp/libpackrun.rlib" -o "$out" counter.rs
if [[ $# -eq 0 ]]; then
	"$RUSTC" "${flags[@]}" --crate-type cdylib --crate-name fetch -C strip=symbols \
		--extern packrun="$tmp/libpackrun.rlib" -o fetch/fetch.wasm fetch/fetch.rs
fi
