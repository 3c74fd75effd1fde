"""Self-contained HTML reports with inline SVG charts; ``rlvr report RUN_DIR``."""

from rlvr.report.run import report_run

__all__ = ["report_run"]
