"""Per-prompt statistics kept across steps, keyed by the example's stable id, with per-domain aggregates.

Rows live in numpy columns indexed through an ``id -> row`` dict, so a million prompts cost about 150 bytes
each (columns and index) and one step's update is a handful of vectorised writes. Rows are append-only:
a row index never changes until ``load_state_dict`` (which bumps ``generation``, telling cached row
lookups to refresh).

Per row, for each observation of a prompt (its completions in one generation round):

    rollouts += n;  correct += c;  reward_sum += sum r;  reward_sq += sum r^2;  visits += 1
    last_pass = c / n;  last_step = step
    ema_pass  = last_pass on the first visit, else  d * ema_pass + (1 - d) * last_pass
    ema_var   = var_pop(r) on the first visit,  else  d * ema_var  + (1 - d) * var_pop(r)

with ``d = decay``. Per domain (``Example.task``; one domain for a single task): rollouts, correct, groups,
and the same decayed pass rate over the domain's completions of each update.

Checkpoints store each column as base64 of its zlib-compressed little-endian bytes inside the JSON state
(a million rows: see ``benchmarks/prompt_stats.py`` for size and time), and read the
older ``{"rows": {id: [rollouts, correct, ema, last_step]}}`` format too.
"""

from __future__ import annotations

import base64
import zlib
from typing import Any, Sequence

from rlvr.lazy import np

__all__ = ["PromptStats"]

_COLUMNS = {"rollouts": "int64", "visits": "int64", "last_step": "int64", "domain": "int32",
            "correct": "float64", "reward_sum": "float64", "reward_sq": "float64",
            "ema_pass": "float64", "ema_var": "float64", "last_pass": "float64"}
_DOMAIN_KEYS = ("rollouts", "correct", "groups", "ema_pass")


class PromptStats:
    """Rollout counts, pass rates, reward variance and last step per prompt; aggregates per domain."""

    def __init__(self, decay: float = 0.5, capacity: int = 1024):
        if not 0.0 <= decay < 1.0:
            raise ValueError(f"decay must be in [0, 1), got {decay}")
        self.decay = decay
        self.generation = 0
        self._index: dict[str, int] = {}
        self._ids: list[str] = []
        self._domains: list[str] = []
        self._domain_index: dict[str, int] = {}
        self._domain_stats: dict[str, list[float]] = {}
        self._cols = {k: np.zeros(capacity, dtype=t) for k, t in _COLUMNS.items()}
        self._cols["last_step"][:] = -1

    # ----------------------------------------------------------------------------------------- rows
    def _grow(self, need: int) -> None:
        cap = len(self._cols["rollouts"])
        if need <= cap:
            return
        new = max(need, 2 * cap)
        for k, col in self._cols.items():
            grown = np.zeros(new, dtype=col.dtype)
            grown[:cap] = col
            if k == "last_step":
                grown[cap:] = -1
            self._cols[k] = grown

    def _domain_code(self, name: str) -> int:
        code = self._domain_index.get(name)
        if code is None:
            code = self._domain_index[name] = len(self._domains)
            self._domains.append(name)
        return code

    def rows_for(self, example_ids: Sequence[str], create: bool = False) -> np.ndarray:
        """Row index of each id (``-1`` for an unknown id unless ``create``, which appends empty rows)."""
        if create:
            fresh = [i for i in dict.fromkeys(example_ids) if i not in self._index]
            if fresh:
                start = len(self._ids)
                self._grow(start + len(fresh))
                self._index.update(zip(fresh, range(start, start + len(fresh))))
                self._ids.extend(fresh)
        get = self._index.get
        return np.fromiter((get(i, -1) for i in example_ids), dtype="int64", count=len(example_ids))

    def column(self, name: str) -> np.ndarray:
        """A read-only view of one column over the existing rows (see the module docstring for names)."""
        view = self._cols[name][: len(self._ids)]
        view.flags.writeable = False
        return view

    # --------------------------------------------------------------------------------------- update
    def update(self, example_ids: Sequence[str], correct: Sequence[float], step: int,
               rewards: Sequence[float] | None = None, domains: Sequence[str] | None = None) -> None:
        """Record one round of completions: per completion its prompt id, correctness, reward and domain."""
        if not len(example_ids):
            return
        rewards = correct if rewards is None else rewards
        if not len(example_ids) == len(correct) == len(rewards):
            raise ValueError("example_ids, correct and rewards must have one entry per completion")
        order: dict[str, int] = {}
        slot = np.fromiter((order.setdefault(i, len(order)) for i in example_ids), dtype="int64",
                           count=len(example_ids))
        m = len(order)
        c = np.asarray(correct, dtype=np.float64)
        r = np.asarray(rewards, dtype=np.float64)
        n = np.bincount(slot, minlength=m).astype(np.float64)
        cs, rs, rq = (np.bincount(slot, weights=w, minlength=m) for w in (c, r, r * r))
        rows = self.rows_for(list(order), create=True)
        col, d = self._cols, self.decay
        rate, var = cs / n, np.maximum(rq / n - (rs / n) ** 2, 0.0)
        first = col["visits"][rows] == 0
        col["ema_pass"][rows] = np.where(first, rate, d * col["ema_pass"][rows] + (1 - d) * rate)
        col["ema_var"][rows] = np.where(first, var, d * col["ema_var"][rows] + (1 - d) * var)
        col["rollouts"][rows] += n.astype(np.int64)
        col["correct"][rows] += cs
        col["reward_sum"][rows] += rs
        col["reward_sq"][rows] += rq
        col["visits"][rows] += 1
        col["last_pass"][rows] = rate
        col["last_step"][rows] = step
        if domains is not None:
            first_of = {}
            for i, dom in zip(slot.tolist(), domains):
                first_of.setdefault(i, dom)
            col["domain"][rows] = [self._domain_code(first_of[i]) for i in range(m)]
        self._update_domains(c, domains if domains is not None else [""] * len(c), slot, rows)

    def _update_domains(self, c: np.ndarray, domains: Sequence[str], slot: np.ndarray, rows: np.ndarray) -> None:
        names = np.asarray(domains, dtype=object)
        for name in dict.fromkeys(domains):
            sel = names == name
            agg = self._domain_stats.setdefault(name, [0.0, 0.0, 0.0, float("nan")])
            rate = float(c[sel].mean())
            agg[0] += float(sel.sum())
            agg[1] += float(c[sel].sum())
            agg[2] += float(len(np.unique(slot[sel])))
            agg[3] = rate if agg[3] != agg[3] else self.decay * agg[3] + (1 - self.decay) * rate

    # -------------------------------------------------------------------------------------- queries
    def _get(self, example_id: str, name: str) -> Any:
        row = self._index.get(example_id)
        return None if row is None else self._cols[name][row].item()

    def pass_rate(self, example_id: str) -> float | None:
        """Decayed pass rate, or None for a prompt never seen."""
        return self._get(example_id, "ema_pass")

    def last_pass_rate(self, example_id: str) -> float | None:
        return self._get(example_id, "last_pass")

    def rollouts(self, example_id: str) -> int:
        return self._get(example_id, "rollouts") or 0

    def last_step(self, example_id: str) -> int | None:
        s = self._get(example_id, "last_step")
        return None if s is None or s < 0 else s

    def reward_var(self, example_id: str) -> float | None:
        """Population variance of every reward this prompt received."""
        row = self._index.get(example_id)
        if row is None or self._cols["rollouts"][row] == 0:
            return None
        n = float(self._cols["rollouts"][row])
        mean = self._cols["reward_sum"][row] / n
        return max(float(self._cols["reward_sq"][row] / n - mean * mean), 0.0)

    def row(self, example_id: str) -> dict[str, float] | None:
        r = self._index.get(example_id)
        return None if r is None else {k: self._cols[k][r].item() for k in _COLUMNS}

    def domain_stats(self) -> dict[str, dict[str, float]]:
        """Per domain: rollouts, correct, groups, ema_pass (decayed per update) and pass_rate (lifetime)."""
        out = {}
        for name, v in self._domain_stats.items():
            d = dict(zip(_DOMAIN_KEYS, v))
            d["pass_rate"] = v[1] / v[0] if v[0] else float("nan")
            out[name] = d
        return out

    @property
    def ids(self) -> list[str]:
        return list(self._ids)

    def __len__(self) -> int:
        return len(self._ids)

    def __contains__(self, example_id: object) -> bool:
        return example_id in self._index

    # ---------------------------------------------------------------------------------- checkpoints
    def state_dict(self) -> dict[str, Any]:
        size = len(self._ids)
        cols = {k: base64.b64encode(zlib.compress(v[:size].astype(v.dtype.newbyteorder("<"), copy=False).tobytes(), 1))
                .decode("ascii") for k, v in self._cols.items()}
        return {"format": 2, "decay": self.decay, "ids": list(self._ids), "domains": list(self._domains),
                "columns": cols, "domain_stats": {k: list(v) for k, v in self._domain_stats.items()}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.decay = float(state["decay"])
        if "rows" in state:  # the first format: {id: [rollouts, correct, ema_pass, last_step]}
            self._load_rows(state["rows"])
        else:
            ids = list(state["ids"])
            self._cols = {}
            for k, t in _COLUMNS.items():
                raw = state["columns"].get(k)
                arr = (np.frombuffer(zlib.decompress(base64.b64decode(raw)), dtype=np.dtype(t).newbyteorder("<")).astype(t)
                       if raw is not None else np.zeros(len(ids), dtype=t))
                if len(arr) != len(ids):
                    raise ValueError(f"prompt stats column {k!r} has {len(arr)} rows for {len(ids)} ids")
                self._cols[k] = arr.copy()
            self._ids, self._index = ids, {i: r for r, i in enumerate(ids)}
            self._domains = list(state["domains"])
            self._domain_index = {d: i for i, d in enumerate(self._domains)}
            self._domain_stats = {k: [float(x) for x in v] for k, v in state.get("domain_stats", {}).items()}
        self.generation += 1

    def _load_rows(self, rows: dict[str, list[float]]) -> None:
        fresh = PromptStats(self.decay, capacity=max(len(rows), 1))
        ids = list(rows)
        idx = fresh.rows_for(ids, create=True)
        vals = np.asarray([rows[i] for i in ids], dtype=np.float64).reshape(len(ids), 4)
        fresh._cols["rollouts"][idx] = vals[:, 0].astype(np.int64)
        fresh._cols["correct"][idx] = vals[:, 1]
        fresh._cols["ema_pass"][idx] = vals[:, 2]
        fresh._cols["last_step"][idx] = vals[:, 3].astype(np.int64)
        fresh._cols["visits"][idx] = 1
        fresh._cols["last_pass"][idx] = vals[:, 2]
        self._cols, self._ids, self._index = fresh._cols, fresh._ids, fresh._index
        self._domains, self._domain_index, self._domain_stats = [], {}, {}
