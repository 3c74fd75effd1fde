"""PROPA: hand-worked oracles, the MCTS tree on a scripted policy whose right first step is known, the
process-value reward and the sibling-set advantage against naive loops, and the recipe through the trainer."""

import math
import random

import pytest
import torch

from rlvr.algorithms.advantages.grpo import GRPOAdvantageParams, grpo_advantage
from rlvr.algorithms.registry import ADVANTAGES, REWARD_TRANSFORMS, AdvantageInputs, TransformInputs, call
from rlvr.core.types import Completion, Example, GenerationRequest, SamplingParams, Score
from rlvr.models.tiny import char_tokenizer
from rlvr.rollout.strategies.propa import PROPAWrapper, PROPAParams, log_boost, skipped, ucb


def test_methods_oracles():
    assert log_boost(0.0) == 0.0 and log_boost(1.0) == pytest.approx(1.0)
    assert log_boost(0.5) == pytest.approx(math.log(6) / math.log(11)) and round(log_boost(0.5), 4) == 0.7472
    assert skipped([0, 0.05, 0.08, 0.09], 0.1) and skipped([0, 0, 0], 0.1) and skipped([1.0, 1.0], 0.1)
    assert not skipped([0.0, 0.5, 0.1], 0.1)
    assert ucb(3, 5, 10, 1.0) == pytest.approx(1.5597, abs=1e-4)
    assert ucb(0, 0, 10, 1.0) == math.inf


class ScriptedEngine:
    """A policy whose steps are 'a\\n' or 'b\\n' (sampled, seeded); its greedy continuation answers 1 after a
    path that opened with 'a', else 0. So a first step 'a' has Q = 1 and 'b' Q = 0, and every deeper sibling
    set is all-1 or all-0."""

    def __init__(self, tok):
        self.tok, self.calls = tok, []

    def sync_weights(self):
        pass

    def generate(self, requests, sampling):
        out = []
        rng = random.Random(sampling.seed)
        for gi, req in enumerate(requests):
            prompt = self.tok(req.example.prompt)["input_ids"]
            prefix = list(req.prefix_ids)
            for _ in range(req.n):
                text = self.tok.decode(prefix)
                if sampling.greedy:
                    new = self.tok("ans 1" if text.startswith("a") else "ans 0")["input_ids"] + [self.tok.eos_token_id]
                else:
                    new = self.tok(rng.choice(["a\n", "b\n"]))["input_ids"]
                new = new[: req.max_new_tokens if req.max_new_tokens is not None else sampling.max_new_tokens]
                ids = prefix + new
                out.append(Completion(req.example.id, prompt, ids, [-0.5] * len(ids), "stop",
                                      self.tok.decode(ids), group=gi))
            self.calls.append((len(requests), sampling.greedy))
        return out


class AnswerTask:
    def score(self, example, text):
        ok = text.strip().endswith(example.answer)
        return Score(float(ok), {"correct": float(ok)})


def _engine(**kw):
    tok = char_tokenizer()
    eng = PROPAWrapper(ScriptedEngine(tok), tok, PROPAParams(**kw))
    eng.bind_task(AnswerTask())
    return eng, tok


def test_the_tree_labels_the_right_first_step_and_skips_uninformative_sets():
    eng, tok = _engine(iterations=6, expansions=4, max_steps=4)
    reqs = [GenerationRequest(Example("q1", "x=", "1"), 8), GenerationRequest(Example("q2", "y=", "1"), 8)]
    comps = eng.generate(reqs, SamplingParams(temperature=1.0, max_new_tokens=40, seed=3))
    assert {c.group for c in comps} == {0, 1}
    for g in (0, 1):
        rows = [c for c in comps if c.group == g]
        assert len({c.tree_parent for c in rows}) == 1  # deeper sets are all 1 or all 0: only the root's is kept
        assert len(rows) == 4
        for c in rows:
            step = tok.decode(c.completion_ids)
            assert c.prompt_ids == tok(reqs[g].example.prompt)["input_ids"]
            assert c.process_value == (1.0 if step.startswith("a") else 0.0)  # Q = 1 or 0, exactly
            assert c.mask() == [1.0] * len(c.completion_ids)  # no prefix at the root
        assert {c.process_value for c in rows} == {0.0, 1.0}
    m = eng.metrics()
    assert m["propa/groups"] == 2 and m["propa/skipped_sets"] > 0


def test_deeper_sets_carry_their_prefix_masked_and_visits_add_up():
    eng, tok = _engine(iterations=5, expansions=2, max_steps=6, min_span=0.0, max_groups=50)
    reqs = [GenerationRequest(Example("q", "x=", "1"), 2)]
    comps = eng.generate(reqs, SamplingParams(temperature=1.0, max_new_tokens=40, seed=0))
    deeper = [c for c in comps if c.tree_branch > 0]
    for c in deeper:
        assert c.mask()[: c.tree_branch] == [0.0] * c.tree_branch and c.mask()[c.tree_branch:] == [1.0, 1.0]
        assert c.segments[0].source == "prefix" and c.segments[0].end == c.tree_branch
        assert c.logprobs == [-0.5] * len(c.completion_ids)
    # min_span 0 keeps the mixed sets only (all-0 and all-1 sets are still skipped); the root's is mixed or not
    for parent in {c.tree_parent for c in comps}:
        labels = [c.process_value for c in comps if c.tree_parent == parent]
        assert not skipped(labels, 0.0) or parent == 1


def test_process_value_reward_and_sibling_advantage_equal_naive_loops():
    g = torch.Generator().manual_seed(0)
    n = 12
    group = torch.tensor([0] * 6 + [1] * 6)
    parent = torch.tensor([1, 1, 1, 4, 4, 4, 1, 1, 7, 7, 7, 7], dtype=torch.float32)
    label = torch.rand(n, generator=g, dtype=torch.float64)
    label[3] = -1.0  # a row without a label keeps its reward
    rewards = torch.rand(n, generator=g, dtype=torch.float64)
    inp = TransformInputs(rewards, group, torch.ones(n, 3), extras={"process_value": label})
    r, _ = call(REWARD_TRANSFORMS.get("process_value"), inp, REWARD_TRANSFORMS.get("process_value").params())
    want = torch.where(label >= 0, label, rewards)
    assert torch.equal(r, want)
    extras = {"tree_parent": parent[:, None].expand(n, 3)}
    for std in ("unbiased", "population", "none"):
        p = ADVANTAGES.get("propa").params(std=std)
        adv = call(ADVANTAGES.get("propa"), AdvantageInputs(r, group, extras=extras), p)
        for gi, pi in {(int(a), int(b)) for a, b in zip(group, parent)}:
            rows = [i for i in range(n) if group[i] == gi and parent[i] == pi]
            sub = grpo_advantage(AdvantageInputs(r[rows], torch.zeros(len(rows), dtype=torch.long)),
                                 GRPOAdvantageParams(std=std))
            assert torch.allclose(adv[rows], sub, atol=1e-6)


def test_propa_needs_the_task():
    tok = char_tokenizer()
    eng = PROPAWrapper(ScriptedEngine(tok), tok, PROPAParams())
    with pytest.raises(RuntimeError, match="bind_task"):
        eng.generate([GenerationRequest(Example("q", "x", "1"), 4)], SamplingParams())


class AnsweringEngine(ScriptedEngine):
    """Sampled steps are 'a\\n', 'b\\n' or a final 'ans 1' (EOS): terminal and correct."""

    def generate(self, requests, sampling):
        if sampling.greedy:
            return super().generate(requests, sampling)
        out, rng = [], random.Random(sampling.seed)
        for gi, req in enumerate(requests):
            prompt = self.tok(req.example.prompt)["input_ids"]
            for _ in range(req.n):
                pick = rng.choice(["a\n", "b\n", "ans 1"])
                new = self.tok(pick)["input_ids"] + ([self.tok.eos_token_id] if pick == "ans 1" else [])
                ids = list(req.prefix_ids) + new
                out.append(Completion(req.example.id, prompt, ids, [-0.5] * len(ids), "stop", "", group=gi))
        return out


def test_sft_rows_are_paths_to_correct_answers_or_the_reference():
    from rlvr.rollout.strategies.propa_tree import Node, best_paths

    tok = char_tokenizer()
    eng = PROPAWrapper(AnsweringEngine(tok), tok, PROPAParams(iterations=8, expansions=3, max_steps=3))
    eng.bind_task(AnswerTask())
    eng.generate([GenerationRequest(Example("q", "x=", "1", target="ans 1"), 6)],
                 SamplingParams(temperature=1.0, max_new_tokens=40, seed=1))
    rows = eng.sft_rows()
    assert 1 <= len(rows) <= 2 and eng.sft_rows() == []  # cleared once read
    for r in rows:
        text = tok.decode(r.completion_ids, skip_special_tokens=True)
        assert text.endswith("ans 1") and r.completion_ids[-1] == tok.eos_token_id
        assert r.prompt_ids == tok("x=")["input_ids"] and r.mask() == [1.0] * len(r.completion_ids)
    # a search that never finds the answer falls back to the reference solution
    eng2, _ = _engine(iterations=3, expansions=2, max_steps=2)
    eng2.generate([GenerationRequest(Example("q", "x=", "9", target="ans 9"), 2)],
                  SamplingParams(temperature=1.0, max_new_tokens=40, seed=0))
    (ref,) = eng2.sft_rows()
    assert ref.completion_ids == tok("ans 9", add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    # the pair with the shallowest common ancestor: siblings under the root beat cousins deeper down
    root = Node([], [])
    a, b = Node([1], [0.0], root, depth=1), Node([2], [0.0], root, depth=1)
    root.children = [a, b]
    a1, a2 = Node([3], [0.0], a, depth=2), Node([4], [0.0], a, depth=2)
    a.children = [a1, a2]
    b1 = Node([5], [0.0], b, depth=2)
    b.children = [b1]
    assert best_paths([a1, a2, b1], 2) == [a1, b1]
    assert best_paths([a1, a2], 2) == [a1, a2] and len(best_paths([a1, a2, b1], 3)) == 3


def test_interleaved_sft_on_the_strategys_rows_runs_through_the_trainer(tmp_path):
    from tests.methods.helpers import run_recipe_steps
    from tests.methods.seed_support import BINARY

    out = run_recipe_steps("propa", tmp_path, steps=2, overrides=list(BINARY) + [
        "sft.interleave_every=1", "sft.interleave_source=rollouts", "sft.interleave_steps=2", "sft.batch_size=4"])
    assert all("sft/rows" in m for m in out["metrics"])
    assert any(m.get("sft/steps", 0) == 2 for m in out["metrics"])


def test_the_step_cut_equals_a_token_by_token_scan():
    tok = char_tokenizer()
    eng = PROPAWrapper(ScriptedEngine(tok), tok, PROPAParams(delimiter="\n", terminal="ans"))
    eos = tok.eos_token_id

    def naive(ids, reason):
        for j in range(1, len(ids) + 1):
            text = tok.decode(ids[:j], skip_special_tokens=True)
            if ids[j - 1] == eos or "\n" in text:
                return ids[:j], ids[j - 1] == eos or "ans" in text
        return ids, reason == "stop" or "ans" in tok.decode(ids, skip_special_tokens=True)

    rng = random.Random(0)
    alphabet = tok("ab \nns")["input_ids"] + [eos]
    for _ in range(300):
        ids = [rng.choice(alphabet) for _ in range(rng.randint(0, 12))]
        reason = rng.choice(["stop", "length"])
        step, lps, done = eng._cut_step(ids, [0.1] * len(ids), reason)
        want, want_done = naive(ids, reason)
        assert (step, bool(done)) == (want, bool(want_done)) and len(lps) == len(step)
