"""Write constraints.txt: the exact version of every package rlvr[dev] pulls in, read from the active environment.

The README's figures are measured in an environment set up from constraints.txt (scripts/setup.sh installs with
``-c constraints.txt``), so a fresh clone installs the same versions. The package's own requirements stay
ranges. Regenerate after upgrading on purpose: ``python scripts/lock.py`` from the .venv scripts/setup.sh made.
"""

from __future__ import annotations

import re
import sys
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def closure(root: str, extras: tuple[str, ...]) -> dict[str, str]:
    """Every installed distribution reachable from ``root[extras]``: normalised name -> version."""
    seen: dict[str, str] = {}
    todo: list[tuple[str, tuple[str, ...]]] = [(root, extras)]
    while todo:
        name, want = todo.pop()
        try:
            dist = distribution(name)
        except PackageNotFoundError:
            continue
        key = _norm(dist.metadata["Name"])
        first = key not in seen
        seen[key] = dist.version
        for line in dist.requires or []:
            req = Requirement(line)
            envs = [{"extra": e} for e in want] or [{"extra": ""}]
            if req.marker is not None and not any(req.marker.evaluate(env) for env in envs):
                continue
            if first or want:
                todo.append((req.name, tuple(req.extras)))
    seen.pop("rlvr", None)
    return seen


def main() -> None:
    pins = closure("rlvr", ("dev",))
    lines = [f"{n}=={v.split('+')[0]}" for n, v in sorted(pins.items())]  # torch 2.13.0+cpu pins as 2.13.0
    head = ("# Exact versions behind the README's figures (written by scripts/lock.py from the environment that "
            "measured them).\n# scripts/setup.sh installs with -c constraints.txt; RLVR_UNPINNED=1 skips it. The "
            "package's own\n# requirements (pyproject.toml) stay ranges.\n")
    (ROOT / "constraints.txt").write_text(head + "\n".join(lines) + "\n")
    print(f"constraints.txt: {len(lines)} packages", file=sys.stderr)


if __name__ == "__main__":
    main()
