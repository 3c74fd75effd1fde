"""Algorithm components: pure functions over tensors, registered by name.

Importing this package registers every built-in component.
"""

from rlvr.algorithms import advantages, aggregation, clip, corrections, kl, objectives  # noqa: F401  (registration)
from rlvr.algorithms import group_filters, masks, shaping, transforms  # noqa: F401  (registration)
from rlvr.algorithms.registry import (
    ADVANTAGES, AGGREGATIONS, CORRECTIONS, KL_ESTIMATORS, OBJECTIVES,
    AdvantageInputs, CorrectionInputs, AggregationInputs, ObjectiveInputs, aggregate,
)

__all__ = [
    "ADVANTAGES", "AGGREGATIONS", "CORRECTIONS", "KL_ESTIMATORS", "OBJECTIVES",
    "AdvantageInputs", "CorrectionInputs", "AggregationInputs", "ObjectiveInputs", "aggregate",
]
