#!/usr/bin/env bash
# Set up (if needed) and start a real AstrBot with this plugin loaded.
#   ./scripts/run.sh                 # configure your own model in the WebUI
#   ./scripts/run.sh --offline-demo  # also start a local fake model: no API key needed
# Options: --port N (dashboard, default 6185), --fresh (new AstrBot home)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$ROOT/scripts/setup.sh"
cd "$ROOT"
exec "${LTM_VENV:-$ROOT/.venv}/bin/python" -m devtools.demo "$@"
