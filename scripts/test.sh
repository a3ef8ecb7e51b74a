#!/usr/bin/env bash
# Set up (if needed), check the code and run the whole test suite: ruff,
# mypy (both configured in pyproject.toml), then the unit and end-to-end
# tests. Extra arguments go to pytest, e.g. ./scripts/test.sh -k writer
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$ROOT/scripts/setup.sh"
cd "$ROOT"
PY="${LTM_VENV:-$ROOT/.venv}/bin/python"
echo "test: ruff check"
"$PY" -m ruff check .
echo "test: mypy"
"$PY" -m mypy
exec "$PY" -m pytest "$@"
