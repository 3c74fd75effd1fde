"""TAC, a transfer-aware bandit curriculum over the domains of a task mixture (Yang et al. 2026,
"Transferability for General Reasoning: An Automated Curriculum for Multi-Domain RLVR", arXiv:2606.25178)
— RECONSTRUCTED.

Per domain d, from the groups of each step (advantages A = (r - mean_g r) / (std_g r + 1e-6), population std)::

    L_d <- (1 - alpha) L_d + alpha * mean over d's groups of mean_i |A_i|                   learnability
    g_d <- (1 - alpha) g_d + alpha * (1/n_d) sum_{i in d} A_i S(o_i)                        gradient sketch
    T_d = mean_{d' != d} cos(g_d, g_d')                                                     transferability
    s_d = L_d + lam T_d + c sqrt(log t / n_d)          pi(d) = (1 - eps) softmax(s / tau) + eps / D

Each slot of a batch draws its domain from pi, then the next prompt of that domain's uniform stream.
DEVIATION (the sketch): the paper projects the policy gradient of each domain's loss from the backward
pass. Here S(o) is a signed count sketch (``sketch_dim`` buckets) of the completion's token ids, i.e. the
gradient of the policy-gradient surrogate with respect to an output-token bias, without its expected-token
term (that term cancels exactly at the first position, where a group shares its context and sum_i A_i = 0,
and approximately after). It needs no model access and costs nothing; it is a weaker signal than a real
gradient projection. A domain never observed gets L = T = 0 and, with c > 0, an infinite bonus.
"""

from __future__ import annotations

from typing import Any, Sequence

from pydantic import Field

from rlvr.core.types import Example
from rlvr.lazy import np
from rlvr.registry import Params
from rlvr.sampling.base import SAMPLERS, Group, SamplerContext
from rlvr.sampling.prompts import MixtureSampler

__all__ = ["TACParams", "TACSampler", "transferability", "tac_probs", "token_sketch"]

_P = 2_147_483_647  # a Mersenne prime for the sketch hashes


class TACParams(Params):
    lam: float = Field(1.0, ge=0.0, description="weight of transferability in the arm score (0: learnability only)")
    tau: float = Field(0.1, gt=0.0, description="softmax temperature of the domain distribution")
    alpha: float = Field(0.3, gt=0.0, le=1.0, description="EMA rate of learnability and sketches")
    eps: float = Field(0.1, ge=0.0, le=1.0, description="uniform mixing so no domain starves")
    ucb: float = Field(0.0, ge=0.0, description="UCB bonus coefficient c")
    sketch_dim: int = Field(64, gt=0, description="buckets of the token-count gradient sketch")


def transferability(sketches: np.ndarray) -> np.ndarray:
    """``T_d = mean_{d' != d} cos(g_d, g_d')`` for sketches ``[D, k]`` (a zero sketch has cosine 0)."""
    g = np.asarray(sketches, dtype=np.float64)
    norms = np.linalg.norm(g, axis=1)
    unit = np.where(norms[:, None] > 0, g / np.where(norms > 0, norms, 1.0)[:, None], 0.0)
    cos = unit @ unit.T
    d = len(g)
    if d < 2:
        return np.zeros(d)
    return (cos.sum(1) - np.diag(cos)) / (d - 1)


def tac_probs(learn: np.ndarray, sketches: np.ndarray, counts: np.ndarray, t: int, p: TACParams) -> np.ndarray:
    """The domain distribution ``pi`` from learnability, sketches and per-domain counts."""
    s = np.asarray(learn, dtype=np.float64) + p.lam * transferability(sketches)
    if p.ucb > 0:
        counts = np.asarray(counts, dtype=np.float64)
        bonus = np.where(counts > 0, p.ucb * np.sqrt(np.log(max(t, 1)) / np.maximum(counts, 1)), np.inf)
        if np.isinf(bonus).any():  # unseen domains first, equally
            s = np.where(np.isinf(bonus), 0.0, -np.inf)
        else:
            s = s + bonus
    z = np.exp((s - s.max()) / p.tau)
    return (1 - p.eps) * z / z.sum() + p.eps / len(s)


def token_sketch(token_ids: Sequence[int], dim: int) -> np.ndarray:
    """Signed count sketch of token ids into ``dim`` buckets (fixed hashes, stable across processes)."""
    t = np.asarray(token_ids, dtype=np.int64)
    out = np.zeros(dim)
    if len(t):
        bucket = ((t * 40503 + 2654435761) % _P) % dim
        sign = np.where(((t * 69069 + 1) % _P) % 2 == 0, 1.0, -1.0)
        np.add.at(out, bucket, sign)
    return out


class TACSampler:
    def __init__(self, mixture: MixtureSampler, p: TACParams):
        self.mix, self.p = mixture, p
        d = len(mixture.domains)
        self.learn, self.sketch = np.zeros(d), np.zeros((d, p.sketch_dim))
        self.counts, self.t = np.zeros(d), 0
        self.index = {name: i for i, name in enumerate(mixture.domains)}

    def probs(self) -> np.ndarray:
        return tac_probs(self.learn, self.sketch, self.counts, self.t, self.p)

    def next(self, k: int, step: int = 0) -> list[Example]:
        return self.mix.next(k, step, probs=self.probs())

    def observe(self, groups: Sequence[Group], step: int) -> None:
        per: dict[int, list] = {}
        for g in groups:
            d = self.index.get(g.example.task)
            if d is None or g.n == 0:
                continue
            r = np.asarray(g.rewards, dtype=np.float64)
            adv = np.zeros_like(r) if r.max() == r.min() else (r - r.mean()) / (r.std() + 1e-6)
            acc = per.setdefault(d, [[], np.zeros(self.p.sketch_dim), 0])
            acc[0].append(float(np.abs(adv).mean()))
            for a, comp in zip(adv, g.completions):
                acc[1] += a * token_sketch(comp.completion_ids, self.p.sketch_dim)
            acc[2] += g.n
        a = self.p.alpha
        for d, (learn, sketch, n) in per.items():
            first = self.counts[d] == 0
            self.learn[d] = np.mean(learn) if first else (1 - a) * self.learn[d] + a * np.mean(learn)
            self.sketch[d] = sketch / n if first else (1 - a) * self.sketch[d] + a * sketch / n
            self.counts[d] += len(learn)
        self.t += 1

    def metrics(self) -> dict[str, float]:
        pi, tr = self.probs(), transferability(self.sketch)
        out = {f"p/{name}": float(pi[i]) for name, i in self.index.items()}
        out.update({f"transfer/{name}": float(tr[i]) for name, i in self.index.items()})
        out.update({f"learnability/{name}": float(self.learn[i]) for name, i in self.index.items()})
        return out

    def state_dict(self) -> dict[str, Any]:
        return {"learn": self.learn.tolist(), "sketch": self.sketch.tolist(), "counts": self.counts.tolist(),
                "t": self.t, "domains": list(self.index), "mixture": self.mix.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if list(state["domains"]) != list(self.index):
            raise ValueError(f"TAC state is for domains {state['domains']}, the mixture has {list(self.index)}")
        self.learn, self.sketch = np.asarray(state["learn"]), np.asarray(state["sketch"]).reshape(self.sketch.shape)
        self.counts, self.t = np.asarray(state["counts"]), int(state["t"])
        self.mix.load_state_dict(state["mixture"])


@SAMPLERS.register("tac", TACParams)
def tac(ctx: SamplerContext, p: TACParams) -> TACSampler:
    """TAC: a bandit over mixture domains scored by learnability plus transferability (RECONSTRUCTED)."""
    domains = list(dict.fromkeys(e.task for e in ctx.examples))
    if len(domains) < 2:
        raise ValueError(f"the 'tac' sampler needs a task mixture with at least two domains; the train split "
                         f"has {domains} (use task: {{name: mixture, ...}})")
    weights = ctx.domain_weights or {d: 1.0 for d in domains}
    return TACSampler(MixtureSampler(ctx.examples, weights, ctx.seed), p)
