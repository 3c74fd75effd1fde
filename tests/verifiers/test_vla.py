import json
import math
import random
import time

import pytest

import rlvr.verifiers.vla  # noqa: F401  (registers "vla")
from rlvr.core.types import Example
from rlvr.verifiers import build_verifier
from rlvr.verifiers.vla import VLAVerifier, box_to_xyxy, giou_xyxy, os_discrete_frechet

TRAJ = [[0.1, 0.1], [0.5, 0.5], [0.9, 0.9]]


def out(obj, think=True):
    return ("<think>reasoning</think>\n" if think else "") + f"<output>{json.dumps(obj)}</output>"


def box(x, y, w, h):
    return {"x": x, "y": y, "width": w, "height": h}


def test_registered_and_validates():
    v = build_verifier("vla")
    assert isinstance(v, VLAVerifier) and v.name == "vla"
    v.validate()
    build_verifier("vla", {"format_weight": 0.3, "box_metric": "iou"}).validate()


def test_vla_r1_oracles():
    """VLA-R1's reward, verified against the reference compute_score."""
    v = VLAVerifier()
    gold = box(0.75, 0.75, 0.2, 0.2)
    e = Example("b", "q", out(gold, think=False), meta={"box": gold})
    assert v(e, out(gold)).reward == 1.0
    far = v(e, out(box(0.25, 0.25, 0.2, 0.2)))
    assert far.info["giou"] == pytest.approx(-0.8367, abs=1e-4) and far.reward == pytest.approx(0.17347, abs=1e-5)
    assert v(e, out(gold, think=False)).reward == pytest.approx(0.9)
    t = Example("t", "q", out(TRAJ), meta={"trajectory": TRAJ})
    assert v(t, out(TRAJ)).reward == 1.0
    moved = [[0.1, 0.1], [0.5, 0.5], [0.9, 0.8]]
    assert v(t, out(moved)).reward == pytest.approx(0.94525, abs=1e-5)


def test_gold_from_answer_and_wrong_scores_zero():
    v = VLAVerifier()
    e = Example("b", "q", f"<output>{json.dumps(box(0.5, 0.5, 0.2, 0.2))}</output>")
    assert v(e, out(box(0.5, 0.5, 0.2, 0.2))).reward == 1.0
    assert v(e, "left side of the table").reward == 0.0
    assert v(e, "<think>x</think><output>not json</output>").reward == 0.0
    assert v(e, out(TRAJ)).reward == pytest.approx(0.1)  # wrong kind: task 0, format still counts


def test_giou_and_iou_values():
    a, b = (0.0, 0.0, 0.5, 0.5), (0.25, 0.25, 0.75, 0.75)
    giou, iou = giou_xyxy(a, b)
    assert iou == pytest.approx(0.0625 / 0.4375)
    assert giou == pytest.approx(iou - (0.5625 - 0.4375) / 0.5625)
    assert box_to_xyxy(box(0.05, 0.5, 0.2, -0.2)) == pytest.approx((0.0, 0.4, 0.15, 0.6))  # clipped, |h|
    e = Example("b", "q", "", meta={"box": box(0.375, 0.375, 0.25, 0.25)})
    p = out(box(0.5, 0.5, 0.5, 0.5))
    assert VLAVerifier(box_metric="iou")(e, p).components["task"] == pytest.approx(0.25)
    assert VLAVerifier()(e, p).components["task"] == pytest.approx(0.625)


def _recursive_os_dfd(P, Q, cost):
    """The Fréchet recursion of VLA-R1's reward written directly (exponential without memo, fine for tiny inputs)."""
    def C(i, j):
        c = cost(i, j)
        if i == 0 and j == 0:
            return c
        if j == 0:
            return max(C(i - 1, 0), c)
        if i == 0:
            return max(C(0, j - 1), c)
        return max(min(C(i - 1, j), C(i - 1, j - 1), C(i, j - 1)), c)
    return C(len(P) - 1, len(Q) - 1)


def test_iterative_dp_matches_the_recursion():
    rng = random.Random(0)
    for _ in range(30):
        P = [(rng.random(), rng.random()) for _ in range(rng.randint(1, 5))]
        Q = [(rng.random(), rng.random()) for _ in range(rng.randint(1, 5))]
        # with lambda = 0 the cost is the Euclidean distance, so the recursion needs no tangents
        want = _recursive_os_dfd(P, Q, lambda i, j: math.dist(P[i], Q[j]))
        assert os_discrete_frechet(P, Q, 0.0, 0.0) == pytest.approx(want)
    assert os_discrete_frechet([(0, 0), (1, 0)], [(0, 0), (1, 0)]) == 0.0
    reverse = os_discrete_frechet([(0, 0), (1, 0)], [(1, 0), (0, 0)], lambda_theta=1.0, lambda_ratio=0.0)
    assert reverse == pytest.approx(1.0 + math.pi)  # orientation-sensitive: same points, opposite direction


def test_per_example_lambda_override():
    e = Example("t", "q", "", meta={"trajectory": TRAJ})
    bent = [[0.1, 0.1], [0.5, 0.5], [0.9, 0.5]]
    plain = VLAVerifier()(e, out(bent)).reward
    e2 = Example("t", "q", "", meta={"trajectory": TRAJ, "lambda_theta": 2.0})
    assert VLAVerifier()(e2, out(bent)).reward != pytest.approx(plain)


@pytest.mark.parametrize("pred", [
    "[[NaN, 0.1], [0.2, 0.3]]", "[[Infinity, 0.1], [0.2, 0.3]]", '[["a", "b"]]', "[]", '{"x": "nan"}',
    json.dumps([[0.5, 0.5]] * 10_000), '{"x": 1e309, "y": 0.5, "width": 0.1, "height": 0.1}', "[" * 50_000,
])
def test_adversarial_predictions_give_task_zero_fast(pred):
    e = Example("t", "q", "", meta={"trajectory": TRAJ} if pred.startswith("[") else {"box": box(.5, .5, .2, .2)})
    t0 = time.perf_counter()
    s = VLAVerifier()(e, f"<output>{pred}</output>")
    assert time.perf_counter() - t0 < 1.0
    assert s.components["task"] == 0.0 and s.reward == 0.0 and math.isfinite(s.reward)


@pytest.mark.parametrize("text", ["x" * 10_000_000, bytes(range(256)).decode("latin-1"), "<output>" * 10_000])
def test_adversarial_completions(text):
    s = VLAVerifier()(Example("t", "q", "", meta={"trajectory": TRAJ}), text)
    assert s.reward == 0.0 and "verifier error" not in s.info.get("reason", "")
