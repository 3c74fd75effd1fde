"""Training: the loop, the update step, SFT, checkpoints, logging and run orchestration."""

from rlvr.train.loop import Components, rl_step, train_loop
from rlvr.train.update import NonFiniteError, update_policy

__all__ = ["Components", "NonFiniteError", "rl_step", "train_loop", "update_policy"]
