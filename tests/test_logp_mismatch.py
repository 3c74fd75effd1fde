"""``logp_mismatch`` measures the engine against the trainer before the step's updates: with several
minibatches the policy moves within a step, and that movement is not engine mismatch."""

from tests.methods.helpers import run_recipe_steps
from tests.methods.seed_support import BINARY


def test_mismatch_excludes_the_policys_own_movement_within_a_step(tmp_path):
    out = run_recipe_steps("grpo", tmp_path, steps=2, overrides=BINARY + [
        "algorithm.minibatches=4", "optim.lr=0.01", "rollout.max_new_tokens=12"])
    for m in out["metrics"]:
        assert m["kl_old"] > 1e-4  # later minibatches ran on a policy that had moved
        assert m["logp_mismatch"] < 1e-5  # yet the engine's log-probs are the trainer's before the step
