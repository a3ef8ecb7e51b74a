#!/usr/bin/env bash
# Set up (if needed) and run the whole test suite: unit and end-to-end.
# Extra arguments go to pytest, e.g. ./scripts/test.sh -k writer
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$ROOT/scripts/setup.sh"
cd "$ROOT"
exec "${LTM_VENV:-$ROOT/.venv}/bin/python" -m pytest "$@"
