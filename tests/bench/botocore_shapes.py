"""Check a JSON document against a shape of botocore's SageMaker service model.

botocore's own ``ParamValidator`` checks types, required members and minimums but not enums,
maximums or patterns; this walks the shape and checks all of them (patterns that use ``\\p{...}``
classes, which Python's ``re`` lacks, are skipped).
"""

from __future__ import annotations

import datetime as dt
import functools
import re
from typing import Any

import botocore.session
from botocore.model import ListShape, MapShape, ServiceModel, Shape, StructureShape


@functools.cache
def sagemaker_model() -> ServiceModel:
    return botocore.session.get_session().get_service_model("sagemaker")


def violations(shape_name: str, value: Any) -> list[str]:
    """Every way ``value`` breaks the shape ``shape_name``, as ``path: problem`` strings."""
    out: list[str] = []
    _check(sagemaker_model().shape_for(shape_name), value, "$", out)
    return out


def _bounds(shape: Shape, size: float, what: str, path: str, out: list[str]) -> None:
    meta = shape.metadata
    if "min" in meta and size < meta["min"]:
        out.append(f"{path}: {what} {size} < min {meta['min']}")
    if "max" in meta and size > meta["max"]:
        out.append(f"{path}: {what} {size} > max {meta['max']}")


def _check(shape: Shape, value: Any, path: str, out: list[str]) -> None:
    kind = shape.type_name
    if isinstance(shape, StructureShape):
        if not isinstance(value, dict):
            out.append(f"{path}: expected an object")
            return
        for name in shape.required_members:
            if name not in value:
                out.append(f"{path}.{name}: required")
        for name, member in value.items():
            if name not in shape.members:
                out.append(f"{path}.{name}: not a member of {shape.name}")
            else:
                _check(shape.members[name], member, f"{path}.{name}", out)
    elif isinstance(shape, ListShape):
        if not isinstance(value, list):
            out.append(f"{path}: expected an array")
            return
        _bounds(shape, len(value), "length", path, out)
        for i, item in enumerate(value):
            _check(shape.member, item, f"{path}[{i}]", out)
    elif isinstance(shape, MapShape):
        if not isinstance(value, dict):
            out.append(f"{path}: expected an object")
            return
        for key, item in value.items():
            _check(shape.key, key, f"{path}<key {key}>", out)
            _check(shape.value, item, f"{path}[{key}]", out)
    elif kind == "string":
        if not isinstance(value, str):
            out.append(f"{path}: expected a string")
            return
        _bounds(shape, len(value), "length", path, out)
        enum = getattr(shape, "enum", None)
        if enum and value not in enum:
            out.append(f"{path}: {value!r} not in enum {shape.name}")
        pattern = shape.metadata.get("pattern")
        if pattern and "\\p{" not in pattern and not re.fullmatch(pattern, value):
            out.append(f"{path}: {value!r} does not match {pattern}")
    elif kind in ("integer", "long"):
        if not isinstance(value, int) or isinstance(value, bool):
            out.append(f"{path}: expected an integer")
            return
        _bounds(shape, value, "value", path, out)
    elif kind in ("float", "double"):
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            out.append(f"{path}: expected a number")
            return
        _bounds(shape, value, "value", path, out)
    elif kind == "boolean":
        if not isinstance(value, bool):
            out.append(f"{path}: expected a boolean")
    elif kind == "timestamp":
        try:
            dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        except ValueError:
            out.append(f"{path}: not an ISO 8601 timestamp")
    else:  # pragma: no cover - no other shape types in these documents
        out.append(f"{path}: unchecked shape type {kind}")
