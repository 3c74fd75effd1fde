"""The ``math`` verifier: final-answer extraction, hedging rules, an exact pure-Python fast path, and
symbolic equivalence in long-lived worker processes with a hard deadline.

Importing this package registers ``math`` in :data:`rlvr.verifiers.VERIFIERS`. Module map:
:mod:`.chars` (Unicode look-alikes: folded or rejected, never dropped), :mod:`.extract` (answer spans,
hedging), :mod:`.guards` (answers that cannot be read as one value, number dumps), :mod:`.prose` and
:mod:`.statement` (the prose around an answer, and answers given in a final sentence), :mod:`.normalize`
(spelling, units, number words), :mod:`.fastpath` (exact numbers), :mod:`.pool` and :mod:`._worker`
(processes, deadlines), :mod:`.latex`, :mod:`.values` and :mod:`.symbolic` (sympy and mpmath, in the workers
only; math-verify, from the optional ``math`` extra, only for what our parser does not support),
:mod:`.verifier` (the pipeline).
"""

from rlvr.verifiers.base import VERIFIERS

from .extract import Extraction, extract_answer, hedge_reason
from .fastpath import fast_equal, parse_exact
from .normalize import normalize
from .pool import WorkerPool
from .verifier import MathParams, MathVerifier

__all__ = ["MathParams", "MathVerifier", "WorkerPool", "Extraction", "extract_answer", "hedge_reason",
           "normalize", "parse_exact", "fast_equal"]


@VERIFIERS.register("math", MathParams)
def _math(p: MathParams) -> MathVerifier:
    """Math answers (GSM8K, MATH): exact numbers in-process, symbolic equivalence in worker processes."""
    return MathVerifier(**p.model_dump())
