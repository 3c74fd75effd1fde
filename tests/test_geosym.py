"""GeoSym: answers checked against an independent computation, the construction's claims, the difficulty
strata, determinism, the renderer, the exact-match verifier (oracle and hostile output), the task and
``rlvr geosym generate``.

The independent checks never call the solver: they read the figure's float coordinates from the
example's meta and recompute the asked quantity with the shoelace formula, ``math.dist`` and ``atan2``,
and evaluate the answer string with :mod:`math` (``sqrt``, ``pi``) instead of SymPy. They also check every
claim the prompt makes (given lengths, stated angles, parallel sides) and every construction step
(midpoints, feet, crossings, antipodes, regular polygons, circles, dilations, translations) in floats.
A few problems are solved by hand below.
"""

import json
import math
import re
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from rlvr.core.types import Example
from rlvr.tasks.geosym.field import K
from rlvr.tasks.geosym.generate import generate_problem, problem_meta
from rlvr.tasks.geosym.grammar import BASE_WEIGHTS
from rlvr.tasks.geosym.render import BACKGROUND, project, render
from rlvr.tasks.geosym.task import GeoSymParams, geosym_task
from rlvr.verifiers.geosym import GeoSymVerifier

BASES, LEVELS = sorted(BASE_WEIGHTS), ("easy", "mid", "hard")
COUNT = {"easy": 3, "mid": 5, "hard": 7}


# independent float geometry --------------------------------------------------------------------------
def shoelace(pts):
    return abs(sum(x1 * y2 - x2 * y1 for (x1, y1), (x2, y2) in zip(pts, pts[1:] + pts[:1]))) / 2


def angle(a, b, c):
    d = abs(math.degrees(math.atan2(c[1] - b[1], c[0] - b[0]) - math.atan2(a[1] - b[1], a[0] - b[0]))) % 360
    return min(d, 360 - d)


def cross(o, a, b):
    return (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0])


def close(x, y, tol=1e-7):
    return abs(x - y) <= tol * max(1.0, abs(x), abs(y))


def within(p, a, b):
    return (abs(cross(a, b, p)) <= 1e-7 * max(1.0, math.dist(a, b) ** 2)
            and min(a[0], b[0]) - 1e-9 <= p[0] <= max(a[0], b[0]) + 1e-9
            and min(a[1], b[1]) - 1e-9 <= p[1] <= max(a[1], b[1]) + 1e-9)


def value(expr: str) -> float:
    """An answer string evaluated with math, not SymPy (it holds only numbers, + - * / **, sqrt and pi)."""
    assert re.fullmatch(r"[0-9+\-*/(). sqrtpi]+", expr), expr
    return eval(expr, {"__builtins__": {}}, {"sqrt": math.sqrt, "pi": math.pi})


def given_length(text: str) -> float:
    """A length as the prompt writes it: 4, 5/2, 2√3, √2."""
    return value(re.sub(r"(\d)√", r"\1*√", text).replace("√", "sqrt").replace("sqrt", "sqrt(")
                 .replace("sqrt(2", "sqrt(2)").replace("sqrt(3", "sqrt(3)").replace("sqrt(6", "sqrt(6)"))


def region_area(pts, r):
    if r is None:
        return 0.0
    if "polygon" in r:
        return shoelace([pts[n] for n in r["polygon"]])
    return math.pi * math.dist(pts[r["circle"]["center"]], pts[r["circle"]["on"]]) ** 2


def independent_answer(meta) -> float:
    pts = {n: tuple(p) for n, p in meta["points"].items()}
    kind, t = meta["question_kind"], meta["question_target"]
    if kind == "length":
        return math.dist(*(pts[n] for n in t["points"]))
    if kind == "area":
        return shoelace([pts[n] for n in t["polygon"]])
    if kind == "angle":
        return angle(*(pts[n] for n in t["angle"]))
    if kind == "circle":
        r = math.dist(pts[t["circle"]["center"]], pts[t["circle"]["on"]])
        return {"radius": r, "area": math.pi * r * r, "circumference": 2 * math.pi * r}[t["quantity"]]
    assert kind == "shaded"
    return region_area(pts, t["outer"]) - region_area(pts, t["inner"])


def regular(v):
    n = len(v)
    sides = [math.dist(v[i], v[(i + 1) % n]) for i in range(n)]
    return (all(close(s, sides[0]) for s in sides)
            and all(close(angle(v[i - 1], v[i], v[(i + 1) % n]), 180 - 360 / n, 1e-6) for i in range(n)))


def check_construction(meta, prompt):
    """Every claim of the prompt and every construction step holds in the figure's float coordinates."""
    pts = {n: tuple(p) for n, p in meta["points"].items()}
    named = set("".join(re.findall(r"[A-Z]+(?![a-z])", prompt)))
    assert set(pts) <= named, f"points never named in the prompt: {set(pts) - named}"
    for a, b, text in meta["given"]:
        assert close(math.dist(pts[a], pts[b]), given_length(text)), (a, b, text)
    for a, b, c, deg in re.findall(r"∠([A-Z])([A-Z])([A-Z]) = (\d+)°", prompt):
        assert close(angle(pts[a], pts[b], pts[c]), float(deg), 1e-6), (a, b, c, deg)
    for a, b, c, d in re.findall(r"([A-Z])([A-Z]) ∥ ([A-Z])([A-Z])", prompt):
        u, v = (pts[b][0] - pts[a][0], pts[b][1] - pts[a][1]), (pts[d][0] - pts[c][0], pts[d][1] - pts[c][1])
        assert abs(u[0] * v[1] - u[1] * v[0]) < 1e-7
    if "right angle at A" in prompt:
        assert close(angle(pts["B"], pts["A"], pts["C"]), 90, 1e-6)
    for s in meta["steps"]:
        op, P = s["op"], (lambda n: pts[n])
        if op == "midpoint":
            a, b = map(P, s["of"])
            assert close(P(s["point"])[0], (a[0] + b[0]) / 2) and close(P(s["point"])[1], (a[1] + b[1]) / 2), s
        elif op == "foot":
            f, p, (a, b) = P(s["point"]), P(s["from"]), map(P, s["to"])
            assert within(f, a, b) and abs((p[0] - f[0]) * (b[0] - a[0]) + (p[1] - f[1]) * (b[1] - a[1])) < 1e-7, s
        elif op == "intersection":
            assert all(within(P(s["point"]), *map(P, line)) for line in s["lines"]), s
        elif op == "antipode":
            o, p, q = P(s["center"]), P(s["of"]), P(s["point"])
            assert close(q[0], 2 * o[0] - p[0]) and close(q[1], 2 * o[1] - p[1]), s
        elif op == "perpendicular_diameter":
            o, p, (e, f) = P(s["center"]), P(s["to"]), map(P, s["points"])
            assert close(math.dist(o, e), math.dist(o, p)) and close(math.dist(o, f), math.dist(o, p))
            assert within(o, e, f) and abs((e[0] - f[0]) * (p[0] - o[0]) + (e[1] - f[1]) * (p[1] - o[1])) < 1e-7, s
        elif op in ("side_polygon", "inscribed_polygon", "circumscribed_square"):
            assert regular([P(n) for n in s["vertices"]]), s
        elif op == "circumcircle":
            d = [math.dist(P(s["center"]), P(n)) for n in s["polygon"]]
            assert all(close(x, d[0]) for x in d), s
        elif op == "incircle":
            o, v, r = P(s["center"]), [P(n) for n in s["polygon"]], math.dist(P(s["center"]), P(s["touch"]))
            assert all(close(abs(cross(v[i], v[(i + 1) % len(v)], o)) / math.dist(v[i], v[(i + 1) % len(v)]), r)
                       for i in range(len(v))), s
        elif op == "dilation":
            g, k = P(s["center"]), s["ratio"]
            for a, b in zip(s["from"], s["to"]):
                assert close(P(b)[0], g[0] + k * (P(a)[0] - g[0])) and close(P(b)[1], g[1] + k * (P(a)[1] - g[1])), s
        elif op == "translation":
            a, b = map(P, s["vector"])
            for x, y in zip(s["from"], s["to"]):
                assert close(P(y)[0] - P(x)[0], b[0] - a[0]) and close(P(y)[1] - P(x)[1], b[1] - a[1]), s


@pytest.fixture(scope="module")
def problems():
    return {(b, d, seed): generate_problem(seed, d, b) for b in BASES for d in LEVELS for seed in (0, 1)}


# answers and construction ---------------------------------------------------------------------------
def test_answers_match_an_independent_computation_for_every_base_type_and_difficulty(problems):
    kinds = set()
    for (b, d, seed), p in problems.items():
        meta = problem_meta(p)
        assert meta["base_type"] == b and meta["difficulty"] == d
        assert close(value(p.answer), independent_answer(meta), 1e-9), (b, d, seed, p.prompt, p.answer)
        check_construction(meta, p.prompt)
        kinds.add(meta["question_kind"])
    assert kinds >= {"length", "area", "angle"}


@pytest.mark.parametrize("seed, base, expected, phrase", [
    # apothem of a regular hexagon of side 4: 4·√3/2
    (23, "polygon", "2*sqrt(3)", "regular hexagon with side length 4. The circle with center O is inscribed"),
    # A(0,0) B(8,0) C(4,2) D(0,2): diagonals cross at O = (8/3, 4/3); E = (4/3, 2/3), F = (16/3, 2/3);
    # base EF = 4, height 4/3 - 2/3 = 2/3, area 4/3
    (27, "trapezoid", "4/3", "AB = 8, DC = 4 and AD = 2. O is the intersection of diagonals"),
    # E(-3,3), H(3,3/2): EH meets DA (x = 0) at J = (0, 9/4); right triangle DEJ has legs 3 and 3/4
    (19, "polygon", "9/8", "Find the area of triangle DEJ"),
    # a dilation keeps angles: ∠FGH = ∠BCD = ∠DAB = 45°
    (8, "parallelogram", "45", "∠DAB = 45°. O is the intersection of diagonals"),
])
def test_hand_solved_problems(seed, base, expected, phrase):
    p = generate_problem(seed, "easy", base)
    assert phrase in p.prompt, f"the pinned problem changed: {p.prompt}"
    assert p.answer == expected


def test_difficulty_strata_set_the_number_of_enhancements(problems):
    for (b, d, seed), p in problems.items():
        assert len(p.figure.enhancements) == COUNT[d], (b, d, seed)
    mean = {d: sum(len(p.figure.text) for (_, dd, _), p in problems.items() if dd == d) for d in LEVELS}
    assert mean["easy"] < mean["mid"] < mean["hard"]


def test_the_seed_fixes_the_problem():
    a, b, c = generate_problem(7, "mid"), generate_problem(7, "mid"), generate_problem(8, "mid")
    assert (a.prompt, a.answer, problem_meta(a)) == (b.prompt, b.answer, problem_meta(b))
    assert a.prompt != c.prompt
    assert a.image(160, 120).tobytes() == b.image(160, 120).tobytes()


def test_field_arithmetic_is_exact():
    x, y = K(1, 2, 3, 4), K(-1, 1, 0, 2)
    assert (x / y) * y == x and K(7, 0, -4).sqrt() == K(2, 0, -1) and K(5).sqrt() is None
    assert close(float(x / y), float(x) / float(y), 1e-12)


# renderer -------------------------------------------------------------------------------------------
def _inked(img, x, y) -> bool:
    return any(img.getpixel((min(max(int(x) + dx, 0), img.width - 1), min(max(int(y) + dy, 0), img.height - 1)))
               != BACKGROUND for dx in (-1, 0, 1) for dy in (-1, 0, 1))


@pytest.mark.parametrize("size", [(320, 240), (1600, 1200), (200, 500)])
def test_render_has_the_size_and_every_point_inside(problems, size):
    w, h = size
    for key in [("circle", "hard", 0), ("polygon", "mid", 1), ("trapezoid", "easy", 0)]:
        p = problems[key]
        img = p.image(w, h)
        assert img.size == (w, h) and img.mode == "RGB"
        margin = 0.05 * min(w, h)
        for name, (x, y) in project(p.figure, w, h).items():
            assert margin <= x <= w - margin and margin <= y <= h - margin, (key, name, x, y)
            assert _inked(img, x, y), (key, name)


def test_render_fits_any_coordinates(problems):
    fig = problems[("special_triangle", "mid", 0)].figure
    far = {n: (x * 1000 + 10 ** 5, y * 1000 - 10 ** 6) for n, (x, y) in fig.points.items()}
    shapes = [replace(s, r2=s.r2 * 10 ** 6) if s.is_circle else s for s in fig.shapes]
    big = replace(fig, points=far, shapes=shapes)
    img = render(big, 300, 200)
    for x, y in project(big, 300, 200).values():
        assert 0 < x < 300 and 0 < y < 200 and _inked(img, x, y)


# verifier -------------------------------------------------------------------------------------------
V = GeoSymVerifier()


def _score(gold: str, text: str) -> float:
    return V(Example("g", "<image>q", gold), text).reward


def test_verifier_oracle():
    assert _score("sqrt(12)", "2*sqrt(3)") == 1.0
    assert _score("sqrt(12)", "3.4641016") == 1.0  # numeric fallback
    assert _score("1.57", "pi/2") == 0.0           # the tolerance is strict
    V.validate()


@pytest.mark.parametrize("text", ["\\boxed{2\\sqrt{3}}", "The answer is $2\\sqrt{3}$.", "Answer: 2√3 cm",
                                  "<think>maybe 4</think> so AB = \\frac{4\\sqrt{3}}{2}", "\\sqrt[2]{12} units",
                                  "x = 2 sqrt(3)", "12^(1/2)"])
def test_verifier_reads_usual_forms(text):
    assert _score("sqrt(12)", text) == 1.0


@pytest.mark.parametrize("text", ["__import__('os').system('echo hi')", "9**9**9**9", "2^{1000}", "((2**99)**99)**99",
                                  "", "   \n ", "3 or 4", "2\\sqrt{3}, 4", "\\boxed{2\\sqrt{3}} then \\boxed{4}",
                                  "2 3", "lambda: 2*sqrt(3)", "().__class__.__bases__", "sqrt(12)" * 40,
                                  "\\boxed{2\\sqrt{3}", "sqrt(-12)", "1/0", "x*2", "3.46", "355/113*0+3.4642",
                                  "2*sqrt(3) ± 1", "exec('1')", "sqrt(12)!", "\x00\x01"])
def test_verifier_scores_hostile_or_wrong_output_zero_quickly(text):
    start = time.perf_counter()
    score = V(Example("g", "q", "sqrt(12)"), text)
    assert score.reward == 0.0 and score.info.get("reason"), score.info
    assert time.perf_counter() - start < 2.0


def test_verifier_units_and_angles():
    assert _score("60", "60°") == 1.0 and _score("60", "60^\\circ") == 1.0 and _score("12", "12 cm") == 1.0
    assert _score("25*pi/4", "\\dfrac{25}{4}\\pi") == 1.0 and _score("pi", "355/113") == 0.0
    assert _score("9/8", "\\boxed{\\dfrac98}") == 1.0 and _score("3 + 2*sqrt(2)", "(1+\\sqrt{2})^2") == 1.0


# task and CLI ---------------------------------------------------------------------------------------
def test_task_examples_score_their_own_answers():
    from rlvr.tasks.base import TASKS

    assert TASKS.get("geosym").fn is geosym_task
    task = geosym_task(GeoSymParams(num_train=6, num_eval=3, width=160, height=120, difficulty={"hard": 1.0}))
    evals, train = task.examples("eval"), task.examples("train")
    assert not {e.prompt for e in evals} & {e.prompt for e in train}
    for ex in evals + train:
        assert ex.prompt.startswith("<image>In the figure, ") and ex.images[0].size == (160, 120)
        assert ex.meta["difficulty"] == "hard" and len(ex.meta["enhancements"]) == 7
        assert {"base_type", "rules", "question_kind"} <= set(ex.meta)
        assert ex.target.endswith(f"\\boxed{{{ex.answer}}}.")
        assert task.score(ex, ex.target).reward == 1.0 and task.score(ex, "\\boxed{0}").reward == 0.0


def test_importing_the_task_loads_no_heavy_library():
    code = ("import sys, rlvr.tasks.geosym, rlvr.verifiers.geosym, rlvr.cli.geosym;"
            "print([m for m in ('torch', 'sympy', 'PIL', 'numpy', 'matplotlib') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"


def test_cli_generate_writes_a_dataset_the_jsonl_task_reads(tmp_path):
    from typer.testing import CliRunner

    from rlvr.cli import app
    from rlvr.tasks.dataset import DatasetParams, read_examples

    out = tmp_path / "gs"
    res = CliRunner().invoke(app, ["geosym", "generate", "--out", str(out), "--num", "4", "--difficulty", "mid",
                                   "--size", "200x150", "--seed", "3"])
    assert res.exit_code == 0, res.output
    path = out / "geosym.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(rows) == 4 and all(r["difficulty"] == "mid" and r["images"].startswith("images/") for r in rows)
    examples = read_examples(path, DatasetParams(train_path=str(path), verifier="geosym"))
    assert [e.answer for e in examples] == [r["answer"] for r in rows]
    from PIL import Image

    for ex, row in zip(examples, rows):
        assert Path(ex.images[0]).is_file() and Image.open(ex.images[0]).size == (200, 150)
        assert ex.meta["question_kind"] == row["question_kind"] and ex.target == row["completion"]
        assert close(value(ex.answer), independent_answer(ex.meta), 1e-9)
        assert V(ex, ex.target).reward == 1.0
    bad = CliRunner().invoke(app, ["geosym", "generate", "--out", str(out), "--size", "big"])
    assert bad.exit_code == 2


def test_modules_are_small():
    for f in (Path(__file__).parents[1] / "rlvr" / "tasks" / "geosym").glob("*.py"):
        assert len(f.read_text().splitlines()) <= 400, f
