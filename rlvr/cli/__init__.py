"""The ``rlvr`` command line and the modules behind its commands.

- :mod:`~rlvr.cli.commands` — the typer app: ``train``, ``sft``, ``eval``, ``compare``, ``report``,
  ``verify``, ``recipes``, ``config``; ``rlvr`` (``rlvr.cli:main``) and ``python -m rlvr`` run it.
- :mod:`~rlvr.cli.defab` — ``rlvr defab derive`` / ``generate``, mounted on the app.
- :mod:`~rlvr.cli.geosym` — ``rlvr geosym generate``: GeoSym geometry problems, mounted on the app.
- :mod:`~rlvr.cli.verify` — ``rlvr verify``: score a JSONL file of completions.
- :mod:`~rlvr.cli.docs` — the generated config reference (``rlvr config --reference``; the README's copy is
  rewritten with ``python -m rlvr.cli.docs README.md``).

Importing this package loads only typer and rich (and the light DeFAb modules ``rlvr defab`` needs); each
command imports the rest when it runs.
"""

from rlvr.cli.commands import app, main

__all__ = ["app", "main"]
