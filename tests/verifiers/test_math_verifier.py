"""The math verifier end to end: symbolic cases through the worker pool, the regression corpus,
garbage input, ``validate()`` and registration."""

import json
import os
import threading
import time

import pytest

import rlvr.verifiers.math  # noqa: F401  (registers "math" until rlvr.verifiers imports it)
from rlvr.core.types import Example
from rlvr.verifiers import build_verifier
from rlvr.verifiers.math import MathParams, MathVerifier

CORPUS = os.path.join(os.path.dirname(__file__), "data", "math_pairs.jsonl")


@pytest.fixture(scope="module")
def verifier():
    v = MathVerifier(timeout_s=5.0, workers=2)
    yield v
    v.close()


def _corpus():
    with open(CORPUS) as f:
        return [json.loads(line) for line in f]


@pytest.mark.parametrize("gold, answer, want", [
    ("\\frac{\\sqrt{2}}{2}", "\\frac{1}{\\sqrt{2}}", 1), ("\\frac{\\sqrt{2}}{2}", "\\frac{1}{\\sqrt{3}}", 0),
    ("x^2+2x+1", "(x+1)^2", 1), ("x^2+2x+1", "(x+1)^3", 0), ("\\frac{x^2-1}{x-1}", "x+1", 1),
    ("|x|", "x", 0), ("|x|", "\\sqrt{x^2}", 1), ("e^{\\ln x}", "x", 1), ("\\sqrt[3]{x^3}", "x", 0),
    ("2\\sqrt{5}", "\\sqrt{20}", 1), ("\\sqrt[3]{8}", "2", 1), ("\\pi", "\\frac{22}{7}", 0),
    ("i", "\\sqrt{-1}", 1), ("3+4i", "4i+3", 1), ("e^{i\\pi}", "-1", 1), ("\\log_2 8", "3", 1),
    ("\\sin 30^\\circ", "\\frac12", 1), ("\\frac{\\pi}{6}", "30^\\circ", 0),
    ("[0,\\infty)", "x \\ge 0", 1), ("(-3,3)", "|x| < 3", 1), ("(-3,3)", "-3 < x < 3", 1), ("(-3,3)", "[-3,3]", 0),
    ("[2,5)", "2 \\le x < 5", 1), ("(-\\infty,1)\\cup(2,\\infty)", "x<1 \\text{ or } x>2", 1),
    ("(-\\infty,1)\\cup(2,\\infty)", "x<1", 0), ("\\mathbb{R}", "(-\\infty, \\infty)", 1),
    ("\\{1,2,3,4\\}", "\\{1,3\\}\\cup\\{2,4\\}", 1), ("\\pm 2", "\\{-2, 2\\}", 1), ("\\{-2,2\\}", "\\{2\\}", 0),
    ("(\\sqrt2, \\pi)", "(\\sqrt{2}, \\pi)", 1), ("(\\sqrt2, \\pi)", "(\\pi, \\sqrt2)", 0),
    ("y = 2x+1", "2x - y + 1 = 0", 1), ("3x+4y+14=0", "3*x-1*y+13=0", 0), ("x = \\sqrt2", "\\sqrt{2}", 1),
    ("\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}", "\\begin{bmatrix}1&2\\\\3&4\\end{bmatrix}", 1),
    ("\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}", "\\begin{pmatrix}1&2\\\\4&3\\end{pmatrix}", 0),
    ("1-\\frac{1}{\\mathrm{e}}", "1", 0), ("1-\\frac{1}{\\mathrm{e}}", "\\frac{e-1}{e}", 1), ("4", "4\\sqrt(2)", 0),
    ("\\frac{1}{2004!}", "\\frac{1}{2006!}", 0), ("\\frac{1}{2004!}", "\\frac{2005 \\cdot 2006}{2006!}", 1),
    ("\\max(1, 2)", "2", 1), ("\\binom{x}{2}", "\\frac{x(x-1)}{2}", 1), ("\\lfloor 2.5 \\rfloor", "2", 1),
    ("10^{-7}", "0", 0), ("50\\%", "\\frac{\\sqrt{2}}{2}", 0), ("50\\%", "\\frac{1}{2}", 1),
])
def test_symbolic_cases(verifier, gold, answer, want):
    s = verifier.verify(gold, f"The result is $\\boxed{{{answer}}}$.")
    assert s.reward == want, s.info
    assert s.info["path"] in ("symbolic", "fast", "string")


def test_fast_pairs_never_start_workers():
    v = MathVerifier()
    scores = v.verify_many([("72", "#### 72"), ("0.5", "\\boxed{\\frac12}"), ("3", "The answer is 4."),
                            ("\\text{(C)}", "\\boxed{C}"), ("3", "\\boxed{3} or \\boxed{4}")])
    assert [s.reward for s in scores] == [1, 1, 0, 1, 0]
    assert v._pool is None


def test_corpus_label_accuracy_is_100_percent(verifier):
    rows = _corpus()
    assert len(rows) >= 150
    scores = verifier.verify_many([(r["gold"], r["completion"]) for r in rows])
    wrong = [(r, s.info) for r, s in zip(rows, scores) if s.reward != r["label"]]
    assert not wrong, wrong[:5]


def test_corpus_with_the_sympy_backend_alone():
    v = MathVerifier(backend="sympy", workers=2)
    try:
        rows = _corpus()
        scores = v.verify_many([(r["gold"], r["completion"]) for r in rows])
        assert [s.reward for s in scores] == [r["label"] for r in rows]
    finally:
        v.close()


@pytest.mark.slow
def test_math_verify_alone_on_the_corpus(capsys):
    """Prints how math-verify alone (its own extraction) does on our labels; it must miss some."""
    mv = pytest.importorskip("math_verify")
    rows = _corpus()
    def gold(g):  # as math-verify users pass it: the GSM8K number, LaTeX inside $...$
        g = g.rsplit("####", 1)[1].strip() if "####" in g else g
        return g if "$" in g or "\\boxed" in g else f"${g}$"

    right = sum(bool(mv.verify(mv.parse(gold(r["gold"])), mv.parse(r["completion"]))) == bool(r["label"])
                for r in rows)
    with capsys.disabled():
        print(f"\nmath-verify alone: {right}/{len(rows)} = {right / len(rows):.1%} of corpus labels")
    assert right < len(rows)


def test_batch_keeps_order_and_caches(verifier):
    pairs = [("\\sqrt{8}", f"\\boxed{{{a}}}") for a in ("2\\sqrt2", "3\\sqrt2", "2\\sqrt{2}", "\\sqrt{2}\\cdot 2")]
    assert [s.reward for s in verifier.verify_many(pairs)] == [1, 0, 1, 1]
    t = time.perf_counter()
    assert [s.reward for s in verifier.verify_many(pairs * 50)] == [1, 0, 1, 1] * 50
    assert time.perf_counter() - t < 0.5  # answered from the cache, not 200 more worker round trips


GARBAGE = [
    "", " ", "\x00\x01\x02", "\udcff\udcfe", bytes(range(256)).decode("latin-1"), "\\boxed{" * 5000,
    "}" * 5000 + "\\boxed{2}", "\\boxed{" + "{" * 3000 + "}" * 3000 + "}", "$" * 10000, "\\" * 10000,
    "\\boxed{\\frac{1}{0}}", "\\boxed{0/0}", "\\boxed{\\infty - \\infty}", "\\boxed{\\sqrt{}}", "\\boxed{^}",
    "\\boxed{\\begin{pmatrix}1&2\\\\3\\end{pmatrix}}", "\\boxed{" + "x" * 100_000 + "}", "9" * 1_000_000,
    "\\boxed{\U0001F600}", "<answer><answer></answer>", "#### ", "The answer is", "\\boxed{__import__('os')}",
    "\\boxed{\\undefinedmacro{3}}", "\\boxed{1e999999999}", "\\boxed{10^{10^{10}}}", "\\boxed{0.1^{-10^{9}}}",
]


def test_never_raises_on_garbage(verifier):
    pairs = [(g, c) for c in GARBAGE for g in ("1", "x+1")] + [(c, "\\boxed{1}") for c in GARBAGE]
    pairs += [(None, "1"), ("1", None), (b"1", b"1"), (1, 1)]
    t = time.perf_counter()
    scores = verifier.verify_many(pairs)
    assert len(scores) == len(pairs)
    assert all(s.reward in (0.0, 1.0) and isinstance(s.info.get("reason"), str) for s in scores)
    assert sum(s.reward for s in scores) == 0
    assert time.perf_counter() - t < 3 * verifier.timeout_s


def test_works_from_a_non_main_thread(verifier):
    out = []
    t = threading.Thread(target=lambda: out.extend(verifier.verify_many(
        [("\\frac{\\sqrt3}{3}", "\\boxed{\\frac{1}{\\sqrt3}}"), ("2", "\\boxed{2}")])))
    t.start()
    t.join(30)
    assert [s.reward for s in out] == [1, 1]


def test_validate_and_call_contract(verifier):
    verifier.validate()
    ex = Example("e1", "q", "\\frac{\\sqrt{2}}{2}")
    assert verifier(ex, "\\boxed{\\frac{\\sqrt2}{2}}").reward == 1.0
    assert verifier(ex, "\\boxed{\\sqrt2}").info["reason"] == "not equal"
    assert verifier(ex, "\\boxed{1} and \\boxed{2}").info["reason"].startswith("hedged")
    assert verifier(ex, "I do not know how to do this one.").info["reason"] == "no answer"
    assert verifier(ex, "\\boxed{" + "1" * 600 + "}").info["reason"] == "answer too long"
    assert verifier(ex, "\\boxed{" + "(" * 30 + "1" + ")" * 30 + "}").info["reason"] == "too complex"


def test_registration():
    v = build_verifier("math", {"timeout_s": 2.0, "workers": 1})
    try:
        assert isinstance(v, MathVerifier) and v.name == "math" and v.timeout_s == 2.0 and v.workers == 1
        assert v(Example("r", "q", "72"), "#### 72").reward == 1.0
    finally:
        v.close()
    from rlvr.config.run import load_config

    cfg = load_config(overrides=["task.name=jsonl", "task.train_path=x.jsonl", "task.verifier=math"])
    assert cfg.task.params.verifier == "math"
    with pytest.raises(Exception):
        MathParams.model_validate({"timeout_s": 0})
    with pytest.raises(Exception):
        MathParams.model_validate({"backend": "maple"})
