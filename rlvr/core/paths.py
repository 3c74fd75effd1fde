"""Config fields that name local files and directories, resolved once to absolute paths.

A field typed :data:`LocalPathStr` (``Annotated[str, LocalPath()]``) holds a file or directory on this machine
(data files, model directories, demonstrations). When a config is loaded (:func:`rlvr.config.run.load_config`),
every such field that holds a relative path is resolved once: beside the config file when it exists there, else
in the working directory, and stored absolute, so the ``config.yaml`` a run writes finds the same files when the
run is resumed, evaluated or compared from any other directory (:func:`resolve_local_paths`).

A registered component's params kept as a plain mapping (a verifier's ``verifier_params``, a reward's
``params``) are resolved by the same rule: the model holding the mapping names the params model it is for in a
``local_path_params()`` method (field name -> params model), and the mapping's entries for that model's
:data:`LocalPathStr` fields are made absolute (a reward model's or a judge's ``path``). A field whose type always
holds one params model's mapping (a rubric's ``judge``) says so with a :class:`ParamsOf` marker instead.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, get_args

__all__ = ["LocalPath", "LocalPathStr", "ParamsOf", "resolve_local_paths", "resolve_path", "resolved_raw"]


class LocalPath:
    """The marker of a field that names a local file or directory."""

    def __repr__(self) -> str:
        return "LocalPath()"


LocalPathStr = Annotated[str, LocalPath()]


class ParamsOf:
    """The marker of a field holding a mapping of ``model``'s params: its local paths resolve too."""

    def __init__(self, model: Any):
        self.model = model

    def __repr__(self) -> str:
        return f"ParamsOf({getattr(self.model, '__name__', self.model)})"


def _params_of(field: Any) -> Any:
    """The params model a field's :class:`ParamsOf` marker names, or None."""
    for m in getattr(field, "metadata", ()):
        if isinstance(m, ParamsOf):
            return m.model
    return None


def resolve_path(value: str, base: Path | None) -> str:
    """``value`` absolute: ``~`` expanded; a relative path beside ``base`` (a config file's folder) when it exists
    there, else in the working directory."""
    p = Path(value).expanduser()
    if p.is_absolute():
        return str(p)
    if base is not None and (base / p).exists():
        return str((base / p).resolve())
    return str(p.resolve())


def _marked(annotation: Any) -> bool:
    """Whether ``annotation`` is ``LocalPathStr``, or a union holding it (``LocalPathStr | None``)."""
    if any(isinstance(m, LocalPath) for m in getattr(annotation, "__metadata__", ())):
        return True
    return any(_marked(a) for a in get_args(annotation))


def _is_local_path(field: Any) -> bool:
    return any(isinstance(m, LocalPath) for m in getattr(field, "metadata", ())) or _marked(field.annotation)


def _resolve_params(params: Any, model: Any, base: Path | None) -> Any:
    """``params`` (a mapping of ``model``'s fields) with its local-path entries absolute; the same object when
    nothing changes."""
    if not isinstance(params, dict) or model is None:
        return params
    fields = getattr(model, "model_fields", {})

    def one(k: str, v: Any) -> Any:
        if k not in fields:
            return v
        if _is_local_path(fields[k]) and isinstance(v, str) and v:
            return resolve_path(v, base)
        return _resolve_params(v, _params_of(fields[k]), base)

    new = {k: one(k, v) for k, v in params.items()}
    return new if any(new[k] is not params[k] for k in params) else params


def resolve_local_paths(model: Any, base: Path | None = None) -> Any:
    """``model`` (a pydantic model tree, frozen or not) with every :data:`LocalPathStr` field made absolute
    (:func:`resolve_path`); the same object when nothing changes."""
    from pydantic import BaseModel

    def walk(value: Any) -> Any:
        if isinstance(value, BaseModel):
            changes = {}
            for name, field in type(value).model_fields.items():
                old = getattr(value, name)
                if _is_local_path(field) and isinstance(old, str) and old:
                    new = resolve_path(old, base)
                elif (params_model := _params_of(field)) is not None:
                    new = _resolve_params(old, params_model, base)
                else:
                    new = walk(old)
                if new is not old:
                    changes[name] = new
            hook = getattr(value, "local_path_params", None)
            for name, params_model in (hook() if callable(hook) else {}).items():
                old = changes.get(name, getattr(value, name))
                new = _resolve_params(old, params_model, base)
                if new is not old:
                    changes[name] = new
            return value.model_copy(update=changes) if changes else value
        if isinstance(value, (list, tuple)):
            items = [walk(v) for v in value]
            return type(value)(items) if any(a is not b for a, b in zip(items, value)) else value
        if isinstance(value, dict):
            items = {k: walk(v) for k, v in value.items()}
            return items if any(items[k] is not value[k] for k in value) else value
        return value

    return walk(model)


def resolved_raw(raw: Any, resolved: Any) -> Any:
    """``raw`` (a config mapping as written) with each path its validated form made absolute: every string leaf
    whose counterpart in ``resolved`` (the same config loaded and dumped, e.g. ``cfg.model_dump(mode="json")``)
    is a different, absolute path. For a config merged under another file's (a comparison's shared config under
    a variant's), whose relative paths belong beside their own file."""
    if isinstance(raw, dict):
        return {k: resolved_raw(v, resolved.get(k) if isinstance(resolved, dict) else None) for k, v in raw.items()}
    if isinstance(raw, list):
        same = isinstance(resolved, list) and len(raw) == len(resolved)
        return [resolved_raw(a, b) for a, b in zip(raw, resolved)] if same else raw
    if isinstance(raw, str) and isinstance(resolved, str) and raw != resolved and Path(resolved).is_absolute() \
            and not Path(raw).expanduser().is_absolute():
        return resolved
    return raw
