"""Optimizers chosen by ``optim.optimizer``: ``(model, optim_config, params) -> torch.optim.Optimizer``.

``lr``, ``weight_decay``, ``betas`` and the schedule live in ``optim``; an optimizer's own settings
(momentum, Newton-Schulz steps, ...) are its params. Optimizer state is saved in checkpoints like AdamW's.
"""

from rlvr.optim.registry import OPTIMIZERS, trainable  # noqa: F401  (each optimizer's module loads on lookup)

__all__ = ["OPTIMIZERS", "trainable"]
