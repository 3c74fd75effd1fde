"""Policy objectives: ``(ObjectiveInputs, params) -> (per-token loss [N, T], per-token metrics)``; one file per method."""

from rlvr.algorithms.objectives import ppo_clip  # noqa: F401  (registration)
from rlvr.algorithms.objectives import cispo, gspo, gspo_token  # noqa: F401  (registration)
from rlvr.algorithms.objectives import conspo, dhpo, f_grpo, maspo, mcpo, pacs, real, sspo, tpo, wapo  # noqa: F401
from rlvr.algorithms.objectives import vimpo as vimpo_objective  # noqa: F401
from rlvr.algorithms.objectives import oc_grpo  # noqa: F401
from rlvr.algorithms.objectives import osft  # noqa: F401  (registration)
