"""Loss aggregations: ``(AggregationInputs, params) -> coefficients [N]`` (one per completion); one file per method."""

from rlvr.algorithms.aggregation import balanced, basic, delta_l  # noqa: F401  (registration)
