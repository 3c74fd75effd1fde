"""The exact, pure-Python fast path of the math verifier."""

import os
import subprocess
import sys
from fractions import Fraction as F

import pytest

from rlvr.verifiers.math.fastpath import fast_equal, parse_exact
from rlvr.verifiers.math.normalize import normalize


@pytest.mark.parametrize("text, value", [
    ("42", F(42)), ("-7", F(-7)), ("+7", F(7)), ("0.25", F(1, 4)), (".5", F(1, 2)), ("3.", F(3)),
    ("1,234,567", F(1234567)), ("1,234.5", F(2469, 2)), ("1/3", F(1, 3)), ("12/36", F(1, 3)),
    ("\\frac{3}{4}", F(3, 4)), ("\\frac12", F(1, 2)), ("\\frac{-1}{2}", F(-1, 2)), ("-\\frac{1}{2}", F(-1, 2)),
    ("2\\frac{1}{2}", F(5, 2)), ("-2\\frac{1}{2}", F(-5, 2)), ("2 1/2", F(5, 2)), ("1.5e3", F(1500)),
    ("2.5E-2", F(1, 40)), ("2^{10}", F(1024)), ("2^10", F(1024)), ("10^{-7}", F(1, 10**7)),
    ("1.5\\times10^{3}", F(1500)), ("3\\cdot 4", F(12)), ("6 \\div 4", F(3, 2)), ("(1+2)*3", F(9)),
    ("5!", F(120)), ("\\frac{1}{2^{99}}", F(1, 2**99)), ("1011_2", F(11)), ("1011_{2}", F(11)), ("FF_{16}", F(255)),
    ("{7}", F(7)), ("--3", F(3)), ("0.\\overline{3}", F(1, 3)), ("1.2\\overline{45}", F(137, 110)),
])
def test_parse_exact(text, value):
    assert parse_exact(text) == value


@pytest.mark.parametrize("text", [
    "", "x", "2x", "\\sqrt{2}", "\\pi", "1/0", "\\frac{1}{0}", "2^{1/2}", "10^{100000}", "9^{9^{9}}",
    "3000!", "(-1)!", "1.5!", "2\\frac{3}{2}", "(((1)", "1 2", "1,23", "12_1", "9" * 500, "\u00bd",
])
def test_parse_exact_declines(text):
    assert parse_exact(text) is None


@pytest.mark.parametrize("gold, pred, want", [
    ("72", "72.0", True), ("72", "73", False), ("0.5", "\\frac{1}{2}", True), ("\\frac{1}{3}", "0.333", False),
    ("\\frac{1}{3}", "0.3333333", False), ("1/2", "2/4", True), ("1000", "1,000", True), ("1200", "1.200", False),
    ("-3", "-3.00", True), ("2^{100}", "1267650600228229401496703205376", True),
    ("10^{30}", "1000000000000000000000000000001", False), ("\\frac{1}{2004!}", "\\frac{1}{2006!}", None),
    ("\\frac{1}{2^{99}}", "\\frac{1}{2^{98}}", False), ("0", "0.0000001", False), ("0", "-0", True),
    ("(1,2)", "(1, 2)", True), ("(1,2)", "(2,1)", False), ("(1,2)", "[1,2]", None), ("(1,2)", "1, 2", False),
    ("\\{1,2,3\\}", "\\{3,2,1\\}", True), ("1, 2, 3", "3, 2, 1", True), ("1, 2, 3", "1, 2", False),
    ("\\{3\\}", "3", True), ("-2, 2", "x=2, x=-2", True), ("x=5", "5", True), ("5", "x = 5", True),
    ("11", "1011_2", True), ("1011", "1011_2", False), ("1011_2", "1011", True), ("1011_2", "11", False),
    ("1011_2", "11_{10}", True), ("1500", "1.5e3", True), ("(0,100)", "(0, 100)", True),
    ("(1,234)", "1234", False), ("1.5", "1.5e3", False), ("\\sqrt{2}", "1.414", None),
])
def test_fast_equal(gold, pred, want):
    g, gp = normalize(gold)
    p, pp = normalize(pred)
    assert fast_equal(g, gp, p, pp) is want


@pytest.mark.parametrize("gold, pred, want", [
    ("50", "50\\%", True),      # a percent sign on one side: the number itself ...
    ("0.5", "50\\%", True),     # ... or the number over 100
    ("50\\%", "0.5", True),
    ("50\\%", "50", True),
    ("50\\%", "50\\%", True),
    ("50\\%", "5000\\%", False),  # both sides percent: compared as written
    ("50", "0.5", False),         # no percent sign anywhere: no scaling
    ("0.5", "0.5\\%", True),      # the sign alone is treated as decoration (documented trade-off)
    ("0.5", "5\\%", False),
    ("(50, 60)", "(50\\%, 60)", None),  # percent inside containers is left to the symbolic path
])
def test_percent_rule(gold, pred, want):
    g, gp = normalize(gold)
    p, pp = normalize(pred)
    assert fast_equal(g, gp, p, pp) is want


def test_parent_side_modules_do_not_import_sympy(tmp_path):
    """Extraction, normalisation and the fast path run without sympy (loaded as the workers load them)."""
    here = os.path.join(os.path.dirname(__file__), "..", "..", "rlvr", "verifiers", "math")
    code = f"""
import importlib, sys, types
pkg = types.ModuleType("_m"); pkg.__path__ = [{os.path.abspath(here)!r}]; sys.modules["_m"] = pkg
ex = importlib.import_module("_m.extract"); fp = importlib.import_module("_m.fastpath")
nm = importlib.import_module("_m.normalize")
g, gp = nm.normalize(ex.extract_answer("x\\n#### 1,234", is_gold=True).span)
p, pp = nm.normalize(ex.extract_answer("so \\\\boxed{{1234}}").span)
assert fp.fast_equal(g, gp, p, pp) is True
print(sorted(m for m in sys.modules if m.split(".")[0] in ("sympy", "mpmath", "torch", "rlvr")))
"""
    out = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
