"""Clip rules: ``(ClipInputs, params) -> ClipBounds``, the trust region of ratio-clipping objectives.

An objective that clips a ratio (``ppo_clip``, ``gspo``, ``gspo_token``, ...) asks the run's clip rule for
its bounds through :meth:`ObjectiveInputs.ratio_bounds`, so a rule composes with every such objective.
``ratio`` (the default) keeps the objective's own ``clip_low`` / ``clip_high``.
"""
