"""Verifiers: functions from (example, completion text) to a Score."""

from rlvr.verifiers.base import VERIFIERS, Verifier, from_callable, load_callable, validate_verifier
from rlvr.verifiers.numeric import NumericVerifier, extract_answer, parse_number


class ExactMatchVerifier:
    """1 when the stripped completion equals the stripped answer."""

    name = "exact"

    def __call__(self, example, text):
        from rlvr.core.types import Score
        ok = text.strip() == example.answer.strip()
        return Score(float(ok), {"correct": float(ok)})


VERIFIERS.register("numeric")(NumericVerifier)
VERIFIERS.register("exact")(ExactMatchVerifier)

__all__ = ["VERIFIERS", "ExactMatchVerifier", "NumericVerifier", "Verifier", "extract_answer", "from_callable",
           "load_callable", "parse_number", "validate_verifier"]
