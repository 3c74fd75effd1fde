"""Sentence BLEU (sacrebleu) and ROUGE-L F (rouge_score), in pure Python, for free-form answers.

Both reproduce the reference packages as Table-R1's FeTaQA reward calls them (arXiv:2505.23621):
``sacrebleu.metrics.BLEU(effective_order=True).sentence_score(hyp, [ref]).score`` and
``rouge_score.rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True).score(...)["rougeL"].fmeasure``.

``sentence_bleu`` (Papineni et al. 2002; sacrebleu 2.x defaults, one reference)::

    tokens   = 13a tokenizer (mteval-v13a: punctuation split off, periods/commas kept inside numbers)
    p_n      = 100 * matched_n / total_n     matched n-grams clipped by the reference counts, n = 1..4
               "exp" smoothing (NIST / Chen & Cherry method 3): the k-th order with no match gets
               p_n = 100 / (2^k * total_n)
    N        = effective order: the largest n with total_n > 0 (hypotheses shorter than 4 tokens)
    BP       = 1 if |hyp| >= |ref| else exp(1 - |ref| / |hyp|)      (0 for an empty hypothesis)
    BLEU     = BP * exp(sum_{n<=N} log p_n / N)                      in [0, 100]; 0 if nothing matches

``rouge_l`` (Lin 2004)::

    tokens   = lowercase, runs of [^a-z0-9] become spaces, words longer than 3 letters Porter-stemmed
               (NLTK's PorterStemmer, NLTK_EXTENSIONS mode, as rouge_score uses)
    P = LCS / |pred|,  R = LCS / |ref|,  F = 2PR / (P + R)          (0 when either side has no tokens)

Deviations: BLEU is clipped at 100 (sacrebleu returns 100.00000000000004 for identical sentences, which
would make a perfect answer score a hair above 1); both tokenizers first read invisible characters as words
go (``rlvr/verifiers/math/chars.py``, ``visible``: a zero-width space, word joiner or BOM separates words as a
space does, other invisible format characters are removed), so "the<U+200B>cat" is two tokens and a
zero-width character inside a word does not make it a different word. Text without them tokenizes exactly as
the reference packages do.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from functools import lru_cache

from rlvr.algorithms.extra_producers import ExtraContext, produces
from rlvr.verifiers.math.chars import visible

__all__ = ["tokenize_13a", "sentence_bleu", "rouge_tokenize", "rouge_l", "porter_stem"]

_13A = ((re.compile(r"([\{-\~\[-\` -\&\(-\+\:-\@\/])"), r" \1 "),
        (re.compile(r"([^0-9])([\.,])"), r"\1 \2 "),
        (re.compile(r"([\.,])([^0-9])"), r" \1 \2"),
        (re.compile(r"([0-9])(-)"), r"\1 \2 "))
MAX_ORDER = 4


def tokenize_13a(line: str) -> list[str]:
    """sacrebleu's default ``13a`` tokenizer (applied after stripping trailing whitespace)."""
    line = visible(line).rstrip().replace("<skipped>", "").replace("-\n", "").replace("\n", " ")
    for old, new in (("&quot;", '"'), ("&amp;", "&"), ("&lt;", "<"), ("&gt;", ">")):
        line = line.replace(old, new)
    line = f" {line} "
    for pat, repl in _13A:
        line = pat.sub(repl, line)
    return line.split()


def _ngrams(tokens: list[str]) -> Counter:
    return Counter(tuple(tokens[i:i + n]) for n in range(1, MAX_ORDER + 1) for i in range(len(tokens) - n + 1))


def sentence_bleu(hypothesis: str, reference: str) -> float:
    """sacrebleu sentence BLEU in [0, 100] with exp smoothing and effective order (one reference)."""
    hyp, ref = tokenize_13a(hypothesis), tokenize_13a(reference)
    hyp_ng, ref_ng = _ngrams(hyp), _ngrams(ref)
    correct, total = [0] * MAX_ORDER, [0] * MAX_ORDER
    for gram, count in hyp_ng.items():
        total[len(gram) - 1] += count
        correct[len(gram) - 1] += min(count, ref_ng.get(gram, 0))
    if not any(correct):
        return 0.0
    bp = 1.0 if len(hyp) >= len(ref) else math.exp(1 - len(ref) / len(hyp))
    logs, smooth = [], 1.0
    for n in range(MAX_ORDER):
        if total[n] == 0:
            break
        if correct[n] == 0:
            smooth *= 2
            logs.append(math.log(100.0 / (smooth * total[n])))
        else:
            logs.append(math.log(100.0 * correct[n] / total[n]))
    return min(100.0, bp * math.exp(sum(logs) / len(logs)))


_NON_ALNUM = re.compile(r"[^a-z0-9]+")
_VALID = re.compile(r"^[a-z0-9]+$")


def rouge_tokenize(text: str, stem: bool = True) -> list[str]:
    """rouge_score's default tokenizer."""
    tokens = re.split(r"\s+", _NON_ALNUM.sub(" ", visible(text).lower()))
    if stem:
        tokens = [porter_stem(t) if len(t) > 3 else t for t in tokens]
    return [t for t in tokens if _VALID.match(t)]


def _lcs(a: list[str], b: list[str]) -> int:
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0]
        for j, y in enumerate(b):
            cur.append(prev[j] + 1 if x == y else max(prev[j + 1], cur[j]))
        prev = cur
    return prev[-1]


def rouge_l(prediction: str, reference: str, stem: bool = True) -> float:
    """ROUGE-L F-measure of the longest common token subsequence."""
    pred, ref = rouge_tokenize(prediction, stem), rouge_tokenize(reference, stem)
    if not pred or not ref:
        return 0.0
    lcs = _lcs(ref, pred) if len(pred) >= len(ref) else _lcs(pred, ref)
    p, r = lcs / len(pred), lcs / len(ref)
    return 2 * p * r / (p + r) if p + r > 0 else 0.0


# Porter (1980) "An algorithm for suffix stripping", as NLTK's PorterStemmer (NLTK_EXTENSIONS) runs it.
_IRREGULAR = {"skies": "sky", "sky": "sky", "dying": "die", "lying": "lie", "tying": "tie", "news": "news",
              "innings": "inning", "inning": "inning", "outings": "outing", "outing": "outing",
              "cannings": "canning", "canning": "canning", "howe": "howe", "proceed": "proceed",
              "exceed": "exceed", "succeed": "succeed"}


def _cons(w: str, i: int) -> bool:
    if w[i] in "aeiou":
        return False
    return True if w[i] != "y" or i == 0 else not _cons(w, i - 1)


def _m(stem: str) -> int:
    return "".join("c" if _cons(stem, i) else "v" for i in range(len(stem))).count("vc")


def _vowel(stem: str) -> bool:
    return any(not _cons(stem, i) for i in range(len(stem)))


def _double(w: str) -> bool:
    return len(w) >= 2 and w[-1] == w[-2] and _cons(w, len(w) - 1)


def _cvc(w: str) -> bool:
    n = len(w)
    if n >= 3 and _cons(w, n - 3) and not _cons(w, n - 2) and _cons(w, n - 1) and w[-1] not in "wxy":
        return True
    return n == 2 and not _cons(w, 0) and _cons(w, 1)


def _rules(w: str, rules) -> str:
    """The first rule whose suffix matches decides: replaced if its condition holds, else ``w`` unchanged."""
    for suffix, repl, cond in rules:
        if suffix == "*d" and _double(w):
            return w[:-2] + repl if cond is None or cond(w[:-2]) else w
        if w.endswith(suffix):
            stem = w[:len(w) - len(suffix)]
            return stem + repl if cond is None or cond(stem) else w
    return w


def _pos(stem: str) -> bool:
    return _m(stem) > 0


def _gt1(stem: str) -> bool:
    return _m(stem) > 1


_STEP2 = [(s, r, _pos) for s, r in (
    ("ational", "ate"), ("tional", "tion"), ("enci", "ence"), ("anci", "ance"), ("izer", "ize"), ("bli", "ble"),
    ("alli", "al"), ("entli", "ent"), ("eli", "e"), ("ousli", "ous"), ("ization", "ize"), ("ation", "ate"),
    ("ator", "ate"), ("alism", "al"), ("iveness", "ive"), ("fulness", "ful"), ("ousness", "ous"), ("aliti", "al"),
    ("iviti", "ive"), ("biliti", "ble"), ("fulli", "ful"))]
_STEP3 = [(s, r, _pos) for s, r in (("icate", "ic"), ("ative", ""), ("alize", "al"), ("iciti", "ic"),
                                    ("ical", "ic"), ("ful", ""), ("ness", ""))]
_STEP4 = [(s, "", _gt1) for s in ("al", "ance", "ence", "er", "ic", "able", "ible", "ant", "ement", "ment", "ent")]
_STEP4 += [("ion", "", lambda st: _m(st) > 1 and st[-1] in "st")]
_STEP4 += [(s, "", _gt1) for s in ("ou", "ism", "ate", "iti", "ous", "ive", "ize")]


def _step1(w: str) -> str:
    if w.endswith("ies") and len(w) == 4:
        w = w[:-3] + "ie"
    else:
        w = _rules(w, [("sses", "ss", None), ("ies", "i", None), ("ss", "ss", None), ("s", "", None)])
    if w.endswith("ied"):
        w = w[:-3] + ("ie" if len(w) == 4 else "i")
    elif w.endswith("eed"):
        w = w[:-1] if _m(w[:-3]) > 0 else w
    else:
        stem = next((w[:-len(s)] for s in ("ed", "ing") if w.endswith(s) and _vowel(w[:-len(s)])), None)
        if stem is not None:
            w = _rules(stem, [("at", "ate", None), ("bl", "ble", None), ("iz", "ize", None),
                              ("*d", stem[-1], lambda st: stem[-1] not in "lsz"),
                              ("", "e", lambda st: _m(st) == 1 and _cvc(st))])
    return _rules(w, [("y", "i", lambda st: len(st) > 1 and _cons(st, len(st) - 1))])


def _step2(w: str) -> str:
    if w.endswith("alli") and _pos(w[:-4]):
        return _step2(w[:-4] + "al")
    return _rules(w, _STEP2 + [("logi", "log", lambda st: _pos(w[:-3]))])


@lru_cache(maxsize=1 << 16)
def porter_stem(word: str) -> str:
    """NLTK's ``PorterStemmer().stem(word)`` (lower-case input)."""
    word = word.lower()
    if word in _IRREGULAR:
        return _IRREGULAR[word]
    if len(word) <= 2:
        return word
    w = _rules(_step2(_step1(word)), _STEP3)
    w = _rules(w, _STEP4)
    if w.endswith("e"):  # step 5a tries both conditions (so it cannot use _rules)
        stem = w[:-1]
        if _m(stem) > 1 or (_m(stem) == 1 and not _cvc(stem)):
            w = stem
    return _rules(w, [("ll", "l", lambda st: _m(w[:-1]) > 1)])


@produces("reference_rouge_l")
def _reference_rouge_l(ctx: ExtraContext, keys: frozenset[str]) -> dict:
    """ROUGE-L F of each completion against its example's reference solution, -1 without one (LamPO's bonus;
    no model pass)."""
    import torch

    return {"reference_rouge_l": torch.tensor([-1.0 if ex.target is None else rouge_l(comp.text, ex.target)
                                               for comp, ex in zip(ctx.completions, ctx.examples)])}
