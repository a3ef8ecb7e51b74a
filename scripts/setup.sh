#!/usr/bin/env bash
# Create .venv with a Python >= 3.12 and install AstrBot + test tools.
# Idempotent: reinstalls only when requirements*.txt change.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${LTM_VENV:-$ROOT/.venv}"

python_ok() {  # $1: an interpreter; true when it is CPython >= 3.12 with venv
  "$1" -c 'import sys, venv; sys.exit(0 if sys.version_info >= (3, 12) else 1)' >/dev/null 2>&1
}

find_python() {
  local candidates=()
  [ -n "${LTM_PYTHON:-}" ] && candidates+=("$LTM_PYTHON")
  candidates+=(python3.13 python3.12 python3 python)
  if command -v pyenv >/dev/null 2>&1; then
    local root; root="$(pyenv root)"
    for p in "$root"/versions/3.1[2-9]*/bin/python3 "$root"/versions/3.[2-9][0-9]*/bin/python3; do
      [ -x "$p" ] && candidates+=("$p")
    done
  fi
  for p in /usr/local/bin/python3.1[2-9] /usr/bin/python3.1[2-9] "$HOME"/.local/bin/python3.1[2-9]; do
    [ -x "$p" ] && candidates+=("$p")
  done
  for c in "${candidates[@]}"; do
    local path; path="$(command -v "$c" 2>/dev/null || true)"
    if [ -n "$path" ] && python_ok "$path"; then echo "$path"; return 0; fi
  done
  return 1
}

if [ ! -x "$VENV/bin/python" ] || ! python_ok "$VENV/bin/python"; then
  if ! PY="$(find_python)"; then
    cat >&2 <<'MSG'
error: AstrBot needs Python 3.12 or newer, and none was found.
  Looked at: $LTM_PYTHON, python3.13, python3.12, python3, python, pyenv versions.
  Install one, for example:
    sudo apt-get install python3.12 python3.12-venv     (Debian/Ubuntu with 3.12 packages)
    pyenv install 3.12                                  (pyenv)
    uv python install 3.12                              (uv)
  or point LTM_PYTHON at an existing interpreter: LTM_PYTHON=/path/to/python3.12 ./scripts/test.sh
MSG
    exit 1
  fi
  echo "setup: creating $VENV with $PY ($("$PY" --version 2>&1))"
  rm -rf "$VENV"
  "$PY" -m venv "$VENV"
fi

STAMP="$VENV/.requirements.sha256"
WANT="$(cat "$ROOT/requirements.txt" "$ROOT/requirements-dev.txt" | sha256sum | cut -d' ' -f1)"
# pip's own output, cut to one line per package and step: the first install
# takes two to three minutes, which should not look like a hang.
pip_progress() {
  awk '/^Collecting /{n++; printf "setup:   [%d] %s\n", n, $2; fflush(); next}
       /^Installing collected packages/{print "setup:   installing " n " packages (the longest step) …"; fflush(); next}
       /^Successfully installed/{print "setup:   done"; fflush(); next}
       /^(ERROR|error)/{print; fflush()}'
}

if [ "$(cat "$STAMP" 2>/dev/null || true)" != "$WANT" ]; then
  echo "setup: installing AstrBot and test requirements into $VENV (a few minutes the first time)"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip >/dev/null
  "$VENV/bin/python" -m pip install --disable-pip-version-check --progress-bar off \
    -r "$ROOT/requirements-dev.txt" 2>&1 | pip_progress
  echo "$WANT" > "$STAMP"
  echo "setup: requirements installed"
fi

# --- Browser for tests/e2e/test_e2e_review_page.py (the review page test) ---
# The page test drives Debian's headless Chromium over the DevTools protocol;
# fonts-noto-cjk lets its screenshots show Chinese (not empty boxes). Install
# what is missing when we can (root with apt-get); otherwise say how.
missing_debs=()
command -v chromium >/dev/null 2>&1 || missing_debs+=(chromium)
if command -v dpkg >/dev/null 2>&1 && ! dpkg -s fonts-noto-cjk >/dev/null 2>&1; then
  missing_debs+=(fonts-noto-cjk)
fi
if [ "${#missing_debs[@]}" -gt 0 ]; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing Debian's ${missing_debs[*]} for the review page test: apt-get update -qq && apt-get install -y -qq ${missing_debs[*]}"
    if apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing_debs[@]}" >/dev/null; then
      echo "setup: ${missing_debs[*]} installed"
    else
      echo "setup: warning: could not install ${missing_debs[*]}; tests/e2e/test_e2e_review_page.py may fail" >&2
    fi
  else
    echo "setup: note: ${missing_debs[*]} missing (install: sudo apt-get install ${missing_debs[*]}); the review page test needs them" >&2
  fi
fi
