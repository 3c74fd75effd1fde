"""Preference optimisation from any verifier: DPO, IPO and SimPO against their published forms and a naive
loop, pairs ranked by the verifier, the offline pairs term, and the DeFAb recipe training."""

from __future__ import annotations

import json
import math

import pytest
import torch

from rlvr.algorithms.objectives.dpo import DPOParams, SimPOParams, dpo, pair_losses, preference_pairs, simpo
from rlvr.algorithms.registry import ObjectiveInputs


def _sig(x):
    return 1 / (1 + math.exp(-x))


def test_the_pair_losses_by_hand():
    t = lambda *v: torch.tensor(v, dtype=torch.float64)  # noqa: E731
    s_w, s_l, r_w, r_l, n_w, n_l = t(-3.0), t(-5.0), t(-3.5), t(-4.0), t(2.0), t(4.0)
    loss, h = pair_losses("dpo", s_w, s_l, n_w, n_l, r_w, r_l, beta=0.5)
    assert float(h) == pytest.approx(0.5 * ((-3 + 3.5) - (-5 + 4)))  # 0.75
    assert float(loss) == pytest.approx(-math.log(_sig(0.75)))
    loss, _ = pair_losses("dpo", s_w, s_l, n_w, n_l, r_w, r_l, beta=0.5, eps=0.1)
    assert float(loss) == pytest.approx(-0.9 * math.log(_sig(0.75)) - 0.1 * math.log(_sig(-0.75)))
    loss, h = pair_losses("ipo", s_w, s_l, n_w, n_l, r_w, r_l, beta=0.5)
    assert float(h) == pytest.approx(0.5 / 2 - (-1.0) / 4) and float(loss) == pytest.approx((0.5 - 1.0) ** 2)
    loss, h = pair_losses("simpo", s_w, s_l, n_w, n_l, beta=2.0, gamma=0.5)
    assert float(h) == pytest.approx(2 * -1.5 - 2 * -1.25 - 0.5) and float(loss) == pytest.approx(-math.log(_sig(-1.0)))


def _inputs(seed=0, n=12, t=5, groups=3):
    g = torch.Generator().manual_seed(seed)
    logp = (-torch.rand(n, t, generator=g, dtype=torch.float64) * 3).requires_grad_(True)
    ref = -torch.rand(n, t, generator=g, dtype=torch.float64) * 3
    mask = (torch.rand(n, t, generator=g) > 0.2).double()
    mask[:, 0] = 1.0
    rewards = torch.tensor([1, 0, 0.5, 0, 1, 1, 1, 1, 0, 0.2, 0.2, 0.9], dtype=torch.float64)[:n]  # group 1 ties
    gi = torch.arange(n) // (n // groups)
    return ObjectiveInputs(logp, logp.detach(), torch.zeros(n, t), mask, rewards=rewards, group_index=gi,
                           ref_logp=ref, n_groups=groups)


def _naive(inp, kind, mode, **kw):
    """Loops over groups and pairs, the formulas written out."""
    total = 0.0
    for g in sorted(set(inp.group_index.tolist())):
        rows = [i for i in range(len(inp.rewards)) if int(inp.group_index[i]) == g]
        r = [float(inp.rewards[i]) for i in rows]
        if len(set(r)) == 1:
            continue
        if mode == "best_worst":
            pairs = [(rows[r.index(max(r))], rows[r.index(min(r))])]
        else:
            pairs = [(i, j) for a, i in enumerate(rows) for b, j in enumerate(rows) if r[a] > r[b]]
        acc = 0.0
        for w, lo in pairs:
            sw = sum(inp.logp[w, k] for k in range(inp.mask.shape[1]) if inp.mask[w, k] > 0)
            sl = sum(inp.logp[lo, k] for k in range(inp.mask.shape[1]) if inp.mask[lo, k] > 0)
            rw = sum(inp.ref_logp[w, k] for k in range(inp.mask.shape[1]) if inp.mask[w, k] > 0)
            rl = sum(inp.ref_logp[lo, k] for k in range(inp.mask.shape[1]) if inp.mask[lo, k] > 0)
            nw, nl = float(inp.mask[w].sum()), float(inp.mask[lo].sum())
            if kind == "dpo":
                h = kw["beta"] * ((sw - rw) - (sl - rl))
                acc = acc - torch.nn.functional.logsigmoid(h)
            elif kind == "ipo":
                acc = acc + ((sw - rw) / nw - (sl - rl) / nl - 1 / (2 * kw["beta"])) ** 2
            else:
                acc = acc - torch.nn.functional.logsigmoid(kw["beta"] * sw / nw - kw["beta"] * sl / nl - kw["gamma"])
        total = total + acc / len(pairs)
    return total / inp.n_groups


@pytest.mark.parametrize("mode", ["best_worst", "all"])
@pytest.mark.parametrize("kind", ["dpo", "ipo", "simpo"])
def test_the_objectives_equal_a_naive_loop_in_value_and_gradient(kind, mode):
    inp = _inputs()
    if kind == "simpo":
        got, m = simpo(inp, SimPOParams(beta=2.0, gamma=0.5, pairs=mode))
        want = _naive(inp, kind, mode, beta=2.0, gamma=0.5)
    else:
        got, m = dpo(inp, DPOParams(loss=kind, beta=0.3, pairs=mode))
        want = _naive(inp, kind, mode, beta=0.3)
    (g_got,) = torch.autograd.grad(got, inp.logp)
    (g_want,) = torch.autograd.grad(want, inp.logp)
    assert float(got.detach()) == pytest.approx(float(want.detach()), rel=1e-10)
    assert torch.allclose(g_got, g_want, atol=1e-12)
    # groups 0 and 2 make 1 pair each, or 5 each (r = 1, 0, .5, 0: 3 + 2; 0, .2, .2, .9: 3 + 2); group 1 is flat
    assert float(m["pairs"][0, 0]) == (2 if mode == "best_worst" else 10)


def test_pairs_are_ranked_by_the_verifier_and_equal_rewards_make_none():
    gi = torch.tensor([0, 0, 0, 1, 1, 2, 2, 2])
    r = torch.tensor([0.0, 1.0, 1.0, 0.5, 0.5, 0.0, 0.3, 0.9])
    assert preference_pairs(r, gi, "best_worst") == [[(1, 0)], [(7, 5)]]  # the first of equals
    assert preference_pairs(r, gi, "all") == [[(1, 0), (2, 0)], [(6, 5), (7, 5), (7, 6)]]
    flat = _inputs()
    flat.rewards.fill_(1.0)
    loss, m = dpo(flat, DPOParams())
    assert float(loss.detach()) == 0.0 and float(m["pairs"][0, 0]) == 0.0
    (g,) = torch.autograd.grad(loss, flat.logp, allow_unused=True)
    assert g is None or not g.any()


@pytest.mark.slow  # (tests/test_recipes.py trains every recipe two steps in the default run)
def test_the_dpo_recipe_on_defab_trains(tmp_path):
    from tests.methods.helpers import run_recipe_steps

    out = run_recipe_steps("dpo_defab", tmp_path, overrides=[
        "task={name: defab, level: 2, n_train: 8, n_eval: 4}", "model.tiny.max_positions=2048",
        "rollout.prompts_per_step=4", "rollout.group_size=4", "rollout.max_new_tokens=16"])
    for m in out["metrics"]:
        assert all(math.isfinite(v) for v in m.values() if isinstance(v, float) and not math.isnan(v)), m
    assert out["cfg"].algorithm.objective.name == "dpo" and out["cfg"].task.name == "defab"


def test_the_offline_pairs_term_equals_its_formula_and_trains(tmp_path):
    from rlvr.algorithms.loss_terms.dpo_pairs import DPOPairsParams, dpo_pairs
    from tests.methods.helpers import run_recipe_steps

    g = torch.Generator().manual_seed(1)
    mk = lambda: (-torch.rand(3, 4, generator=g, dtype=torch.float64)).requires_grad_(True)  # noqa: E731
    e = {"pair_chosen_logp": mk(), "pair_rejected_logp": mk(), "pair_chosen_ref_logp": mk().detach(),
         "pair_rejected_ref_logp": mk().detach(), "pair_chosen_mask": torch.ones(3, 4, dtype=torch.float64),
         "pair_rejected_mask": torch.tensor([[1.0, 1, 0, 0]] * 3, dtype=torch.float64)}
    x = ObjectiveInputs(torch.zeros(1, 1), torch.zeros(1, 1), torch.zeros(1, 1), torch.ones(1, 1), extras=e)
    loss, m = dpo_pairs(x, DPOPairsParams(path="x", beta=0.2))
    s = lambda k, mask: (e[k] * e[mask]).sum(-1)  # noqa: E731
    h = 0.2 * ((s("pair_chosen_logp", "pair_chosen_mask") - s("pair_chosen_ref_logp", "pair_chosen_mask"))
               - (s("pair_rejected_logp", "pair_rejected_mask") - s("pair_rejected_ref_logp", "pair_rejected_mask")))
    assert float(loss) == pytest.approx(float(-torch.nn.functional.logsigmoid(h).mean()))
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text("".join(json.dumps({"prompt": f"{a}+{a}=", "chosen": str(2 * a), "rejected": str(2 * a + 1)})
                             + "\n" for a in range(10)))
    out = run_recipe_steps("grpo", tmp_path, overrides=[
        f"algorithm.loss_terms=[{{name: dpo_pairs, path: '{pairs}', pairs_per_step: 4, weight: 1.0}}]"])
    assert all("loss_term/dpo_pairs/pair_accuracy" in m for m in out["metrics"]), out["metrics"][0].keys()
