"""DeFAb instances from files, in either of two layouts (decided row by row).

**rlvr's layout** (``rlvr defab generate``; :meth:`rlvr.defab.generate.Instance.to_json`): ``id``, ``level``,
``theory`` (the challenge theory D⁻ in the :mod:`rlvr.defab.parser` format), ``target`` (q, or the
anomaly at Level 3), ``gold`` (the gold hypothesis, with its superiority lines), optional ``glossary``,
``kb``, ``distractors``, ``strategy``, ``nonsense``. The prompt is rlvr's DeFAb rendering (``rendering``:
one of the four styles, ``mixed``, or ``all`` for rendering-robust accuracy) and the completion is scored
exactly by the ``defab`` verifier: the decoded hypothesis is checked against the theory, so any correct
hypothesis scores, not only the gold one.

**The authors' released layout** (the DeFAb repository's instance files, checked against its writers and its
``instances/`` folder): ``tier0/*_instances.json`` are ``{"metadata": ..., "instances": [...]}``; ``tier1/<domain>/``
and ``multitier/<source>/instances.json`` are bare lists; a download also holds summary and statistics files,
which a directory load passes over (:func:`rlvr.tasks.benchmarks.task.benchmark_examples`). Rows: ``level``,
``target`` (Levels 1-2, and Level 3 from the generator, with the anomaly in it) or ``anomaly`` (the hand-written
Level-3 set and DeFAb-Hard), ``candidates`` (hypotheses in the formal syntax, ``"df_bird(owl):  => bird(owl)"``),
``gold`` (one of them: a string, or a one-element list; always the first candidate in the release), ``id``
(often empty) or ``name``, and the theory only where the row stores it: ``theory_facts`` / ``theory_rules``
(the Level-3 sets; defeaters sit among the rules), ``theory`` (text or a list) or ``metadata.facts``.
Generated Level-1/2 rows store only ``theory_size``, so no exact check is possible: every released row is a
multiple-choice item over its candidates, shuffled with ``seed``, scored by the ``choice`` verifier; the meta
records ``options``, ``correct`` (every gold letter), ``shuffle_seed`` and ``option_order``. A row with a single
candidate (a handful in the release) is not a question and is passed over with a warning. Without the theory a
Level-1/2 item can be answered by matching the target against the candidates' heads (one candidate's head is
the target in every such row we read), so report released Level-1/2 accuracy with that caveat, and prefer
Level 3 or rlvr-generated instances (exact check) for a real measure. Fields beyond these are kept in the meta,
unread. (The field list of the release's croissant.json, which names ``theory``, ``tier`` and ``renderings``,
does not match the files.)
"""

from __future__ import annotations

import warnings
from typing import Any, Sequence

from rlvr.core.types import Example, Score
from rlvr.tasks.benchmarks.gpqa import shuffled
from rlvr.tasks.benchmarks.reader import Row
from rlvr.tasks.benchmarks.spec import Benchmark, fill, register, require
from rlvr.tasks.dataset import DataError
from rlvr.verifiers.base import BaseVerifier
from rlvr.verifiers.choice import LETTERS, letters_block

__all__ = ["DEFAB_CHOICE_TEMPLATE", "DefabBenchVerifier"]

DEFAB_CHOICE_TEMPLATE = ("{theory}{question}\n\n{options}\n\nThe last line of your response should be of the following "
                         "format: 'Answer: $LETTER' (without quotes) where LETTER is one of {letters}.")
_THEORY_INTRO = ("Here is a theory in defeasible logic. Strict rules (->) always hold, defeasible rules (=>) hold "
                 "unless defeated, and defeaters (~>) only block conclusions.\n\n")
_QUESTION = {1: "Which candidate fact, added to the theory, makes it follow that {target}?",
             2: "Which candidate rule, added to the theory, makes it follow that {target}?",
             3: "The theory concludes {target}, but this is wrong. Which candidate, added to the theory, blocks this "
                "conclusion while keeping the theory's other conclusions?"}
_THEORY_LISTS = ("theory_facts", "theory_rules", "theory_defeaters", "theory_superiority")


class DefabBenchVerifier(BaseVerifier):
    """The ``choice`` verifier on released multiple-choice rows, the exact ``defab`` verifier on rlvr's."""

    name = "defab"

    def __init__(self, choice: Any, exact: Any):
        self.choice, self.exact = choice, exact

    def score(self, example: Example, text: str) -> Score:
        return (self.choice if "options" in example.meta else self.exact)(example, text)

    def validation_cases(self) -> list[tuple[Example, str, float]]:
        ex = Example("defab-mc", "q", "B", "defab", meta={"options": ["a(X) => b(X)", "r2: bird(X) => flies(X)"]})
        return [(ex, "Answer: B", 1.0), (ex, "Answer: A", 0.0)]


def _verifier(params: dict[str, Any]) -> DefabBenchVerifier:
    from rlvr.tasks.defab import DefabVerifier
    from rlvr.verifiers import build_verifier

    return DefabBenchVerifier(build_verifier("choice", params), DefabVerifier())


def _norm(statement: str) -> str:
    return " ".join(str(statement).split()).rstrip(".").strip()


def _theory_text(row: dict) -> str:
    theory = row.get("theory")
    if isinstance(theory, list):
        return "\n".join(map(str, theory))
    if isinstance(theory, str) and theory.strip():
        return theory.strip()
    lines = [str(s) for key in _THEORY_LISTS for s in (row.get(key) or []) if isinstance(row.get(key), list)]
    meta = row.get("metadata")
    facts = meta.get("facts") if isinstance(meta, dict) else None
    if not lines and isinstance(facts, list):
        lines = [str(f) for f in facts]
    return "\n".join(lines)


def _released(where: str, default: str, row: dict, p: Any, bench: Benchmark) -> Example | None:
    """The row as a multiple-choice example; None for a row with a single candidate (not a question)."""
    cands = row["candidates"]
    if not isinstance(cands, list) or not cands or not all(isinstance(c, str) and c.strip() for c in cands):
        raise DataError(f"{where}: 'candidates' must be a list of two or more hypotheses (strings)")
    if len(cands) == 1:
        return None
    gold = row["gold"] if isinstance(row["gold"], list) else [row["gold"]]
    texts = [c.strip() for c in cands]
    want = {_norm(g) for g in gold if isinstance(g, str)}
    missing = want - {_norm(c) for c in texts}
    if not want or missing:
        raise DataError(f"{where}: every 'gold' hypothesis must be one of the 'candidates' (not found: "
                        f"{sorted(missing) or gold})")
    iid = str(row.get("id") or row.get("name") or default)
    order = shuffled(len(texts), p.seed, iid)
    options = [texts[i] for i in order]
    correct = [LETTERS[k] for k, o in enumerate(options) if _norm(o) in want]
    level = row.get("level")
    if level not in (1, 2, 3) and str(level) not in ("1", "2", "3"):
        raise DataError(f"{where}: 'level' must be 1, 2 or 3, got {level!r}")
    target = str(row.get("anomaly") or row.get("target"))
    theory = _theory_text(row)
    prompt = fill(p.template or bench.template, {
        "theory": f"{_THEORY_INTRO}{theory}\n\n" if theory else "", "question": _QUESTION[int(level)].format(target=target),
        "options": letters_block(options), "letters": LETTERS[: len(options)], "target": target})
    meta = {k: v for k, v in row.items() if k != "candidates"}
    meta.update(options=options, correct=correct, shuffle_seed=p.seed, option_order=order)
    return Example(iid, prompt, correct[0], bench.name, None, meta)


def _rlvr_layout(where: str, row: dict, p: Any, k: int) -> list[Example]:
    from rlvr.defab.generate import Instance
    from rlvr.defab.render import STYLES
    from rlvr.tasks.defab import instance_example

    try:
        inst = Instance.from_json({**row, "id": str(row.get("id") or where)})
    except Exception as e:  # a parse error in the theory, target or gold
        raise DataError(f"{where}: not a valid DeFAb instance ({type(e).__name__}: {e})") from None
    styles = (STYLES if p.rendering == "all" else [STYLES[k % 4]] if p.rendering == "mixed" else [p.rendering])
    return [instance_example(inst, s, task="defab") for s in styles]


def _defab(rows: Sequence[Row], p: Any, bench: Benchmark) -> list[Example]:
    out: list[Example] = []
    single: list[str] = []
    for k, (where, default, row) in enumerate(rows):
        require(bench, where, row)
        if "candidates" in row:
            ex = _released(where, default, row, p, bench)
            if ex is None:
                single.append(where)
            else:
                out.append(ex)
        elif "theory" in row and "target" in row:
            out.extend(_rlvr_layout(where, row, p, k))
        else:
            raise DataError(f"{where}: a DeFAb row needs 'candidates' (the released layout) or 'theory' and "
                            f"'target' (rlvr's layout); it has {sorted(row)[:12]}")
    if single:
        warnings.warn(f"{len(single)} DeFAb row(s) with a single candidate passed over (not a question): "
                      + ", ".join(single[:3]) + (", ..." if len(single) > 3 else ""), stacklevel=3)
    return out


register(Benchmark(
    "defab", "DeFAb", "rlvr defab generate, or the DeFAb release's instance files",
    (("level",), ("target", "anomaly"), ("gold",), ("candidates", "theory")),
    ("id", "name", "theory_facts", "theory_rules", "glossary", "domain"), DEFAB_CHOICE_TEMPLATE,
    ("theory", "question", "options", "letters", "target"), _defab, _verifier, "choice"))
