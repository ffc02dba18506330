#!/usr/bin/env bash
# The demo: installs what is missing, builds the `tessera` binary (Release, in build/) and runs the
# demo scenario on the embedded cluster: `tessera simulate config/examples/demo.yaml`.
# Usage (from anywhere, as root on a fresh Debian 12 machine): bash scripts/demo.sh
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

bash scripts/install-deps.sh

JOBS=$(nproc 2>/dev/null || echo 2)
LAUNCHER=()
if command -v ccache >/dev/null 2>&1; then
  LAUNCHER=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi

echo "demo: configuring build/ (Release)"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "${LAUNCHER[@]}" >/dev/null
echo "demo: building tessera with $JOBS jobs"
cmake --build build --target tessera -j "$JOBS"

echo
echo "demo: build/src/app/tessera simulate config/examples/demo.yaml"
echo
build/src/app/tessera simulate config/examples/demo.yaml || exit 1
echo
echo "demo, the reclaim story: build/src/app/tessera simulate config/examples/reclaim.yaml"
echo
build/src/app/tessera simulate config/examples/reclaim.yaml || exit 1
echo
echo "demo, fractional GPUs: build/src/app/tessera simulate config/examples/fractional.yaml"
echo
exec build/src/app/tessera simulate config/examples/fractional.yaml
