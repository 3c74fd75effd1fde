"""PACED-RL's trajectory balance (arXiv:2602.12642, RECONSTRUCTED): the hand-worked accuracy oracle (beta = ln 3),
log Z at its least-squares optimum (the loss is minimal there and its gradient in log Z is 0), the loss and
gradient against a naive loop, invariance to the row order and micro-batch split of whole groups; the recipe
trains."""

import math

import pytest
import torch

from rlvr.algorithms.objectives.tb import TBParams, accuracy_from_log_z, tb
from rlvr.algorithms.registry import ObjectiveInputs
from tests.methods.helpers import run_recipe_steps
from tests.methods.seed_support import BINARY


def test_the_accuracy_oracle():
    beta = math.log(3)
    z = torch.tensor([1.0, 3.0, 2.0, 0.5, 9.0])
    assert accuracy_from_log_z(z.log(), beta).tolist() == pytest.approx([0.0, 1.0, 0.5, 0.0, 1.0])


def _inp(seed=0, n=6, t=4):
    g = torch.Generator().manual_seed(seed)
    logp = (-torch.rand(n, t, generator=g)).requires_grad_(True)
    ref = -torch.rand(n, t, generator=g)
    mask = (torch.rand(n, t, generator=g) < 0.8).float()
    mask[:, 0] = 1
    rewards = torch.randint(0, 2, (n,), generator=g).double()
    gi = torch.tensor([0, 0, 0, 1, 1, 1])[:n]
    return ObjectiveInputs(logp, logp.detach().clone(), torch.zeros(n, t), mask, rewards=rewards, group_index=gi,
                           ref_logp=ref)


@pytest.mark.parametrize("length_norm", [False, True])
def test_loss_and_gradient_against_a_naive_loop(length_norm):
    inp = _inp()
    p = TBParams(beta=0.7, length_norm=length_norm)
    loss, m = tb(inp, p)
    loss.backward()
    got = inp.logp.grad.clone()
    logp = inp.logp.detach().clone().requires_grad_(True)
    total = 0.0
    for g in (0, 1):
        rows = [i for i in range(6) if int(inp.group_index[i]) == g]
        def seq(x, i):
            s = sum(x[i, t] for t in range(4) if inp.mask[i, t] > 0)
            return s / inp.mask[i].sum() if length_norm else s
        res = [0.7 * float(inp.rewards[i]) + float(seq(inp.ref_logp, i)) - seq(logp, i) for i in rows]
        log_z = sum(float(x.detach()) if torch.is_tensor(x) else x for x in res) / len(res)
        total = total + sum((log_z - x) ** 2 for x in res)
    (total / 6).backward()
    assert loss.item() == pytest.approx(float(total / 6), rel=1e-6)
    torch.testing.assert_close(got, logp.grad * inp.mask, rtol=1e-5, atol=1e-7)
    # log Z is the optimum: moving it either way raises the loss
    z = m["log_z"][:, 0]
    res = 0.7 * inp.rewards.float() + (inp.ref_logp * inp.mask).sum(-1) / (inp.mask.sum(-1) if length_norm else 1) \
        - (inp.logp.detach() * inp.mask).sum(-1) / (inp.mask.sum(-1) if length_norm else 1)
    for eps in (0.1, -0.1):
        assert float(((z + eps - res) ** 2).mean()) > float(((z - res) ** 2).mean())


def test_rows_may_come_in_any_order_and_micro_batches_of_whole_groups_add_up():
    inp = _inp(seed=3)
    full, _ = tb(inp, TBParams())
    perm = torch.tensor([4, 1, 5, 0, 3, 2])
    shuffled = ObjectiveInputs(inp.logp[perm], inp.old_logp[perm], inp.advantages[perm], inp.mask[perm],
                               rewards=inp.rewards[perm], group_index=inp.group_index[perm], ref_logp=inp.ref_logp[perm])
    assert tb(shuffled, TBParams())[0].item() == pytest.approx(full.item(), rel=1e-6)
    parts = [slice(0, 3), slice(3, 6)]  # each a whole group, normalised by the whole minibatch's rows
    total = sum(tb(ObjectiveInputs(inp.logp[s], inp.old_logp[s], inp.advantages[s], inp.mask[s], rewards=inp.rewards[s],
                                   group_index=inp.group_index[s], ref_logp=inp.ref_logp[s], n_rows=6),
                   TBParams())[0] for s in parts)
    assert float(total) == pytest.approx(full.item(), rel=1e-6)


def test_base_old_reads_the_sampling_policy():
    inp = _inp(seed=5)
    a, _ = tb(inp, TBParams(base="old"))
    b, _ = tb(ObjectiveInputs(inp.logp, inp.old_logp, inp.advantages, inp.mask, rewards=inp.rewards,
                              group_index=inp.group_index, ref_logp=inp.old_logp), TBParams(base="ref"))
    assert a.item() == pytest.approx(b.item())


def test_the_recipe_trains_two_steps(tmp_path):
    out = run_recipe_steps("paced_tb", tmp_path, overrides=BINARY)
    for m in out["metrics"]:
        assert all(math.isfinite(v) for v in m.values() if isinstance(v, float)), m
        assert 0.0 <= m["accuracy_estimate"] <= 1.0
    assert any(not torch.equal(out["before"][k], out["after"][k]) for k in out["before"])
