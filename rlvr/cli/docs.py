"""Generated reference docs: every config field and every registered component, as Markdown.

``rlvr config --reference`` prints it; the README's config reference is this output
(``python -m rlvr.cli.docs README.md`` rewrites it), and a test keeps the two in step.
"""

from __future__ import annotations

import json
import types
import typing
from typing import Any

from pydantic import BaseModel

from rlvr.algorithms.kl_schedules import KL_SCHEDULES
from rlvr.algorithms.registry import (ADVANTAGE_TRANSFORMS, ADVANTAGES, AGGREGATIONS, CLIP_RULES, CORRECTIONS,
                                     KL_ESTIMATORS, OBJECTIVES, REWARD_TRANSFORMS)
from rlvr.optim import OPTIMIZERS
from rlvr.sampling import ALLOCATORS, SAMPLERS
from rlvr.config.run import Component, RunConfig
from rlvr.registry import Registry
from rlvr.engines.base import ENGINES
from rlvr.rollout.strategies.base import ROLLOUT_STRATEGIES
from rlvr.tasks.base import TASKS

__all__ = ["config_reference"]


def _type_name(ann: Any) -> str:
    origin, args = typing.get_origin(ann), typing.get_args(ann)
    if origin is typing.Annotated:  # (a marked type, such as a local path: the type itself)
        return _type_name(args[0])
    if origin is typing.Literal:
        return "one of " + ", ".join(f"`{a}`" for a in args)
    if origin in (types.UnionType, typing.Union):
        return " or ".join(_type_name(a) for a in args)
    if ann is type(None):
        return "null"
    if origin is not None:
        return f"{origin.__name__}[{', '.join(_type_name(a) for a in args)}]"
    return getattr(ann, "__name__", str(ann))


def _default(field) -> str:
    if field.is_required():
        return "required"
    if field.default_factory is not None:
        return ""
    v = field.default
    if isinstance(v, BaseModel):
        return ""
    if isinstance(v, dict) and "name" in v:
        return f"`{v['name']}`"
    return f"`{json.dumps(v)}`"


def _demo_value(key: str) -> str:
    """`` (demo: X)`` when the demo's settings (rlvr/config/demo.yaml) change ``key``'s default."""
    from rlvr.config.defaults import demo_settings

    node: Any = demo_settings()
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return ""
        node = node[part]
    return f" (demo: `{json.dumps(node)}`)"


def _rows(model: type[BaseModel], prefix: str = "") -> list[str]:
    rows = []
    for name, field in model.model_fields.items():
        ann = field.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel) and ann is not Component:
            rows += _rows(ann, f"{prefix}{name}.")
            continue
        args = typing.get_args(ann)
        if ann is Component:
            kind = "component"
        elif typing.get_origin(ann) is list and args and typing.get_args(args[0])[:1] == (Component,):
            kind = "list of components"
        else:
            kind = _type_name(ann)
        rows.append(f"| `{prefix}{name}` | {kind} | {_default(field)}{_demo_value(prefix + name)} | "
                    f"{field.description or ''} |")
    return rows


def _components(title: str, reg: Registry) -> list[str]:
    out = [f"**{title}**", ""]
    for name in reg.names():
        e = reg.get(name)
        params = ", ".join(f"`{k}`={_default(f)}" for k, f in e.params.model_fields.items())
        out.append(f"- `{name}`: {e.summary}" + (f" Params: {params}." if params else ""))
    return out + [""]


def config_reference() -> str:
    lines = ["| key | type | default | description |", "|---|---|---|---|", *_rows(RunConfig), ""]
    for title, reg in [("task", TASKS), ("algorithm.advantage", ADVANTAGES), ("algorithm.objective", OBJECTIVES),
                       ("algorithm.aggregation", AGGREGATIONS), ("algorithm.clip", CLIP_RULES),
                       ("algorithm.reward_transforms", REWARD_TRANSFORMS),
                       ("algorithm.advantage_transforms", ADVANTAGE_TRANSFORMS),
                       ("algorithm.correction", CORRECTIONS), ("algorithm.kl.estimator", KL_ESTIMATORS),
                       ("algorithm.kl.schedule", KL_SCHEDULES), ("optim.optimizer", OPTIMIZERS),
                       ("data.sampler", SAMPLERS), ("data.budget", ALLOCATORS),
                       ("rollout.engine", ENGINES), ("rollout.strategy", ROLLOUT_STRATEGIES)]:
        lines += _components(title, reg)
    return "\n".join(lines).rstrip() + "\n"


START, END = "<!-- config-reference:start -->", "<!-- config-reference:end -->"


def readme_section(text: str) -> str:
    return text.split(START, 1)[1].split(END, 1)[0].strip("\n") + "\n"


def sync_readme(path: str = "README.md") -> bool:
    """Rewrite the README's config reference; True when it changed."""
    from pathlib import Path

    p = Path(path)
    text = p.read_text()
    head, rest = text.split(START, 1)
    tail = rest.split(END, 1)[1]
    new = f"{head}{START}\n{config_reference()}{END}{tail}"
    p.write_text(new)
    return new != text


def registry_homes() -> dict[str, dict[str, str]]:
    """Which rlvr module registers each component, by registry kind, after importing every rlvr module."""
    import importlib
    import pkgutil

    import rlvr
    from rlvr.registry import REGISTRIES, load_all

    for info in pkgutil.walk_packages(rlvr.__path__, "rlvr."):
        if not info.name.endswith("__main__"):
            importlib.import_module(info.name)
    load_all()
    out: dict[str, dict[str, str]] = {}
    for kind, registry in sorted(REGISTRIES.items()):
        homes = {name: registry.get(name).module for name in registry.names()}
        homes = {name: module for name, module in homes.items() if module.startswith("rlvr.")}
        if homes:
            out[kind] = homes
    return out


def render_homes(homes: dict[str, dict[str, str]]) -> str:
    """``HOMES`` as the Python source of :mod:`rlvr.registry_index` holds it."""
    import json

    lines = ["HOMES: dict[str, dict[str, str]] = {  # registry kind -> {component name -> module}"]
    for kind, names in homes.items():
        lines.append(f"    {json.dumps(kind)}: {{")
        lines += [f"        {json.dumps(name)}: {json.dumps(module)}," for name, module in names.items()]
        lines.append("    },")
    return "\n".join(lines) + "\n}\n"


def sync_registry_index() -> bool:
    """Rewrite ``HOMES`` in rlvr/registry_index.py; True when it changed."""
    from pathlib import Path

    import rlvr.registry_index as index

    p = Path(index.__file__)
    text = p.read_text()
    start, end = text.index("HOMES: dict"), text.index("# (generated)")
    new = text[:start] + render_homes(registry_homes()) + text[end:]
    p.write_text(new)
    return new != text


if __name__ == "__main__":
    import sys

    index = sync_registry_index()  # first: the README's reference lists what the index names
    if index:  # the reference must be built by a process that read the new index
        import subprocess

        print("rlvr/registry_index.py: updated", flush=True)
        raise SystemExit(subprocess.run([sys.executable, "-m", "rlvr.cli.docs", *sys.argv[1:]]).returncode)
    print("rlvr/registry_index.py: up to date")
    print("README:", "updated" if sync_readme(*(sys.argv[1:] or ["README.md"])) else "up to date")
