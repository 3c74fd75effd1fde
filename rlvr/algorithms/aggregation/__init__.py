"""Loss aggregations: ``(AggregationInputs, params) -> coefficients [N]`` (one per completion); one file per method."""
