#!/usr/bin/env bash
# Set up and run the built-in CPU demo (tiny model, SFT warm-up, GRPO, held-out eval before and after).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. .venv/bin/activate
exec rlvr train "$@"
