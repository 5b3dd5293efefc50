#!/usr/bin/env bash
# Rebuilds every hostile fixture: <name>.wat -> <name>.wasm (wabt's wat2wasm).
# No extra flags are needed: multi-value (used by hostcalls_multivalue) is on by
# default in wabt >= 1.0.2x, and no fixture uses bulk-memory or other proposals.
# No --debug-names, so the output is byte-for-byte reproducible.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"

WAT2WASM="${WAT2WASM:-wat2wasm}"

shopt -s nullglob
wats=(*.wat)
if [ "${#wats[@]}" -eq 0 ]; then
  echo "build.sh: no .wat files found" >&2
  exit 1
fi

for wat in "${wats[@]}"; do
  wasm="${wat%.wat}.wasm"
  "$WAT2WASM" "$wat" -o "$wasm"
  echo "built $wasm"
done
