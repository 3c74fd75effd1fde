"""KL3 clipping (ATR-GRPO): the trust region ``w - 1 - log w <= delta`` as an asymmetric ratio clip.

Wu et al., "A Unified Framework for Rethinking Policy Divergence Measures in GRPO", arXiv:2602.05494.
Bounding the per-token k3 estimate ``KL3(w) = w - 1 - log w`` by ``delta`` is equivalent to clipping the
ratio to ``[l_delta, u_delta]``, the two roots of ``w - log w = 1 + delta``:

    l_delta = -W_0(-exp(-(1 + delta)))      in (0, 1)
    u_delta = -W_{-1}(-exp(-(1 + delta)))   in (1, inf)

so ATR-GRPO is GRPO with ``eps_low = 1 - l_delta`` and ``eps_high = u_delta - 1``; the upper side is wider
(KL3 penalises shrinking a probability more steeply than growing it). The roots are found by Newton's method
(no scipy). The paper's delta was not found: 0.02 gives [0.813, 1.214], close to GRPO's range.
"""

from __future__ import annotations

import math
from functools import lru_cache

from pydantic import Field

from rlvr.algorithms.clip.ratio import requires_clipping_objective
from rlvr.algorithms.registry import CLIP_RULES, ClipBounds, ClipInputs
from rlvr.registry import Params

__all__ = ["KL3Params", "kl3_bounds", "kl3_clip"]


class KL3Params(Params):
    delta: float = Field(0.02, gt=0.0, le=5.0, description="bound on w - 1 - log w per token")


@lru_cache(maxsize=64)
def kl3_bounds(delta: float) -> tuple[float, float]:
    """The roots ``l < 1 < u`` of ``w - 1 - log w = delta``, to ~1e-15."""
    f = lambda w: w - 1.0 - math.log(w) - delta  # noqa: E731
    df = lambda w: 1.0 - 1.0 / w  # noqa: E731

    def newton(w: float, lo: float, hi: float) -> float:
        for _ in range(100):
            step = f(w) / df(w)
            nxt = min(max(w - step, lo), hi)
            if abs(nxt - w) < 1e-16 * max(1.0, w):
                return nxt
            w = nxt
        return w

    low = newton(math.exp(-1.0 - delta), 1e-300, 1.0 - 1e-15)  # near 0, f is ~ -log w: start at e^-(1+d)
    high = newton(1.0 + delta + math.sqrt(2 * delta) + 1.0, 1.0 + 1e-15, 1e300)  # f is convex on (1, inf)
    return low, high


@CLIP_RULES.register("kl3", KL3Params, check=requires_clipping_objective)
def kl3_clip(inp: ClipInputs, p: KL3Params) -> ClipBounds:
    """ATR-GRPO: ratio bounds where the per-token KL3 estimate equals delta."""
    low, high = kl3_bounds(p.delta)
    return ClipBounds(low, high)
