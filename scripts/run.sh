#!/usr/bin/env bash
# Set up (if needed) and start a real AstrBot with this plugin loaded.
#   ./scripts/run.sh                 # configure your own model in the WebUI
#   ./scripts/run.sh --offline-demo  # also start a local fake model: no API key needed
# Options: --port N (dashboard; default 6195, beside AstrBot's own 6185, else a free port),
#          --fresh (new AstrBot home)
# Environment: LTM_DEMO_PORT=N   the dashboard port (as --port)
#              LTM_DEMO_HOME=DIR the AstrBot home (default .astrbot-home/; kept between runs)
#              LTM_VENV=DIR      the Python venv (default .venv/, made by scripts/setup.sh)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$ROOT/scripts/setup.sh"
cd "$ROOT"
exec "${LTM_VENV:-$ROOT/.venv}/bin/python" -m devtools.demo "$@"
