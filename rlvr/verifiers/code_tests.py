"""The code verifier's test forms, now in :mod:`rlvr.sandbox.code_tests` (shared with the ``code_feedback``
environment); this module keeps the old import path working."""

from rlvr.sandbox.code_tests import *
from rlvr.sandbox.code_tests import TestSpec, parse_tests

__all__ = ["TestSpec", "parse_tests"]
