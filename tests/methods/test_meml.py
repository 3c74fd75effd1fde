"""MEML-GRPO (arXiv:2508.09670, RECONSTRUCTED): expert prompts with peers, the pooled advantage, the best expert, the
mutual-learning term.

The hand-worked oracle (pooled advantages give the all-wrong expert a signal; e* = the expert that solved it); the
best-expert rule (first on ties, none at accuracy 0, plain rows never); the term's value and gradient by hand with
the e* side detached; the contexts wrapper spreads each expert's completions over its peers' prompts; the recipe
trains; config errors."""

import math

import pytest
import torch

from rlvr.algorithms.loss_terms.mutual_learning import MutualLearningParams, best_expert_rows, mutual_learning
from rlvr.algorithms.registry import ADVANTAGES, AdvantageInputs, ObjectiveInputs
from rlvr.config.run import ConfigError, load_config
from rlvr.core.types import Example, GenerationRequest, SamplingParams
from rlvr.models import TinyModelConfig, build_tiny_model, char_tokenizer
from rlvr.engines import HFEngine
from rlvr.models.prompts import encode_prompt
from rlvr.rollout.contexts import ContextCompletion, ContextsWrapper, ContextsConfig
from tests.methods.helpers import run_recipe_steps
from tests.methods.seed_support import BINARY


def test_the_pooled_advantage_oracle_and_the_best_expert():
    # K = 2, G = 4: expert A (context 1) rewards [0, 0], expert B (context 2) [1, 0]
    rewards = torch.tensor([0.0, 0.0, 1.0, 0.0], dtype=torch.float64)
    groups = torch.zeros(4, dtype=torch.long)
    grpo = ADVANTAGES.get("grpo")
    adv = grpo.fn(AdvantageInputs(rewards, groups), grpo.params(std="population"))
    assert adv[:2].tolist() == pytest.approx([-0.25 / math.sqrt(0.1875)] * 2, abs=1e-5)  # -0.577 (eps 1e-6)
    per_expert_a = grpo.fn(AdvantageInputs(rewards[:2], groups[:2]), grpo.params(std="population"))
    assert per_expert_a.abs().sum() == 0  # on its own, A's group says nothing
    ctx = torch.tensor([1.0, 1.0, 2.0, 2.0])
    assert best_expert_rows(rewards, groups, ctx).tolist() == [False, False, True, False]  # e* = B, its correct row


def test_the_best_expert_rule():
    r = torch.tensor([1.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0])
    g = torch.tensor([0, 0, 0, 0, 1, 1, 2, 2, 2, 2])
    ctx = torch.tensor([1.0, 1.0, 2.0, 2.0, 1.0, 2.0, 0.0, 0.0, 1.0, 2.0])
    # group 0: a tie at 1/2 -> the first expert; group 1: nobody solved it; group 2: only plain rows solved it
    assert best_expert_rows(r, g, ctx).tolist() == [True] + [False] * 9
    assert best_expert_rows(torch.tensor([0.6, 0.4]), torch.tensor([0, 0]), torch.tensor([1.0, 2.0]),
                            correct_at=0.5).tolist() == [True, False]


def test_the_term_pulls_peers_toward_the_best_experts_correct_rows():
    logp = torch.tensor([[-0.5, -0.7, 0.0], [-1.0, -1.0, -1.0], [-0.2, -0.3, -0.4]], requires_grad=True)
    peer = torch.tensor([[-2.0, -1.5, 0.0], [-3.0, -3.0, -3.0], [-0.9, -0.9, -0.9]], requires_grad=True)
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0], [1.0, 1.0, 1.0]])
    ctx = torch.tensor([[2.0, 2.0, 0.0], [1.0, 1.0, 1.0], [2.0, 2.0, 2.0]])
    x = ObjectiveInputs(logp, logp.detach(), torch.zeros(3, 3), mask, rewards=torch.tensor([1.0, 0.0, 0.0]),
                        group_index=torch.zeros(3, dtype=torch.long),
                        extras={"context_logp": peer, "context_index": ctx})
    loss, m = mutual_learning(x, MutualLearningParams())
    # row 0 is e*'s (expert 2, accuracy 1/2 > expert 1's 0) correct row: mean_t (own - peer) over its 2 tokens
    assert loss.detach()[0].tolist() == pytest.approx([1.5 / 2, 0.8 / 2, 0.0])
    assert loss.detach()[1:].abs().sum() == 0
    loss.sum().backward()
    assert peer.grad[0].tolist() == pytest.approx([-0.5, -0.5, 0.0]) and peer.grad[1:].abs().sum() == 0
    assert logp.grad is None or logp.grad.abs().sum() == 0  # the e* side is detached
    assert m["pulled_frac"][:, 0].tolist() == [1.0, 0.0, 0.0]


def test_peers_spread_each_experts_completions_over_the_other_experts():
    tok = char_tokenizer()
    model = build_tiny_model(TinyModelConfig(hidden_size=32, intermediate_size=64, num_layers=1), tok, seed=0)
    experts = ["use algebra.", "write code.", "check steps."]
    cfg = ContextsConfig(num_contexts=3, per_context=2, p_dropout=0.0, fallback=experts, peers=True,
                         template="{context} {prompt}")
    eng = ContextsWrapper(HFEngine(model, tok, batch_size=8), tok, cfg)
    out = eng.generate([GenerationRequest(Example("a", "1+2=", "3"), 6)], SamplingParams(max_new_tokens=2, seed=0))
    assert all(isinstance(c, ContextCompletion) for c in out) and sorted(c.context for c in out) == [1, 1, 2, 2, 3, 3]
    prompt_of = {k + 1: encode_prompt(tok, f"{e} 1+2=") for k, e in enumerate(experts)}
    for c in out:
        assert c.prompt_ids == prompt_of[c.context]
    peers = {ctx: [next(k for k, ids in prompt_of.items() if ids == c.plain_prompt_ids) for c in out
                   if c.context == ctx] for ctx in (1, 2, 3)}
    assert peers == {1: [2, 3], 2: [1, 3], 3: [1, 2]}
    plain = ContextsWrapper(HFEngine(model, tok, batch_size=8), tok, cfg.model_copy(update={"peers": False}))
    out = plain.generate([GenerationRequest(Example("a", "1+2=", "3"), 6)], SamplingParams(max_new_tokens=2, seed=0))
    assert all(c.plain_prompt_ids == encode_prompt(tok, "1+2=") for c in out)


def test_the_recipe_trains_two_steps(tmp_path):
    out = run_recipe_steps("meml_grpo", tmp_path, overrides=BINARY + ["rollout.group_size=4",
                                                                      "rollout.contexts.per_context=1"])
    for m in out["metrics"]:
        assert all(math.isfinite(v) for v in m.values() if isinstance(v, float)), m
        assert m["engine/context_frac"] == 1.0 and "loss_term/mutual_learning" in m
    assert any(not torch.equal(out["before"][k], out["after"][k]) for k in out["before"])


@pytest.mark.parametrize("recipe, bad, match", [
    ("meml_grpo", ["rollout.contexts.peers=false"], "peers true"),
    ("meml_grpo", ["rollout.contexts.num_contexts=1", "rollout.contexts.per_context=8"], "num_contexts >= 2"),
    ("nudge_rl", ["rollout.contexts.peers=true"], "set peers false"),
])
def test_bad_settings_are_config_errors(recipe, bad, match):
    with pytest.raises(ConfigError, match=match):
        load_config(recipe=recipe, overrides=bad)


def test_the_hard_example_buffer_keeps_questions_some_experts_solved():
    from rlvr.core.types import Score

    tok = char_tokenizer()
    model = build_tiny_model(TinyModelConfig(hidden_size=32, intermediate_size=64, num_layers=1), tok, seed=0)
    cfg = ContextsConfig(num_contexts=2, per_context=2, p_dropout=0.0, fallback=["A.", "B."], peers=True,
                         template="{context} {prompt}", hard_examples=5)
    eng = ContextsWrapper(HFEngine(model, tok, batch_size=8), tok, cfg)
    reqs = [GenerationRequest(Example(q, f"{q}=", "1"), 4) for q in ("q1", "q2", "q3")]
    out = eng.generate(reqs, SamplingParams(max_new_tokens=2, seed=0))
    # q1: only expert 2 solves it (once) -> stored; q2: both experts solve it -> not hard; q3: nobody does
    verdict = {("q1", 1): [0, 0], ("q1", 2): [1, 0], ("q2", 1): [1, 0], ("q2", 2): [0, 1], ("q3", 1): [0, 0],
               ("q3", 2): [0, 0]}
    seen: dict = {}
    scores = []
    for c in out:
        k = seen[(c.example_id, c.context)] = seen.get((c.example_id, c.context), -1) + 1
        ok = verdict[(c.example_id, c.context)][k]
        scores.append(Score(float(ok), {"correct": float(ok)}))
    eng.observe(out, scores)
    (row,) = eng.sft_rows()
    solved = [c for c, s in zip(out, scores) if c.example_id == "q1" and s.correct]
    assert row.example_id == "q1" and row.completion_ids == solved[0].completion_ids
    assert row.prompt_ids == encode_prompt(tok, "q1=")  # the plain question, without the expert prompt
    assert eng.sft_rows() == []
    off = ContextsWrapper(HFEngine(model, tok, batch_size=8), tok, cfg.model_copy(update={"hard_examples": 0}))
    off.generate(reqs, SamplingParams(max_new_tokens=2, seed=0))
    off.observe(out, scores)
    assert off.sft_rows() == []


def test_expert_fine_tuning_renders_every_example_under_each_expert_prompt(tmp_path):
    from rlvr.rollout.contexts import context_examples
    from rlvr.run.train import train

    cfg = ContextsConfig(num_contexts=2, per_context=2, fallback=["A.", "B.", "C."], template="{context} {prompt}")
    ex = Example("q", "1+2=", "3", target="3")
    got = context_examples(ex, cfg)
    assert [(e.id, e.prompt, e.sft_target) for e in got] == [("q@1", "A. 1+2=", "3"), ("q@2", "B. 1+2=", "3")]
    over = BINARY + ["rollout.group_size=4", "rollout.contexts.per_context=1", "sft.under_contexts=true",
                     "sft.steps=2", "sft.batch_size=4", "train.steps=1", "train.checkpoint_every=0",
                     "sft.interleave_every=0"]
    from tests.methods.helpers import tiny_overrides

    train(load_config(recipe="meml_grpo", overrides=tiny_overrides(tmp_path) + over))
    (tmp_path / "b").mkdir()
    with pytest.raises(ValueError, match="under_contexts trains on the rollout.contexts prompts"):
        train(load_config(overrides=tiny_overrides(tmp_path / "b") + ["sft.under_contexts=true", "sft.steps=1"]))
