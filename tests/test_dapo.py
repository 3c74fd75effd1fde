"""DAPO's parts (arXiv:2503.14476; docs/methods.md, DAPO's sampling and shaping): overlong shaping, overlong
filtering, dynamic sampling."""

import pytest
import torch

from rlvr.algorithms.shaping import overlong_penalty
from rlvr.config.run import load_config
from rlvr.core.types import Completion, Example
from rlvr.models import TinyModelConfig, build_tiny_model, char_tokenizer
from rlvr.sampling import FixedBudget, PromptStats, UniformSampler
from rlvr.tasks.base import Task, WeightedVerifier
from rlvr.train.loop import Components, rl_step
from rlvr.train.rollouts import DynamicSamplingShortfall, collect_rollouts
from rlvr.verifiers import ExactMatchVerifier


def test_overlong_penalty_oracle():
    got = overlong_penalty(torch.tensor([16, 17, 18, 20, 10]), max_len=20, buffer=4, factor=1.0)
    assert got.tolist() == pytest.approx([0.0, -0.25, -0.5, -1.0, 0.0])
    assert overlong_penalty(torch.tensor([18]), 20, 4, factor=0.5).tolist() == [-0.25]


def test_overlong_penalty_paper_scale():
    got = overlong_penalty(torch.tensor([16384, 18432, 20480]), max_len=20480, buffer=4096)
    assert got.tolist() == pytest.approx([0.0, -0.5, -1.0])


class ScriptedEngine:
    """Returns scripted completion texts: one list of per-request texts per generate call."""

    def __init__(self, tok, rounds, max_new_tokens=4):
        self.tok, self.rounds, self.calls, self.max_new = tok, list(rounds), 0, max_new_tokens

    def sync_weights(self):
        pass

    def generate(self, requests, sampling):
        texts = self.rounds[self.calls]
        self.calls += 1
        out = []
        for g, (req, group) in enumerate(zip(requests, texts)):
            assert len(group) == req.n
            for t in group:
                ids = self.tok(t)["input_ids"]
                reason = "length" if len(ids) >= self.max_new else "stop"
                ids = ids if reason == "length" else ids + [self.tok.eos_token_id]
                out.append(Completion(req.example.id, self.tok(req.example.prompt)["input_ids"], ids, None, reason, t, g))
        return out


class StartsWithA:
    name = "starts_with_a"

    def __call__(self, example, text):
        from rlvr.core.types import Score
        ok = float(text.startswith("a"))
        return Score(ok, {"correct": ok})


def components(rounds, overrides, verifier=None):
    cfg = load_config(overrides=["rollout.group_size=4", "rollout.max_new_tokens=4", "algorithm.minibatches=1",
                                 "train.micro_batch_size=64"] + overrides)
    tok = char_tokenizer()
    model = build_tiny_model(TinyModelConfig(hidden_size=32, intermediate_size=64, num_layers=1), tok)
    exs = [Example(f"p{i}", f"q{i}=", "a") for i in range(20)]
    task = Task("t", {"train": exs, "eval": exs}, [WeightedVerifier(verifier or ExactMatchVerifier())])
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    c = Components(model, tok, task, ScriptedEngine(tok, rounds), UniformSampler(exs), FixedBudget(4),
                   PromptStats(), opt, torch.optim.lr_scheduler.LambdaLR(opt, lambda i: 1.0))
    return cfg, c


ALL_RIGHT, ALL_WRONG, MIXED = ["a"] * 4, ["b"] * 4, ["a", "b", "b", "b"]


def test_filter_keeps_only_groups_with_signal():
    cfg, c = components([[ALL_RIGHT, ALL_WRONG, MIXED]],
                        ["rollout.prompts_per_step=3", "algorithm.dynamic_sampling.enabled=true",
                         "algorithm.dynamic_sampling.max_rounds=1"])
    ro = collect_rollouts(cfg, c, 0, lambda r: r)
    assert len(ro.requests) == 1 and [x.text for x in ro.completions] == MIXED
    assert {x.group for x in ro.completions} == {0}
    assert ro.metrics["rollouts/informative_groups"] == 1 and ro.metrics["rollout/filled_frac"] == pytest.approx(1 / 3)


def test_all_correct_filter_keeps_all_wrong_groups():
    """NGRPO's filter: only all-correct groups leave; all-wrong ones stay (its advantage learns from them)."""
    cfg, c = components([[ALL_RIGHT, ALL_WRONG, MIXED]],
                        ["rollout.prompts_per_step=3", "algorithm.dynamic_sampling.enabled=true",
                         "algorithm.dynamic_sampling.max_rounds=1", "algorithm.dynamic_sampling.metric=correct",
                         "algorithm.dynamic_sampling.drop=all_correct"], verifier=StartsWithA())
    ro = collect_rollouts(cfg, c, 0, lambda r: r)
    assert [x.text for x in ro.completions] == ALL_WRONG + MIXED
    assert load_config(recipe="ngrpo").algorithm.dynamic_sampling.drop == "all_correct"


def test_resamples_until_full_then_stops():
    # two prompts wanted; each round yields one informative group out of two
    rounds = [[MIXED, ALL_WRONG], [ALL_RIGHT, MIXED], [MIXED, MIXED]]
    cfg, c = components(rounds, ["rollout.prompts_per_step=2", "algorithm.dynamic_sampling.enabled=true",
                                 "algorithm.dynamic_sampling.max_rounds=5"])
    ro = collect_rollouts(cfg, c, 0, lambda r: r)
    assert c.engine.calls == 2 and ro.metrics["rollout/rounds"] == 2
    assert len(ro.completions) == 2 * 4 and sorted({x.group for x in ro.completions}) == [0, 1]
    assert ro.metrics["rollouts/spent"] == 16


def test_surplus_groups_are_discarded():
    cfg, c = components([[MIXED, MIXED], [MIXED, MIXED]],
                        ["rollout.prompts_per_step=2", "algorithm.dynamic_sampling.enabled=true",
                         "algorithm.dynamic_sampling.batch_prompts=2"])
    c.engine.rounds[0] = [ALL_WRONG, MIXED]
    ro = collect_rollouts(cfg, c, 0, lambda r: r)
    assert len(ro.requests) == 2 and len(ro.completions) == 8  # 1 + 1 of the 2 in round two


def test_shortfall_raises_when_asked():
    cfg, c = components([[ALL_WRONG, MIXED]], ["rollout.prompts_per_step=2", "algorithm.dynamic_sampling.enabled=true",
                                               "algorithm.dynamic_sampling.max_rounds=1",
                                               "algorithm.dynamic_sampling.on_shortfall=error"])
    with pytest.raises(DynamicSamplingShortfall, match="1 of 2 informative groups in 1 rounds"):
        collect_rollouts(cfg, c, 0, lambda r: r)


def test_step_with_no_signal_skips_the_update():
    cfg, c = components([[ALL_WRONG, ALL_RIGHT]], ["rollout.prompts_per_step=2", "algorithm.dynamic_sampling.enabled=true",
                                                   "algorithm.dynamic_sampling.max_rounds=1"])
    m = rl_step(cfg, c, 0)
    assert m["update_skipped"] == 1.0


def test_filter_on_correctness_ignores_shaping_differences():
    # all correct, but one completion is truncated and penalised: reward varies, correctness does not
    group = ["a", "a", "a", "aaaa"]
    over = ["rollout.prompts_per_step=1", "algorithm.dynamic_sampling.enabled=true",
            "algorithm.dynamic_sampling.max_rounds=1", "algorithm.overlong.soft_penalty=true",
            "algorithm.overlong.buffer_frac=0.5"]
    cfg, c = components([[group]], over + ["algorithm.dynamic_sampling.metric=correct"], StartsWithA())
    assert collect_rollouts(cfg, c, 0, lambda r: r).completions == []
    cfg, c = components([[group]], over + ["algorithm.dynamic_sampling.metric=reward"], StartsWithA())
    ro = collect_rollouts(cfg, c, 0, lambda r: r)
    assert len(ro.completions) == 4 and ro.rewards == pytest.approx([1.0, 1.0, 1.0, 0.0])  # 1 - 1 at the limit


def test_overlong_filter_masks_truncated_completions(monkeypatch):
    import rlvr.train.loop as loop_mod
    seen = {}
    real = loop_mod.update_policy

    def spy(model, opt, sched, batch, s, gen, *rest):
        seen["mask"] = batch.completion_mask.clone()
        seen["truncated"] = batch.truncated.clone()
        return real(model, opt, sched, batch, s, gen, *rest)

    monkeypatch.setattr(loop_mod, "update_policy", spy)
    cfg, c = components([[["a", "bbbb", "b", "a"]]], ["rollout.prompts_per_step=1", "algorithm.overlong.filter=true"])
    rl_step(cfg, c, 0)
    assert seen["truncated"].tolist() == [False, True, False, False]
    assert seen["mask"][1].sum() == 0 and seen["mask"][0].sum() > 0
