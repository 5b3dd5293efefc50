#!/usr/bin/env bash
# Builds counter.wasm (the Extism plugin of pack local.extism.as) with the
# AssemblyScript compiler pinned in package-lock.json; the build is
# reproducible, so a rebuild is byte-identical to the committed counter.wasm.
#   ./build.sh [out.wasm]     (default: counter.wasm next to this script)
# After changing the source, update the module's sha256 in pack.json
# (sha256sum counter.wasm).
set -euo pipefail
out="${1:-}"
if [[ -n "$out" && "$out" != /* ]]; then
	out="$PWD/$out"
fi
cd "$(dirname "${BASH_SOURCE[0]}")"
if [[ ! -x node_modules/.bin/asc || ! -d node_modules/@extism/as-pdk ]]; then
	echo "examples/extism-as: node_modules is missing: run npm ci in $PWD first" >&2
	exit 1
fi
node_modules/.bin/asc assembly/index.ts --config asconfig.json --target release --outFile "${out:-counter.wasm}"
