"""DeFAb instances from files, in either of two layouts (decided row by row).

**rlvr's layout** (``rlvr defab generate``; :meth:`rlvr.defab.generate.Instance.to_json`): ``id``, ``level``,
``theory`` (the challenge theory D⁻ in the :mod:`rlvr.defab.parser` format), ``target`` (q, or the
anomaly at Level 3), ``gold`` (the gold hypothesis, with its superiority lines), optional ``glossary``,
``kb``, ``distractors``, ``strategy``, ``nonsense``. The prompt is rlvr's DeFAb rendering (``rendering``:
one of the four styles, ``mixed``, or ``all`` for rendering-robust accuracy) and the completion is scored
exactly by the ``defab`` verifier: the decoded hypothesis is checked against the theory, so any correct
hypothesis scores, not only the gold one.

**The authors' released layout** (the instance files of the DeFAb repository, ``instances/*.json``; the
dataset card lists ``theory``, ``target``, ``candidates``, ``gold``, ``level``, ``tier``, ``domain``,
``renderings``): ``level``, ``target`` (Levels 1-2) or ``anomaly`` (Level 3: the literal the theory wrongly
derives), ``candidates`` (hypotheses in the formal syntax, ``"r2: bird(X) => flies(X)"``), ``gold`` (one of
them, or a list), and the theory when the row stores it: ``theory`` (text or a list of statements) or
``theory_facts`` / ``theory_rules`` / ``theory_defeaters`` / ``theory_superiority`` lists. Released Level-1/2
rows often do not store the theory, so no exact check is possible: these rows are a multiple-choice item over
the candidates, shuffled with ``seed`` (in the release the gold is always the first candidate), scored by
the ``choice`` verifier; the meta records ``options``, ``correct`` (every gold letter), ``shuffle_seed`` and
``option_order``. The exact schema of the full Hugging Face release was not available to check; fields
beyond these are kept in the meta, unread.
"""

from __future__ import annotations

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
    return "\n".join(lines)


def _released(where: str, default: str, row: dict, p: Any, bench: Benchmark) -> Example:
    cands = row["candidates"]
    if not isinstance(cands, list) or len(cands) < 2 or not all(isinstance(c, str) and c.strip() for c in cands):
        raise DataError(f"{where}: 'candidates' must be a list of two or more hypotheses (strings)")
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
    for k, (where, default, row) in enumerate(rows):
        require(bench, where, row)
        if "candidates" in row:
            out.append(_released(where, default, row, p, bench))
        elif "theory" in row and "target" in row:
            out.extend(_rlvr_layout(where, row, p, k))
        else:
            raise DataError(f"{where}: a DeFAb row needs 'candidates' (the released layout) or 'theory' and "
                            f"'target' (rlvr's layout); it has {sorted(row)[:12]}")
    return out


register(Benchmark(
    "defab", "DeFAb", "rlvr defab generate, or the DeFAb release's instance files",
    (("level",), ("target", "anomaly"), ("gold",), ("candidates", "theory")),
    ("id", "name", "theory_facts", "theory_rules", "glossary", "domain"), DEFAB_CHOICE_TEMPLATE,
    ("theory", "question", "options", "letters", "target"), _defab, _verifier, "choice"))
