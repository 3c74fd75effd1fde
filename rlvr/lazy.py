"""Model libraries imported on first use, so commands that need no model start without them.

``from rlvr.lazy import torch`` gives a stand-in for the ``torch`` module that imports the real one the
first time any attribute is read. At that moment every rlvr module that holds the stand-in gets the real
module in its place (and so does this module, for later importers), so code runs on the real module at
full speed from the first use on; the stand-in itself forwards every read, for any reference the
rebinding did not reach. Type checkers see the real modules. A module that only defines components
(their parameters, their registration, functions that use torch when called) therefore imports in
microseconds, and ``rlvr config``, ``rlvr recipes`` or ``rlvr --help`` never load torch, transformers
or numpy, which take seconds. (Python's ``importlib.util.LazyLoader`` cannot do this: transformers
replaces its own entry in ``sys.modules`` while loading, which LazyLoader refuses.)

Module-level *use* still loads the library at import: a default ``dtype=torch.float32``, a class that
subclasses ``nn.Module``, a decorator ``@torch.no_grad()`` (:func:`no_grad` here defers it to the first
call). Modules that need such use are kept out of the import graph of the configuration
(``tests/test_cli_startup.py`` holds it).
"""

from __future__ import annotations

import functools
import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

__all__ = ["LazyModule", "torch", "F", "np", "transformers", "no_grad", "inference_mode", "lazy_exports"]


class LazyModule(types.ModuleType):
    """A module object that imports module ``target`` on its first attribute read and forwards to it."""

    def __init__(self, target: str):
        super().__init__(f"rlvr.lazy:{target}")
        self.__dict__["_lazy_target"] = target
        self.__dict__["_lazy_module"] = None

    def _load(self) -> types.ModuleType:
        mod = self.__dict__["_lazy_module"]
        if mod is None:
            mod = importlib.import_module(self.__dict__["_lazy_target"])
            self.__dict__["_lazy_module"] = mod
            _rebind(self, mod)
        return mod

    def __getattr__(self, name: str) -> Any:  # names not in the stand-in's own __dict__
        if name in ("__path__", "__file__", "__wrapped__") and self.__dict__["_lazy_module"] is None:
            raise AttributeError(name)  # introspection must not import the library
        return getattr(self._load(), name)

    def __dir__(self) -> list[str]:
        return dir(self._load())

    def __repr__(self) -> str:
        state = "loaded" if self.__dict__["_lazy_module"] is not None else "not loaded"
        return f"<lazy module {self.__dict__['_lazy_target']!r} ({state})>"


def _rebind(stand_in: LazyModule, mod: types.ModuleType) -> None:
    """Replace ``stand_in`` by ``mod`` in the globals of every loaded rlvr module (this one included)."""
    for name, module in list(sys.modules.items()):
        if module is None or not (name == "rlvr" or name.startswith("rlvr.")):
            continue
        namespace = getattr(module, "__dict__", None)
        if not isinstance(namespace, dict) or isinstance(module, LazyModule):
            continue
        for key, value in list(namespace.items()):
            if value is stand_in:
                namespace[key] = mod


if TYPE_CHECKING:
    import numpy as np
    import torch
    import torch.nn.functional as F
    import transformers
else:
    torch = LazyModule("torch")
    F = LazyModule("torch.nn.functional")
    np = LazyModule("numpy")
    transformers = LazyModule("transformers")


def _under(context: str):
    """A decorator running ``fn`` inside ``torch.<context>()``, looked up when ``fn`` is called."""

    def decorate(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with getattr(torch, context)():
                return fn(*args, **kwargs)

        return wrapper

    return decorate


no_grad = _under("no_grad")  # ``@torch.no_grad()``, importing torch on the first call, not at definition
inference_mode = _under("inference_mode")  # ``@torch.inference_mode()``, likewise


def lazy_exports(package: str, homes: dict[str, str]):
    """A module ``__getattr__`` (PEP 562) for ``package`` that imports ``package.homes[name]`` when ``name``
    is first read, so a package can re-export names of modules it does not import eagerly."""

    def __getattr__(name: str) -> Any:
        if name not in homes:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{homes[name]}"), name)

    return __getattr__
