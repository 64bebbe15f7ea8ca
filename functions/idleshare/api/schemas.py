"""Request body types of the admin API as the OpenAPI document shows them.

Powertools validates only that a body is a JSON object (``dict``): the route then parses it with the
request models of :mod:`idleshare.parse.requests`, so that every error names its field the same way
everywhere (422). The document's request schemas are those models' ``model_json_schema()``, made
self-contained (no ``$ref``) and built only when the document is (not at cold start).
"""

from __future__ import annotations

from functools import cache
from typing import Annotated, Any

from pydantic import BaseModel

from idleshare.parse.requests import CreateQuota, Recalculate, SchedulerConfigRequest, UpdateQuota


class DocSchema:
    """Annotated metadata: the field's JSON schema is ``model``'s (built when the document is generated)."""

    def __init__(self, model: type[BaseModel]) -> None:
        self.model = model

    def __get_pydantic_json_schema__(self, core_schema: Any, handler: Any) -> dict[str, Any]:
        return schema(self.model)


def _inline(value: Any, defs: dict[str, Any]) -> Any:
    """``value`` with every ``#/$defs/X`` reference replaced by X (the shapes are not recursive)."""
    if isinstance(value, dict):
        ref = value.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            return _inline(defs[ref.removeprefix("#/$defs/")], defs)
        return {k: _inline(v, defs) for k, v in value.items() if k != "$defs"}
    if isinstance(value, list):
        return [_inline(v, defs) for v in value]
    return value


@cache
def schema(model: type[BaseModel]) -> dict[str, Any]:
    """``model``'s JSON schema, self-contained."""
    raw = model.model_json_schema()
    inlined: dict[str, Any] = _inline(raw, raw.get("$defs", {}))
    return inlined


CreateQuotaBody = Annotated[dict[str, Any], DocSchema(CreateQuota)]
UpdateQuotaBody = Annotated[dict[str, Any], DocSchema(UpdateQuota)]
SchedulerConfigBody = Annotated[dict[str, Any], DocSchema(SchedulerConfigRequest)]
RecalculateBody = Annotated[dict[str, Any], DocSchema(Recalculate)]
