"""docs/environments.md's example environment works as written: scripted, and driven by the tiny model."""

import re
from pathlib import Path

import pytest

from rlvr.core.types import Example, GenerationRequest, SamplingParams
from rlvr.envs import ENVIRONMENTS, MultiTurnWrapper, env_factory

DOC = Path(__file__).resolve().parents[1] / "docs" / "environments.md"


@pytest.fixture(scope="module")
def guess_env():
    code = re.search(r"<!-- env-example -->\s*```python\n(.*?)```", DOC.read_text(), re.S).group(1)
    assert len(code.strip().splitlines()) <= 45
    assert "guess_the_number" not in ENVIRONMENTS.names()  # the example is what registers it
    exec(compile(code, "environments.md", "exec"), {})
    return env_factory("guess_the_number", {"low": 0, "high": 9})


def test_scripted_episode(guess_env):
    env = guess_env()
    assert env.reset(Example("e", "p", "7"), seed=0) == "Guess a number from 0 to 9."
    assert env.step("3")[:3] == ("higher", 0.0, False)
    assert env.step("oops")[:3] == ("Answer with a number.", 0.0, False)
    assert env.step("9 I think")[:3] == ("lower", 0.0, False)
    obs, reward, done, _ = env.step("7")
    assert (obs, done) == ("Correct!", True) and reward == pytest.approx(1 / 4)
    other = guess_env()  # a fresh instance per episode
    assert other.guesses == 0


def test_episodes_with_the_tiny_model(guess_env):
    from rlvr.models import TinyModelConfig, build_tiny_model, char_tokenizer
    from rlvr.engines.hf import HFEngine

    tok = char_tokenizer()
    model = build_tiny_model(TinyModelConfig(hidden_size=32, intermediate_size=64, num_layers=1), tok, seed=0)
    engine = MultiTurnWrapper(HFEngine(model, tok), tok, guess_env, max_turns=3, turn_tokens=4)
    comps = engine.generate([GenerationRequest(Example("e", "guess:", "5"), 3)], SamplingParams(max_new_tokens=4, seed=1))
    assert len(comps) == 3
    for c in comps:
        assert 1 <= c.turns <= 3 and c.env_error is None
        sampled = sum(s.end - s.start for s in c.segments if s.source != "inserted")
        assert sum(c.mask()) == sampled and len(c) > sampled  # observations inserted and masked
