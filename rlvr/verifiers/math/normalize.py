"""String normalisation of an extracted math answer, and top-level splitting into items.

Pure standard library (the worker processes load this file without importing ``rlvr``, which pulls in
torch). :func:`normalize` rewrites notation that changes nothing mathematically into one spelling, so that
the fast path, the symbolic path and a plain string comparison all see the same text:

- unicode look-alikes are folded first (:func:`.chars.fold`: minus signs and dashes, digits of other
  scripts, superscripts, vulgar fractions, invisible characters, Unicode spaces), then math symbols
  (``×`` ``·`` ``π`` ``√`` ``∞`` ``≤`` ``≥``, Greek letters) become their LaTeX forms;
- math delimiters (``$``, ``\\(``, ``\\[``), ``\\displaystyle``, ``\\left``/``\\right``/``\\big``, and a
  ``\\boxed{}`` wrapping the whole answer are dropped;
- ``\\dfrac``/``\\tfrac``/``\\cfrac`` become ``\\frac``; ``\\varnothing`` becomes ``\\emptyset``;
  ``\\leq``/``\\geq``/``\\neq`` become ``\\le``/``\\ge``/``\\ne``; ``bmatrix`` becomes ``pmatrix``;
- a thin space between digits is a thousands separator (``1\\,000`` is 1000, where math-verify reads
  ``1*0``) and ``{,}`` is a comma; other LaTeX spacing becomes a space;
- unit text (``\\text{ cm}``, ``\\mbox{dollars}``, optionally squared), degrees (``^\\circ``) and the
  currency sign ``\\$`` are removed (never joining the digits on its two sides: ``4$58`` is not 458);
  other ``\\text{}``-like wrappers are unwrapped (so ``\\mathrm{e}`` is ``e``, which math-verify truncates);
- a trailing ``%``/``\\%``/"percent" is removed and reported, because percent handling depends on the
  other side;
- trailing sentence punctuation and markdown bold are removed;
- a number word from zero to twenty that is the whole answer (``three``, ``\\text{Three}``) is that number;
  larger numbers must be written in digits (compound number words are not read: "eighty-five" scores 0);
- a leading ``~`` before a number is "approximately" (``\\approx``, which the hedging rules reject), not
  LaTeX's tie.

:func:`split_items` splits at top-level commas, semicolons and the words "or"/"and", never inside
brackets, and keeps a bare ``1,234,567`` (groups of exactly three digits, no spaces) as one number.
"""

from __future__ import annotations

import re
from fractions import Fraction

from .chars import fold

__all__ = ["normalize", "split_items", "is_plain_number", "strip_var_prefix", "nesting_depth", "unwrap_command",
           "find_group", "strip_unit_words", "MATH_WORDS"]

_UNICODE = {
    "\u00d7": "\\times ", "\u00b7": "\\cdot ",
    "\u22c5": "\\cdot ", "\u00f7": "\\div ", "\u03c0": "\\pi ", "\u221a": "\\sqrt", "\u221e": "\\infty ",
    "\u2264": "\\le ", "\u2265": "\\ge ", "\u2260": "\\ne ", "\u00b1": "\\pm ", "\u2205": "\\emptyset ",
    "\u222a": "\\cup ", "\u2229": "\\cap ", "\u00b0": "^\\circ", "\u2009": " ", "\u202f": " ", "\u00a0": " ",
    "\uff0c": ",", "\u2248": "\\approx ", "\u2208": "\\in ", "\u2032": "'",
}
_GREEK = dict(zip("αβγδεζηθικλμνξρσςτυφχψωΓΔΘΛΞΣΦΨΩ", (
    "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi rho sigma sigma tau upsilon phi chi "
    "psi omega Gamma Delta Theta Lambda Xi Sigma Phi Psi Omega").split()))
_UNICODE.update({c: f"\\{name} " for c, name in _GREEK.items()})
_UNICODE_RE = re.compile("|".join(map(re.escape, _UNICODE)))
# Renames that are pure spelling: longest first so "\\leqslant" is not read as "\\le" + "qslant".
_RENAME = [("\\dfrac", "\\frac"), ("\\tfrac", "\\frac"), ("\\cfrac", "\\frac"), ("\\dbinom", "\\binom"),
           ("\\tbinom", "\\binom"), ("\\varnothing", "\\emptyset"), ("\\leqslant", "\\le"),
           ("\\geqslant", "\\ge"), ("\\leq", "\\le"), ("\\geq", "\\ge"), ("\\neq", "\\ne"), ("\\lt", "<"),
           ("\\gt", ">"), ("bmatrix", "pmatrix"), ("\\fbox", "\\boxed"), ("\\land", " and "),
           ("\\lor", " or "), ("\\wedge", " and "), ("\\vee", " or ")]
_DROP = re.compile(r"\\(?:displaystyle|textstyle|left|right|[bB]igg?[lr]?|limits|nolimits)(?![a-zA-Z])\.?")
_THIN_DIGITS = re.compile(r"(?<=\d)(?:(?<!\\)\\[,;:! ]|~)(?=\d{3}(?!\d))")
_SPACES = re.compile(r"(?<!\\)\\[,;:! ]|\\q?quad(?![a-zA-Z])|~")  # not the second half of a "\\" row break
_WRAPPERS = ("text", "textbf", "textit", "textrm", "texttt", "mathrm", "mathbf", "mathit", "mbox", "operatorname",
             "textnormal", "boldsymbol", "mathsf")
_DEGREES = re.compile(r"\^\s*\{?\s*\\circ\s*\}?|\\circ|\\degree(?![a-zA-Z])|\^\s*\{\s*\}")
# A unit: words (``\\text{ cm}``, ``\\text{ m/s}``) or one unit letter (``\\text{m}``, never ``e`` or ``i``),
# optionally with a power; text that hedges (``\\text{ or more}``) is not a unit.
_UNIT_TEXT = re.compile(r"\\(?:text|mbox|mathrm|textrm)\s*\{\s*(?!(?:or|and|to|not|at|up|more|less|fewer|about"
                        r"|approx\w*|around|roughly|nearly|almost|maybe|possibly|probably|perhaps|either"
                        r"|between|from|over|under|if|is|when|unless|for|provided|assuming|otherwise|except"
                        r"|ish|max\w*|min\w*|plus|only)\b)(?:[a-zA-Z][a-zA-Z ./]*[a-zA-Z.]|[mgsLlKAVWJNh])\s*\}"
                        r"\s*(?:\^\s*\{?\s*-?[1-9]\s*\}?)?\s*$")
_UNIT_HEDGE = re.compile(r"\b(?:or|and|to|not|more|less|fewer|approx\w*|about|maybe|possibly|probably|if|is"
                         r"|when|unless|for|provided|assuming|otherwise|except|max\w*|min\w*|plus)\b",
                         re.IGNORECASE)
_PERCENT_WORD = re.compile(r"\s*(?:\\(?:text|mbox)\s*\{\s*)?per\s?cent\s*\}?\s*$", re.IGNORECASE)
_TRIG = re.compile(r"\\(?:sin|cos|tan|cot|sec|csc)(?![a-zA-Z])")
_PLAIN_MIXED = re.compile(r"([-+]?\d+)\s+(\d+)\s*/\s*(\d+)")
_PERCENT = re.compile(r"\s*\\?%\s*$")
_DOLLAR = re.compile(r"\\\$|\$")
_BOLD = re.compile(r"\*\*|__")
_WS = re.compile(r"\s+")
_PLAIN_NUMBER = re.compile(r"-?(?:[1-9]\d{0,2}(?:,\d{3})+|\d+)(?:\.\d+)?", re.ASCII)
_NUMBER_WORDS = {w: str(i) for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty".split())}
# "~5" in prose is "about 5" (LaTeX's tie "5~cm" has a value before it).
_TILDE_APPROX = re.compile(r"(?:^|(?<=[\s(=:$]))~+(?=\s*[-+.\d\\$])")
MAX_WRAPPERS = 8  # \boxed{\boxed{...}} and $...$ layers unwrapped at most; deeper wrapping stays (unparsable)
_LEFT_GROUPS = re.compile(r"(?:^|[^\d.,])[1-9]\d{0,2}(?:,\d{3})*$")
_RIGHT_GROUP = re.compile(r"\d{3}(?![\d])")
_SEP_WORDS = re.compile(r"\s+(?:or|and)\s+|;", re.IGNORECASE)


def is_plain_number(s: str) -> bool:
    """``42``, ``-3.5``, ``1,234``: a number that needs no parsing beyond removing thousands commas."""
    return bool(_PLAIN_NUMBER.fullmatch(s))


def find_group(s: str, i: int) -> int:
    """Index just past the ``{...}`` group opening at ``s[i]`` (escaped braces ignored), or -1 if unbalanced."""
    depth = 0
    j = i
    while j < len(s):
        c = s[j]
        if c == "\\":
            j += 2
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return j + 1
        j += 1
    return -1


def unwrap_command(s: str, names: tuple[str, ...], keep_space: bool = True) -> str:
    """Replace ``\\name{content}`` by its content for each command name (one pass, inner groups kept)."""
    pat = re.compile(r"\\(?:" + "|".join(names) + r")\s*(?=\{)")
    out, pos = [], 0
    for m in pat.finditer(s):
        if m.start() < pos:
            continue
        end = find_group(s, m.end())
        if end < 0:
            continue
        inner = s[m.end() + 1:end - 1]
        out.append(s[pos:m.start()])
        out.append(f" {inner} " if keep_space and re.search(r"[a-zA-Z]{2}", inner) else inner)
        pos = end
    out.append(s[pos:])
    return "".join(out)


def _strip_delimiters(s: str) -> str:
    """Drop math delimiters and one ``\\boxed{}`` that wraps everything (repeatedly, at most MAX_WRAPPERS
    layers, so that nested wrappers cost linear time)."""
    for _ in range(MAX_WRAPPERS):
        t = s.strip()
        for a, b in (("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]")):
            if len(t) >= len(a) + len(b) and t.startswith(a) and t.endswith(b):
                t = t[len(a):len(t) - len(b)].strip()
                break
        if t.startswith("\\boxed") and (k := t.find("{")) >= 0 and not t[6:k].strip():
            if find_group(t, k) == len(t):
                t = t[k + 1:-1].strip()
        if t == s:
            return t
        s = t
    return s.strip()


def normalize(s: str) -> tuple[str, bool]:
    """The answer's canonical spelling and whether it ended in a percent sign."""
    if _PLAIN_NUMBER.fullmatch(s):  # most GSM8K answers: nothing to rewrite
        return s, False
    s = _UNICODE_RE.sub(lambda m: _UNICODE[m.group()], fold(s))
    if "~" in s:
        s = _TILDE_APPROX.sub(lambda m: "\\approx ", s)
    s = _strip_delimiters(_BOLD.sub("", s))
    for a, b in _RENAME:
        s = s.replace(a, b)
    s = _DROP.sub("", s)
    s = _THIN_DIGITS.sub("", s).replace("{,}", ",")
    s = _SPACES.sub(" ", s)
    # Inside a trig function a degree is pi/180 (sin 30^\circ = 1/2); an answer's own degree sign is dropped,
    # as math-verify does (30^\circ equals 30 and not pi/6).
    s = _DEGREES.sub(lambda m: "\\frac{\\pi}{180}" if _TRIG.search(s) else "", s)
    s = _PERCENT_WORD.sub("%", s)  # "50 percent" is "50%", not a unit to drop
    # Units go before the wrappers are unwrapped: once unwrapped, "cm" would read as c*m.
    for _ in range(3):
        stripped = _UNIT_TEXT.sub(lambda m: m.group() if _UNIT_HEDGE.search(m.group()) else "", s)
        if stripped == s or not stripped.strip():
            break
        s = stripped
    s = unwrap_command(s, _WRAPPERS)
    s = _strip_delimiters(s)
    percent = bool(_PERCENT.search(s))
    if percent:
        s = _PERCENT.sub("", s)
    s = _DOLLAR.sub(lambda m: " " if _between_digits(s, m) else "", s)  # "4$58" is not 458
    s = _WS.sub(" ", s).strip()
    s = re.sub(r"(?:\s*[.。]|\\\.)+$", "", s).strip()  # trailing full stops (decimals keep their digits)
    m = _PLAIN_MIXED.fullmatch(s)
    if m and int(m.group(2)) < int(m.group(3)):  # plain-text mixed number "2 1/2"
        s = f"{m.group(1)}\\frac{{{m.group(2)}}}{{{m.group(3)}}}"
    s = _strip_delimiters(s)
    return _NUMBER_WORDS.get(s.lower(), s), percent


def _between_digits(s: str, m: re.Match) -> bool:
    return 0 < m.start() and m.end() < len(s) and s[m.start() - 1].isdigit() and s[m.end()].isdigit()


def _thousands_comma(s: str, i: int) -> bool:
    """Whether the comma at ``s[i]`` separates thousands (``1,234``: 1-3 digits, then exactly 3, no spaces)."""
    return bool(_LEFT_GROUPS.search(s, 0, i) and _RIGHT_GROUP.match(s, i + 1))


def _split_top(s: str, seps: str, thousands: bool = True) -> list[str]:
    """Split at characters in ``seps`` that sit outside every bracket pair (a thousands comma never splits)."""
    parts, depth, start, i = [], 0, 0, 0
    while i < len(s):
        c = s[i]
        if c == "\\" and i + 1 < len(s) and s[i + 1] in "{}":
            depth += 1 if s[i + 1] == "{" else -1
            i += 2
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c in seps and depth == 0 and not (c == "," and thousands and _thousands_comma(s, i)):
            parts.append(s[start:i])
            start = i + 1
        i += 1
    parts.append(s[start:])
    return parts


def split_items(s: str, thousands: bool = True) -> list[str]:
    """Top-level items: split at ``,`` ``;`` and the words or/and, outside brackets. With ``thousands``
    (for a bare answer, not the inside of brackets) ``1,234`` stays one number."""
    marked = _SEP_WORDS.sub("\x00", s)
    items = [p.strip() for piece in _split_top(marked, "\x00") for p in _split_top(piece, ",", thousands)]
    return [it for it in items if it]


_VAR_PREFIX = re.compile(r"^\s*([a-zA-Z](?:_\{?[a-zA-Z0-9]+\}?)?|\\[a-zA-Z]+)\s*=\s*(?=\S)")


def strip_var_prefix(s: str) -> str:
    """``x = 3`` -> ``3`` (one variable, one ``=``); anything else unchanged."""
    m = _VAR_PREFIX.match(s)
    if m and "=" not in s[m.end():] and "<" not in s and ">" not in s and "\\le" not in s and "\\ge" not in s:
        return s[m.end():].strip()
    return s


def nesting_depth(s: str) -> int:
    """The deepest bracket nesting, counting ``( [ {`` alike (a cheap complexity guard)."""
    depth = best = 0
    for c in s:
        if c in "([{":
            depth += 1
            best = max(best, depth)
        elif c in ")]}":
            depth -= 1
    return best


_BOUND_WORDS = {"max", "maximum", "min", "minimum", "ish", "plus", "more", "less", "fewer", "approx", "about",
                "roughly", "not", "if", "when", "unless", "only", "least", "most", "tops"}
MATH_WORDS = {"sin", "cos", "tan", "cot", "sec", "csc", "log", "ln", "exp", "sqrt", "pi", "infty", "or", "and"}
# Unit abbreviations that may be written right after the number ("5cm", "60km/h"); any other unit is a word of
# three or more letters after a space ("18 dollars", "12 square feet"). Two letters after a number ("5xy") are
# a product of variables, never a unit.
_SHORT_UNITS = ("cm mm km kg mg lb lbs oz ft yd mi mph kph ml mL cc hr hrs ms mol kJ kW kWh Pa kPa Hz kHz MHz GHz mA "
                "GB MB KB kB TB m s g h L").split()
_UNIT_TOKEN = r"(?:[a-zA-Z]{3,}|" + "|".join(sorted(_SHORT_UNITS, key=len, reverse=True)) + r")"
_UNIT_WORDS = re.compile(rf"^(?P<num>.*?[\d}}])(?P<sep>\s*)(?P<unit>{_UNIT_TOKEN}(?:\s*/\s*{_UNIT_TOKEN})?\.?"
                         rf"(?:\s+{_UNIT_TOKEN}(?:\s*/\s*{_UNIT_TOKEN})?\.?)*(?:\s*\^\s*\{{?[23]\}}?)?)$")


# Words that scale the number before them: "1/2 thousand" is 500, never 1/2 (a unit word would be dropped).
SCALE_WORDS = {"hundred": 100, "thousand": 10**3, "million": 10**6, "billion": 10**9, "trillion": 10**12,
               "dozen": 12}
# "5k", "2M", "3bn": a scale, not a unit (and not m, metres; or mm), read as no number rather than as 5
_ABBREV = r"(?:k|K|M|B|bn|Bn|BN|mn|MN|mil|mio|MM|thou)\.?"
SCALE_ABBREV = re.compile(_ABBREV)
# A scale after a number: group "word" for a scale word (the number is scaled), else an abbreviation (no number)
SCALE_AFTER = re.compile(rf"\s*(?:(?P<word>(?:{'|'.join(SCALE_WORDS)})s?\b)|{_ABBREV}(?![A-Za-z]))")


def strip_unit_words(s: str) -> str:
    """``18 dollars`` -> ``18``, ``60km/h`` -> ``60``; unchanged when what follows the number is not a unit
    (a bound or math word, two letters written onto the number: ``5xy``). A scale word multiplies instead
    (``1/2 thousand`` -> ``500``, ``2 million dollars`` -> ``2000000``); a scale abbreviation (``5k``, ``2M``,
    ``3 bn``) leaves the text unchanged, so it reads as no number rather than as 5."""
    m = _UNIT_WORDS.match(s)
    if not m:
        return s
    words = re.findall(r"[a-z]+", m.group("unit").lower())
    if set(words) & (MATH_WORDS | _BOUND_WORDS):
        return s
    first = words[0] if words else ""
    scale = SCALE_WORDS.get(first[:-1] if first.endswith("s") and first[:-1] in SCALE_WORDS else first)
    if scale is not None:
        try:  # a plain number ("1/2", "0.5", "1,234", "3.5e2"); anything else is left as it was
            value = Fraction(m.group("num").strip().replace(",", "")) * scale
        except (ValueError, ZeroDivisionError):
            return s
        return str(value.numerator) if value.denominator == 1 else f"{value.numerator}/{value.denominator}"
    if SCALE_ABBREV.fullmatch(m.group("unit").split()[0]):
        return s
    first = re.match(r"[a-zA-Z]+", m.group("unit")).group()
    if not m.group("sep") and (len(first) < 2 or first not in _SHORT_UNITS):
        return s  # "5abc", "5m": a product of variables, not a number and a unit
    return m.group("num").strip()
