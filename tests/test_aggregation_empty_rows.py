"""Empty rows (an all-zero completion mask, e.g. after the overlong filter) are not completions: every
aggregation gives the loss it gives without them, however the minibatch is split into micro-batches.

Golden values by hand; the buggy values (empty rows counted in B) are noted beside them.
"""

import pytest
import torch

import rlvr.algorithms  # noqa: F401  (registers every aggregation)
from rlvr.algorithms.aggregation.balanced import BalancedParams
from rlvr.algorithms.aggregation.basic import TokenSumNormParams
from rlvr.algorithms.aggregation.delta_l import DeltaLParams
from rlvr.algorithms.registry import AGGREGATIONS, AggregationInputs, aggregate
from rlvr.registry import Params

PARAMS = {"token_mean": Params(), "seq_mean_token_mean": Params(), "seq_mean_token_sum": Params(),
          "seq_mean_token_sum_norm": TokenSumNormParams(max_len=4), "delta_l": DeltaLParams(alpha=1.0, max_len=4),
          "balanced": BalancedParams(scope="group")}


def test_every_aggregation_has_a_case():
    assert set(PARAMS) == set(AGGREGATIONS.names()), "add the new aggregation's empty-row golden values here"


def _mask(lengths, width):
    return (torch.arange(width)[None, :] < torch.tensor(lengths)[:, None]).float()


def _coef(name, mask, adv):
    inp = AggregationInputs(mask, torch.zeros(mask.shape[0], dtype=torch.long), adv)
    return AGGREGATIONS.get(name).fn(inp, PARAMS[name])


# lengths [2, 0, 1], loss 1 on every token, every advantage +1, one group
# token_mean 3/3; seq_mean_token_mean (1 + 1)/2 (counting the empty row: 2/3); seq_mean_token_sum (2 + 1)/2
# (was 1); Dr. GRPO 3/(2 * 4) (was 0.25); delta_l x = [1/2, 1]/(3/2) = [1/3, 2/3], (2/3 + 2/3)/4;
# balanced: the empty row has no sign, P = {0, 2}: 2/(2 * 3) per token, 3 tokens
SIMPLE = {"token_mean": 1.0, "seq_mean_token_mean": 1.0, "seq_mean_token_sum": 1.5,
          "seq_mean_token_sum_norm": 0.375, "delta_l": 1 / 3, "balanced": 1.0}


@pytest.mark.parametrize("name", sorted(SIMPLE))
def test_empty_row_is_not_a_completion(name):
    mask = _mask([2, 0, 1], 2)
    coef = _coef(name, mask, torch.ones(3, 2))
    assert float(aggregate(coef, torch.ones(3, 2), mask)) == pytest.approx(SIMPLE[name])
    # the other rows' coefficients are those of the batch without the empty row
    live = torch.tensor([0, 2])
    without = _coef(name, mask[live], torch.ones(2, 2))
    assert torch.allclose(coef[live], without)
    if name != "token_mean":  # token_mean's coefficient is 1/tokens on every row; the mask zeroes it
        assert float(coef[1].abs().max()) == 0.0


# per-token losses of lengths [2, 0, 1, 3]: row sums 4, 0, 2, 12, row means 2, -, 2, 4; advantages +, +, -, +
LOSS = torch.tensor([[1.0, 3, 0], [5, 5, 5], [2, 0, 0], [3, 3, 6]])
LENGTHS = [2, 0, 1, 3]
ADV = torch.tensor([1.0, 1.0, -1.0, 1.0])[:, None].expand(4, 3)
# token_mean 18/6; seq_mean_token_mean (2+2+4)/3 (was 8/4); seq_mean_token_sum 18/3 (was 18/4);
# Dr. GRPO 18/(3 * 4) (was 18/16); delta_l raw [1/2, 0, 1, 1/3] / (11/6) = [3, 0, 6, 2]/11,
# (3*4 + 6*2 + 2*12)/11/4 = 12/11; balanced P = {0, 3} (5 tokens, sum 16), N = {2} (1 token, sum 2):
# (2 * 16/5 + 1 * 2)/3 = 14/5
RAGGED = {"token_mean": 3.0, "seq_mean_token_mean": 8 / 3, "seq_mean_token_sum": 6.0,
          "seq_mean_token_sum_norm": 1.5, "delta_l": 12 / 11, "balanced": 2.8}


@pytest.mark.parametrize("name", sorted(RAGGED))
@pytest.mark.parametrize("cuts", [(0, 4), (0, 1, 2, 4), (0, 2, 3, 4)])
def test_empty_row_in_a_micro_batch_changes_no_coefficient(name, cuts):
    mask = _mask(LENGTHS, 3)
    coef = _coef(name, mask, ADV)
    total = 0.0
    for a, b in zip(cuts, cuts[1:]):  # each micro-batch trimmed to its own longest row, as RolloutBatch.trim does
        w = int(mask[a:b].sum(-1).max())  # 0 for the micro-batch holding only the empty row
        total += float(aggregate(coef[a:b], LOSS[a:b, :w], mask[a:b, :w]))
    assert total == pytest.approx(RAGGED[name])


@pytest.mark.parametrize("name", sorted(PARAMS))
def test_all_rows_empty_gives_zero_loss(name):
    mask = torch.zeros(3, 2)
    coef = _coef(name, mask, torch.ones(3, 2))
    assert torch.isfinite(coef).all()
    assert float(aggregate(coef, torch.ones(3, 2), mask)) == 0.0
