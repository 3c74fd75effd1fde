"""LamPO's ROUGE-L auxiliary reward (rouge_l_bonus, RECONSTRUCTED weight): a hand-computed bonus, rows
without a reference left alone, the extra computed from the texts, and the recipe's real steps."""

import pytest
import torch

from rlvr.algorithms.registry import REWARD_TRANSFORMS, TransformInputs
from rlvr.algorithms.transforms.rouge_bonus import RougeBonusParams
from rlvr.core.batch import build_batch
from rlvr.core.types import Completion, Example
from rlvr.train.loop import compute_extras

from tests.methods.helpers import recipe_trains


def _inputs(rewards, rouge):
    r = torch.tensor(rewards, dtype=torch.float64)
    n = len(rewards)
    return TransformInputs(r, torch.zeros(n, dtype=torch.long), torch.ones(n, 3), None, {},
                           {"reference_rouge_l": torch.tensor(rouge)}, 0, 1, 0.0)


def test_bonus_is_weight_times_rouge_where_a_reference_exists():
    fn = REWARD_TRANSFORMS.get("rouge_l_bonus").fn
    out, m = fn(_inputs([1.0, 0.0, 0.5], [10 / 11, -1.0, 0.0]), RougeBonusParams(weight=0.1))
    assert out.tolist() == pytest.approx([1.0 + 1 / 11, 0.0, 0.5])  # no reference: unchanged
    assert m["with_reference_frac"] == pytest.approx(2 / 3) and m["rouge_l_mean"] == pytest.approx(5 / 11)
    zero, _ = fn(_inputs([1.0, 0.0], [0.7, 0.2]), RougeBonusParams(weight=0.0))
    assert zero.tolist() == [1.0, 0.0]


def test_extra_is_rouge_l_of_the_text_against_the_target():
    # "the cat on the mat" vs reference "the cat sat on the mat": LCS 5, P 5/5, R 5/6 -> F = 10/11
    comps = [Completion("a", [5], [6, 7], None, "stop", "The cat on the mat", 0),
             Completion("b", [5], [6], None, "stop", "anything", 1),
             Completion("c", [5], [6], None, "stop", "dogs", 2),
             Completion("d", [5], [6], None, "stop", "cats", 3)]
    examples = [Example("a", "p", "mat", target="the cat sat on the mat"), Example("b", "p", "x"),
                Example("c", "p", "y", target="cat"), Example("d", "p", "y", target="cat")]
    batch = build_batch(comps, [0.0] * 4, 0)
    c = type("C", (), {"device": torch.device("cpu"), "tokenizer": None, "model": None, "ref_model": None})()
    out = compute_extras(frozenset({"reference_rouge_l"}), c, batch, None, comps, examples)
    # no target: -1 (no bonus); "dogs" vs "cat": 0; "cats" stems to "cat": 1
    assert out["reference_rouge_l"].tolist() == pytest.approx([10 / 11, -1.0, 0.0, 1.0])


def test_recipe_trains(tmp_path):
    out = recipe_trains("lampo_rouge", tmp_path, ["reward", "loss"])
    assert all("reward_transform/rouge_l_bonus/with_reference_frac" in m for m in out["metrics"])
