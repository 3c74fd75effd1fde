"""Algorithm components: pure functions over tensors, registered by name.

Each component's module is imported the first time its name is looked up in its registry
(:mod:`rlvr.registry_index`); ``rlvr.registry.load_all()`` imports them all.
"""

from rlvr.algorithms.registry import (
    ADVANTAGES, AGGREGATIONS, CORRECTIONS, KL_ESTIMATORS, OBJECTIVES,
    AdvantageInputs, CorrectionInputs, AggregationInputs, ObjectiveInputs, aggregate,
)

__all__ = [
    "ADVANTAGES", "AGGREGATIONS", "CORRECTIONS", "KL_ESTIMATORS", "OBJECTIVES",
    "AdvantageInputs", "CorrectionInputs", "AggregationInputs", "ObjectiveInputs", "aggregate",
]
