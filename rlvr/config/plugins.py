"""Your own components from the command line: ``plugins`` names modules imported before a config is
validated, so the components they register (``@ADVANTAGES.register("mine", MyParams)`` and the like) are
known by name like rlvr's own.

Each entry is a dotted module name (importable from the working directory or ``sys.path``) or a ``.py``
file. A file given in a config file resolves beside that file and is written back as an absolute path, so
the resolved ``config.yaml`` of a run finds it wherever the run is resumed; given on the command line it
resolves against the working directory. A file is imported once per process, under a name derived from its
absolute path. A plugin that cannot be imported is a config error naming it and the cause.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from pathlib import Path
from typing import Any

from rlvr.config.errors import ConfigError

__all__ = ["import_plugins", "resolve_plugin_paths", "read_config_file"]


def _is_file(entry: str) -> bool:
    return entry.endswith(".py") or "/" in entry


def resolve_plugin_paths(raw: Any, base: Path) -> Any:
    """``raw`` with its relative ``plugins`` files made absolute against ``base`` (a config file's folder)."""
    if not isinstance(raw, dict) or not isinstance(raw.get("plugins"), list):
        return raw
    plugins = [str((base / p).resolve()) if isinstance(p, str) and _is_file(p) and not Path(p).is_absolute()
               else p for p in raw["plugins"]]
    return {**raw, "plugins": plugins}


def _import_file(path: Path) -> None:
    name = f"rlvr_plugin_{path.stem}_{hashlib.sha1(str(path).encode()).hexdigest()[:8]}"
    if name in sys.modules:
        return
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise


def import_plugins(entries: Any) -> None:
    """Import every plugin in ``entries`` (a list of module names or ``.py`` paths)."""
    if entries is None:
        return
    if not isinstance(entries, list) or not all(isinstance(e, str) and e for e in entries):
        raise ValueError("plugins must be a list of module names or .py files")
    for entry in entries:
        try:
            if _is_file(entry):
                path = Path(entry).resolve()
                if not path.is_file():
                    raise FileNotFoundError(f"no such file: {path}")
                _import_file(path)
            else:
                importlib.import_module(entry)
        except Exception as e:
            raise ValueError(f"plugin {entry!r} could not be imported: {type(e).__name__}: {e}") from None


def read_config_file(path: str | Path) -> dict[str, Any]:
    """A config file's mapping, its reward-function and plugin paths resolved beside it."""
    import yaml

    from rlvr.config.paths import resolve_reward_specs
    from rlvr.core import yaml_io

    p = Path(path)
    if not p.is_file():
        raise ConfigError([f"config file {str(p)!r} not found"])
    try:
        loaded = yaml_io.load(p.read_text()) or {}
    except yaml.YAMLError as e:
        raise ConfigError([f"{p}: invalid YAML: {e}"]) from None
    if not isinstance(loaded, dict):
        raise ConfigError([f"{p}: expected a mapping at the top level"])
    return resolve_plugin_paths(resolve_reward_specs(loaded, p.parent), p.parent)
