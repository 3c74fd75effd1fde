"""rlvr: reinforcement learning from verifiable rewards.

The Python API is :mod:`rlvr.api` (``from rlvr.api import config, task, train, evaluate``).

Importing rlvr asks Intel MKL (torch's CPU BLAS) for its strict reproducible mode, ``MKL_CBWR=AVX2,STRICT``,
unless ``MKL_CBWR`` is already set: a float32 matrix product then gives the same bits whatever the thread
count and whichever AVX2 CPU runs it (about 10-20% slower CPU steps on the demo; a whole run still needs a
fixed ``train.threads`` to reproduce under any load, docs/cpu-threads.md). MKL reads it at its first call,
so it takes effect only when rlvr is imported before torch's first matrix product; ``MKL_CBWR=AUTO`` turns
it off.
"""

import os as _os

_os.environ.setdefault("MKL_CBWR", "AVX2,STRICT")

__version__ = "0.1.0"
__all__ = ["__version__"]
