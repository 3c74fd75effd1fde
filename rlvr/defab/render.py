"""The four DeFAb surface renderings (M1–M4), their answer decoders, and the rendering-robust score.

Renderings (DeFAb §5; docs/verifiers.md, DeFAb renderings) of the same instance:

- ``narrative`` (M1): English sentences, the variable is "something"/"it"
  ("If something is a bird, then normally it flies.");
- ``semiformal`` (M2): sentences with explicit variables ("If X is a bird, then typically X flies.");
- ``annotated`` (M3): the formal statements, each followed by a ``%`` gloss in M2 wording;
- ``formal`` (M4): the :mod:`rlvr.defab.parser` text format (``r1: bird(X) => flies(X).``).

A literal is glossed by the kind of its predicate (``glossary``: ``"class"`` → "t is a penguin",
``"property"`` → "t flies"; underscores become spaces); predicates missing from the glossary are
properties. Rule kinds are told apart by a fixed adverb: strict "always"/"definitely", defeasible
"normally"/"typically", defeater "it might be that"/"possibly".

Decoding is tolerant of prose around the answer but strict about the answer itself: the answer is what
follows the **last** ``Answer:`` marker (the rest of that line, or the next non-empty line; for the
formal styles up to the first blank line, so Level-3 superiority lines fit); surrounding backticks,
quotes and ``*`` are stripped; then the text must parse *completely* in the style's answer format, with
every predicate known to the instance's glossary (M1/M2) — otherwise the answer scores 0. There is no
edit-distance or model-based repair (DeFAb's D2/D3): a near miss is a miss, so the reward cannot be
gamed by answers that are only close. A decoded rule gets the label ``h1``.

A Level-3 exception states its priority over existing rules (Γ): in the formal styles as lines
``h1 > r2.`` after the rule; in the sentence styles, which show no labels, by repeating each overridden
rule as the theory states it: "If X is a penguin, then typically it is not the case that X flies. It
overrides: If X is a bird, then typically X flies." The decoder maps each repeated rule to the label of
the theory rule with the same kind, body and head (up to renaming variables); one that matches no rule
is a decode failure.

The rendering-robust score of an instance is the minimum over the four renderings of its score.
"""

from __future__ import annotations

import re
from typing import Mapping, Optional, Sequence, Union

from rlvr.defab.parser import parse_statements
from rlvr.defab.score import Verdict, score_answer
from rlvr.defab.syntax import Literal, Rule, RuleKind, Superiority, Theory, TheoryError, is_variable

__all__ = ["STYLES", "render_theory", "render_literal", "render_hypothesis", "render_prompt", "answer_text",
           "extract_answer", "decode", "score_completion", "robust_score", "rendering_robust_accuracy"]

STYLES = ("narrative", "semiformal", "annotated", "formal")
_ADVERB = {"narrative": {RuleKind.STRICT: "always", RuleKind.DEFEASIBLE: "normally",
                         RuleKind.DEFEATER: "it might be that"},
           "semiformal": {RuleKind.STRICT: "definitely", RuleKind.DEFEASIBLE: "typically",
                          RuleKind.DEFEATER: "possibly"}}
_TASK = {1: "Which single fact, added to the theory, makes it follow (defeasibly) that {q}?",
         2: "Which single default rule (a defeasible rule), added to the theory, makes it follow that {q}?",
         3: "The theory concludes that {q}, but this is wrong. Give one defeater or exception rule that blocks "
            "this conclusion while keeping every other conclusion that does not depend on it. The rule must be "
            "general (about a kind of individual, not one named individual) and have no unneeded condition."}
_PRIORITY = {"formal": "An exception rule (=>) may take priority over rules of the theory: add one line "
                       "'h1 > LABEL.' per overridden rule after it.",
             "sentence": "An exception rule ('{adverb}') may take priority over rules of the theory: after it, "
                         "add 'It overrides: ' followed by the overridden rule exactly as the theory states it, "
                         "once per overridden rule."}
_OVERRIDES = re.compile(r"\s*\bIt overrides:\s*")


def _words(pred: str) -> str:
    return pred.replace("_", " ")


def _clause(lit: Literal, term: str, glossary: Mapping[str, str]) -> str:
    words = _words(lit.predicate)
    if glossary.get(lit.predicate) == "class":
        return f"{term} is {'not ' if lit.negated else ''}{'an' if words[0] in 'aeiou' else 'a'} {words}"
    return f"it is not the case that {term} {words}" if lit.negated else f"{term} {words}"


def render_literal(lit: Literal, glossary: Mapping[str, str], style: str = "semiformal") -> str:
    """A literal as a clause; formal styles give the literal itself."""
    if style in ("annotated", "formal"):
        return str(lit)
    if len(lit.args) != 1:
        raise ValueError(f"the sentence renderings need unary literals, got {lit}")
    arg = lit.args[0]
    return _clause(lit, arg if not is_variable(arg) or style == "semiformal" else "it", glossary)


def _sentence(h: Union[Literal, Rule], glossary: Mapping[str, str], style: str) -> str:
    if isinstance(h, Literal):
        return render_literal(h, glossary, style) + "."
    first = "something" if style == "narrative" else None
    body = [_clause(b, (first if i == 0 else "it") if first else b.args[0], glossary) for i, b in enumerate(h.body)]
    head = _clause(h.head, "it" if first else h.head.args[0], glossary)
    return f"If {' and '.join(body)}, then {_ADVERB[style][h.kind]} {head}."


def render_hypothesis(h: Union[Literal, Rule], glossary: Mapping[str, str], style: str) -> str:
    """One fact or rule in ``style`` (the answer format of that style)."""
    if style in ("annotated", "formal"):
        return f"{h}." if isinstance(h, Literal) else str(h)
    return _sentence(h, glossary, style)


def render_theory(theory: Theory, glossary: Mapping[str, str], style: str) -> str:
    if style not in STYLES:
        raise ValueError(f"unknown rendering {style!r}; choose one of {', '.join(STYLES)}")
    if style == "formal":
        return str(theory)
    lines = []
    for e in (*theory.facts, *theory.rules):
        text = render_hypothesis(e, glossary, "semiformal" if style == "annotated" else style)
        lines.append(f"{render_hypothesis(e, glossary, 'formal')}  % {text}" if style == "annotated" else text)
    lines += [str(s) for s in theory.superiority]
    return "\n".join(lines) + "\n"


def answer_text(h: Union[Literal, Rule], glossary: Mapping[str, str], style: str,
                superiority: Sequence[Superiority] = (), theory: Optional[Theory] = None) -> str:
    """What a correct completion ends with: ``Answer: <hypothesis in the style's format>``, with the
    priority of a Level-3 exception (``superiority``; the sentence styles need ``theory`` to restate the
    overridden rules)."""
    text = "Answer: " + render_hypothesis(h, glossary, style)
    if not superiority:
        return text
    if style in ("annotated", "formal"):
        return "\n".join([text, *map(str, superiority)])
    if theory is None:
        raise ValueError("the sentence renderings of superiority pairs need the theory")
    return text + "".join(f" It overrides: {render_hypothesis(theory.rule(s.inferior), glossary, style)}"
                          for s in superiority)


def render_prompt(theory: Theory, target: Literal, level: int, glossary: Mapping[str, str], style: str) -> str:
    """The full prompt: the theory, the question, and the required answer format with an example."""
    kind = "fact" if level == 1 else "rule"
    example = {1: Literal.of("example_class", "c1"),
               2: Rule("h1", RuleKind.DEFEASIBLE, [Literal.of("example_class", "X")], Literal.of("has_p", "X")),
               3: Rule("h1", RuleKind.DEFEATER, [Literal.of("example_class", "X")],
                       Literal.of("has_p", "X", negated=True))}[level]
    gloss = {**glossary, "example_class": "class"}
    question = _TASK[level].format(q=render_literal(target, glossary, style))
    if level == 3:
        formal = style in ("annotated", "formal")
        question += " " + _PRIORITY["formal" if formal else "sentence"].format(
            adverb=None if formal else _ADVERB[style][RuleKind.DEFEASIBLE])
    return (f"Here is a theory in defeasible logic ({style} rendering). Strict statements always hold, "
            "default rules hold unless defeated, and defeaters only block conclusions.\n\n"
            f"{render_theory(theory, glossary, style)}\n{question}\n"
            f"End your reply with one line 'Answer: ' followed by the {kind} in the same style as the theory, "
            f"for example:\n{answer_text(example, gloss, style)}")


_MARK = re.compile(r"answer\s*:", re.IGNORECASE)


def extract_answer(text: str, style: str) -> str:
    """The text after the last ``Answer:`` marker (see the module docstring); '' when there is none."""
    marks = list(_MARK.finditer(text))
    if not marks:
        return ""
    rest = text[marks[-1].end():]
    lines = rest.split("\n")
    if not lines[0].strip():
        lines = lines[1:]
        while lines and not lines[0].strip():
            lines.pop(0)
    if style in ("annotated", "formal"):
        block = []
        for line in lines:
            if not line.strip() or line.strip().startswith("```") and block:
                break
            block.append(line)
        out = "\n".join(block)
    else:
        out = lines[0] if lines else ""
    return out.strip().strip("`*\"' ").strip()


def _decode_clause(text: str, glossary: Mapping[str, str], var_words: dict) -> Literal:
    by_words = {_words(p): p for p in glossary}
    m = re.fullmatch(r"(\S+) is (not )?an? (.+)", text)
    if m and by_words.get(m.group(3)) and glossary[by_words[m.group(3)]] == "class":
        term, negated, pred = m.group(1), bool(m.group(2)), by_words[m.group(3)]
    else:
        m = re.fullmatch(r"(it is not the case that )?(\S+) (.+)", text)
        if not m or by_words.get(m.group(3)) is None or glossary[by_words[m.group(3)]] == "class":
            raise ValueError(f"cannot read the clause {text!r}")
        term, negated, pred = m.group(2), bool(m.group(1)), by_words[m.group(3)]
    return Literal.of(pred, var_words.get(term.lower(), term), negated=negated)


def _decode_sentence(text: str, glossary: Mapping[str, str], style: str) -> Union[Literal, Rule]:
    text = re.sub(r"\s+", " ", text).rstrip(".").strip()
    adverbs = {v: k for k, v in _ADVERB[style].items()}
    var_words = {"something": "X", "it": "X"} if style == "narrative" else {}
    alt = "|".join(re.escape(a) for a in sorted(adverbs, key=len, reverse=True))
    m = re.fullmatch(rf"[Ii]f (.+), then ({alt}) (.+)", text)
    if m is None:
        if text.lower().startswith("if "):
            raise ValueError(f"cannot read the rule {text!r}")
        return _decode_clause(text, glossary, var_words)
    body = [_decode_clause(c.strip(), glossary, var_words) for c in m.group(1).split(" and ")]
    return Rule("h1", adverbs[m.group(2)], body, _decode_clause(m.group(3), glossary, var_words))


def _shape(rule: Rule) -> tuple:
    """(kind, body, head) with variables renamed in order of first occurrence (labels ignored)."""
    names = {v: f"V{i}" for i, v in enumerate(rule.variables)}

    def lit(x: Literal) -> tuple:
        return x.negated, x.predicate, tuple(names.get(a, a) for a in x.args)

    return rule.kind, tuple(map(lit, rule.body)), lit(rule.head)


def _overridden(sentence: str, glossary: Mapping[str, str], style: str, theory: Optional[Theory]) -> str:
    """The label of the theory rule a sentence restates (for "It overrides: ...")."""
    rule = _decode_sentence(sentence, glossary, style)
    if isinstance(rule, Rule) and theory is not None:
        want = _shape(rule)
        for r in theory.rules:
            if _shape(r) == want:
                return r.label
    raise ValueError(f"the overridden rule {sentence!r} is not a rule of the theory")


def decode(text: str, glossary: Mapping[str, str], style: str, theory: Optional[Theory] = None) -> tuple:
    """``(hypothesis, superiority pairs)`` from a completion; raises ``ValueError`` when none is readable.
    ``theory`` resolves the overridden rules of a sentence-style exception (module docstring)."""
    answer = extract_answer(text, style)
    if not answer:
        raise ValueError("no 'Answer:' line")
    if style in ("annotated", "formal"):
        items = parse_statements(answer if answer.rstrip().endswith(".") else answer + ".")
        hyps = [x for x in items if not isinstance(x, Superiority)]
        if len(hyps) != 1:
            raise ValueError(f"expected exactly one fact or rule, found {len(hyps)}")
        return hyps[0], tuple(x for x in items if isinstance(x, Superiority))
    first, *overridden = _OVERRIDES.split(answer)
    h = _decode_sentence(first, glossary, style)
    if overridden and not isinstance(h, Rule):
        raise ValueError("only a rule can override rules")
    return h, tuple(Superiority(h.label, _overridden(x, glossary, style, theory)) for x in overridden)


def score_completion(theory: Theory, target: Literal, level: int, glossary: Mapping[str, str], style: str,
                     text: str) -> Verdict:
    """Decode ``text`` in ``style`` and score it exactly; never raises on model output."""
    try:
        h, gamma = decode(text, glossary, style, theory)
    except (ValueError, TheoryError) as e:
        return Verdict(0.0, f"decode failure: {e}")
    return score_answer(theory, target, h, level, superiority=gamma)


def robust_score(instance, completions: Mapping[str, str]) -> float:
    """Rendering-robust score of one instance: the minimum over the four styles (a missing one is 0)."""
    return min(score_completion(instance.theory, instance.target, instance.level, instance.glossary, s,
                                completions.get(s, "")).score for s in STYLES)


def rendering_robust_accuracy(results: Sequence[tuple]) -> float:
    """Mean over ``(instance, {style: completion})`` pairs of :func:`robust_score` (docs/verifiers.md, DeFAb
    renderings)."""
    return sum(robust_score(i, c) for i, c in results) / len(results) if results else 0.0
