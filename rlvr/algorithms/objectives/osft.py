"""OSFT: online supervised fine-tuning on the policy's own low-temperature samples; no reward, no advantage.

"Online SFT for LLM Reasoning: Surprising Effectiveness of Self-Tuning without Rewards", arXiv:2510.18814;
code ElementQi/OnlineSFT (``osft/recipe/osft/dp_actor.py``, ``osft_trainer.py``,
``examples/osft_1e7_dsr_tau0s6.sh``). EXACT (paper + code). One completion per prompt is sampled at a low
temperature tau_s (``rollout.temperature``, 0.6) and the trainer recomputes its log-probs at the training
temperature tau_t (``algorithm.train_temperature``, 1); the per-token loss is the plain cross-entropy

    l_{i,t} = -logp_{i,t}          logp = log pi_theta(y_t | x, y_<t; tau_t)   [N, T]

reduced by the configured aggregation (the paper: token mean). Advantages, rewards and old log-probs are
not read (the verifier still scores, for metrics only); add no KL.

Why it learns without a reward (the test oracle): for a categorical policy with logits z, pi = softmax(z)
and samples from q = softmax(z / tau_s),

    E_{y ~ q}[ d(-log pi(y)) / dz ] = pi - q,

so gradient descent moves pi toward the sharper q (for tau_s < 1 the argmax gains mass), and at
tau_s = tau_t the expected gradient is exactly 0. Per-token metric: ``nll`` (-logp).
"""

from __future__ import annotations

from rlvr.algorithms.registry import OBJECTIVES, ObjectiveInputs, ObjectiveOutput
from rlvr.registry import Params

__all__ = ["OSFTParams", "osft"]


class OSFTParams(Params):
    """OSFT has no parameters of its own: tau_s is ``rollout.temperature``, tau_t ``algorithm.train_temperature``."""


@OBJECTIVES.register("osft", OSFTParams)
def osft(inp: ObjectiveInputs, p: OSFTParams) -> ObjectiveOutput:
    """Per-token negative log-likelihood of the sampled completion; the advantages are ignored."""
    loss = -inp.logp
    return loss, {"nll": loss.detach()}
