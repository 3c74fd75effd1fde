"""LATR (rlvr/rollout/strategies/latr.py; docs/methods.md, `rollout.strategy: latr`): the branching, mix-ratio,
pruning and capacity oracles on scripted distributions; the official suppression order and exit rule; the contract
on a tiny model (groups, counts, segments, behaviour log-probs equal to the trainer's recomputation); more distinct
completions per group than i.i.d. sampling where sampling repeats itself; the mix schedule and its state; training
through the trainer; config errors."""

import json
import math

import pytest
import torch

from rlvr.config.run import load_config
from rlvr.core.batch import build_batch
from rlvr.core.types import Example, GenerationRequest, SamplingParams, Segment
from rlvr.models import TinyModelConfig, build_tiny_model, char_tokenizer, completion_logprobs
from rlvr.engines import HFEngine
from rlvr.rollout.strategies.latr import (LATRWrapper, LATRParams, Roots, branch_mask, edit_distance, grow_tree, mix_ratio_at,
                               rouge_l, suffix_match, tree_count)
from rlvr.rollout.wrappers import wrap_engine
from rlvr.run.train import train
from tests.methods.helpers import Counting, run_recipe_steps, tiny_overrides

TOK = char_tokenizer("abcd ")


def _model(seed=0, sharpen=3.0):
    model = build_tiny_model(TinyModelConfig(hidden_size=32, intermediate_size=64, num_layers=2), TOK, seed=seed)
    with torch.no_grad():
        model.model.norm.weight.mul_(sharpen)  # a random model is close to uniform: sharpen its logits
    return model


def _stats():
    return dict.fromkeys(("created", "pruned", "suppressed", "tree_tokens", "steps"), 0.0)


def _scripted(probs_of, vocab=8):
    """A ``step_logits`` giving each branch the distribution ``probs_of(tokens)`` (a {token: p} dict)."""

    def step(branches):
        out = torch.full((len(branches), vocab), 1e-6)
        for i, b in enumerate(branches):
            for tok, p in probs_of(b.tokens).items():
                out[i, tok] = p
        return (out / out.sum(1, keepdim=True)).log()

    return step


def _roots(ks, r_max):
    return Roots(list(ks), [r_max] * len(ks), [{99}] * len(ks))  # token 99 never comes: no branch ends early


# ---- (a) the oracles -------------------------------------------------------------------------------------

def test_branching_test_oracle():
    top = torch.tensor([[0.50, 0.30], [0.60, 0.30], [0.45, 0.10]])
    assert branch_mask(top, 0.15, 0.25).flatten().tolist() == [True, False, False]  # gap 0.2 / 0.3 / p 0.1
    # the official code's literal relative test (p_1 - p_j > tau_rel) flips the gap condition
    assert branch_mask(top, 0.15, 0.25, official=True).flatten().tolist() == [False, True, False]
    three = torch.tensor([[0.40, 0.35, 0.20], [0.40, 0.35, 0.10]])  # m = 3: each runner-up tested on its own
    assert branch_mask(three, 0.15, 0.25).tolist() == [[True, True], [True, False]]


def test_mix_ratio_oracle_and_schedule():
    assert tree_count(8, 0.75) == 6 and 8 - tree_count(8, 0.75) == 2
    assert [tree_count(n, 0.75) for n in (3, 5, 1, 0)] == [2, 4, 1, 0]  # Python's round, as the official code
    p = LATRParams(mix_schedule={100: 0.75, 0: 1.0, 300: 0.25, 200: 0.5})  # the math script's, unordered
    assert [mix_ratio_at(p, s) for s in (0, 99, 100, 199, 250, 300, 10_000)] == [1.0, 1.0, 0.75, 0.75, 0.5, 0.25, 0.25]
    assert mix_ratio_at(LATRParams(mix_schedule={5: 0.5}), 0) == 0.5  # before the first entry: the first
    assert mix_ratio_at(LATRParams(mix_ratio=0.3), 7) == 0.3


def test_pruning_similarity_oracles():
    same = list(range(20))
    other = list(range(100, 120))
    assert rouge_l(same, same) == 1.0 and suffix_match(same, same) == 1.0 and edit_distance(same, same) == 0
    assert rouge_l(same, other) == 0.0 and suffix_match(same, other) == 0.0 and edit_distance(same, other) == 20
    assert rouge_l([1, 2, 3, 4], [9, 2, 3, 4]) == 0.75  # LCS 3 of 4 both ways
    assert suffix_match([1, 2, 3, 4], [3, 4, 9, 9]) == 0.5  # a's suffix [3, 4] occurs in b
    assert suffix_match([1, 2, 3, 4], [9, 9, 9, 3]) == 0.25
    assert edit_distance([1, 2, 3], [1, 3]) == 1


@pytest.mark.parametrize("rejoin, pruned", [(True, 1), (False, 0)])
def test_a_fork_that_repeats_its_parent_is_pruned_a_disjoint_one_kept(rejoin, pruned):
    """A fork at step 0 (p = 0.5 / 0.4); then every branch continues with token 3 (windows [2, 3, 3, 3] vs
    [1, 3, 3, 3]: ROUGE-L 0.75 > 0.5) or the fork with 4 and the parent with 3 (disjoint: kept)."""

    def probs(tokens):
        if not tokens:
            return {1: 0.5, 2: 0.4}
        return {3 if rejoin or tokens[0] == 1 else 4: 0.95}

    stats = _stats()
    tree = grow_tree(_scripted(probs), _roots([2], 8), LATRParams(lookahead=[4], return_threshold_decay=0.0), 1.0,
                     8, stats)
    assert stats["created"] == 1 and stats["pruned"] == pruned
    assert [b.tokens for b in tree[0]] == ([[1] + [3] * 7] if rejoin else [[1, 3, 3, 3, 3, 3], [2, 4, 4, 4, 4, 4]])
    # kept: full (2 of k = 2) and every branch older than the lookahead: the phase ends after step 5 (0 + 4 < 5)
    assert stats["steps"] == (8 if rejoin else 6)
    p = LATRParams(rouge_l=None, suffix_match=None, edit_distance=0.5, lookahead=[4])  # edit distance 1/4 < 0.5
    stats = _stats()
    grow_tree(_scripted(probs), _roots([2], 8), p, 1.0, 8, stats)
    assert stats["pruned"] == pruned


def test_capacity_and_the_official_suppression_order():
    """Every branch could fork twice at every step (m = 3); roots with k = 3, 5, 0, 1 never hold more than k
    branches, and room goes to candidate 2 of each row before candidate 3 of any."""
    seen: dict[int, int] = {}

    def probs(tokens):
        return {1: 0.40, 2: 0.35, 3: 0.20}

    step = _scripted(probs)

    def recording(branches):
        for root in {b.root for b in branches}:
            seen[root] = max(seen.get(root, 0), sum(b.root == root for b in branches))
        return step(branches)

    stats = _stats()
    p = LATRParams(max_branch_per_token=3, rouge_l=None, suffix_match=None, lookahead=[50])
    tree = grow_tree(recording, _roots([3, 5, 0, 1], 6), p, 1.0, 6, stats)
    assert [len(t) for t in tree] == [3, 5, 0, 1] and seen == {0: 3, 1: 5, 3: 1}
    assert stats["suppressed"] > 0 and stats["created"] == 2 + 4
    two = grow_tree(step, _roots([5], 2), p, 1.0, 2, _stats())[0]
    # step 0: the root forks with 2 and 3; step 1: room for 2 more, candidate 2 of rows 0 and 1 (not 3 of row 0)
    assert [b.tokens for b in two] == [[1, 1], [2, 1], [3, 1], [1, 2], [2, 2]]


# ---- (b) the contract on a tiny model --------------------------------------------------------------------

def test_completions_keep_the_contract_and_the_trainers_logprobs():
    model = _model()
    counting = Counting(HFEngine(model, TOK))
    params = LATRParams(mix_ratio=0.75, lookahead=[2], force_return_step=4)
    eng = LATRWrapper(counting, model, TOK, params)
    reqs = [GenerationRequest(Example("p", "ab", ""), 8), GenerationRequest(Example("q", "ba", ""), 3),
            GenerationRequest(Example("r", "a b", ""), 5, stop=("c",)),
            GenerationRequest(Example("s", "c", ""), 2, prefix_ids=(4,), prefix_logprobs=(-1.0,)),
            GenerationRequest(Example("t", "d", ""), 0)]
    model.train()
    out = eng.generate(reqs, SamplingParams(0.7, max_new_tokens=10, seed=0))
    assert model.training  # the tree ran in eval mode; the trainer's mode is restored
    model.eval()
    assert [c.group for c in out] == [0] * 8 + [1] * 3 + [2] * 5 + [3] * 2
    assert all(c.example_id == "pqrs"[c.group] for c in out)
    # one engine call: the i.i.d. parts (n - k: 2, 1, 1), the prefixed request as asked, the continuations
    (call,) = counting.calls
    plain = [r for r in call if not r.prefix_ids]
    assert [(r.example.id, r.n) for r in plain] == [("p", 2), ("q", 1), ("r", 1)] and reqs[3] in call
    conts = [r for r in call if r.prefix_ids and r is not reqs[3]]
    assert conts and all(r.n == 1 and len(r.prefix_ids) == 4 and r.max_new_tokens == 6 for r in conts)
    ks = {0: 6, 1: 2, 2: 4}
    for g, k in ks.items():
        rows = [c for c in out if c.group == g]
        for c in rows[:k]:  # tree completions: a prefix segment of at most 4 tokens, then what was sampled
            cut = c.segments[0].end
            assert c.segments[0] == Segment(0, cut, "prefix") and cut <= 4
            assert c.segments[1:] == ([Segment(cut, len(c))] if cut < len(c) else [])
            assert cut == len(c) or cut == 4  # it ended inside the tree, or the tree phase did
        assert all(c.segments is None for c in rows[k:])
        assert len({tuple(c.completion_ids[: c.segments[0].end]) for c in rows[:k]}) > 1  # the tree forked
    assert all(c.finish_reason == "stop" or "c" not in c.text for c in out if c.group == 2)
    assert [c.segments[0].source for c in out if c.group == 3] == ["prefix", "prefix"]
    # the tree's tokens are the raw top-1 or a top-2 fork of the policy at their position; some are forks
    forks = 0
    with torch.no_grad():
        for c in (c for c in out if c.group in ks and c.segments):
            ids = torch.tensor([c.prompt_ids + c.completion_ids])
            top = model(ids).logits[0, len(c.prompt_ids) - 1: len(c.prompt_ids) - 1 + c.segments[0].end].topk(2)
            ranks = [(top.indices[j] == t).nonzero().flatten().tolist() for j, t in
                     enumerate(c.completion_ids[: c.segments[0].end])]
            assert all(r for r in ranks), (c.completion_ids, top.indices)
            forks += sum(r == [1] for r in ranks)
    assert forks > 0
    ours = [c for c in out if c.group != 3]  # request 3's prefix log-prob is the test's made-up -1
    batch = build_batch(ours, [0.0] * len(ours), TOK.pad_token_id)
    with torch.no_grad():
        lp, _ = completion_logprobs(model, batch, temperature=0.7)
    torch.testing.assert_close(lp, batch.behaviour_logp, rtol=0, atol=1e-5)  # tree tokens included
    m = eng.metrics()
    assert m["latr/branches_created"] > 0 and m["latr/tree_steps"] == 4 and m["latr/mix_ratio"] == 0.75
    assert 1 <= m["latr/branches_per_root"] <= 6 and m["latr/padded_rows"] >= 0 and m["latr/tree_tokens"] > 0
    assert 1 <= m["latr/distinct_per_group"] <= 8 and eng.metrics() == {}


@pytest.mark.parametrize("stop_early", [False, True])
def test_padding_repeats_the_first_branch_or_samples_once_it_has_ended(stop_early):
    """A near-uniform model never forks (p_2 < 0.15): each root is one branch, padded to k = 4. Unfinished at
    exit (force_return_step 2), the padding continues its prefix (official); ended in the tree (completions
    of 2 tokens), it is sampled from the prompt instead of copied."""
    tok = char_tokenizer()
    model = build_tiny_model(TinyModelConfig(hidden_size=32, intermediate_size=64, num_layers=2), tok, seed=0)
    counting = Counting(HFEngine(model, tok))
    eng = LATRWrapper(counting, model, tok, LATRParams(lookahead=[1], force_return_step=2))
    out = eng.generate([GenerationRequest(Example("p", "ab", ""), 4)],
                       SamplingParams(0.9, max_new_tokens=2 if stop_early else 6, seed=0))
    m = eng.metrics()
    assert m["latr/branches_created"] == 0 and m["latr/padded_rows"] == 3 and m["latr/branches_per_root"] == 1
    (call,) = counting.calls
    if stop_early:  # the root ran to R_max = 2 inside the tree: three i.i.d. samples beside it
        assert [(r.n, r.prefix_ids) for r in call] == [(3, ())]
        assert out[0].segments == [Segment(0, 2, "prefix")] and all(c.segments is None for c in out[1:])
    else:  # four continuations of the same 2-token greedy prefix
        assert len(call) == 4 and len({r.prefix_ids for r in call}) == 1 and all(len(r.prefix_ids) == 2 for r in call)
        assert all(c.segments[0] == Segment(0, 2, "prefix") for c in out)
        assert len({tuple(c.completion_ids) for c in out}) > 1  # sampled apart after the prefix


def _distinct(completions) -> float:
    groups: dict[int, set] = {}
    for c in completions:
        groups.setdefault(c.group, set()).add(tuple(c.completion_ids))
    return sum(map(len, groups.values())) / len(groups)


def test_more_distinct_completions_than_iid_sampling_where_sampling_repeats_itself():
    """8 prompts x 8 completions of <= 12 tokens, 6 random sharpened models, temperature 0.1 (i.i.d. sampling
    mostly repeats the mode): the tree forks at close runner-ups and finds clearly more distinct completions."""
    prompts = ["ab", "ba", "a b", "bb a", "c", "d a", "cab", "dd"]
    latr, iid, lengths = [], [], []
    for seed in range(6):
        model = _model(seed)
        reqs = [GenerationRequest(Example(str(i), p, ""), 8) for i, p in enumerate(prompts)]
        sampling = SamplingParams(0.1, max_new_tokens=12, seed=seed)
        eng = LATRWrapper(HFEngine(model, TOK), model, TOK, LATRParams(lookahead=[4], force_return_step=6))
        tree, plain = eng.generate(reqs, sampling), HFEngine(model, TOK).generate(reqs, sampling)
        latr.append(_distinct(tree))
        iid.append(_distinct(plain))
        lengths.append((sum(map(len, tree)) / len(tree), sum(map(len, plain)) / len(plain)))
    mean_latr, mean_iid = sum(latr) / len(latr), sum(iid) / len(iid)
    print(f"distinct per group of 8: latr {mean_latr:.2f} {latr}, iid {mean_iid:.2f} {iid}; lengths {lengths}")
    assert mean_latr > 1.5 * mean_iid and mean_latr > mean_iid + 1.0
    assert sum(a >= b for a, b in zip(latr, iid)) >= 5


# ---- (c) schedule, state, training -----------------------------------------------------------------------

def test_the_mix_schedule_follows_weight_syncs_and_is_saved():
    model = _model()
    eng = LATRWrapper(HFEngine(model, TOK), model, TOK, LATRParams(mix_schedule={0: 1.0, 2: 0.5}, lookahead=[2]))
    req = [GenerationRequest(Example("p", "ab", ""), 4)]
    sampling = SamplingParams(0.7, max_new_tokens=6, seed=0)

    def tree_rows(out):
        return sum(c.segments is not None for c in out)

    assert tree_rows(eng.generate(req, sampling)) == 4
    eng.sync_weights()
    assert tree_rows(eng.generate(req, sampling)) == 4 and eng.metrics()["latr/mix_ratio"] == 1.0
    eng.sync_weights()
    assert tree_rows(eng.generate(req, sampling)) == 2 and eng.metrics()["latr/mix_ratio"] == 0.5
    other = LATRWrapper(None, model, TOK, LATRParams())
    other.load_state_dict(json.loads(json.dumps(eng.state_dict())))
    assert other.step == 2 and other.state_dict() == {"step": 2}
    other.load_state_dict({})  # a checkpoint without strategy state leaves it as it is
    assert other.step == 2


def test_two_recipe_steps_train_with_tree_metrics(tmp_path):
    out = run_recipe_steps("latr", tmp_path, steps=2)
    for m in out["metrics"]:
        assert all(math.isfinite(v) for v in m.values())
        assert m["engine/latr/branches_per_root"] <= 4 and m["engine/latr/mix_ratio"] == 1.0
        assert 0 < m["engine/latr/tree_steps"] <= 4  # completions of <= 4 tokens: all grown in the tree
    assert any(not torch.equal(out["before"][k], out["after"][k]) for k in out["before"])


def test_a_run_through_the_trainer_checkpoints_the_strategy_step(tmp_path):
    cfg = load_config(None, tiny_overrides(tmp_path) + [
        "rollout.strategy.name=latr", "rollout.strategy.mix_ratio=0.5", "rollout.strategy.lookahead=[2]",
        "train.steps=2", "train.checkpoint_every=1", "train.eval_every=0"])
    train(cfg)
    state = json.loads((tmp_path / "run" / "checkpoints" / "step_000002" / "state.json").read_text())
    assert state["engine"]["strategy"] == {"step": 2}
    model = _model()
    assert isinstance(wrap_engine(HFEngine(model, TOK), model, TOK, cfg.rollout), LATRWrapper)


@pytest.mark.parametrize("bad, match", [
    (["rollout.strategy.prob_abs=1.5"], "prob_abs"),
    (["rollout.strategy.max_branch_per_token=1"], "max_branch_per_token"),
    (["rollout.strategy.lookahead=[0]"], "lookahead"),
    (["rollout.strategy.mix_ratio=-0.1"], "mix_ratio"),
    (["rollout.strategy.mix_schedule={0: 1.5}"], "mix_schedule"),
    (["rollout.strategy.mix_schedule={-1: 0.5}"], "mix_schedule"),
    (["rollout.strategy.force_return_step=0"], "force_return_step"),
    (["rollout.strategy.width=3"], "width"),
    (["rollout.strategy.mix_schedule={0: 1}", "rollout.param_noise.sigma=0.01"], "param_noise"),
    (["rollout.multiturn.env=issue_tracker"], "multi-turn"),
])
def test_bad_params_are_config_errors(tmp_path, bad, match):
    with pytest.raises(ValueError, match=match):
        load_config(None, tiny_overrides(tmp_path) + ["rollout.strategy.name=latr", *bad])
