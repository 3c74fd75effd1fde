"""Loss terms: training signals beside the policy gradient, ``(ObjectiveInputs, params) -> (per-token loss
[N, T], per-token metrics)``, each with its own weight and schedule (``algorithm.loss_terms``).

The update adds ``weight(step) * term`` to the objective's per-token loss after the importance-sampling
correction, the same place the in-loss KL goes, so the run's aggregation weighs the terms as it weighs the
objective and gradient accumulation stays exact (the micro-batch invariance of the rest holds). A term reads
the extra tensors it declares with ``needs`` (a teacher's log-probs, say) and is the identity, with its
passes skipped, at steps where its weight is 0. One file per term.
"""
