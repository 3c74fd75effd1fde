"""Engine wrappers come from a registry: a wrapper registered here, outside rlvr, is applied to training
rollouts in its order, checkpointed under its name, restored on resume and never used for evaluation."""

import json
import shutil

import pytest

from rlvr.config.run import load_config
from rlvr.models import TinyModelConfig, build_tiny_model, char_tokenizer
from rlvr.engines import HFEngine
from rlvr.rollout import ENGINE_WRAPPERS
from rlvr.rollout.guidance import GuidanceWrapper
from rlvr.rollout.param_noise import ParamNoiseWrapper
from rlvr.rollout.wrappers import (base_engine, engine_metrics, engine_state, load_engine_state, wrap_engine,
                                   wrapper_chain)
from rlvr.run.train import build_task, resume, train
from tests.methods.helpers import tiny_overrides


class CountingEngine:
    """Counts generation calls (its state) and records the example ids it was asked for."""

    name = "counting"

    def __init__(self, inner):
        self.inner, self.calls, self.seen = inner, 0, set()

    def sync_weights(self):
        self.inner.sync_weights()

    def generate(self, requests, sampling):
        self.calls += 1
        self.seen.update(r.example.id for r in requests)
        return self.inner.generate(requests, sampling)

    def metrics(self):
        return {"counting/calls": self.calls}

    def state_dict(self):
        return {"calls": self.calls}

    def load_state_dict(self, state):
        self.calls = state.get("calls", 0)


class Silent:
    """A wrapper with no state and no metrics: only ``inner`` and ``name``."""

    name = "silent"

    def __init__(self, inner):
        self.inner = inner


@pytest.fixture
def counting():
    built: list[CountingEngine] = []

    @ENGINE_WRAPPERS.register("counting", order=300)
    def build(engine, model, tokenizer, rollout_cfg, chat_template=False):
        """Counts generation calls (test wrapper)."""
        built.append(CountingEngine(engine))
        return built[-1]

    try:
        yield built
    finally:
        ENGINE_WRAPPERS.unregister("counting")
    assert "counting" not in ENGINE_WRAPPERS


@pytest.fixture(scope="module")
def tiny():
    tok = char_tokenizer()
    return build_tiny_model(TinyModelConfig(hidden_size=32, intermediate_size=64, num_layers=1), tok, seed=0), tok


def test_builtin_wrappers_are_registered_in_order():
    assert ENGINE_WRAPPERS.names()[:5] == ["multiturn", "strategy", "scaffold", "guidance", "param_noise"]  # episodes innermost
    with pytest.raises(ValueError, match="already registered"):
        ENGINE_WRAPPERS.register("guidance", order=1)(lambda *a: None)
    with pytest.raises(ValueError, match="order 100 is taken by 'guidance'"):
        ENGINE_WRAPPERS.register("other", order=100)(lambda *a: None)
    assert "other" not in ENGINE_WRAPPERS


def test_no_wrapper_applies_to_the_default_config(tiny):
    model, tok = tiny
    plain = HFEngine(model, tok)
    assert wrap_engine(plain, model, tok, load_config(None, []).rollout) is plain


def test_a_registered_wrapper_is_applied_in_order_and_unwrapped(counting, tiny):
    model, tok = tiny
    cfg = load_config(None, ["rollout.guidance.fraction=0.5", "rollout.param_noise.sigma=0.01"])
    plain = HFEngine(model, tok)
    wrapped = wrap_engine(plain, model, tok, cfg.rollout)
    chain = wrapper_chain(wrapped)
    assert [type(w) for w in chain] == [CountingEngine, ParamNoiseWrapper, GuidanceWrapper]  # outermost first
    assert base_engine(wrapped) is plain and chain[-1].inner is plain
    state = engine_state(wrapped)
    assert set(state) == {"counting", "guidance", "param_noise"} and state["counting"] == {"calls": 0}
    load_engine_state(wrapped, {**state, "counting": {"calls": 7}})
    assert counting[-1].calls == 7 and engine_metrics(wrapped)["engine/counting/calls"] == 7.0


def test_a_wrapper_needs_only_inner_and_name(tiny):
    model, tok = tiny
    plain = HFEngine(model, tok)
    ENGINE_WRAPPERS.register("silent", order=301)(lambda engine, *a: Silent(engine))
    try:
        wrapped = wrap_engine(plain, model, tok, load_config(None, []).rollout)
    finally:
        ENGINE_WRAPPERS.unregister("silent")
    assert isinstance(wrapped, Silent) and base_engine(wrapped) is plain
    assert engine_state(wrapped) == {} and engine_metrics(wrapped) == {}
    load_engine_state(wrapped, {})


def test_a_builder_must_return_a_wrapper_of_the_engine_it_was_given(tiny):
    model, tok = tiny
    ENGINE_WRAPPERS.register("broken", order=302)(lambda engine, *a: object())
    try:
        with pytest.raises(TypeError, match="engine wrapper 'broken' must return"):
            wrap_engine(HFEngine(model, tok), model, tok, load_config(None, []).rollout)
    finally:
        ENGINE_WRAPPERS.unregister("broken")


def _engine_state(run, step):
    return json.loads((run / "checkpoints" / f"step_{step:06d}" / "state.json").read_text())["engine"]


def test_a_registered_wrapper_is_trained_through_checkpointed_and_resumed(counting, tmp_path):
    cfg = load_config(None, tiny_overrides(tmp_path) + ["train.steps=2", "train.checkpoint_every=1",
                                                        "train.keep_checkpoints=5", "train.eval_every=0"])
    summary = train(cfg)
    run, trainer = tmp_path / "run", counting[-1]
    assert len(counting) == 1 and trainer.calls >= 2  # one wrapper, built for training only
    assert summary["eval_before"] and summary["eval_after"]  # evaluation ran, not through the wrapper:
    eval_ids = {ex.id for ex in build_task(cfg).examples(cfg.eval.split)}
    assert eval_ids and trainer.seen and not eval_ids & trainer.seen  # the held-out prompts never reached it
    assert _engine_state(run, 2) == {"counting": {"calls": trainer.calls}}
    step1 = _engine_state(run, 1)["counting"]["calls"]
    assert 1 <= step1 < trainer.calls

    part = tmp_path / "part"
    shutil.copytree(run, part)
    shutil.rmtree(part / "checkpoints" / "step_000002")
    resume(part / "checkpoints" / "step_000001")
    assert len(counting) == 2 and counting[-1].calls == trainer.calls  # restored from step 1, then counted on
    assert _engine_state(part, 2) == _engine_state(run, 2)


def test_a_registered_rollout_strategy_wraps_training_rollouts_with_its_params(tmp_path):
    """``rollout.strategy`` names a strategy in ROLLOUT_STRATEGIES; its params are validated at config load,
    it wraps training rollouts (named "strategy", between multi-turn and guidance) and evaluation skips it."""
    from rlvr.registry import Params
    from rlvr.rollout import ROLLOUT_STRATEGIES

    class Tagging(Params):
        tag: str

    built = []

    class Strategy(CountingEngine):
        name = "strategy"

    @ROLLOUT_STRATEGIES.register("tagging", params=Tagging)
    def tagging(engine, model, tokenizer, params, rollout_cfg, chat_template=False):
        """Counts calls (test strategy)."""
        built.append((params.tag, Strategy(engine)))
        return built[-1][1]

    try:
        with pytest.raises(ValueError, match="tag"):
            load_config(overrides=tiny_overrides(tmp_path) + ["rollout.strategy.name=tagging"])
        with pytest.raises(ValueError, match="unknown rollout strategy 'nope'.*plain"):
            load_config(overrides=tiny_overrides(tmp_path) + ["rollout.strategy=nope"])
        cfg = load_config(overrides=tiny_overrides(tmp_path) + ["rollout.strategy.name=tagging",
                                                                 "rollout.strategy.tag=x", "train.steps=2"])
        train(cfg)
        (tag, strategy), = built
        assert tag == "x" and strategy.calls == 2  # one call per training step; evaluations bypass it
        assert load_config(overrides=tiny_overrides(tmp_path)).rollout.strategy.name == "plain"
    finally:
        ROLLOUT_STRATEGIES.unregister("tagging")
    assert "tagging" not in ROLLOUT_STRATEGIES


def test_fsdp_gathers_the_model_for_generation_only_when_a_layer_forwards_it():
    """reads_trainer_weights: an engine with weights of its own (vLLM) under wrappers that only rewrite requests
    needs no whole model on the trainer's ranks; the hf engine, a wrapper that runs the trainer's model (param
    noise, ROSE, SpecRL...), or one that declares nothing, does."""
    from types import SimpleNamespace

    from rlvr.envs.multiturn import MultiTurnWrapper
    from rlvr.rollout.contexts import ContextsWrapper
    from rlvr.rollout.scaffold import ScaffoldWrapper
    from rlvr.rollout.strategies.murphy import MurphyWrapper
    from rlvr.rollout.wrappers import reads_trainer_weights

    own = SimpleNamespace(forwards_trainer_model=False)  # as VLLMEngine declares

    def wrap(cls, inner):
        w = cls.__new__(cls)
        w.inner = inner
        return w

    assert not reads_trainer_weights(own)
    chain = own
    for cls in (GuidanceWrapper, ContextsWrapper, ScaffoldWrapper, MultiTurnWrapper, MurphyWrapper):
        chain = wrap(cls, chain)
        assert not reads_trainer_weights(chain), cls.__name__
    assert reads_trainer_weights(wrap(ParamNoiseWrapper, chain))  # perturbs the trainer's weights
    undeclared = SimpleNamespace(inner=chain, name="mine")  # a user's wrapper that says nothing
    assert reads_trainer_weights(undeclared)
    model = build_tiny_model(TinyModelConfig(hidden_size=16, intermediate_size=32, num_layers=1), char_tokenizer())
    assert reads_trainer_weights(HFEngine(model, char_tokenizer()))
    from rlvr.engines.vllm import VLLMEngine

    assert VLLMEngine.forwards_trainer_model is False
