"""Advantage estimators: ``(AdvantageInputs, params) -> [N]`` (``[N, T]`` for those registered with the
``token_level`` trait); one file per method."""
