#!/usr/bin/env bash
# Set up and run the default test suite (slow and GPU tests are excluded; run them with -m slow / -m gpu).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh dev
. .venv/bin/activate
exec python -m pytest -q "$@"
