#!/usr/bin/env bash
# Rebuilds the test modules from source. Output is reproducible.
set -euo pipefail
cd "$(dirname "$0")"
clang --target=wasm32-wasi -O2 -mexec-model=reactor -Wl,--strip-all -o probe.wasm probe.c
clang --target=wasm32-wasi -O2 -mexec-model=reactor -Wl,--strip-all -DPROBE_V2 -o probe-v2.wasm probe.c
wat2wasm envelope.wat -o envelope.wasm
wat2wasm sensor.wat -o sensor.wasm
wat2wasm assets.wat -o assets.wasm
wat2wasm openwop_hello.wat -o openwop_hello.wasm
wat2wasm bus.wat -o bus.wasm
wat2wasm publish.wat -o publish.wasm
wat2wasm fetch.wat -o fetch.wasm
wat2wasm fetch_readme.wat -o fetch_readme.wasm
wat2wasm extism_fetch.wat -o extism_fetch.wasm
