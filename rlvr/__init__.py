"""rlvr: reinforcement learning from verifiable rewards.

The Python API is :mod:`rlvr.api` (``from rlvr.api import config, task, train, evaluate``).
"""

__version__ = "0.1.0"
__all__ = ["__version__"]
