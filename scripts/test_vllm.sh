#!/usr/bin/env bash
# Set up .venv-vllm (rlvr with vLLM's CPU build, scripts/setup_vllm.sh) and run the tests marked vllm.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_vllm.sh
. "${RLVR_VLLM_VENV:-.venv-vllm}/bin/activate"
exec python -m pytest -q -m vllm "$@"
