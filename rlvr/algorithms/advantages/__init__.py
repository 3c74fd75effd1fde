"""Advantage estimators: ``(AdvantageInputs, params) -> [N]`` (``[N, T]`` for those registered with the
``token_level`` trait); one file per method."""

from rlvr.algorithms.advantages import batch_std  # noqa: F401  (registration)
from rlvr.algorithms.advantages import dr_grpo  # noqa: F401
from rlvr.algorithms.advantages import grpo  # noqa: F401
from rlvr.algorithms.advantages import reinforce_pp  # noqa: F401
from rlvr.algorithms.advantages import rloo  # noqa: F401
from rlvr.algorithms.advantages import a_grae  # noqa: F401
from rlvr.algorithms.advantages import dgpo  # noqa: F401
from rlvr.algorithms.advantages import fixed_baseline  # noqa: F401
from rlvr.algorithms.advantages import lampo  # noqa: F401
from rlvr.algorithms.advantages import ngrpo  # noqa: F401
from rlvr.algorithms.advantages import vimpo  # noqa: F401
from rlvr.algorithms.advantages import poise  # noqa: F401
from rlvr.algorithms.advantages import aero  # noqa: F401
from rlvr.algorithms.advantages import turn_grpo  # noqa: F401
