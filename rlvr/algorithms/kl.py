"""KL estimators k1, k2, k3 (Schulman 2020, "Approximating KL divergence").

Samples come from pi_theta; with d = log pi_ref - log pi_theta per token (clamped to [-20, 20]):

    k1 = -d                   unbiased for KL(pi_theta || pi_ref), may be negative
    k2 = d^2 / 2              biased, >= 0
    k3 = exp(d) - 1 - d       unbiased, >= 0, low variance (GRPO's choice; clamped to [-10, 10] as verl does)
    k3+                       the value of k3 with the gradient of k2 (straight-through; verl's "+" suffix)

Why "k3+": on-policy, grad E[k2] = grad KL(pi_theta || pi_ref), while k1 or k3 used as a loss do not give
that gradient (k1's is 0 in expectation, k3's is that of the forward KL(pi_ref || pi_theta)). k3+ keeps k3's
unbiased low-variance value for the loss value and the logged KL, and takes k2's gradient
(d(k3+)/d logp = d(k2)/d logp = -d). Written ``sg[k3] + k2 - sg[k2]``, so the value is bit-for-bit k3's.

Each maps ``(logp [N, T], ref_logp [N, T]) -> [N, T]``; the loop adds ``coef * kl`` to the per-token loss.
"""

from __future__ import annotations

from rlvr.algorithms.registry import KL_ESTIMATORS
from rlvr.lazy import torch

__all__ = ["k1", "k2", "k3", "k3_plus"]


def _d(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    return (ref_logp - logp).clamp(-20.0, 20.0)


@KL_ESTIMATORS.register("k1")
def k1(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """log pi_theta - log pi_ref."""
    return -_d(logp, ref_logp)


@KL_ESTIMATORS.register("k2")
def k2(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """Half the squared log-ratio."""
    return 0.5 * _d(logp, ref_logp) ** 2


@KL_ESTIMATORS.register("k3")
def k3(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """exp(d) - 1 - d, GRPO's low-variance unbiased estimator."""
    d = _d(logp, ref_logp)
    return (torch.exp(d) - 1.0 - d).clamp(-10.0, 10.0)


@KL_ESTIMATORS.register("k3+")
def k3_plus(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """k3's value with k2's gradient (straight-through)."""
    g = k2(logp, ref_logp)
    # x - x.detach() is exactly 0 in value and carries x's gradient
    return k3(logp, ref_logp).detach() + (g - g.detach())
