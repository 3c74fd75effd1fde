"""Readable config errors: one line per problem, naming the field and what is allowed."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ValidationError

__all__ = ["ConfigError", "format_validation_error", "format_params_error"]


class ConfigError(ValueError):
    """Invalid configuration; ``lines`` holds one message per problem."""

    def __init__(self, lines: list[str]):
        self.lines = lines
        super().__init__("invalid config:\n" + "\n".join(f"  - {ln}" for ln in lines))


def _model_at(model: type[BaseModel], loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The pydantic model class that owns the field at ``loc`` (for listing allowed fields)."""
    for part in loc:
        field = model.model_fields.get(str(part)) if isinstance(part, str) else None
        if field is None:
            return None
        ann = field.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            model = ann
        else:
            return None
    return model


def _allowed(model: type[BaseModel] | None) -> str:
    if model is None:
        return ""
    return f" (allowed: {', '.join(model.model_fields)})" if model.model_fields else " (it takes no fields)"


def _line(root: type[BaseModel], err: dict[str, Any], prefix: str = "") -> str:
    loc = tuple(err["loc"])
    path = prefix + ".".join(str(x) for x in loc) if loc else prefix.rstrip(".") or "config"
    if err["type"] == "extra_forbidden":
        return f"{path}: unknown field{_allowed(_model_at(root, loc[:-1]))}"
    msg = err["msg"].removeprefix("Value error, ")
    got = err.get("input")
    quiet = isinstance(got, (dict, list)) or err["type"] in ("missing", "value_error")
    shown = "" if quiet else f" (got {got!r})"
    return f"{path}: {msg}{shown}"


def format_validation_error(root: type[BaseModel], e: ValidationError) -> list[str]:
    return [_line(root, err) for err in e.errors()]


def format_params_error(what: str, model: type[BaseModel], e: ValidationError) -> str:
    return f"{what}: " + "; ".join(_line(model, err) for err in e.errors())
