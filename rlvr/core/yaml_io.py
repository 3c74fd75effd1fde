"""YAML through libyaml's C loader and dumper when PyYAML has them (4x faster than the pure-Python ones,
the same documents), the safe pure-Python ones otherwise."""

from __future__ import annotations

from typing import Any

import yaml

__all__ = ["load", "dump"]

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def load(text: str) -> Any:
    """``yaml.safe_load``."""
    return yaml.load(text, Loader=_LOADER)


def dump(data: Any, sort_keys: bool = False) -> str:
    """``yaml.safe_dump``."""
    return yaml.dump(data, Dumper=_DUMPER, sort_keys=sort_keys)
