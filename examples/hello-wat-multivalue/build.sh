#!/usr/bin/env bash
# Builds hello.wasm from hello.wat with wabt's wat2wasm (deterministic output).
# Multi-value is on by default in wabt >= 1.0.20; older releases would need
# --enable-multi-value.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
wat2wasm hello.wat -o hello.wasm
