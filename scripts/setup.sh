#!/usr/bin/env bash
# Create .venv and install rlvr (with the test extras when called with "dev"). Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
. .venv/bin/activate
# CPU torch first (a range such as torch>=2.4 is then already satisfied); GPU users install their CUDA build.
python -c "import torch" 2>/dev/null || python -m pip install -q "torch==${RLVR_TORCH_VERSION:-2.13.0}"
# The versions behind the README's figures (constraints.txt, written by scripts/lock.py); RLVR_UNPINNED=1 installs
# the newest versions the package's ranges allow instead.
PIN=(-c constraints.txt)
[ "${RLVR_UNPINNED:-0}" = 1 ] && PIN=()
if [ "${1:-}" = "dev" ]; then
  python -m pip install -q "${PIN[@]}" -e ".[dev]"
else
  python -m pip install -q "${PIN[@]}" -e .
fi
