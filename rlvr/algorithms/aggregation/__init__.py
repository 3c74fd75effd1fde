"""Loss aggregations: ``(AggregationInputs, params) -> coefficients [N] or [N, T]``; one file per method."""

from rlvr.algorithms.aggregation import balanced, basic, delta_l  # noqa: F401  (registration)
