"""``rlvr compare``: methods x seeds on one task with one rollout budget, resumable, with an HTML report."""

from rlvr.compare.report import write_report
from rlvr.compare.runner import CompareError, Variant, make_variants, rewrite_report, run_compare

__all__ = ["run_compare", "rewrite_report", "make_variants", "Variant", "CompareError", "write_report"]
