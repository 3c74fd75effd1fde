"""SCOPE-RL's process-shape reward (stage 2; docs/methods.md, `scope_shape`; RECONSTRUCTED): the hand-worked gate
oracles, the step splitting and usefulness rules on hand cases (repeats, restatements, steps without content), the
efficiency against the group's shortest correct member, unsolved groups left alone; the recipe trains."""

import math

import pytest
import torch

from rlvr.algorithms.registry import TransformInputs
from rlvr.algorithms.transforms.scope import ScopeShapeParams, scope_shape, split_steps, useful_fraction
from tests.methods.helpers import run_recipe_steps
from tests.methods.seed_support import BINARY


def _inp(rewards, groups, lengths, useful, correct=None):
    t = max(lengths)
    mask = (torch.arange(t)[None, :] < torch.tensor(lengths)[:, None]).float()
    comps = {} if correct is None else {"correct": torch.tensor(correct, dtype=torch.float64)}
    return TransformInputs(torch.tensor(rewards, dtype=torch.float64), torch.tensor(groups), mask, components=comps,
                           extras={"step_useful_frac": torch.tensor(useful)})


def test_the_gate_oracles():
    # an incorrect row with a perfect shape gets 0; a correct one with shape 0 and lambda 0.3 gets 0.7
    out, _ = scope_shape(_inp([0.0, 1.0, 1.0], [0, 0, 0], [4, 4, 4], [1.0, 0.0, 0.0]), ScopeShapeParams())
    # rows 1 and 2 are the shortest correct (efficiency 1): shape = (0 + 1) / 2 = 0.5 -> 0.7 + 0.15
    assert out.tolist() == pytest.approx([0.0, 0.85, 0.85])
    out, _ = scope_shape(_inp([0.0, 1.0], [0, 0], [4, 4], [1.0, 0.0]), ScopeShapeParams(lambda_p=0.0))
    assert out.tolist() == [0.0, 1.0]  # the gate alone
    # a partial reward is not correct when the correct component says so: gated to 0
    out, _ = scope_shape(_inp([0.9, 1.0], [0, 0], [2, 2], [1.0, 1.0], correct=[0.0, 1.0]), ScopeShapeParams())
    assert out.tolist() == pytest.approx([0.0, 1.0])


def test_efficiency_is_against_the_groups_shortest_correct_member_and_unsolved_groups_stay():
    p = ScopeShapeParams(lambda_p=1.0)
    out, m = scope_shape(_inp([1.0, 1.0, 0.0, 0.0, 0.4], [0, 0, 0, 1, 1], [2, 8, 1, 3, 3], [1.0, 1.0, 1.0, 0.5, 0.5]),
                         p)
    # group 0: L_min = 2 (the 1-token row is wrong): shapes (1 + 1)/2 and (1 + 2/8)/2; group 1 unsolved: unchanged
    assert out.tolist() == pytest.approx([1.0, 0.625, 0.0, 0.0, 0.4])
    assert m["shape_mean"] == pytest.approx((1.0 + 0.625) / 2) and m["useful_mean"] == 1.0
    out, _ = scope_shape(_inp([0.0, 0.4], [0, 0], [3, 3], [0.5, 0.5]), ScopeShapeParams(only_solved=False))
    assert out.tolist() == [0.0, 0.0]


def test_steps_and_their_usefulness():
    assert split_steps("a = 3. So b = 4!\n\n  c is 5  \n") == ["a = 3.", "So b = 4!", "c is 5"]
    assert useful_fraction("") == 0.0
    # a repeat (up to case and punctuation) and a step with nothing new are not useful
    text = "Let x = 12.\nThen y = x + 3 = 15.\nlet X = 12\nSo the answer:\nThe answer is 15."
    assert useful_fraction(text) == pytest.approx(3 / 5)
    assert useful_fraction("12 + 7 = 19") == 1.0
    assert useful_fraction("ok.\nok.\nok.") == 0.0  # no content word of three letters or number


def test_the_recipe_trains_two_steps(tmp_path):
    out = run_recipe_steps("scope_rl", tmp_path, overrides=BINARY)
    for m in out["metrics"]:
        assert all(math.isfinite(v) for v in m.values() if isinstance(v, float)), m
        assert "reward_transform/scope_shape/shape_mean" in m
    assert any(not torch.equal(out["before"][k], out["after"][k]) for k in out["before"])


# ---- stage 1: scaffolds ------------------------------------------------------------------------------------------

from rlvr.algorithms.transforms.scope import ScopePrefixParams, scope_prefix  # noqa: E402
from rlvr.core.types import Example, GenerationRequest, SamplingParams  # noqa: E402
from rlvr.models import TinyModelConfig, build_tiny_model, char_tokenizer  # noqa: E402
from rlvr.engines import HFEngine  # noqa: E402
from rlvr.models.prompts import encode_prompt  # noqa: E402
from rlvr.rollout.scaffold import (ScaffoldCompletion, ScaffoldConfig, ScaffoldWrapper, credit_rows,  # noqa: E402
                                   scaffold_credit, scaffold_of)

STEPS = [{"question": "What is 3 times 4?", "answer": "12"}, {"question": "Add 5 to it.", "answer": "17"},
         {"question": "Is 17 the final answer?", "answer": "yes"}]


class _Stats:
    """last_step / last_pass_rate by example id, set by the test."""

    def __init__(self):
        self.obs = {}

    def last_step(self, i):
        return self.obs.get(i, (None, None))[0]

    def last_pass_rate(self, i):
        return self.obs.get(i, (None, None))[1]


def test_the_prefix_reward_oracle_and_the_credit():
    assert scaffold_credit("first 12, then 17", ["12", "17", "X", "Y"]) == 0.5
    assert scaffold_credit("  TWELVE  and  more ", ["twelve and"]) == 1.0 and scaffold_credit("x", []) == 0.0
    # 2 of 4 sub-answers and a wrong final answer -> 0.5; a correct scaffolded row and a plain row keep theirs
    inp = _inp([0.0, 1.0, 0.3], [0, 0, 1], [3, 3, 3], [0.0, 0.0, 0.0])
    inp = type(inp)(**{**inp.__dict__, "extras": {"scaffold_credit": torch.tensor([0.5, 0.25, -1.0])}})
    out, m = scope_prefix(inp, ScopePrefixParams())
    assert out.tolist() == [0.5, 1.0, 0.3] and m["credit_mean"] == pytest.approx(0.375)
    assert scope_prefix(inp, ScopePrefixParams(weight=0.5))[0].tolist() == [0.25, 1.0, 0.3]


def test_scaffolds_are_read_leniently():
    ex = Example("e", "p", "17", meta={"scaffold": STEPS[:1] + [["List form?", 3], {"question": ""}, "junk"]})
    assert scaffold_of(ex, "scaffold") == [("What is 3 times 4?", "12"), ("List form?", "3")]
    assert scaffold_of(Example("f", "p", "1"), "scaffold") == []


def test_the_depth_follows_the_pass_rate_and_the_prompt_hides_the_answer():
    tok = char_tokenizer()
    model = build_tiny_model(TinyModelConfig(hidden_size=32, intermediate_size=64, num_layers=1), tok, seed=0)
    eng = ScaffoldWrapper(HFEngine(model, tok, batch_size=8), ScaffoldConfig(enabled=True))
    stats = _Stats()
    eng.bind_stats(stats)
    ex = Example("e", "Compute 3*4+5.", "17", meta={"scaffold": STEPS})
    plain = Example("p", "2+2?", "4")
    s = SamplingParams(max_new_tokens=3, seed=0)

    def depth_now():
        out = eng.generate([GenerationRequest(ex, 2), GenerationRequest(plain, 1)], s)
        assert not isinstance(out[-1], ScaffoldCompletion)  # no scaffold: never scaffolded
        return out, (out[0].depth if isinstance(out[0], ScaffoldCompletion) else 0)

    assert depth_now()[1] == 0  # never observed: plain
    stats.obs["e"] = (0, 0.0)
    out, d = depth_now()
    assert d == 3  # failed: every sub-question
    # "Add 5 to it." holds no answer; "Is 17 the final answer?" leaks it and is left out
    want = "Compute 3*4+5.\n\nWork through these sub-questions first:\n1. What is 3 times 4?\n2. Add 5 to it.\n"
    assert out[0].prompt_ids == encode_prompt(tok, want) and out[0].sub_answers == ("12", "17", "yes")
    assert eng.metrics()["scaffold/leaks"] == 1
    assert depth_now()[1] == 3  # the same observation again: no change
    stats.obs["e"] = (1, 0.5)
    assert depth_now()[1] == 2
    stats.obs["e"] = (2, 0.0)
    assert depth_now()[1] == 2  # failing again keeps the depth
    stats.obs["e"] = (3, 1.0)
    assert depth_now()[1] == 1
    other = ScaffoldWrapper(eng.inner, eng.cfg)
    other.load_state_dict(eng.state_dict())
    assert other.depth == {"e": 1} and other.seen == {"e": 3}
    stats.obs["e"] = (4, 0.5)
    assert depth_now()[1] == 0  # solved often enough: the scaffold is gone
    rows = credit_rows([ScaffoldCompletion("e", [1], [2], None, "stop", "12 then 17", sub_answers=("12", "17", "x")),
                        out[-1]])
    assert rows.tolist() == pytest.approx([2 / 3, -1.0])


def test_the_trainer_binds_its_prompt_statistics(tmp_path):
    from rlvr.config.run import load_config
    from rlvr.models.loading import load_model
    from rlvr.rollout.wrappers import wrapper_chain
    from rlvr.run.setup import build_components, build_task
    from tests.methods.helpers import tiny_overrides

    cfg = load_config(recipe="scope_rl", overrides=tiny_overrides(tmp_path))
    model, tok = load_model(cfg.model, seed=0)
    c = build_components(cfg, model, tok, build_task(cfg))
    (w,) = [w for w in wrapper_chain(c.engine) if isinstance(w, ScaffoldWrapper)]
    assert w.stats is c.stats
