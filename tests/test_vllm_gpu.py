"""The ``vllm`` engine on a GPU: bf16 log-probs against the trainer's, and sleep mode freeing memory during
the update and restoring the current weights at the next call. Marked ``gpu`` and ``vllm``."""

import pytest
import torch

pytest.importorskip("vllm")

from rlvr.core.types import SamplingParams  # noqa: E402
from rlvr.engines.vllm_config import VLLMConfig  # noqa: E402
from rlvr.engines.vllm import VLLMEngine  # noqa: E402
from tests.test_vllm_engine import REQS, TOK, chaotic_model, trainer_logprobs  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.vllm]


def used_gib() -> float:
    free, total = torch.cuda.mem_get_info()
    return (total - free) / 2**30


def test_sleep_mode_frees_memory_and_wakes_with_the_current_weights():
    model = chaotic_model(seed=3).cuda()
    engine = VLLMEngine(model, TOK, settings=VLLMConfig(sleep_mode=True, gpu_memory_utilization=0.2))
    s = SamplingParams(1.0, max_new_tokens=8, seed=0)
    engine.generate(REQS, s)
    asleep = used_gib()
    engine.llm.wake_up()
    engine._shared.asleep = False  # (the state every view of one vLLM shares)
    awake = used_gib()
    assert awake - asleep > 1.0  # the KV cache (20% of the device) was released while asleep
    engine.generate(REQS, s)  # sleeps again
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.3 * torch.randn_like(p))
    engine.sync_weights()
    out = engine.generate(REQS, s)  # wakes, pushes the new weights
    lp, batch = trainer_logprobs(model, out, 1.0)
    torch.testing.assert_close(lp, batch.behaviour_logp.to(lp.device), rtol=0, atol=1e-3)
