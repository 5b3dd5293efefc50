#!/usr/bin/env bash
# Builds hello.wasm from hello.wat with wabt's wat2wasm (deterministic output).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
wat2wasm hello.wat -o hello.wasm
