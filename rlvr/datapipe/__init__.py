"""The data pipeline (``rlvr data clean``) and SFT weight interpolation (``rlvr merge``).

- :mod:`rlvr.core.jsonl` (shared with ``rlvr verify``): streaming JSONL, malformed lines reported with their
  numbers;
- :mod:`.dedup`: exact duplicates (normalised hash) and near duplicates (MinHash + LSH, ``datasketch``);
- :mod:`.decontam`: n-gram overlap with local benchmark files (13-grams by default);
- :mod:`.relabel`: re-verification of each row's gold answer with a verifier (Zhu & Kang 2026; docs/data.md);
- :mod:`.pipeline`: :func:`clean_file`, the stages in one pass, and the report;
- :mod:`.merge`: ``θ = (1 − α)·θ_A + α·θ_B`` over two model directories (L20-Edu-135M).

See docs/data.md. Heavy imports (datasketch, torch, transformers) happen inside the functions that need them.
"""

from rlvr.datapipe.pipeline import REASONS, CleanOptions, clean_file

__all__ = ["CleanOptions", "clean_file", "REASONS"]
