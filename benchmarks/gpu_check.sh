#!/usr/bin/env bash
# The GPU checks, in one go, within a few minutes on one H100/H200: the gpu tests, the vLLM engine against raw
# vLLM (tokens/s, seconds per weight sync, memory with sleep mode off and on), the FSDP2 update, rlvr plan against
# a measured run, and the two-rank tests when the machine has two GPUs. Every figure is printed; a part that
# fails says so and the next part runs. Nothing is downloaded: models are random-initialised from a shape.
#
#     bash benchmarks/gpu_check.sh                 # with the python that has torch (and vllm) installed
#     PYTHON=.venv-vllm/bin/python bash benchmarks/gpu_check.sh
#
# Each part has a time limit (seconds): GPU_CHECK_LIMIT, 150 by default.
set -u
cd "$(dirname "$0")/.."
PY=${PYTHON:-python}
LIMIT=${GPU_CHECK_LIMIT:-150}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" TOKENIZERS_PARALLELISM=false
failed=()

part() {  # part NAME COMMAND...: run it under the limit, say how it went
  local name=$1; shift
  echo; echo "=== $name"; local t0=$SECONDS
  if timeout "$LIMIT" "$@"; then echo "--- $name: ok ($((SECONDS - t0)) s)"
  else echo "--- $name: FAILED, exit $? ($((SECONDS - t0)) s)"; failed+=("$name"); fi
}

echo "=== machine"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
$PY - <<'PY'
import importlib, torch
print("torch", torch.__version__, "cuda", torch.version.cuda, "devices", torch.cuda.device_count(),
      "bf16", torch.cuda.is_available() and torch.cuda.is_bf16_supported())
for m in ("transformers", "vllm", "peft"):
    try:
        print(m, importlib.import_module(m).__version__)
    except Exception as e:  # noqa: BLE001
        print(m, "missing:", type(e).__name__, e)
PY
GPUS=$($PY -c "import torch; print(torch.cuda.device_count())")

part "gpu tests" $PY -m pytest -m gpu -q -p no:cacheprovider tests/
part "vllm engine vs raw vLLM, weight sync, sleep-mode memory" \
  $PY benchmarks/vllm_engine.py --prompts 32 --samples 8 --tokens 256 --repeats 2 --syncs 5
part "FSDP2 update (one rank), vLLM generation, checkpointing" \
  $PY benchmarks/fsdp_update.py --engine vllm --checkpointing --steps 2
part "rlvr plan against a measured run (Qwen2.5-0.5B shape, vLLM asleep, bf16)" \
  $PY benchmarks/rehearsal.py --engine vllm --steps 1 --prompts 8 --group 8 --new-tokens 256 \
    --set device=cuda --set model.dtype=auto --set rollout.vllm.sleep_mode=true \
    --set rollout.vllm.gpu_memory_utilization=0.3
if [ "${GPUS:-0}" -ge 2 ]; then
  part "two ranks: the distributed tests (FSDP2) on this machine" \
    $PY -m pytest -q -p no:cacheprovider tests/test_distributed.py -m distributed -k "fsdp and not loaded"
else
  echo; echo "=== two ranks under NCCL: skipped (one GPU)"
fi

echo
if [ ${#failed[@]} -eq 0 ]; then echo "all parts ran"; else printf 'failed: %s\n' "${failed[@]}"; exit 1; fi
