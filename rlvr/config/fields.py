"""The config's building blocks: a section (typed, frozen, no unknown keys) and the fields that hold a
registered component (``{name: ..., <params>}``, its params validated against the component's own model when
the config loads) or a registered name."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, PlainSerializer, PlainValidator, ValidationError, WithJsonSchema

from rlvr.config.errors import format_params_error
from rlvr.registry import Params, Registry, RegistryError

__all__ = ["Section", "Component", "component", "named"]


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Component(BaseModel):
    """A registered component chosen by name, with its validated parameters."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)
    name: str
    params: Params

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, **self.params.model_dump(mode="json")}


def component(registry: Registry, default: str | None) -> Any:
    """A config field holding a ``registry`` component; a mapping without ``name`` means ``default``
    (``None``: the name is required)."""

    def validate(v: Any) -> Component:
        if isinstance(v, Component):
            return v
        if isinstance(v, str):
            v = {"name": v}
        if isinstance(v, dict) and "name" not in v and default is not None:
            v = {"name": default, **v}
        if isinstance(v, dict) and "name" not in v:
            raise ValueError(f"expected a mapping with a 'name' (one of: {', '.join(registry.names())})")
        if not isinstance(v, dict):
            raise ValueError(f"expected a mapping with a 'name' (one of: {', '.join(registry.names())})")
        raw = dict(v)
        name = raw.pop("name")
        try:
            entry = registry.get(str(name))
        except RegistryError as e:
            raise ValueError(str(e)) from None
        try:
            params = entry.params.model_validate(raw)
        except ValidationError as e:
            raise ValueError(format_params_error(f"{registry.kind} {name!r}", entry.params, e)) from None
        return Component(name=str(name), params=params)

    return Annotated[Component, PlainValidator(validate), PlainSerializer(lambda c: c.to_dict()),
                     WithJsonSchema({"type": "object"})]


def named(registry: Registry) -> Any:
    def validate(v: Any) -> str:
        if not isinstance(v, str) or v not in registry:
            raise ValueError(f"unknown {registry.kind} {v!r}; valid names: {', '.join(registry.names())}")
        return v

    return Annotated[str, PlainValidator(validate), WithJsonSchema({"type": "string"})]
