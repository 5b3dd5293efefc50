#!/usr/bin/env bash
# Builds example/counter.wasm, a node pack using the AssemblyScript guest SDK
# (and, without OUT, example/fetch/fetch.wasm from example/fetch.ts),
# with the pinned compiler from node_modules (run `npm ci` here first). The
# output is byte-identical on rebuild; sdk_test.go checks it.
#   ./build.sh [OUT.wasm]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
out="${1:-example/counter.wasm}"
if [[ ! -x node_modules/.bin/asc ]]; then
	echo "node_modules/.bin/asc is missing: run 'npm ci' in $(pwd)" >&2
	exit 1
fi
node_modules/.bin/asc example/counter.ts -O3 --use abort= -o "$out"
if [[ $# -eq 0 ]]; then
	node_modules/.bin/asc example/fetch.ts -O3 --use abort= -o example/fetch/fetch.wasm
fi
