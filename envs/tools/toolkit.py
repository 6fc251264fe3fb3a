"""Tools: a name, an OpenAI function-calling JSON Schema and a handler over the app state.

Arguments are checked against the schema before the handler runs, so handlers can trust
types and bounds. The validator covers the subset of JSON Schema the apps use (object with
properties / required / additionalProperties, string, integer, number, boolean, array, enum,
length and range bounds, pattern): small, dependency-free, and exact about what it rejects
(booleans are not integers, NaN is not a number).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from typing import Any, Callable


class ToolError(Exception):
    """A call that was well-formed but cannot be carried out (unknown id, insufficient funds).
    Its message is shown to the agent, so it says what is wrong and, where useful, what to try."""


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    parameters: dict
    handler: Callable[[dict, dict], Any]  # (state, arguments) -> JSON-able result; mutates state
    #: The state collections the handler may change. The env re-hashes and re-grades only those,
    #: so a handler must declare every collection it writes (a fuzz test checks this).
    writes: tuple[str, ...] = ()

    @property
    def spec(self) -> dict:
        """OpenAI function-calling format."""
        return {"type": "function", "function": {"name": self.name, "description": self.description,
                                                 "parameters": self.parameters}}


def params(required: tuple[str, ...] = (), **properties: dict) -> dict:
    return {"type": "object", "properties": properties, "required": list(required), "additionalProperties": False}


def string(description: str, max_length: int = 200, **extra) -> dict:
    return {"type": "string", "description": description, "minLength": 0, "maxLength": max_length, **extra}


DATE = {"type": "string", "pattern": r"^\d{4}-\d{2}-\d{2}$", "description": "a date, YYYY-MM-DD"}
TIME = {"type": "string", "pattern": r"^([01]\d|2[0-3]):[0-5]\d$", "description": "a time of day, HH:MM (24h)"}
EMAIL = {"type": "string", "pattern": r"^[^@\s]+@[^@\s]+\.[^@\s]+$", "maxLength": 120, "description": "an email address"}


def tool(name: str, description: str, parameters: dict):
    def wrap(fn: Callable[[dict, dict], Any]) -> Tool:
        return Tool(name, description, parameters, fn)

    return wrap


def writes(*collections: str):
    """Declare the collections a tool changes (stacked above @tool)."""
    def wrap(t: Tool) -> Tool:
        return replace(t, writes=collections)

    return wrap


# --- validation ------------------------------------------------------------------------------------
_PATTERNS: dict[str, re.Pattern] = {}


def _is_type(value: Any, kind: str) -> bool:
    if kind == "string":
        return isinstance(value, str)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if kind == "array":
        return isinstance(value, list)
    if kind == "object":
        return isinstance(value, dict)
    if kind == "null":
        return value is None
    return False


def validate(value: Any, schema: dict, where: str = "arguments") -> list[str]:
    """Every way `value` violates `schema`, as messages naming the offending field."""
    kind = schema.get("type")
    if kind is not None and not _is_type(value, kind):
        return [f"{where} must be {'an' if kind[0] in 'aeiou' else 'a'} {kind}, got {_type_name(value)}"]
    errors: list[str] = []
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{where} must be one of {', '.join(map(repr, schema['enum']))}")
    if isinstance(value, str):
        if len(value) > schema.get("maxLength", math.inf):
            errors.append(f"{where} is longer than {schema['maxLength']} characters")
        if len(value) < schema.get("minLength", 0):
            errors.append(f"{where} must have at least {schema['minLength']} character(s)")
        if "pattern" in schema:
            pattern = _PATTERNS.setdefault(schema["pattern"], re.compile(schema["pattern"]))
            if not pattern.search(value):
                errors.append(f"{where} must be {schema.get('description', 'match ' + schema['pattern'])}")
    if _is_type(value, "number"):
        if value < schema.get("minimum", -math.inf):
            errors.append(f"{where} must be at least {schema['minimum']}")
        if value > schema.get("maximum", math.inf):
            errors.append(f"{where} must be at most {schema['maximum']}")
    if isinstance(value, list):
        if len(value) > schema.get("maxItems", math.inf):
            errors.append(f"{where} has more than {schema['maxItems']} items")
        if len(value) < schema.get("minItems", 0):
            errors.append(f"{where} needs at least {schema['minItems']} item(s)")
        if "items" in schema and not errors:
            for i, item in enumerate(value):
                errors.extend(validate(item, schema["items"], f"{where}[{i}]"))
    if isinstance(value, dict):
        props = schema.get("properties", {})
        for key in schema.get("required", ()):
            if key not in value:
                errors.append(f"{where} is missing the required field {key!r}")
        if schema.get("additionalProperties", True) is False:
            extra = [k for k in value if k not in props]
            if extra:
                shown = ", ".join(repr(k[:40]) for k in extra[:5])
                errors.append(f"{where} has unknown field(s) {shown}; allowed: {', '.join(props) or 'none'}")
        for key, sub in props.items():
            if key in value:
                errors.extend(validate(value[key], sub, key if where == "arguments" else f"{where}.{key}"))
    return errors


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    return {str: "a string", int: "an integer", float: "a number", list: "an array", dict: "an object"}.get(
        type(value), type(value).__name__)
