"""VLA-R1 rewards: affordance-box GIoU, trajectory consistency (orientation-sensitive Fréchet), format.

VLA-R1 (GigaAI research 2025, gigaai-research.github.io/VLA-R1; official code
``RFT_training/train_utils/robot_bbox_traj_norm.py::compute_score``; EXACT). The model answers inside
``<output>...</output>`` with either a box ``{"x", "y", "width", "height"}`` (normalised centre format) or a 2-D
trajectory ``[[x, y], ...]`` (normalised coordinates). Reward (``vla``)::

    format = 1 iff a <think>...</think> block exists and <output>...</output> holds parseable JSON
    box:   centre/size -> xyxy clipped to [0, 1]; task = (GIoU + 1) / 2        (box_metric="iou": task = IoU)
    traj:  points clipped to [0, 1]; P = gold, Q = prediction, no resampling;
           cost(i, j) = |P_i - Q_j| + lambda_theta * angle(t_P(i), t_Q(j)) + lambda_r * |log(l_P(i) / l_Q(j))|
           (t = unit local direction: mean of the incoming and outgoing unit steps; l = outgoing step length,
           the incoming one at the last point), OS-DFD = discrete Fréchet DP over cost (max / min recursion),
           task = 1 - min(1, OS-DFD / (sqrt 2 + lambda_theta * pi + lambda_r * ln 10))
    reward = (1 - format_weight) * task + format_weight * format   (VLA-R1: format_weight = 0.1, so 0.9 / 0.1;
                                                                    lambda_theta = 0.25, lambda_r = 0.10)

A prediction of the other kind than the gold, unparsable or non-finite values, or a failure while scoring
gives ``task = 0`` (the format term still counts, as in the reference). Gold: ``meta["box"]`` or
``meta["trajectory"]``, else the JSON in ``answer`` (inside ``<output>`` or bare); ``meta["lambda_theta"]`` /
``meta["lambda_ratio"]`` override the parameters per example like the reference's ``extra_info``. The
Fréchet DP is iterative (the reference recurses) and trajectories longer than ``max_points`` score task 0.
Note a bare gold answer without ``<think>`` scores 0.9, not 1.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, Literal

from pydantic import Field

from rlvr.core.types import Example, Score
from rlvr.registry import Params
from rlvr.verifiers.base import VERIFIERS, BaseVerifier

__all__ = ["VLAVerifier", "VLAParams", "giou_xyxy", "box_to_xyxy", "os_discrete_frechet", "trajectory_score",
           "parse_output"]

_OUT = re.compile(r"<output>\s*(.*?)\s*</output>", re.S | re.IGNORECASE)
_THINK = re.compile(r"<think>\s*.*?\s*</think>", re.S | re.IGNORECASE)
EPS = 1e-12


def parse_output(text: str) -> Any:
    """The JSON inside the first ``<output>`` block, or None."""
    m = _OUT.search(text)
    if not m:
        return None
    try:
        return json.loads(m.group(1).strip())
    except (ValueError, RecursionError):
        return None


def _clip01(x: float) -> float:
    if not math.isfinite(x):
        raise ValueError("non-finite coordinate")
    return min(1.0, max(0.0, x))


def box_to_xyxy(box: dict) -> tuple[float, float, float, float]:
    """Centre/width/height (normalised) to corners, clipped to [0, 1]."""
    x, y = float(box["x"]), float(box["y"])
    w, h = abs(float(box["width"])), abs(float(box["height"]))
    return _clip01(x - w / 2), _clip01(y - h / 2), _clip01(x + w / 2), _clip01(y + h / 2)


def _area(x1: float, y1: float, x2: float, y2: float) -> float:
    return max(0.0, x2 - x1) * max(0.0, y2 - y1)


def giou_xyxy(b1: tuple, b2: tuple) -> tuple[float, float]:
    """``(GIoU clipped to [-1, 1], IoU)`` of two xyxy boxes, as in the reference."""
    inter = _area(max(b1[0], b2[0]), max(b1[1], b2[1]), min(b1[2], b2[2]), min(b1[3], b2[3]))
    a1, a2 = _area(*b1), _area(*b2)
    iou = inter / (a1 + a2 - inter) if a1 + a2 - inter > 0 else 0.0
    hull = _area(min(b1[0], b2[0]), min(b1[1], b2[1]), max(b1[2], b2[2]), max(b1[3], b2[3])) or 1e-12
    union = max(1e-12, a1 + a2 - inter)
    return max(-1.0, min(1.0, iou - (hull - union) / hull)), iou


def _unit(v: tuple[float, float]) -> tuple[float, float]:
    n = math.hypot(*v)
    return (0.0, 0.0) if n < EPS else (v[0] / n, v[1] / n)


def _angle(u: tuple[float, float], v: tuple[float, float]) -> float:
    nu, nv = math.hypot(*u), math.hypot(*v)
    if nu < EPS or nv < EPS:
        return 0.0
    return math.acos(max(-1.0, min(1.0, (u[0] * v[0] + u[1] * v[1]) / (nu * nv))))


def _step(points: list, i: int, j: int) -> tuple[float, float]:
    return points[j][0] - points[i][0], points[j][1] - points[i][1]


def _local_dir(points: list, i: int) -> tuple[float, float]:
    n = len(points)
    if n == 1:
        return 0.0, 0.0
    if i == 0 or i == n - 1:
        return _unit(_step(points, 0, 1) if i == 0 else _step(points, n - 2, n - 1))
    d1, d2 = _unit(_step(points, i - 1, i)), _unit(_step(points, i, i + 1))
    s = (d1[0] + d2[0], d1[1] + d2[1])
    return (s[0] / math.hypot(*s), s[1] / math.hypot(*s)) if math.hypot(*s) >= EPS else d1


def _local_len(points: list, i: int) -> float:
    n = len(points)
    if n <= 1:
        return 0.0
    return math.hypot(*(_step(points, i, i + 1) if i < n - 1 else _step(points, i - 1, i)))


def os_discrete_frechet(P: list, Q: list, lambda_theta: float = 0.25, lambda_ratio: float = 0.10) -> float:
    """Orientation-sensitive discrete Fréchet distance (iterative DP over the reference's cost)."""
    tP, tQ = [_local_dir(P, i) for i in range(len(P))], [_local_dir(Q, j) for j in range(len(Q))]
    lP, lQ = [_local_len(P, i) for i in range(len(P))], [_local_len(Q, j) for j in range(len(Q))]

    def cost(i: int, j: int) -> float:
        a, b = (lP[i], lQ[j]) if lP[i] > EPS and lQ[j] > EPS else (lP[i] + EPS, lQ[j] + EPS)
        return (math.dist(P[i], Q[j]) + lambda_theta * _angle(tP[i], tQ[j])
                + lambda_ratio * abs(math.log(a / b)))

    prev: list[float] = []
    for i in range(len(P)):
        row: list[float] = []
        for j in range(len(Q)):
            c = cost(i, j)
            if i == 0:
                row.append(c if j == 0 else max(row[j - 1], c))
            elif j == 0:
                row.append(max(prev[0], c))
            else:
                row.append(max(min(prev[j], prev[j - 1], row[j - 1]), c))
        prev = row
    return prev[-1]


def trajectory_score(P: list, Q: list, lambda_theta: float = 0.25, lambda_ratio: float = 0.10) -> float:
    """``1 - min(1, OS-DFD / (sqrt 2 + lambda_theta pi + lambda_ratio ln 10))``."""
    denom = math.sqrt(2.0) + lambda_theta * math.pi + lambda_ratio * math.log(10.0)
    return 1.0 - min(1.0, os_discrete_frechet(P, Q, lambda_theta, lambda_ratio) / denom)


def _is_box(obj: Any) -> bool:
    return isinstance(obj, dict) and all(k in obj for k in ("x", "y", "width", "height"))


def _is_traj(obj: Any) -> bool:
    return isinstance(obj, list) and all(isinstance(t, (list, tuple)) and len(t) == 2 for t in obj)


def _points(obj: list) -> list[tuple[float, float]]:
    return [(_clip01(float(x)), _clip01(float(y))) for x, y in obj]


def _gold(example: Example) -> Any:
    for key in ("box", "trajectory"):
        if key in example.meta:
            return example.meta[key]
    found = parse_output(example.answer)
    return found if found is not None else json.loads(example.answer)


class VLAVerifier(BaseVerifier):
    """VLA-R1: (1-w) * (box (GIoU+1)/2 or trajectory OS-Fréchet score) + w * format, w = 0.1."""

    name = "vla"

    def __init__(self, lambda_theta: float = 0.25, lambda_ratio: float = 0.10, format_weight: float = 0.1,
                 box_metric: str = "giou", max_points: int = 256, max_chars: int = 50_000):
        self.lambda_theta, self.lambda_ratio, self.format_weight = lambda_theta, lambda_ratio, format_weight
        self.box_metric, self.max_points, self.max_chars = box_metric, max_points, max_chars

    def _task(self, example: Example, pred: Any, gold: Any) -> tuple[float, dict]:
        if _is_box(pred) and _is_box(gold):
            giou, iou = giou_xyxy(box_to_xyxy(pred), box_to_xyxy(gold))
            task = (giou + 1.0) / 2.0 if self.box_metric == "giou" else iou
            return task, {"mode": "box", "giou": giou, "iou": iou}
        if _is_traj(pred) and _is_traj(gold) and pred and gold:
            if max(len(pred), len(gold)) > self.max_points:
                raise ValueError(f"trajectory longer than {self.max_points} points")
            lt = float(example.meta.get("lambda_theta", self.lambda_theta))
            lr = float(example.meta.get("lambda_ratio", self.lambda_ratio))
            return trajectory_score(_points(gold), _points(pred), lt, lr), {"mode": "trajectory"}
        raise ValueError("prediction is not a box / trajectory of the gold's kind")

    def score(self, example: Example, text: str) -> Score:
        if len(text) > self.max_chars:
            return Score(0.0, {"correct": 0.0, "format": 0.0, "task": 0.0}, {"reason": "completion too long"})
        gold, pred = _gold(example), parse_output(text)
        fmt = float(pred is not None and bool(_THINK.search(text)))
        try:
            task, info = self._task(example, pred, gold)
        except (ValueError, TypeError, KeyError, OverflowError, ZeroDivisionError) as e:
            task, info = 0.0, {"reason": f"task score 0: {e}"}
        reward = task + self.format_weight * (fmt - task)  # (1 - w) task + w format, exactly 1 at the top
        return Score(reward, {"correct": float(task >= 1.0), "format": fmt, "task": task}, info)

    def validation_cases(self):
        box = {"x": 0.5, "y": 0.5, "width": 0.2, "height": 0.2}
        traj = [[0.1, 0.1], [0.5, 0.5], [0.9, 0.9]]
        ex_b = Example("vla-box", "q", f"<output>{json.dumps(box)}</output>", meta={"box": box})
        ex_t = Example("vla-traj", "q", f"<output>{json.dumps(traj)}</output>", meta={"trajectory": traj})
        return [(ex_b, f"<think>here</think><output>{json.dumps(box)}</output>", 1.0),
                (ex_t, f"<think>go</think>\n<output>{json.dumps(traj)}</output>", 1.0),
                (ex_b, "a box in the middle", 0.0), (ex_t, "<output>[[1, 1], [1, 0.999999]]</output>", 0.0),
                (ex_b, f"<output>{json.dumps(traj)}</output>", 0.0)]


class VLAParams(Params):
    lambda_theta: float = Field(0.25, ge=0.0, description="weight of the tangent-angle term (VLA-R1: 0.25)")
    lambda_ratio: float = Field(0.10, ge=0.0, description="weight of the |log step-length ratio| term (VLA-R1: 0.10)")
    format_weight: float = Field(0.1, ge=0.0, le=1.0, description="weight w of the think+output format score; "
                                                                  "the task score gets 1 - w (VLA-R1: 0.1)")
    box_metric: Literal["giou", "iou"] = Field("giou", description="box task score: (GIoU+1)/2 (VLA-R1) or IoU")
    max_points: int = Field(256, gt=0, description="longer trajectories score task 0 (the DP is O(m n))")


@VERIFIERS.register("vla", VLAParams)
def _vla(p: VLAParams) -> VLAVerifier:
    """VLA-R1: 0.9 * ((GIoU+1)/2 or 1 - normalised OS-Fréchet) + 0.1 * format(think + JSON output)."""
    return VLAVerifier(p.lambda_theta, p.lambda_ratio, p.format_weight, p.box_metric, p.max_points)
