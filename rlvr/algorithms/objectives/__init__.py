"""Policy objectives: ``(ObjectiveInputs, params) -> (per-token loss [N, T], per-token metrics)``; one file per method."""
