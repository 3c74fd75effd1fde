"""``geosym``: exact-match of a symbolic answer (GeoSym's RLVR reward).

The reward (docs/geosym.md; RECONSTRUCTED from "deterministic exact-match signals"): with ``pred`` the
model's final answer and ``gt`` the ground truth, both parsed with SymPy,

    r = 1  iff  simplify(pred - gt) == 0,   or (numeric fallback)  |pred - gt| <= rel_tol * |gt|,
    r = 0  otherwise (rel_tol = 1e-6).

The fallback applies when either side is written with a decimal (``fallback: decimals``, the default: a
decimal answer "3.4641016" for ``sqrt(12)`` scores 1, while an exact answer must be exactly right, so
``355/113`` is not pi), or to every answer with ``fallback: always``. The tolerance is strict: ``pi/2``
against ``1.57`` scores 0. A numeric screen at 30 digits runs first, so ``simplify`` only ever sees
differences that are already within the tolerance; a difference ``simplify`` cannot reduce to 0 counts
as 0 only when it is not below 10^-40 at 60 digits.

Extraction: the text after the last ``</think>``; the last ``\\boxed{...}`` (balanced braces; several
boxes that differ are several answers and score 0), else the rest of the line after the last "answer"
("The answer is ...", "Answer: ..."; several such markers with different values are several answers
and score 0), else the last non-empty line; markdown bold around the answer is dropped. Then
``\\text{}`` wrappers, a trailing unit (cm, units, degrees, ``°``, ...), a leading ``AB =`` and a trailing
``≈ ...`` are dropped; several values (", ", ";", " or ", " and ") score 0.

Parsing is safe: LaTeX (``\\frac``, ``\\sqrt``, ``\\pi``, ``\\cdot``, ``^``, ``√``, ``π``) is rewritten to SymPy
syntax, and the result must consist of digits, ``. + - * / ( )``, spaces and the names ``sqrt`` and ``pi``
only, at most ``max_chars`` characters; every exponent must be a literal of at most two digits, exponents
may not stack and their product is at most 1000 (``9**9**9`` and ``2**1000`` are refused before SymPy sees
them), and integers have at most 30 digits, so no power has more than 30000 digits. Only then does
``parse_expr`` run, with a global namespace holding nothing but SymPy's number classes and no builtins.
Nothing is evaluated that these checks did not bound, so scoring never hangs and never raises: bad
output scores 0 with a reason. In particular a completion cut off inside its answer (stopped at the token
limit: ``x = (3 + ``, an unclosed ``\\boxed{``, a dangling operator) scores 0 with the reason "incomplete
expression" or "unbalanced parentheses": no exception of SymPy's tokenizer or parser leaves
:func:`parse_answer` other than :class:`AnswerError` (tested by fuzzing random truncations of the solver's
answers and random unicode).
Source: GeoSym / GeoSym127K (2026), github.com/Tomie56/GeoSym127K.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field

from rlvr.core.types import Example, Score
from rlvr.registry import Params
from rlvr.verifiers.base import VERIFIERS, BaseVerifier

__all__ = ["GeoSymVerifierParams", "GeoSymVerifier", "extract_final", "parse_answer", "AnswerError"]

MAX_INT_DIGITS = 30
MAX_EXPONENT_PRODUCT = 1000
UNITS = ("square units", "sq units", "sq. units", "units", "unit", "cm^2", "cm²", "cm", "mm", "m^2", "m²",
         "km", "m", "degrees", "degree", "deg", "°", "^\\circ", "^{\\circ}", "\\circ", "rad", "radians")
_BOX = re.compile(r"\\(?:boxed|fbox)\s*\{")
_ANSWER = re.compile(r"answer\s*(?:is|:|=)?\s*:?", re.I)
_TOKEN = re.compile(r"\s*(?:(\d+\.?\d*|\.\d+)|([a-z_]+)|(\*\*|[-+*/()]))")


class AnswerError(ValueError):
    """An answer that cannot be read safely; the message is the reason."""


class GeoSymVerifierParams(Params):
    rel_tol: float = Field(1e-6, ge=0.0, description="relative tolerance of the numeric fallback")
    fallback: Literal["decimals", "always"] = Field(
        "decimals", description="numeric fallback for answers written with decimals only, or for every answer")
    max_chars: int = Field(200, gt=0, description="longest final answer read (longer scores 0)")


def _boxes(text: str) -> list[str]:
    out = []
    for m in _BOX.finditer(text):
        depth, i = 1, m.end()
        while i < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        if depth:
            raise AnswerError("unclosed \\boxed{")
        out.append(text[m.end(): i - 1].strip())
    return out


def _values(spans: list[str]) -> set:
    """The distinct values (rounded to 12 significant digits) of the spans that parse as answers."""
    out = set()
    for sp in spans:
        try:
            v = complex(parse_answer(sp).evalf(15))
        except Exception:  # noqa: BLE001 - a span that is not an answer is not a second answer
            continue
        out.add((float(f"{v.real:.12g}"), float(f"{v.imag:.12g}")))
    return out


def extract_final(text: str) -> str:
    """The final answer span of a completion (see the module docstring)."""
    text = text.rsplit("</think>", 1)[-1]
    boxes = _boxes(text)
    if boxes:
        if len({re.sub(r"\s+", "", b) for b in boxes}) > 1:
            raise AnswerError(f"several boxed answers: {boxes[:4]}")
        return boxes[-1]
    hits = list(_ANSWER.finditer(text))
    if hits:
        ends = [h.start() for h in hits[1:]] + [len(text)]
        spans = [text[h.end():end].strip().splitlines() for h, end in zip(hits, ends)]
        spans = [sp[0].strip() for sp in spans if sp and sp[0].strip()]
        if len(spans) > 1 and len(_values(spans[-8:])) > 1:  # "Answer: 43 ... Answer: 42" is a hedge
            raise AnswerError(f"several different answers: {spans[-4:]}")
        if spans:
            return spans[-1]
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if not lines:
        raise AnswerError("empty completion")
    return lines[-1]


def _strip(s: str) -> str:
    s = s.strip().strip("$").strip()
    s = re.sub(r"^(\*\*|__)(.+)\1(?=\W*$)", r"\2", s).strip()  # markdown bold: **42**.
    s = re.sub(r"\\(?:text|mathrm|textrm|mbox)\s*\{([^{}]*)\}", r" \1 ", s)
    s = s.replace("\\left", "").replace("\\right", "").replace("\\displaystyle", "")
    s = re.sub(r"\\[,;:! ]", " ", s).replace("−", "-").replace("–", "-").strip().rstrip(".").strip()
    if "≈" in s or "\\approx" in s:
        s = re.split(r"≈|\\approx", s)[0].strip()
    if "=" in s:
        s = s.rsplit("=", 1)[1].strip()
    changed = True
    while changed:
        changed = False
        for u in UNITS:
            if s.lower().endswith(u) and (not u[0].isalpha() or not s[:-len(u)][-1:].isalpha()):
                s, changed = s[: -len(u)].strip(), True
                break
    return s.strip().strip("$").strip()


def _group(s: str, i: int) -> tuple[str, int]:
    """The balanced ``{...}`` group starting at ``s[i]``; its contents and the index after it."""
    if i >= len(s) or s[i] != "{":
        raise AnswerError("malformed LaTeX group")
    depth, j = 1, i + 1
    while j < len(s) and depth:
        depth += {"{": 1, "}": -1}.get(s[j], 0)
        j += 1
    if depth:
        raise AnswerError("unbalanced braces")
    return s[i + 1: j - 1], j


def _latex(s: str) -> str:
    s = re.sub(r"\\[dt]frac", r"\\frac", s)
    s = re.sub(r"\\sqrt\s*(\d+|[a-z])", r"\\sqrt{\1}", s)
    s = re.sub(r"\\frac\s*(\d)\s*(\d)", r"\\frac{\1}{\2}", s)  # \frac98
    for _ in range(50):
        m = re.search(r"\\frac\s*|\\sqrt\s*(?:\[(\d+)\])?\s*", s)
        if m is None:
            break
        if m.group(0).startswith("\\frac"):
            num, j = _group(s, m.end())
            den, k = _group(s, j)
            s = f"{s[:m.start()]}(({num})/({den})){s[k:]}"
        else:
            body, j = _group(s, m.end())
            s = (f"{s[:m.start()]}(({body})**(1/{m.group(1)})){s[j:]}" if m.group(1)
                 else f"{s[:m.start()]}sqrt({body}){s[j:]}")
    s = re.sub(r"\\pi\b|π", " pi ", s)
    s = re.sub(r"\\cdot|\\times|×|·", "*", s)
    s = re.sub(r"√\s*(\d+(?:\.\d+)?)", r"sqrt(\1)", s).replace("√", "sqrt")
    return s.replace("^", "**").replace("{", "(").replace("}", ")")


def _check_tokens(s: str) -> None:
    toks, pos, prev_number = [], 0, False
    while pos < len(s.rstrip()):
        m = _TOKEN.match(s, pos)
        if m is None or m.end() == pos:
            raise AnswerError(f"unexpected character {s[pos:pos + 1]!r}")
        toks.append(m.group(1) or m.group(2) or m.group(3))
        if m.group(2) and m.group(2) not in ("sqrt", "pi"):
            raise AnswerError(f"unknown name {m.group(2)!r}")
        if m.group(1) and len(m.group(1).split(".")[0]) > MAX_INT_DIGITS:
            raise AnswerError("number too long")
        if m.group(1) and prev_number:  # "1..5", "3.4.6": not one number, and no implicit product of two
            raise AnswerError("two numbers in a row")
        prev_number = bool(m.group(1))
        pos = m.end()
    growth = 1.0  # product of the exponents: bounds the digits of any power, however they nest
    for i, t in enumerate(toks):
        if t != "**":
            continue
        exp = toks[i + 1: i + 2]
        j = i + 2
        if exp == ["("]:  # a parenthesised exponent: only (digits / digits), as \sqrt[n]{} writes
            close = toks.index(")", i + 1) if ")" in toks[i + 1:] else -1
            inner = toks[i + 2: close] if close > 0 else ["?"]
            if not inner or any(not (x.isdigit() and len(x) <= 2) and x not in "/-" for x in inner):
                raise AnswerError("exponent too complex")
            growth *= max(1.0, float(inner[0]) if inner[0].isdigit() else 1.0)
            j = close + 1
        else:
            if exp and exp[0] in "+-":
                exp, j = toks[i + 2: i + 3], i + 3
            if not exp or not exp[0].replace(".", "", 1).isdigit() or len(exp[0]) > 2:
                raise AnswerError("exponent too large or not a number")
            growth *= max(1.0, float(exp[0]))
        if j < len(toks) and toks[j] == "**":
            raise AnswerError("stacked exponents")
        if growth > MAX_EXPONENT_PRODUCT:
            raise AnswerError("powers too large")


def _check_complete(s: str) -> None:
    """Refuse an expression cut off or broken before SymPy's tokenizer sees it: unbalanced parentheses
    ("x = (3 + ", a completion stopped at the token limit), a dangling operator, an empty group."""
    depth = 0
    for ch in s:
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth < 0:
            raise AnswerError("unbalanced parentheses: ')' without '('")
    if depth:
        raise AnswerError("unbalanced parentheses: the expression is incomplete")
    bare = s.strip()
    if not bare or bare[-1] in "+-*/(" or bare[0] in "*/)":
        raise AnswerError("incomplete expression (a dangling operator)")
    if re.search(r"\(\s*\)", s):
        raise AnswerError("empty parentheses")


def parse_answer(text: str, max_chars: int = 200):
    """A constant SymPy expression for an answer span, or :class:`AnswerError` with the reason.

    Only :class:`AnswerError` leaves this function: a truncated, unbalanced or otherwise broken span is a
    reason to score 0, never an exception of another type (the scorer stops a run whose verifier raises)."""
    try:
        return _parse_answer(text, max_chars)
    except AnswerError:
        raise
    except Exception as e:  # noqa: BLE001 - TokenError, RecursionError, OverflowError, ... from SymPy on junk
        raise AnswerError(f"cannot parse the answer: {type(e).__name__}") from None


def _parse_answer(text: str, max_chars: int):
    s = _strip(text)
    if not s:
        raise AnswerError("empty answer")
    if len(s) > max_chars:
        raise AnswerError(f"answer longer than {max_chars} characters")
    if re.fullmatch(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?", s):
        s = s.replace(",", "")
    if re.search(r"[,;]|\bor\b|\band\b|\\pm|±|\d\s+\.?\d", s):
        raise AnswerError("several answers")
    s = _latex(s)
    if len(s) > 2 * max_chars:
        raise AnswerError("answer too long")
    _check_complete(s)
    _check_tokens(s)
    import sympy
    from sympy.parsing.sympy_parser import convert_xor, implicit_multiplication, parse_expr, standard_transformations

    glob = {"__builtins__": {}, "Integer": sympy.Integer, "Float": sympy.Float, "Rational": sympy.Rational,
            "Symbol": sympy.Symbol}
    try:
        expr = parse_expr(s, local_dict={"sqrt": sympy.sqrt, "pi": sympy.pi}, global_dict=glob,
                          transformations=standard_transformations + (implicit_multiplication, convert_xor))
    except Exception as e:  # noqa: BLE001 - SyntaxError, TokenError, TypeError, ...: all mean "not an answer"
        raise AnswerError(f"cannot parse {s!r}: {type(e).__name__}") from None
    if not isinstance(expr, sympy.Expr) or expr.free_symbols:
        raise AnswerError(f"not a number: {s!r}")
    return expr


class GeoSymVerifier(BaseVerifier):
    name = "geosym"

    def __init__(self, p: GeoSymVerifierParams | None = None):
        self.p = p or GeoSymVerifierParams()

    def validation_cases(self):
        ex = Example("geosym-1", "<image>Find AB.", "sqrt(12)")
        return [(ex, "2*sqrt(3)", 1.0), (ex, "\\boxed{2\\sqrt{3}}", 1.0), (ex, "3.4641016", 1.0),
                (ex, "3.46", 0.0), (ex, "\\boxed{3}", 0.0), (ex, "no idea", 0.0)]

    def score(self, example: Example, text: str) -> Score:
        try:
            gold = parse_answer(example.answer, max_chars=10_000)
        except AnswerError as e:
            return Score(0.0, {"correct": 0.0}, {"error": f"gold answer {example.answer!r}: {e}"})
        try:
            span = extract_final(text)
            pred = parse_answer(span, self.p.max_chars)
        except AnswerError as e:
            return Score(0.0, {"correct": 0.0}, {"reason": str(e)})
        except Exception as e:  # noqa: BLE001 - model output never raises out of the verifier
            return Score(0.0, {"correct": 0.0}, {"reason": f"unreadable answer: {type(e).__name__}"})
        info = {"extracted": span, "parsed": str(pred)}
        try:
            return self._compare(pred, gold, info)
        except Exception as e:  # noqa: BLE001 - an expression SymPy cannot evaluate is a wrong answer, not a crash
            return Score(0.0, {"correct": 0.0}, {**info, "reason": f"cannot evaluate: {type(e).__name__}"})

    def _compare(self, pred, gold, info: dict) -> Score:
        import sympy

        p, g = complex(sympy.N(pred, 30)), complex(sympy.N(gold, 30))
        if p != p or abs(p) == float("inf") or abs(p.imag) > 1e-12 * max(1.0, abs(p)):
            return Score(0.0, {"correct": 0.0}, {**info, "reason": "not a finite real number"})
        close = abs(p - g) <= self.p.rel_tol * abs(g)
        decimals = pred.has(sympy.Float) or gold.has(sympy.Float)
        if not close:
            return Score(0.0, {"correct": 0.0}, {**info, "reason": "wrong value"})
        if decimals or self.p.fallback == "always":
            return Score(1.0, {"correct": 1.0}, {**info, "match": "numeric"})
        diff = sympy.simplify(pred - gold)
        if diff == 0 or abs(complex(sympy.N(pred - gold, 60))) < 1e-40:
            return Score(1.0, {"correct": 1.0}, {**info, "match": "exact"})
        return Score(0.0, {"correct": 0.0}, {**info, "reason": f"close but not equal (difference {diff})"})


@VERIFIERS.register("geosym", GeoSymVerifierParams)
def _geosym(p: GeoSymVerifierParams) -> GeoSymVerifier:
    """GeoSym exact-match: SymPy-equal to the symbolic answer, decimals within a relative 1e-6."""
    return GeoSymVerifier(p)
