"""The appeal mechanism (rlvr.tasks.appeals; docs/methods.md, Appeals): a second verifier re-checks a sample of the
negatives and estimates the false-negative rate that ``noise_forward`` / ``noise_backward`` read with
``rho1: appeal``.

Hand-worked oracles (P=30, 10 negatives all re-checked, 5 overturned -> 5/35), the subsampling scale F * n / m and
the EMA over two steps by hand; a seeded subset that repeats; two tiny verifiers that disagree on purpose (strict:
exact match, lenient: case-insensitive); the transforms reading ``fn_rate``; config errors; the state round trip;
two real training steps on the tiny model.
"""

from __future__ import annotations

import json
import math

import pytest
import torch

from rlvr.algorithms.registry import REWARD_TRANSFORMS, TransformInputs
from rlvr.algorithms.transforms.noise import FN_RATE, NoiseParams
from rlvr.config.run import ConfigError, load_config
from rlvr.core.types import Completion, Example, Score
from rlvr.sampling.base import Group
from rlvr.tasks.appeals import (PROVIDES, AppealConfig, AppealState, appeal_state, ema_update, run_appeal,
                                step_estimate)
from rlvr.verifiers import from_callable

from tests.methods.helpers import run_recipe_steps

HERE = "tests.methods.test_appeals"


def strict(prompts, completions, answers, **kw):
    """The task's verifier: exact match only (rejects 'ABC' for gold 'abc': a false negative)."""
    return [float(c.strip() == a) for c, a in zip(completions, answers)]


def lenient(prompts, completions, answers, **kw):
    """The appeal verifier: case-insensitive, and any shared letter counts on the tiny model's output."""
    return [float(c.strip().lower() == a.lower() or any(ch in c.lower() for ch in a.lower()))
            for c, a in zip(completions, answers)]


def always(prompts, completions, **kw):
    """An appeal verifier that overturns every negative (the resume test needs the estimate to move)."""
    return [1.0] * len(completions)


def exact_ci(prompts, completions, answers, **kw):
    return [float(c.strip().lower() == a.lower()) for c, a in zip(completions, answers)]


STRICT, APPEAL = from_callable(strict), from_callable(exact_ci)


def _group(texts: list[str], answer: str = "abc", i: int = 0) -> Group:
    ex = Example(f"e{i}", "say abc:", answer)
    g = Group(ex)
    for t in texts:
        g.completions.append(Completion(ex.id, [1], [2], None, "stop", t))
        g.scores.append(STRICT(ex, t))
        g.rewards.append(g.scores[-1].reward)
    return g


def _batch(pos: int, fn: int, wrong: int) -> list[Group]:
    """``pos`` exact answers, ``fn`` false negatives ('ABC': the appeal overturns them), ``wrong`` true
    negatives ('xyz'), spread over groups of 5."""
    texts = ["abc"] * pos + ["ABC"] * fn + ["xyz"] * wrong
    return [_group(texts[k: k + 5], i=k) for k in range(0, len(texts), 5)]


def _marks(groups) -> list[tuple[int, int, str]]:
    return [(gi, j, s.info["appeal"]) for gi, g in enumerate(groups) for j, s in enumerate(g.scores)
            if "appeal" in s.info]


# --- the estimate (oracles) --------------------------------------------------------------------------------

def test_step_estimate_oracles():
    assert step_estimate(30, 10, 10, 5) == pytest.approx(5 / 35)  # 5/35 = 0.142857
    assert step_estimate(30, 20, 10, 5) == pytest.approx(10 / 40)  # F_scaled = 5 * 20 / 10
    assert step_estimate(0, 4, 4, 2) == 1.0
    assert step_estimate(8, 0, 0, 0) == 0.0  # all positives: no false negatives seen
    assert step_estimate(0, 3, 3, 0) is None  # no evidence: P + F_scaled = 0
    assert ema_update(0.2, None, 0.1) == 0.2
    with pytest.raises(ValueError):
        step_estimate(1, 2, 3, 0)


def test_appeal_oracle_and_ema_over_two_steps():
    cfg, state = AppealConfig(verifier=f"{HERE}:exact_ci", sample=16, ema=0.1, prior=0.0), AppealState()
    groups = _batch(30, 5, 5)
    m = run_appeal(cfg, state, groups, seed=1)
    counts = (m["appeal/positives"], m["appeal/negatives"], m["appeal/checked"], m["appeal/overturned"])
    assert counts == (30, 10, 10, 5)
    assert m["appeal/fn_rate_step"] == pytest.approx(5 / 35)
    first = 0.1 * 5 / 35
    assert m["appeal/fn_rate"] == pytest.approx(first) and state.fn_rate == pytest.approx(first)
    # every row carries the estimate; the re-checked rows are marked; rewards are untouched
    assert [s.components[FN_RATE] for g in groups for s in g.scores] == [state.fn_rate] * 40
    assert sorted(k for *_, k in _marks(groups)) == ["overturned"] * 5 + ["upheld"] * 5
    assert all(groups[gi].completions[j].text == ("ABC" if k == "overturned" else "xyz") for gi, j, k in _marks(groups))
    assert sum(r for g in groups for r in g.rewards) == 30
    # step 2, subsampled: 20 negatives, all false, 10 re-checked -> F = 10, F_scaled = 20, 20 / 50 = 0.4
    m2 = run_appeal(cfg.model_copy(update={"sample": 10}), state, _batch(30, 20, 0), seed=2)
    assert (m2["appeal/checked"], m2["appeal/overturned"]) == (10, 10)
    assert m2["appeal/fn_rate_step"] == pytest.approx(0.4)
    assert m2["appeal/fn_rate"] == pytest.approx(0.9 * first + 0.1 * 0.4)  # 0.0528571
    assert m2["appeal/fn_rate"] == pytest.approx(0.0528571, abs=1e-7)


def test_prior_starts_the_ema_and_scaling_uses_the_drawn_subset():
    cfg = AppealConfig(verifier=f"{HERE}:exact_ci", sample=6, ema=0.5, prior=0.2)
    state = AppealState()
    groups = _batch(10, 9, 9)  # 18 negatives, 6 re-checked, F as drawn
    m = run_appeal(cfg, state, groups, seed=3)
    f = sum(k == "overturned" for *_, k in _marks(groups))
    assert m["appeal/checked"] == 6 and m["appeal/overturned"] == f
    scaled = f * 18 / 6
    assert m["appeal/fn_rate"] == pytest.approx(0.5 * 0.2 + 0.5 * scaled / (10 + scaled))


def test_seeded_subset_repeats_and_depends_on_the_seed():
    cfg = AppealConfig(verifier=f"{HERE}:exact_ci", sample=4)

    def draw(seed):
        groups = _batch(5, 10, 10)
        run_appeal(cfg, AppealState(), groups, seed)
        return _marks(groups)

    assert draw(7) == draw(7)
    assert len(draw(7)) == 4
    assert any(draw(s) != draw(7) for s in (8, 9, 10))


def test_timeouts_and_verifier_errors_are_not_negatives():
    groups = _batch(2, 2, 0)
    groups[0].scores[2] = Score(0.0, {"correct": 0.0}, {"reason": "timeout"})
    groups[0].scores[3] = Score(0.0, {"correct": 0.0}, {"error": "boom"})
    m = run_appeal(AppealConfig(verifier=f"{HERE}:exact_ci"), AppealState(), groups, 0)
    assert (m["appeal/negatives"], m["appeal/checked"]) == (0, 0)
    assert m["appeal/fn_rate_step"] == 0.0


def test_a_registered_verifier_appeals():
    groups = [_group(["42", "x"], answer="42.0")]  # strict rejects "42" for "42.0"; numeric accepts it
    m = run_appeal(AppealConfig(verifier="numeric"), AppealState(), groups, 0)
    assert (m["appeal/checked"], m["appeal/overturned"]) == (2, 1)


# --- the transforms read fn_rate ---------------------------------------------------------------------------

def _transform(name, rewards, fn_rate=None, **params):
    r = torch.tensor(rewards, dtype=torch.float64)
    comps = {} if fn_rate is None else {FN_RATE: torch.full_like(r, fn_rate)}
    inp = TransformInputs(r, torch.zeros(len(r), dtype=torch.long), torch.ones(len(r), 2), components=comps)
    return REWARD_TRANSFORMS.get(name).fn(inp, NoiseParams(**params))


def test_transforms_read_the_fn_rate_component():
    fwd, m = _transform("noise_forward", [1, 0], fn_rate=0.2, rho1="appeal")
    assert fwd.tolist() == pytest.approx([0.2, -0.8])
    assert m["rho1"] == pytest.approx(0.2)
    assert torch.allclose(fwd, _transform("noise_forward", [1, 0], rho1=0.2)[0])
    back, _ = _transform("noise_backward", [1, 0], fn_rate=0.2, rho0=0.1, rho1="appeal")
    assert back.tolist() == pytest.approx([0.9 / 0.7, -0.1 / 0.7])
    with pytest.raises(ValueError, match="fn_rate"):
        _transform("noise_forward", [1, 0], rho1="appeal")
    with pytest.raises(ValueError, match="rho0 \\+ rho1 >= 1"):
        _transform("noise_backward", [1, 0], fn_rate=0.95, rho0=0.1, rho1="appeal")
    assert PROVIDES == {FN_RATE}


# --- config ------------------------------------------------------------------------------------------------

def test_config_errors():
    forward = ["algorithm.advantage=fixed_baseline",
               "algorithm.reward_transforms=[{name: noise_forward, rho1: appeal}]"]
    with pytest.raises(ConfigError, match="scoring.appeal.verifier is not set"):
        load_config(overrides=forward)
    cfg = load_config(overrides=forward + [f"scoring.appeal.verifier={HERE}:exact_ci"])
    assert cfg.algorithm.reward_transforms[0].params.rho1 == "appeal"
    assert cfg.scoring.appeal.sample == 16 and cfg.scoring.appeal.ema == 0.1 and cfg.scoring.appeal.prior == 0.0
    for bad, match in [("scoring.appeal.verifier=nope", "unknown verifier 'nope'"),
                       ("scoring.appeal.sample=0", "sample"), ("scoring.appeal.ema=0", "ema"),
                       ("scoring.appeal.ema=1.5", "ema"), ("scoring.appeal.prior=0.5", "prior"),
                       ("algorithm.reward_transforms=[{name: noise_forward, rho1: often}]", "rho1")]:
        with pytest.raises(ConfigError, match=match):
            load_config(overrides=["algorithm.advantage=fixed_baseline", bad])
    with pytest.raises(ConfigError, match="verifier_params of verifier 'numeric'"):
        load_config(overrides=["scoring.appeal.verifier=numeric", "scoring.appeal.verifier_params={bogus: 1}"])
    with pytest.raises(ConfigError, match="not to a module:function"):
        load_config(overrides=[f"scoring.appeal.verifier={HERE}:lenient", "scoring.appeal.verifier_params={a: 1}"])


# --- state -------------------------------------------------------------------------------------------------

def test_state_round_trip_and_checkpoint_listing():
    cfg = AppealConfig(verifier=f"{HERE}:exact_ci", sample=3)
    a = AppealState()
    run_appeal(cfg, a, _batch(5, 5, 5), 0)
    b = AppealState()
    b.load_state_dict(json.loads(json.dumps(a.state_dict())))
    assert b.state_dict() == a.state_dict() and b.steps == 1
    ma, mb = (run_appeal(cfg, st, _batch(5, 5, 5), 1) for st in (a, b))
    assert ma == mb and a.state_dict() == b.state_dict()
    fresh = AppealState()
    fresh.load_state_dict({})  # a checkpoint written before appeals existed
    assert fresh.fn_rate is None and fresh.steps == 0

    from rlvr.run.train import _stateful

    class Scorer:  # the run's scorer holds its one appeal state
        appeal = AppealState()

    class C:  # the components object
        sampler = allocator = stats = kl = algo_state = task = engine = None
        scorer = Scorer()

    c = C()
    assert _stateful(c)["appeal"] is appeal_state(c)


# --- a real run --------------------------------------------------------------------------------------------

def test_two_real_steps_with_appeals(tmp_path):
    out = run_recipe_steps("noise_backward", tmp_path, overrides=[
        f"task.verifier={HERE}:strict", f"scoring.appeal.verifier={HERE}:lenient", "scoring.appeal.sample=5",
        "algorithm.reward_transforms=[{name: noise_forward, rho1: appeal}]"])
    rate = 0.0
    for m in out["metrics"]:
        assert m["appeal/checked"] == min(5, m["appeal/negatives"])
        assert 0 <= m["appeal/overturned"] <= m["appeal/checked"]
        rate = ema_update(rate, m.get("appeal/fn_rate_step"), 0.1)
        assert m["appeal/fn_rate"] == pytest.approx(rate)
        assert m["reward_transform/noise_forward/rho1"] == pytest.approx(rate)
        assert all(math.isfinite(v) for v in m.values() if isinstance(v, float))
    assert appeal_state(out["c"]).steps == 2
    assert out["metrics"][-1]["appeal/fn_rate"] > 0  # the lenient appeal overturned some strict negatives
    assert any(not torch.equal(out["before"][k], out["after"][k]) for k in out["before"])


def test_resume_restores_the_estimate(jsonl_cfg_overrides, tmp_path):
    """The estimate is checkpoint state: a run resumed at step 2 logs the appeal metrics of the uninterrupted one."""
    import shutil

    from rlvr.run.train import resume, train

    over = jsonl_cfg_overrides + [
        f"task.verifier={HERE}:strict", f"scoring.appeal.verifier={HERE}:always", "scoring.appeal.sample=3",
        "algorithm.advantage=fixed_baseline", "algorithm.reward_transforms=[{name: noise_forward, rho1: appeal}]",
        "train.steps=3", "train.checkpoint_every=2", "eval.num_examples=1", "eval.samples=1"]
    train(load_config(overrides=over))
    full = tmp_path / "run"
    state = json.loads((full / "checkpoints" / "step_000002" / "state.json").read_text())
    assert state["appeal"] == {"steps": 2, "fn_rate": pytest.approx(0.19)}  # 0.1, then 0.9 * 0.1 + 0.1
    part = tmp_path / "part"
    shutil.copytree(full, part)
    shutil.rmtree(part / "checkpoints" / "step_000003")
    resume(part / "checkpoints" / "step_000002")

    def appeal_lines(run):
        rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines() if x.strip()]
        return [{k: v for k, v in r.items() if k.startswith("appeal/")} for r in rows if "appeal/fn_rate" in r]

    assert appeal_lines(full) == appeal_lines(part) and len(appeal_lines(full)) == 3
    assert appeal_lines(part)[-1]["appeal/fn_rate"] == pytest.approx(0.271)  # not 0.1: the state was restored
