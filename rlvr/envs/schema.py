"""A small JSON Schema subset validator (no dependency on ``jsonschema``).

Supported keywords: ``type`` (a name or a list of names: object, array, string, integer, number, boolean,
null), ``enum``, ``const``, ``required``, ``properties``, ``additionalProperties`` (bool or schema),
``items``, ``minItems``, ``maxItems``, ``minLength``, ``maxLength``, ``pattern`` and ``minimum`` / ``maximum``.
That covers function-calling tool schemas (OpenAI / BFCL style); unknown keywords are ignored. Types are
strict: ``"3"`` is not an integer and ``True`` is not a number (no string/number coercion).
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["schema_errors", "type_ok"]

_TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}


def type_ok(value: Any, t: str | list[str]) -> bool:
    """Whether ``value`` has JSON type ``t`` (or one of the listed types)."""
    names = [t] if isinstance(t, str) else list(t)
    return any(_TYPES.get(n, lambda v: False)(value) for n in names)


def _object_errors(value: dict, schema: dict, path: str) -> list[str]:
    errors = [f"{path}: missing required property {r!r}" for r in schema.get("required", []) if r not in value]
    props, extra = schema.get("properties", {}), schema.get("additionalProperties", True)
    for k, v in value.items():
        if k in props:
            errors += schema_errors(v, props[k], f"{path}.{k}")
        elif extra is False:
            errors.append(f"{path}: unexpected property {k!r}")
        elif isinstance(extra, dict):
            errors += schema_errors(v, extra, f"{path}.{k}")
    return errors


def _scalar_errors(value: Any, schema: dict, path: str) -> list[str]:
    errors = []
    if isinstance(value, str):
        if len(value) < schema.get("minLength", 0) or len(value) > schema.get("maxLength", float("inf")):
            errors.append(f"{path}: string length {len(value)} out of bounds")
        if "pattern" in schema and not re.search(schema["pattern"], value):
            errors.append(f"{path}: does not match pattern {schema['pattern']!r}")
    if type_ok(value, "number"):
        if value < schema.get("minimum", float("-inf")) or value > schema.get("maximum", float("inf")):
            errors.append(f"{path}: {value} out of range")
    return errors


def schema_errors(value: Any, schema: dict, path: str = "$") -> list[str]:
    """The ways ``value`` violates ``schema`` (empty when valid)."""
    if "type" in schema and not type_ok(value, schema["type"]):
        return [f"{path}: expected {schema['type']}, got {type(value).__name__}"]
    if "enum" in schema and not any(_same(value, e) for e in schema["enum"]):
        return [f"{path}: {value!r} not one of {schema['enum']}"]
    if "const" in schema and not _same(value, schema["const"]):
        return [f"{path}: must be {schema['const']!r}"]
    if isinstance(value, dict):
        return _object_errors(value, schema, path)
    if isinstance(value, list):
        errors = []
        if len(value) < schema.get("minItems", 0) or len(value) > schema.get("maxItems", float("inf")):
            errors.append(f"{path}: {len(value)} items out of bounds")
        if isinstance(schema.get("items"), dict):
            for i, v in enumerate(value):
                errors += schema_errors(v, schema["items"], f"{path}[{i}]")
        return errors
    return _scalar_errors(value, schema, path)


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b or (type_ok(a, "number") and type_ok(b, "number") and a == b)
