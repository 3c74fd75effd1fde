"""GeoSym: a neuro-symbolic geometry problem engine (type-conditional grammar + analytic SymPy solver).

GeoSym Engine (GeoSym / GeoSym127K, 2026; github.com/Tomie56/GeoSym127K; docs/geosym.md): sample a base
shape, apply type-conditional derivation rules, add construction operations by difficulty, compute exact
symbolic answers, render the diagram; the RLVR reward is exact match of the symbolic answer.

- :mod:`.field` — exact arithmetic in Q(√2, √3), where every coordinate lives;
- :mod:`.figure` — labelled points, segments, shapes; midpoints, feet, intersections;
- :mod:`.grammar` — base types and the derivation rules (weights in tables);
- :mod:`.enhance` — enhancement operations and the difficulty strata (3/5/7 operations);
- :mod:`.solver` — questions and their exact answers (SymPy), with a chain of thought;
- :mod:`.render` — the diagram (Pillow) at any resolution;
- :mod:`.generate` — one problem end to end, from a seed;
- :mod:`.task` — the registered ``geosym`` task; the verifier is :mod:`rlvr.verifiers.geosym`.

``rlvr geosym generate`` (:mod:`rlvr.cli.geosym`) writes a dataset of images and a JSONL file.
Importing this package loads neither SymPy nor Pillow.
"""

from rlvr.tasks.geosym.task import GeoSymParams, geosym_task

__all__ = ["GeoSymParams", "geosym_task"]
