"""Verifiers: functions from (example, completion text) to a Score."""

from rlvr.core.types import Example, Score
from rlvr.registry import Params
from rlvr.verifiers.base import (VERIFIERS, BaseVerifier, Verifier, build_verifier, from_callable, load_callable,
                                 validate_verifier)
from rlvr.verifiers.numeric import NumericVerifier, extract_answer, parse_number


class ExactMatchVerifier(BaseVerifier):
    """1 when the stripped completion equals the stripped answer."""

    name = "exact"

    def score(self, example: Example, text: str) -> Score:
        ok = text.strip() == example.answer.strip()
        return Score(float(ok), {"correct": float(ok)}, {} if ok else {"reason": "not an exact match"})

    def validation_cases(self):
        ex = Example("exact-1", "q", "Paris")
        return [(ex, " Paris\n", 1.0), (ex, "paris", 0.0)]


@VERIFIERS.register("numeric", Params)
def _numeric(p: Params) -> NumericVerifier:
    """Exact numeric answers compared as fractions (the completion's last number)."""
    return NumericVerifier()


@VERIFIERS.register("exact", Params)
def _exact(p: Params) -> ExactMatchVerifier:
    """Exact string match after stripping whitespace."""
    return ExactMatchVerifier()


# the task-family verifiers register themselves when their module is imported, which a lookup of their
# name in VERIFIERS does (rlvr.registry_index)

__all__ = ["VERIFIERS", "BaseVerifier", "ExactMatchVerifier", "NumericVerifier", "Verifier", "build_verifier",
           "extract_answer", "from_callable", "load_callable", "parse_number", "validate_verifier"]
