#!/usr/bin/env bash
# Rebuilds every example's hello.wasm by running each examples/*/build.sh.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
for script in */build.sh; do
	echo "==> ${script%/build.sh}"
	bash "$script"
done
