#!/usr/bin/env bash
# Run the end-to-end suite against the oldest and the newest supported
# AstrBot, each in its own virtual environment, and print a table.
#   ./scripts/e2e-matrix.sh                    # the versions below
#   ./scripts/e2e-matrix.sh 4.25.6 4.29.3      # others
#   ./scripts/e2e-matrix.sh -- -k semantic     # pytest arguments after --
# Venvs: $LTM_MATRIX_DIR/venv-astrbot-<version> (default ~/.cache/ltm-e2e-matrix),
# created with $LTM_PYTHON or the first Python >= 3.12 found (as setup.sh does).
# Logs: $LTM_MATRIX_DIR/e2e-<version>.log. Exit status: 0 when every version passed.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# Keep in step with metadata.yaml's astrbot_version and docs/compatibility.md.
OLDEST=4.25.6
NEWEST=4.29.3
DIR="${LTM_MATRIX_DIR:-$HOME/.cache/ltm-e2e-matrix}"

versions=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do versions+=("$1"); shift; done
[ "${1:-}" = "--" ] && shift
[ ${#versions[@]} -eq 0 ] && versions=("$OLDEST" "$NEWEST")

find_python() {
  local candidates=()
  [ -n "${LTM_PYTHON:-}" ] && candidates+=("$LTM_PYTHON")
  candidates+=(python3.13 python3.12 python3)
  if command -v pyenv >/dev/null 2>&1; then
    local root; root="$(pyenv root)"
    for p in "$root"/versions/3.1[2-9]*/bin/python3; do [ -x "$p" ] && candidates+=("$p"); done
  fi
  for c in "${candidates[@]}"; do
    local path; path="$(command -v "$c" 2>/dev/null || true)"
    if [ -n "$path" ] && "$path" -c 'import sys, venv; sys.exit(0 if sys.version_info >= (3, 12) else 1)' 2>/dev/null; then
      echo "$path"; return 0
    fi
  done
  return 1
}

# The test requirements without requirements-dev.txt's AstrBot line: the
# version under test is pinned instead.
dev_requirements() {
  grep -v -E '^\s*(astrbot|-r)\b' "$ROOT/requirements-dev.txt"
}

setup_venv() {  # $1: AstrBot version; prints the venv's python
  local version="$1" venv="$DIR/venv-astrbot-$1"
  local stamp="$venv/.ltm-matrix.sha256"
  local want; want="$( (echo "$version"; cat "$ROOT/requirements.txt"; dev_requirements) | sha256sum | cut -d' ' -f1)"
  if [ ! -x "$venv/bin/python" ]; then
    local py; py="$(find_python)" || { echo "matrix: no Python >= 3.12 found (set LTM_PYTHON)" >&2; return 1; }
    echo "matrix: creating $venv with $py" >&2
    "$py" -m venv "$venv" || return 1
  fi
  if [ "$(cat "$stamp" 2>/dev/null || true)" != "$want" ]; then
    echo "matrix: installing AstrBot $version and the test requirements into $venv" >&2
    dev_requirements > "$venv/.ltm-dev-requirements.txt"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
      "astrbot==$version" -r "$ROOT/requirements.txt" -r "$venv/.ltm-dev-requirements.txt" >&2 || return 1
    echo "$want" > "$stamp"
  fi
  # scripts/setup.sh's own stamp: the README demo test runs ./scripts/run.sh
  # with LTM_VENV set to this venv, and setup.sh would otherwise install
  # requirements-dev.txt's AstrBot over the version under test.
  cat "$ROOT/requirements.txt" "$ROOT/requirements-dev.txt" | sha256sum | cut -d' ' -f1 > "$venv/.requirements.sha256"
  echo "$venv/bin/python"
}

# Test paths among the pytest arguments replace the whole of tests/e2e.
targets=(tests/e2e)
for arg in "$@"; do case "$arg" in tests/*) targets=() ;; esac; done

mkdir -p "$DIR"
declare -A result
status=0
for version in "${versions[@]}"; do
  log="$DIR/e2e-$version.log"
  if ! py="$(setup_venv "$version")"; then
    result[$version]="install failed"
    status=1
    continue
  fi
  installed="$("$py" -c 'import importlib.metadata as m; print(m.version("astrbot"))')"
  echo "matrix: AstrBot $installed: pytest ${targets[*]} $* (log: $log)"
  started=$(date +%s)
  # LTM_VENV: the README demo test's ./scripts/run.sh uses this venv too.
  (cd "$ROOT" && LTM_VENV="$(dirname "$(dirname "$py")")" "$py" -m pytest "${targets[@]}" -p no:cacheprovider -q -rfE "$@") \
    > "$log" 2>&1
  rc=$?
  summary="$(grep -E '^=* ?[0-9]+ (passed|failed|error).* in [0-9.]+s' "$log" | tail -1 | sed -E 's/^=+ //; s/ =+$//; s/ in [0-9.]+s.*$//')"
  result[$version]="${summary:-no summary, exit $rc} ($(( $(date +%s) - started )) s)"
  [ $rc -eq 0 ] || status=1
done

echo
echo "| AstrBot | Python | end-to-end suite |"
echo "| --- | --- | --- |"
for version in "${versions[@]}"; do
  pyv="$("$DIR/venv-astrbot-$version/bin/python" -c 'import platform; print(platform.python_version())' 2>/dev/null || echo "?")"
  echo "| $version | $pyv | ${result[$version]} |"
done
exit $status
