"""PACED-RL's learned partition function: a per-prompt table of log Z_phi(x) trained by gradient descent on the
trajectory-balance loss (the state of ``tb`` with ``log_z: learned``; not a registered component).

Kim, Kim, Kim, Lee, Rhee, Jung 2026, "Beyond Normalization: Rethinking the Partition Function as a Difficulty
Scheduler for RLVR", arXiv:2602.12642 (no code; RECONSTRUCTED; docs/methods.md, `tb`). For the rows i of prompt x
in one objective call, with residuals rho_i = beta r_i + log pi_b(y_i|x) - log pi_theta(y_i|x) (detached) and
delta_i = log Z(x) - rho_i, one plain gradient step of size ``lr`` on

    z_loss "prompt":  L_x = (1/n_x)  sum_{i in x} delta_i^2     grad = (2/n_x)  sum_{i in x} delta_i
    z_loss "batch":   L   = (1/N)    sum_i        delta_i^2     grad = (2/N)    sum_{i in x} delta_i
                                                                (L is the loss ``tb`` returns, N its rows)
    log Z(x) <- log Z(x) - lr * grad

(``prompt``: log Z(x) <- (1 - 2 lr) log Z(x) + 2 lr mean_{i in x} rho_i, an exponential average toward the
group's least-squares optimum; lr = 0.5 lands on it). A prompt seen for the first time starts at ``init``
(a float), or at its rows' least-squares optimum mean rho (``"optimum"``), before its first step. The loss
``tb`` returns uses the value *before* the step (log Z is a separate parameter, so this is simultaneous
gradient descent on (theta, phi), as one optimizer step over both would take).

With binary rewards Z(x) = 1 + p(x)(e^beta - 1), so the table doubles as an accuracy estimate
p_hat(x) = clip((e^{log Z(x)} - 1)/(e^beta - 1), 0, 1) (:meth:`LogZTable.accuracy_rows`), which the ``paced``
sampler and the ``paced_replay`` budget read (duck-typed: any algorithm state with ``accuracy_rows``).

Rows are append-only and keyed by ``prompt_key(Example.id)`` (rlvr.core.prompt_keys); ``generation`` bumps on
``load_state_dict`` so readers that cache row indices refresh. The checkpoint holds the keys, values and
per-prompt step counts as base64 of zlib-compressed little-endian arrays.
"""

from __future__ import annotations

import base64
import math
import zlib
from typing import Any, Sequence

from rlvr.lazy import np

__all__ = ["LogZTable", "log_z_gradient", "accuracy_of_log_z"]


def accuracy_of_log_z(log_z: np.ndarray, beta: float) -> np.ndarray:
    """p_hat = clip((e^{log Z} - 1) / (e^beta - 1), 0, 1)."""
    return np.clip(np.expm1(np.asarray(log_z, dtype=np.float64)) / math.expm1(beta), 0.0, 1.0)


def log_z_gradient(delta_sum: np.ndarray, n_rows_of_prompt: np.ndarray, n_rows: int, z_loss: str) -> np.ndarray:
    """d(loss)/d(log Z(x)) from each prompt's sum of residuals delta (see the module docstring)."""
    denom = n_rows_of_prompt if z_loss == "prompt" else float(max(n_rows, 1))
    return 2.0 * np.asarray(delta_sum, dtype=np.float64) / denom


def _pack(a: np.ndarray) -> str:
    return base64.b64encode(zlib.compress(a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes(), 1)).decode()


def _unpack(s: str, dtype: str) -> np.ndarray:
    return np.frombuffer(zlib.decompress(base64.b64decode(s)), dtype=np.dtype(dtype).newbyteorder("<")).astype(dtype)


class LogZTable:
    """log Z_phi(x) per prompt key, with the number of gradient steps each took."""

    def __init__(self, beta: float, lr: float, init: float | str = "optimum", z_loss: str = "prompt",
                 capacity: int = 1024):
        self.beta, self.lr, self.init, self.z_loss = float(beta), float(lr), init, z_loss
        self.generation = 0
        self.keys: list[int] = []
        self.index: dict[int, int] = {}
        self.log_z = np.zeros(capacity, dtype=np.float64)
        self.steps = np.zeros(capacity, dtype=np.int64)

    def __len__(self) -> int:
        return len(self.keys)

    def _rows(self, keys: Sequence[int], first: np.ndarray) -> np.ndarray:
        """Row of each key, appending the new ones with their initial value (``first``: the optimum)."""
        rows = np.empty(len(keys), dtype=np.int64)
        for j, k in enumerate(keys):
            r = self.index.get(int(k))
            if r is None:
                r = self.index[int(k)] = len(self.keys)
                self.keys.append(int(k))
                if r >= len(self.log_z):
                    grow = max(2 * len(self.log_z), r + 1)
                    self.log_z = np.concatenate([self.log_z, np.zeros(grow - len(self.log_z))])
                    self.steps = np.concatenate([self.steps, np.zeros(grow - len(self.steps), dtype=np.int64)])
                self.log_z[r] = first[j] if self.init == "optimum" else float(self.init)
            rows[j] = r
        return rows

    def step(self, keys: Sequence[int], resid_sum: np.ndarray, n_of_key: np.ndarray, n_rows: int) -> np.ndarray:
        """One gradient step for the prompts ``keys`` (distinct) from their rows' residual sums and counts;
        returns each prompt's log Z *before* the step (the value the loss uses)."""
        resid_sum = np.asarray(resid_sum, dtype=np.float64)
        n_of_key = np.asarray(n_of_key, dtype=np.float64)
        rows = self._rows(keys, resid_sum / n_of_key)
        before = self.log_z[rows].copy()
        delta_sum = n_of_key * before - resid_sum  # sum_{i in x} (log Z(x) - rho_i)
        self.log_z[rows] = before - self.lr * log_z_gradient(delta_sum, n_of_key, n_rows, self.z_loss)
        self.steps[rows] += 1
        return before

    def value(self, key: int) -> float | None:
        r = self.index.get(int(key))
        return None if r is None else float(self.log_z[r])

    def accuracy_rows(self, rows: np.ndarray, default: float) -> np.ndarray:
        """p_hat of table rows ``rows`` (``-1``: a prompt never trained, which gets ``default``)."""
        rows = np.asarray(rows, dtype=np.int64)
        known = rows >= 0
        out = np.full(len(rows), float(default), dtype=np.float64)
        out[known] = accuracy_of_log_z(self.log_z[rows[known]], self.beta)
        return out

    def accuracy(self, keys: Sequence[int], default: float) -> np.ndarray:
        return self.accuracy_rows(np.asarray([self.index.get(int(k), -1) for k in keys], dtype=np.int64), default)

    def state_dict(self) -> dict[str, Any]:
        n = len(self.keys)
        return {"format": 1, "keys": _pack(np.asarray(self.keys, dtype=np.int64)),
                "log_z": _pack(self.log_z[:n]), "steps": _pack(self.steps[:n])}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        keys = _unpack(state["keys"], "int64")
        self.keys = [int(k) for k in keys]
        self.index = {k: r for r, k in enumerate(self.keys)}
        self.log_z = _unpack(state["log_z"], "float64").copy()
        self.steps = _unpack(state["steps"], "int64").copy()
        if not len(self.log_z) == len(self.steps) == len(self.keys):
            raise ValueError("log Z table: keys, values and step counts differ in length")
        self.generation += 1
