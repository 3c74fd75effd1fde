"""ROSE (rlvr/rollout/strategies/rose.py, rlvr/algorithms/advantages/rose.py; docs/methods.md, `rose`): the
uncertainty and advantage oracles, the tree advantages against a path-based computation and their invariances
(telescoping to R - mean, row order, a forest of roots is the mean baseline), the length penalty by hand; the
strategy on a tiny model (tree structure, shared prefixes, branch points at the argmax of independently recomputed
uncertainty, behaviour log-probs equal to the trainer's, epsilon at 0 and 1); the recipe trains; config errors."""

import math
import random

import pytest
import torch

from rlvr.algorithms.advantages.rose import ROSEAdvantageParams, branch_points, rose_advantage, tree_advantages
from rlvr.algorithms.registry import AdvantageInputs
from rlvr.config.run import load_config
from rlvr.core.batch import build_batch
from rlvr.core.types import Example, GenerationRequest, SamplingParams, Segment
from rlvr.models import TinyModelConfig, build_tiny_model, char_tokenizer, completion_logprobs
from rlvr.engines import HFEngine
from rlvr.rollout.strategies.rose import ROSEWrapper, ROSEParams, TreeCompletion, choose_branch, token_uncertainty, tree_rows
from rlvr.train.loop import compute_extras  # noqa: F401  (the step's producer of extras)
from tests.methods.helpers import Counting, recipe_trains, tiny_overrides

TOK = char_tokenizer("abcd ")


def _model(seed=0, sharpen=2.0):
    model = build_tiny_model(TinyModelConfig(hidden_size=32, intermediate_size=64, num_layers=2), TOK, seed=seed)
    with torch.no_grad():
        model.model.norm.weight.mul_(sharpen)
        emb = model.get_input_embeddings().weight
        zero = emb.norm(dim=-1) == 0  # the padding row: give it a direction (the identity
        emb[zero] = torch.randn(int(zero.sum()), emb.shape[1])  # ||sum p e||^2 - sum p^2 needs unit rows)
    return model


def _tree(spec, length=8):
    """TreeCompletions from ``spec``: (reward, parent node or 0, branch position, length or None) per node."""
    comps = []
    for k, (_, parent, branch, n) in enumerate(spec):
        comps.append(TreeCompletion("e", [1], [3] * (n or length), [0.0] * (n or length), "stop", "", group=0,
                                    tree_node=k + 1, tree_parent=parent, tree_branch=branch))
    return comps


def _advantage(spec, groups=None, lam=0.0, length=8):
    comps = _tree(spec, length)
    t = max(len(c) for c in comps)
    mask = torch.tensor([[1.0] * len(c) + [0.0] * (t - len(c)) for c in comps])
    inp = AdvantageInputs(torch.tensor([r for r, *_ in spec], dtype=torch.float64),
                          torch.tensor(groups or [0] * len(spec)), lengths=mask.sum(-1), mask=mask,
                          extras=tree_rows(comps, mask))
    return rose_advantage(inp, ROSEAdvantageParams(length_penalty=lam))


# ---- (a) the oracles --------------------------------------------------------------------------------------

def test_the_three_sample_advantage_oracle():
    # s0 from the root (R = 1); s1 branches from s0 at 5 (R = 0); s2 restarts from the root (R = 0)
    adv = _advantage([(1.0, 0, 0, None), (0.0, 1, 5, None), (0.0, 0, 0, None)])
    want = [[1 / 6] * 5 + [1 / 2] * 3, [1 / 6] * 5 + [-1 / 2] * 3, [-1 / 3] * 8]
    torch.testing.assert_close(adv, torch.tensor(want), atol=1e-6, rtol=0)
    assert branch_points([-1, 0, -1], [0, 5, 0]) == [{0, 5}, {0, 5}, {0}]


def test_the_cosine_uncertainty_oracle():
    logp = torch.tensor([[0.5, 0.5]]).log()
    same, orth = torch.tensor([[1.0, 0.0], [2.0, 0.0]]), torch.eye(2)
    h = math.log(2)
    chosen = torch.tensor([0])
    assert token_uncertainty(logp, chosen, same, "cosine-entropy", 20).item() == pytest.approx(-0.5 * h)
    assert token_uncertainty(logp, chosen, orth, "cosine-entropy", 20).item() == pytest.approx(0.0, abs=1e-7)
    assert token_uncertainty(logp, chosen, same, "cosine", 20).item() == pytest.approx(-0.5)
    assert token_uncertainty(logp, chosen, same, "entropy", 20).item() == pytest.approx(h)
    # H counts the returned candidates: the top-k and, beside them, the sampled token
    p = torch.tensor([[0.5, 0.3, 0.2]])
    top2 = -(0.5 * math.log(0.5) + 0.3 * math.log(0.3))
    assert token_uncertainty(p.log(), torch.tensor([1]), torch.eye(3), "entropy", 2).item() == pytest.approx(top2)
    assert token_uncertainty(p.log(), torch.tensor([2]), torch.eye(3), "entropy", 2).item() == pytest.approx(
        top2 - 0.2 * math.log(0.2))
    # the cosine term over the top-k only: sum_{i != j} p_i p_j cos_ij with cos(e_0, e_1) = 0.6
    emb = torch.tensor([[1.0, 0.0], [0.6, 0.8], [0.0, 1.0]])
    u = token_uncertainty(p.log(), torch.tensor([2]), emb, "cosine", 2).item()
    assert u == pytest.approx(-(2 * 0.5 * 0.3 * 0.6)), u


def test_choose_branch_takes_the_first_maximum():
    assert choose_branch([[0.1, 0.5, 0.2], [0.1, 0.5, 0.9]]) == (1, 2)
    assert choose_branch([[0.1, 0.5], [0.1, 0.5]]) == (0, 1)  # a child's copied values never win a tie
    assert choose_branch([[], []]) is None


# ---- (b) the tree advantages: an independent computation and invariances ------------------------------

def _naive(rewards, lengths, parent, branch):
    """The advantage by shared paths: completion b passes the branch point that child c made at k when b's
    first k tokens are, in the tree, the same tokens as c's (the same node owns position k - 1 on both
    lines). Values keyed by position, as in ROSE. For the trees ROSE grows (a child never branches before
    the point its parent branched at)."""
    n = len(rewards)

    def owner(b, t):  # the node that sampled position t of b's completion
        while parent[b] >= 0 and t < branch[b]:
            b = parent[b]
        return b

    points = [{0} | {branch[c] for c in range(n) if parent[c] >= 0
                     and (branch[c] == 0 or owner(b, branch[c] - 1) == owner(c, branch[c] - 1))} for b in range(n)]
    value = {k: sum(rewards[b] for b in range(n) if k in points[b]) / sum(k in points[b] for b in range(n))
             for k in set().union(*points)}
    out = []
    for b in range(n):
        ks = sorted(k for k in points[b] if k < lengths[b]) + [lengths[b]]
        out.append([(rewards[b] if ks[i + 1] == lengths[b] else value[ks[i + 1]]) - value[ks[i]]
                    for i in range(len(ks) - 1) for _ in range(ks[i + 1] - ks[i])])
    return out


def _grown_tree(rng, n, length):
    """A tree as ROSE grows it: each new node is a root, or branches from an earlier node at or after that
    node's own branch point."""
    parent, branch = [-1], [0]
    for _ in range(1, n):
        if rng.random() < 0.3:
            parent.append(-1)
            branch.append(0)
        else:
            a = rng.randrange(len(parent))
            parent.append(a)
            branch.append(rng.randrange(branch[a], length))
    return parent, branch


@pytest.mark.parametrize("seed", range(12))
def test_tree_advantages_match_the_path_computation_and_telescope(seed):
    rng = random.Random(seed)
    n, length = rng.randint(2, 8), 10
    parent, branch = _grown_tree(rng, n, length)
    rewards = [float(rng.random() < 0.5) for _ in range(n)]
    lengths = [length] * n
    got = tree_advantages(rewards, lengths, parent, branch)
    want = _naive(rewards, lengths, parent, branch)
    for g, w in zip(got, want):
        assert g == pytest.approx(w, abs=1e-12)
    mean = sum(rewards) / n
    for b in range(n):  # the segment values telescope to R_b - V(0)
        segs = sorted({0, *[k for k in branch_points(parent, branch)[b] if k < length]})
        assert sum(got[b][k] for k in segs) == pytest.approx(rewards[b] - mean, abs=1e-12)


def test_a_forest_of_roots_is_the_mean_baseline_and_rows_may_come_in_any_order():
    spec = [(1.0, 0, 0, 6), (0.0, 0, 0, 4), (0.5, 0, 0, 5)]
    adv = _advantage(spec)
    mean = 0.5
    for row, (r, *_rest) in zip(adv, spec):
        n = _rest[-1]
        assert row[:n].tolist() == pytest.approx([r - mean] * n) and row[n:].abs().sum() == 0
    # two groups interleaved and shuffled: each row's advantage is unchanged
    a = [(1.0, 0, 0, None), (0.0, 1, 5, None), (0.0, 0, 0, None)]
    b = [(0.0, 0, 0, None), (1.0, 1, 2, None), (1.0, 2, 4, None)]
    ref_a, ref_b = _advantage(a), _advantage(b)
    comps = _tree(a) + _tree(b)
    order = [4, 0, 5, 2, 3, 1]
    rows = [comps[i] for i in order]
    rewards = [([r for r, *_ in a] + [r for r, *_ in b])[i] for i in order]
    groups = [0 if i < 3 else 1 for i in order]
    mask = torch.ones(6, 8)
    out = rose_advantage(AdvantageInputs(torch.tensor(rewards, dtype=torch.float64), torch.tensor(groups),
                                         lengths=mask.sum(-1), mask=mask, extras=tree_rows(rows, mask)),
                         ROSEAdvantageParams())
    ref = torch.cat([ref_a, ref_b])
    torch.testing.assert_close(out, ref[order], atol=1e-6, rtol=0)


def test_the_length_penalty_by_hand():
    # s0 (R 1, length 4) is the shortest correct; s1 (R 1, length 8) and s2 (R 0) branched from s0 at 2;
    # s3 (R 0) a root. V(0) = 1/2, V(2) = 2/3: s1 gets 1/6 on [0, 2) and 1/3 on [2, 8)
    spec = [(1.0, 0, 0, 4), (1.0, 1, 2, 8), (0.0, 1, 2, 8), (0.0, 0, 0, 8)]
    plain = _advantage(spec)
    assert plain[1].tolist() == pytest.approx([1 / 6] * 2 + [1 / 3] * 6)
    pen = _advantage(spec, lam=1.0)
    # the deepest common point k_c = 2: f = 1 - (4 - 2) / (8 - 2) = 2/3, A[s1, 2:8] -= |A| f = 1/3 - 2/9
    assert pen[1].tolist() == pytest.approx([1 / 6] * 2 + [1 / 9] * 6)
    for b in (0, 2, 3):  # the shortest correct and the incorrect ones are untouched
        assert torch.equal(pen[b], plain[b])
    half = _advantage(spec, lam=0.5)  # f = 1 - (1/3)^0.5
    assert half[1, 2].item() == pytest.approx(1 / 3 - 1 / 3 * (1 - (1 / 3) ** 0.5))


# ---- (c) the strategy on a tiny model ----------------------------------------------------------------------

def _naive_u(model, comp, temperature):
    """u at every completion position by a per-position loop over the full distribution."""
    emb = model.get_input_embeddings().weight.detach()
    with torch.no_grad():
        logits = model(torch.tensor([comp.prompt_ids + comp.completion_ids])).logits[0].float()
    out = []
    p0 = len(comp.prompt_ids)
    for t, tok in enumerate(comp.completion_ids):
        probs = torch.softmax(logits[p0 - 1 + t] / temperature, -1)
        top = sorted(range(len(probs)), key=lambda v: -float(probs[v]))[:20]
        ent = -sum(float(probs[v]) * math.log(float(probs[v])) for v in set(top) | {tok})
        e = [emb[v] / emb[v].norm() for v in top]
        f = sum(float(probs[a]) * float(probs[b]) * float(e[i] @ e[j])
                for i, a in enumerate(top) for j, b in enumerate(top) if i != j)
        out.append(-f * ent)
    return out


def test_the_strategy_grows_trees_that_keep_the_contract():
    model = _model()
    counting = Counting(HFEngine(model, TOK))
    eng = ROSEWrapper(counting, model, TOK, ROSEParams(epsilon=0.3))
    reqs = [GenerationRequest(Example("p", "ab", ""), 6), GenerationRequest(Example("q", "ba", ""), 3),
            GenerationRequest(Example("s", "c", ""), 2, prefix_ids=(4,), prefix_logprobs=(-1.0,)),
            GenerationRequest(Example("t", "d", ""), 0)]
    model.train()
    out = eng.generate(reqs, SamplingParams(0.8, max_new_tokens=8, seed=0))
    assert model.training  # scored in eval mode; the trainer's mode restored
    model.eval()
    assert sorted(c.group for c in out) == [0] * 6 + [1] * 3 + [2] * 2
    assert len(counting.calls) == 1 + 6  # the prefixed request as asked, then one round per completion
    assert counting.calls[0] == [reqs[2], reqs[3]]
    assert [len(call) for call in counting.calls[1:]] == [2, 2, 2, 1, 1, 1]
    children = 0
    for g in (0, 1):
        rows = sorted((c for c in out if c.group == g), key=lambda c: c.tree_node)
        assert [c.tree_node for c in rows] == list(range(1, reqs[g].n + 1))
        us = []
        for c in rows:
            if c.tree_parent:
                children += 1
                par = rows[c.tree_parent - 1]
                k = c.tree_branch
                assert c.tree_parent < c.tree_node and c.completion_ids[:k] == par.completion_ids[:k]
                if k:
                    assert c.segments == [Segment(0, k, "prefix"), Segment(k, len(c))]
                else:  # branched before its first token: an empty prefix, sampled like a root
                    assert c.segments in (None, [Segment(0, len(c))])
                # the branch point is the argmax of the earlier completions' u (up to float ties)
                best = max(u for row in us for u in row)
                assert us[c.tree_parent - 1][k] >= best - 1e-5, (c.tree_parent, k, choose_branch(us))
            else:
                assert c.tree_branch == 0
            assert len(c) <= 8
            us.append(_naive_u(model, c, 0.8))
            got = eng._uncertainty([c], [0], SamplingParams(0.8))[0]
            assert got == pytest.approx(us[-1], abs=1e-5)
    assert children > 0
    ours = [c for c in out if c.group != 2]
    batch = build_batch(ours, [0.0] * len(ours), TOK.pad_token_id)
    with torch.no_grad():
        lp, _ = completion_logprobs(model, batch, temperature=0.8)
    torch.testing.assert_close(lp, batch.behaviour_logp, rtol=0, atol=1e-5)  # reused prefixes included
    m = eng.metrics()
    assert m["rose/rounds"] == 6 and 0 < m["rose/branched_frac"] <= 1 and m["rose/reused_tokens"] >= 0
    assert eng.metrics() == {}


@pytest.mark.parametrize("epsilon", [0.0, 1.0])
def test_epsilon_one_is_iid_roots_and_zero_always_branches(epsilon):
    model = _model(seed=1)
    eng = ROSEWrapper(HFEngine(model, TOK), model, TOK, ROSEParams(epsilon=epsilon, branch_metric="entropy"))
    out = eng.generate([GenerationRequest(Example("p", "ab", ""), 5)], SamplingParams(1.0, max_new_tokens=6, seed=3))
    parents = [c.tree_parent for c in sorted(out, key=lambda c: c.tree_node)]
    assert parents[0] == 0 and all((p == 0) == (epsilon == 1.0) for p in parents[1:]), parents
    # the same seed grows the same tree
    again = eng.generate([GenerationRequest(Example("p", "ab", ""), 5)], SamplingParams(1.0, max_new_tokens=6, seed=3))
    assert [c.completion_ids for c in again] == [c.completion_ids for c in out]


def test_the_recipe_trains_with_tree_metrics(tmp_path):
    out = recipe_trains("rose", tmp_path, ["reward", "loss"], overrides=["algorithm.dynamic_sampling.max_rounds=2", "algorithm.dynamic_sampling.metric=reward"])
    for m in out["metrics"]:
        assert m["engine/rose/rounds"] >= 4 and 0 <= m["engine/rose/branched_frac"] <= 1


@pytest.mark.parametrize("bad, match", [
    (["rollout.strategy.epsilon=1.5"], "epsilon"),
    (["rollout.strategy.top_k=1"], "top_k"),
    (["rollout.strategy.branch_metric=cosine_entropy"], "branch_metric"),
    (["rollout.strategy.name=plain"], "rollout.strategy rose"),
    (["rollout.contexts.num_contexts=2", "rollout.contexts.per_context=2"], "one tree"),
    (["rollout.multiturn.env=issue_tracker"], "multi-turn"),
])
def test_bad_settings_are_config_errors(tmp_path, bad, match):
    with pytest.raises(ValueError, match=match):
        load_config(None, tiny_overrides(tmp_path) + ["rollout.strategy.name=rose", "algorithm.advantage.name=rose",
                                                      *bad])
