"""Asking a model many things at once (an OpenAI-compatible endpoint, or a local directory in this process):
batched, concurrent, under deadlines, retried, cached and budgeted (:class:`ModelClient`). Used by the judge
verifier (:mod:`rlvr.verifiers.judge`), by ``rlvr data annotate`` and by the rollout wrappers that write NudgeRL's
hints and SCOPE-RL's scaffolds with a model during a run."""

from rlvr.models.ask.client import ModelClient, ModelParams

__all__ = ["ModelClient", "ModelParams"]
