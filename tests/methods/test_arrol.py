"""arrol (arXiv:2603.24840, RECONSTRUCTED): the balanced-keep oracle and schedule, the balanced rule keeps more
within-group reward variance than a random subset when scores carry signal, the wrapper's contract on a tiny model
(over-provisioned starts, the pruned ones the middle of the head's scores computed independently, prefix segments
and behaviour log-probs equal to the trainer's, fewer tokens than full over-provisioned groups), the head learns
from scored outcomes, its state, the recipe through the trainer, config errors."""

import math
import random

import pytest
import torch

from rlvr.config.run import load_config
from rlvr.core.batch import build_batch
from rlvr.core.types import Example, GenerationRequest, SamplingParams, Score, Segment
from rlvr.models import TinyModelConfig, build_tiny_model, char_tokenizer, completion_logprobs
from rlvr.engines import HFEngine
from rlvr.rollout.strategies.arrol import ArrolCompletion, ArrolWrapper, ArrolParams, balanced_keep, keep_counts
from tests.methods.helpers import Counting, run_recipe_steps, tiny_overrides
from tests.methods.seed_support import BINARY

TOK = char_tokenizer("abcd ")


def test_the_balanced_keep_oracle_and_schedule():
    s = [0.9, 0.8, 0.7, 0.2, 0.1, 0.05]
    keep = balanced_keep(s, 4)
    assert keep == [0, 1, 4, 5]
    assert sum(s[i] for i in keep) / 4 == pytest.approx(0.4625) and sum(s) / 6 == pytest.approx(0.4583, abs=1e-4)
    assert len(balanced_keep([0.9, 0.8, 0.7, 0.6, 0.55], 3)) == 3  # all above 0.5: still exactly n
    assert balanced_keep([0.3, 0.1], 5) == [0, 1] and balanced_keep([0.5, 0.5, 0.5], 1) == [0]
    assert keep_counts(6, 4, 1) == [4] and keep_counts(6, 4, 2) == [5, 4] and keep_counts(12, 4, 4) == [10, 8, 6, 4]


def test_balanced_survivors_keep_more_reward_variance_than_random_ones():
    rng = random.Random(0)

    def var(xs):
        m = sum(xs) / len(xs)
        return sum((x - m) ** 2 for x in xs) / len(xs)

    bal, rnd = [], []
    for _ in range(2000):
        labels = [float(rng.random() < 0.3) for _ in range(12)]
        scores = [min(1.0, max(0.0, 0.3 + 0.4 * y + rng.gauss(0, 0.2))) for y in labels]  # noisy but informative
        bal.append(var([labels[i] for i in balanced_keep(scores, 8)]))
        rnd.append(var([labels[i] for i in rng.sample(range(12), 8)]))
    mb, mr = sum(bal) / len(bal), sum(rnd) / len(rnd)
    se = math.sqrt((sum((b - mb) ** 2 for b in bal) + sum((r - mr) ** 2 for r in rnd)) / len(bal) ** 2)
    assert mb > mr + 4 * se, (mb, mr, se)


def _model(seed=0):
    model = build_tiny_model(TinyModelConfig(hidden_size=32, intermediate_size=64, num_layers=2), TOK, seed=seed)
    with torch.no_grad():
        model.model.norm.weight.mul_(3.0)
    return model


def test_the_wrapper_keeps_the_balanced_survivors_and_the_contract():
    model = _model()
    counting = Counting(HFEngine(model, TOK))
    eng = ArrolWrapper(counting, model, TOK, ArrolParams(over_provision=1.5, checkpoints=[2]))
    torch.manual_seed(3)
    eng.w = torch.randn(len(eng.w))  # a fixed, arbitrary head: scores differ between candidates
    reqs = [GenerationRequest(Example("p", "ab", ""), 4), GenerationRequest(Example("q", "ba", ""), 2),
            GenerationRequest(Example("s", "c", ""), 2, prefix_ids=(4,), prefix_logprobs=(-1.0,))]
    sampling = SamplingParams(0.9, max_new_tokens=6, seed=0)
    out = eng.generate(reqs, sampling)
    assert sorted(c.group for c in out) == [0] * 4 + [1] * 2 + [2] * 2
    started = counting.calls[1]  # after the prefixed request, passed as asked: 6 and 3 rollouts to token 2
    assert [(r.example.id, r.n, r.max_new_tokens) for r in started] == [("p", 6, 2), ("q", 3, 2)]
    conts = counting.calls[2]
    assert all(r.n == 1 and len(r.prefix_ids) == 2 and r.max_new_tokens == 4 for r in conts)
    emb_trunk = model.model
    for g, n in ((0, 4), (1, 2)):
        rows = [c for c in out if c.group == g]
        assert all(isinstance(c, ArrolCompletion) and len(c.features) == 1 for c in rows)
        for c in rows:
            if len(c) > 2:
                assert c.segments == [Segment(0, 2, "prefix"), Segment(2, len(c))]
        # the head's scores recomputed from an independent forward of each survivor's first two tokens
        with torch.no_grad():
            for c in rows:
                ids = torch.tensor([c.prompt_ids + c.completion_ids[:2]])
                h = emb_trunk(ids).last_hidden_state[0, -1]
                want = torch.sigmoid(h / h.norm() @ eng.w + eng.b)
                assert c.quality == pytest.approx(float(want), abs=1e-5)
    ours = [c for c in out if c.group in (0, 1)]
    batch = build_batch(ours, [0.0] * len(ours), TOK.pad_token_id)
    with torch.no_grad():
        lp, _ = completion_logprobs(model, batch, temperature=0.9)
    torch.testing.assert_close(lp, batch.behaviour_logp, rtol=0, atol=1e-5)
    m = eng.metrics()
    assert m["arrol/pruned"] == 3 and 0 < m["arrol/generated_tokens"] < m["arrol/full_tokens"]


def test_the_middle_is_pruned():
    model = _model(seed=1)
    eng = ArrolWrapper(HFEngine(model, TOK), model, TOK, ArrolParams(over_provision=2.0, checkpoints=[2]))
    eng.w = torch.randn(len(eng.w), generator=torch.Generator().manual_seed(5))
    seen = {}
    real = eng._features

    def spy(comps):
        feats = real(comps)
        seen["scores"] = eng.score(feats).tolist()
        return feats

    eng._features = spy
    out = eng.generate([GenerationRequest(Example("p", "ab", ""), 4)], SamplingParams(1.0, max_new_tokens=4, seed=2))
    scores = seen["scores"]
    kept = sorted(round(c.quality, 6) for c in out)
    assert kept == sorted(round(scores[i], 6) for i in balanced_keep(scores, 4))


def test_the_head_learns_from_scored_outcomes():
    model = _model()
    eng = ArrolWrapper(HFEngine(model, TOK), model, TOK, ArrolParams(head_lr=2.0, head_steps=20))
    g = torch.Generator().manual_seed(0)
    direction = torch.nn.functional.normalize(torch.randn(len(eng.w), generator=g), dim=0)
    comps, scores = [], []
    for i in range(64):
        y = i % 2
        f = torch.nn.functional.normalize(torch.randn(len(eng.w), generator=g) * 0.3 + (2 * y - 1) * direction, dim=0)
        comps.append(ArrolCompletion("e", [1], [2], [0.0], "stop", "", features=[f]))
        scores.append(Score(float(y), {"correct": float(y)}))
    for _ in range(5):
        eng.observe(comps, scores)
    m = eng.metrics()  # averaged over the five fits (no generation call: no pruning metrics)
    assert m == {}  # metrics are reported per generation call
    x = torch.stack([c.features[0] for c in comps])
    acc = float(((eng.score(x) > 0.5).float() == torch.tensor([float(s.reward) for s in scores])).float().mean())
    assert acc > 0.9 and eng.head_updates == 5
    other = ArrolWrapper(eng.inner, model, TOK, ArrolParams())
    other.load_state_dict(eng.state_dict())
    assert torch.allclose(other.score(x), eng.score(x)) and other.head_updates == 5
    eng.observe([], [])  # nothing to learn from: unchanged
    assert eng.head_updates == 5


def test_the_recipe_trains_and_its_head_learns_through_the_trainer(tmp_path):
    out = run_recipe_steps("arrol", tmp_path, overrides=BINARY + ["rollout.strategy.checkpoints=[2]"])
    for m in out["metrics"]:
        assert all(math.isfinite(v) for v in m.values() if isinstance(v, float)), m
        assert m["engine/arrol/pruned"] == 8  # 4 prompts x (6 started - 4 kept)
        assert m["completions"] == 16  # the group size is kept
    strategy = out["c"].engine
    while not isinstance(strategy, ArrolWrapper):
        strategy = strategy.inner
    assert strategy.head_updates == 2 and float(strategy.w.abs().sum()) > 0


@pytest.mark.parametrize("bad, match", [
    (["rollout.strategy.checkpoints=[4, 2]"], "increasing"),
    (["rollout.strategy.checkpoints=[0]"], "positive"),
    (["rollout.strategy.over_provision=0.5"], "over_provision"),
    (["rollout.multiturn.env=issue_tracker"], "multi-turn"),
])
def test_bad_settings_are_config_errors(tmp_path, bad, match):
    with pytest.raises(ValueError, match=match):
        load_config(None, tiny_overrides(tmp_path) + ["rollout.strategy.name=arrol", *bad])
