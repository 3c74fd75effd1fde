"""Algorithm components: pure functions over tensors, registered by name.

Importing this package registers every built-in component.
"""

from rlvr.algorithms import advantages, aggregation, kl, objectives  # noqa: F401  (registration)
from rlvr.algorithms.registry import (
    ADVANTAGES, AGGREGATIONS, KL_ESTIMATORS, OBJECTIVES,
    AdvantageInputs, LossCounts, ObjectiveInputs,
)

__all__ = [
    "ADVANTAGES", "AGGREGATIONS", "KL_ESTIMATORS", "OBJECTIVES",
    "AdvantageInputs", "LossCounts", "ObjectiveInputs",
]
