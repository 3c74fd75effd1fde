"""Model libraries' own logging and progress bars kept off the ``rlvr`` command's output."""

from __future__ import annotations

import os

__all__ = ["quiet_libraries"]


def quiet_libraries() -> None:
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import transformers

    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
