"""SPEC-RL (rlvr/rollout/strategies/spec_rl.py; docs/methods.md, `rollout.strategy: spec_rl`): the acceptance
oracles, exactness of ``exact: true`` against the current policy's enumerated distribution (and the official mode's
bias), reuse without generation, current-policy prefix log-probs, training with prompts that recur, resume, config
errors."""

import copy
import json
import shutil

import pytest
import torch

from rlvr.config.run import load_config
from rlvr.core.batch import build_batch
from rlvr.core.types import Example, GenerationRequest, SamplingParams
from rlvr.models import TinyModelConfig, build_tiny_model, char_tokenizer, completion_logprobs
from rlvr.engines import HFEngine
from rlvr.rollout.strategies.spec_rl import SpecRLWrapper, SpecRLParams, build_spec_rl, sampling_probs, spec_cut
from rlvr.rollout.wrappers import wrap_engine
from rlvr.run.train import resume, train
from tests.methods.helpers import Counting, run_recipe_steps, tiny_overrides

TOK = char_tokenizer("ab ")


def _model(seed=1):
    model = build_tiny_model(TinyModelConfig(hidden_size=32, intermediate_size=64, num_layers=2), TOK, seed=seed)
    with torch.no_grad():
        model.model.norm.weight.mul_(2.0)  # sharpen the logits: a random model is close to uniform
    return model


def _perturbed(state, sigma=0.1, seed=7):
    g = torch.Generator().manual_seed(seed)
    return {k: v + sigma * torch.randn(v.shape, generator=g) if v.is_floating_point() else v for k, v in state.items()}


# ---- (a) the oracles -------------------------------------------------------------------------------------

def test_full_reuse_when_the_new_policy_is_no_less_likely_anywhere():
    g = torch.Generator().manual_seed(0)
    old = -torch.rand(5, 7, generator=g) * 3
    new = old + torch.rand(5, 7, generator=g)  # new >= old everywhere
    mask = torch.arange(7)[None] < torch.tensor([7, 3, 0, 5, 1])[:, None]
    for log_u in (torch.zeros(5, 7), torch.full((5, 7), -1e-9), torch.rand(5, 7, generator=g).log()):
        assert spec_cut(old, new, mask, log_u).tolist() == [7, 3, 0, 5, 1]


def test_cut_at_the_first_rejection_and_lenience():
    old, new = torch.tensor([[-1.0, -1.0, -1.0]]), torch.tensor([[-1.0, -3.0, -1.0]])
    mask, log_u = torch.ones(1, 3), torch.full((1, 3), 0.5).log()
    assert spec_cut(old, new, mask, log_u).tolist() == [1]  # D = 0 accepted; D = -2 < log 0.5 rejected
    assert spec_cut(old, new, mask, log_u, lenience=2.0).tolist() == [3]  # b = -2: D' = 0, full reuse
    # lenience 1.5: D' = -0.5, accepted when log U <= -0.5 (U = 0.5: -0.69, yes; U = 0.7: -0.36, no)
    assert spec_cut(old, new, mask, log_u, lenience=1.5).tolist() == [3]
    assert spec_cut(old, new, mask, torch.full((1, 3), 0.7).log(), lenience=1.5).tolist() == [1]
    assert spec_cut(old, new, mask, log_u, scale=0.25).tolist() == [3]  # s D = -0.5 >= log 0.5
    # a rejection past a row's length is padding, never a cut
    assert spec_cut(old, new, torch.tensor([[1.0, 0.0, 0.0]]), log_u).tolist() == [1]


# ---- (b) exactness ---------------------------------------------------------------------------------------

def _two_token_probs(model, prompt_ids, temperature, top_p):
    """``P(t1, t2)`` under the processed sampling distribution, from plain full forwards (nucleus computed
    here, independently of the warpers the engines and spec_rl use)."""

    def probs(ids):
        logits = model(torch.tensor([ids])).logits[0, -1].float() / temperature
        p = torch.softmax(logits, -1)
        order = p.argsort(descending=True)
        keep = torch.zeros_like(p, dtype=torch.bool)
        keep[order[(p[order].cumsum(0) - p[order]) < top_p]] = True  # smallest top set reaching top_p
        q = torch.where(keep, p, torch.zeros_like(p))
        return q / q.sum()

    with torch.no_grad():
        p1 = probs(prompt_ids)
        joint = torch.zeros(len(p1), len(p1))
        for t1 in p1.nonzero().flatten().tolist():
            if t1 == TOK.eos_token_id:
                joint[t1, TOK.pad_token_id] = p1[t1]  # a finished completion, padded
            else:
                joint[t1] = p1[t1] * probs(prompt_ids + [t1])
    return joint


def _chi_square(completions, expected) -> tuple[float, float]:
    """Goodness-of-fit p-value of the completions' (t1, t2) against ``expected``; and the count drawn
    outside its support."""
    counts = torch.zeros_like(expected)
    for c in completions:
        t1, t2 = (c.completion_ids + [TOK.pad_token_id])[:2]
        counts[t1, t2] += 1
    e, o = expected[expected > 0] * len(completions), counts[expected > 0]
    small = e < 5  # pool sparse cells: the chi-square approximation wants expected counts of 5 or more
    if small.any():
        e, o = torch.cat([e[~small], e[small].sum()[None]]), torch.cat([o[~small], o[small].sum()[None]])
    chi2 = ((o - e) ** 2 / e).sum()
    return torch.special.gammaincc(torch.tensor((len(e) - 1) / 2), chi2 / 2).item(), counts[expected == 0].sum().item()


@pytest.mark.parametrize("top_p", [0.9, 1.0])
def test_exact_mode_follows_the_current_policy_and_the_official_mode_does_not(top_p):
    """6000 drafts of 2 tokens under one policy, then 6000 completions after perturbing every weight (a
    different current policy): exact mode matches the current policy's enumerated distribution; the
    official regeneration from the cut is detectably biased toward the old one."""
    model = _model()
    old = copy.deepcopy(model.state_dict())
    new = _perturbed(old)
    req = [GenerationRequest(Example("q", "ab", ""), 6000)]
    p_values = {}
    for exact in (True, False):
        model.load_state_dict(old)
        eng = SpecRLWrapper(HFEngine(model, TOK, batch_size=8192), model, TOK, SpecRLParams(exact=exact))
        eng.generate(req, SamplingParams(0.9, top_p, max_new_tokens=2, seed=0))
        eng.metrics()
        model.load_state_dict(new)
        eng.sync_weights()
        out = eng.generate(req, SamplingParams(0.9, top_p, max_new_tokens=2, seed=1))
        m = eng.metrics()
        # drafts were partly accepted, partly regenerated: the case where the two modes differ
        assert 0.2 < m["spec_rl/accept_rate"] < 0.9 and 0.2 < m["spec_rl/full_reuse_frac"] < 0.9, m
        expected = _two_token_probs(model, out[0].prompt_ids, 0.9, top_p)
        assert (expected > 0).sum() > 6 and expected.max() < 0.6  # a distribution worth testing
        p_values[exact], outside = _chi_square(out, expected)
        if exact:
            assert outside == 0  # nothing outside the current nucleus
        print(f"top_p={top_p} exact={exact}: accept {m['spec_rl/accept_rate']:.3f}, "
              f"full reuse {m['spec_rl/full_reuse_frac']:.3f}, chi-square p {p_values[exact]:.3g}, outside {outside}")
    assert p_values[True] > 1e-3, p_values
    assert p_values[False] < 1e-6, p_values


# ---- (c) reuse without generation ------------------------------------------------------------------------

def test_fully_accepted_rows_are_reused_without_generation():
    model = _model()
    counting = Counting(HFEngine(model, TOK))
    eng = SpecRLWrapper(counting, model, TOK, SpecRLParams())
    reqs = [GenerationRequest(Example("x", "a", ""), 4), GenerationRequest(Example("y", "ab b", ""), 3)]
    first = eng.generate(reqs, SamplingParams(0.9, max_new_tokens=6, seed=0))
    m = eng.metrics()
    assert len(counting.calls) == 1 and m["spec_rl/reused_tokens"] == 0 and m["spec_rl/draft_rows"] == 0
    assert m["spec_rl/generated_tokens"] == sum(len(c) for c in first)
    again = eng.generate(reqs, SamplingParams(0.9, max_new_tokens=6, seed=1))  # no new weights: no reuse
    assert len(counting.calls) == 2 and eng.metrics()["spec_rl/draft_rows"] == 0

    eng.sync_weights()  # the same weights: every draft token is accepted
    reused = eng.generate(reqs, SamplingParams(0.9, max_new_tokens=6, seed=2))
    m = eng.metrics()
    assert len(counting.calls) == 2  # nothing was generated
    assert [c.group for c in reused] == [0] * 4 + [1] * 3
    assert [c.completion_ids for c in reused] == [c.completion_ids for c in again]
    assert [c.finish_reason for c in reused] == [c.finish_reason for c in again]
    assert [c.text for c in reused] == [c.text for c in again]
    assert all(c.segments == [type(c.segments[0])(0, len(c), "prefix")] for c in reused)
    for c, d in zip(reused, again):  # the current policy's log-probs (here equal to the behaviour ones)
        torch.testing.assert_close(torch.tensor(c.logprobs), torch.tensor(d.logprobs), rtol=0, atol=1e-5)
    assert m["spec_rl/reused_tokens"] == sum(len(c) for c in again) and m["spec_rl/generated_tokens"] == 0
    assert m["spec_rl/full_reuse_frac"] == 1.0 and m["spec_rl/accept_rate"] == 1.0

    # another group size, or a request with a prefix of its own, is generated as asked
    eng.sync_weights()
    odd = [GenerationRequest(Example("x", "a", ""), 2),
           GenerationRequest(Example("y", "ab b", ""), 3, prefix_ids=(3,), prefix_logprobs=(-1.0,))]
    out = eng.generate(odd, SamplingParams(0.9, max_new_tokens=6, seed=3))
    assert counting.calls[-1] == odd and [c.group for c in out] == [0, 0, 1, 1, 1]
    assert eng.metrics()["spec_rl/draft_rows"] == 0
    assert len(eng.drafts) == 2  # x now holds 2 drafts; y's request had a prefix, so y keeps its 3


# ---- (d) current-policy log-probs for the reused prefix --------------------------------------------------

@pytest.mark.parametrize("exact", [False, True])
def test_completion_logprobs_are_the_current_policys(exact):
    model = _model()
    old = copy.deepcopy(model.state_dict())
    eng = SpecRLWrapper(HFEngine(model, TOK), model, TOK, SpecRLParams(exact=exact, forward_rows=5))  # ragged chunks
    reqs = [GenerationRequest(Example("x", "a", ""), 16), GenerationRequest(Example("y", "ab b", ""), 16)]
    drafts = eng.generate(reqs, SamplingParams(0.9, 0.95, max_new_tokens=6, seed=0))
    model.load_state_dict(_perturbed(old, sigma=0.05))
    eng.sync_weights()
    model.train()
    out = eng.generate(reqs, SamplingParams(0.9, 0.95, max_new_tokens=6, seed=1))
    assert model.training  # scored in eval mode, the trainer's mode restored
    model.eval()
    assert [c.group for c in out] == [0] * 16 + [1] * 16 and all(c.example_id == "xy"[c.group] for c in out)
    kinds = {"full": 0, "spliced": 0, "fresh": 0}
    changed = 0.0
    for c, d in zip(out, drafts):  # completion k of a request continues draft k of its prompt
        cut = c.segments[0].end if c.segments and c.segments[0].source == "prefix" else 0
        assert c.completion_ids[:cut] == d.completion_ids[:cut]
        assert c.segments is None or [s.source for s in c.segments] in (["prefix"], ["prefix", "sampled"])
        kinds["full" if cut == len(c) else "spliced" if cut else "fresh"] += 1
        changed = max(changed, max((abs(a - b) for a, b in zip(c.logprobs[:cut], d.logprobs[:cut])), default=0.0))
    assert all(kinds.values()), kinds
    assert changed > 1e-3  # the reused tokens carry new log-probs, not the drafts'
    batch = build_batch(out, [0.0] * len(out), TOK.pad_token_id)
    with torch.no_grad():
        lp, _ = completion_logprobs(model, batch, temperature=0.9)
    torch.testing.assert_close(lp, batch.behaviour_logp, rtol=0, atol=1e-5)


# ---- (e) training: generated tokens fall once prompts recur; resume keeps the drafts ---------------------

def test_training_generates_fewer_tokens_once_prompts_recur(tmp_path):
    """6 train prompts, 6 per step: every step is an epoch, so from step 1 on every prompt has drafts."""
    out = run_recipe_steps("spec_rl", tmp_path, steps=4,
                           overrides=["rollout.prompts_per_step=6", "rollout.strategy.lenience=0"])
    rows = 6 * out["cfg"].rollout.group_size
    steps = [{k.rpartition("/")[2]: v for k, v in m.items() if k.startswith("engine/spec_rl/")} for m in out["metrics"]]
    totals = [m["generated/completion_length"] * rows for m in out["metrics"]]
    assert steps[0]["draft_rows"] == 0 and steps[0]["reused_tokens"] == 0
    assert steps[0]["generated_tokens"] == pytest.approx(totals[0])
    for s, total in zip(steps[1:], totals[1:]):
        assert s["draft_rows"] == rows and s["reused_tokens"] > 0
        assert s["generated_tokens"] < steps[0]["generated_tokens"]
        assert s["reused_tokens"] + s["generated_tokens"] == pytest.approx(total)  # every token reused or sampled
        assert 0 < s["accept_rate"] < 1 and s["mean_cut"] > 0
    assert any(not torch.equal(out["before"][k], out["after"][k]) for k in out["before"])


def _engine_state(run, step):
    return json.loads((run / "checkpoints" / f"step_{step:06d}" / "state.json").read_text())["engine"]


def test_checkpoints_keep_the_drafts_and_resume_continues_exactly(tmp_path):
    cfg = load_config(None, tiny_overrides(tmp_path) + [
        "rollout.strategy.name=spec_rl", "rollout.prompts_per_step=6", "train.steps=3", "train.checkpoint_every=1",
        "train.keep_checkpoints=5", "train.eval_every=0"])
    train(cfg)
    run = tmp_path / "run"
    state = _engine_state(run, 1)["strategy"]
    assert len(state["drafts"]) == 6 and all(len(e["rows"]) == 4 for e in state["drafts"].values())
    loaded = SpecRLWrapper(None, None, TOK, SpecRLParams())
    loaded.load_state_dict(state)
    assert loaded.state_dict() == state  # JSON round trip

    part = tmp_path / "part"
    shutil.copytree(run, part)
    shutil.rmtree(part / "checkpoints" / "step_000003")
    resume(part / "checkpoints" / "step_000002")
    assert _engine_state(part, 3) == _engine_state(run, 3)


# ---- (f) bad params --------------------------------------------------------------------------------------

@pytest.mark.parametrize("bad, match", [
    (["rollout.strategy.lenience=-1"], "lenience"),
    (["rollout.strategy.scale=0"], "scale"),
    (["rollout.strategy.max_stored_floats=0"], "max_stored_floats"),
    (["rollout.strategy.exact=true", "rollout.strategy.lenience=0.5"], "exact mode needs lenience 0"),
    (["rollout.strategy.exact=true", "rollout.strategy.scale=2"], "exact mode needs lenience 0 and scale 1"),
    (["rollout.strategy.draft=1"], "draft"),
])
def test_bad_params_are_config_errors(tmp_path, bad, match):
    with pytest.raises(ValueError, match=match):
        load_config(None, tiny_overrides(tmp_path) + ["rollout.strategy.name=spec_rl", *bad])


def test_exact_mode_refuses_to_store_too_many_floats_and_multiturn_is_refused():
    model = _model()
    big = load_config(None, ["rollout.strategy={name: spec_rl, exact: true, max_stored_floats: 1000}"])
    with pytest.raises(ValueError, match="6 x 8 x 256 completions per step.*max_stored_floats"):
        wrap_engine(HFEngine(model, TOK), model, TOK, big.rollout)
    small = load_config(None, ["rollout.strategy={name: spec_rl, exact: true, max_stored_floats: 50}",
                               "rollout.prompts_per_step=1", "rollout.group_size=2", "rollout.max_new_tokens=2",
                               "algorithm.minibatches=1"])
    eng = wrap_engine(HFEngine(model, TOK), model, TOK, small.rollout)
    assert isinstance(eng, SpecRLWrapper)
    reqs = [GenerationRequest(Example(str(i), "a" * (i + 1), ""), 2) for i in range(5)]  # >= 5 x 2 x 6 floats
    with pytest.raises(ValueError, match="stored distributions reached .* max_stored_floats=50"):
        eng.generate(reqs, SamplingParams(0.9, max_new_tokens=2, seed=0))
    mt = load_config(None, ["rollout.multiturn.env=issue_tracker"])  # the builder refuses it too (API use)
    with pytest.raises(ValueError, match="multi-turn"):
        build_spec_rl(HFEngine(model, TOK), model, TOK, small.rollout.strategy.params, mt.rollout)
    assert sampling_probs(torch.tensor([[0.0, 2.0, 1.0]]), SamplingParams(0.0)).tolist() == [[0.0, 1.0, 0.0]]


def test_spec_rl_with_multi_turn_episodes_is_a_config_error():
    from rlvr.config.errors import ConfigError

    with pytest.raises(ConfigError, match="spec_rl reuses single-turn completions"):
        load_config(overrides=["rollout.strategy.name=spec_rl", "rollout.multiturn.env=issue_tracker"])
