"""Request body types of the admin API as the OpenAPI document shows them.

Powertools validates only that a body is a JSON object (``dict``): the route then parses it with the request
Shapes of :mod:`idleshare.parse.requests`, so that every error names its field the same way everywhere (422). The
document's request schemas are those Shapes' JSON schemas (msgspec's, self-contained: no ``$ref``), built only when
the document is (not at cold start).
"""

from __future__ import annotations

from functools import cache
from typing import Annotated, Any

from idleshare.parse.requests import CreateQuota, Pause, Recalculate, Request, SchedulerConfigRequest, UpdateQuota
from idleshare.parse.schema import json_schema


class DocSchema:
    """Annotated metadata: the field's JSON schema is ``model``'s (built when the document is generated)."""

    def __init__(self, model: type[Request]) -> None:
        self.model = model

    def __get_pydantic_json_schema__(self, core_schema: Any, handler: Any) -> dict[str, Any]:
        return schema(self.model)


@cache
def schema(model: type[Request]) -> dict[str, Any]:
    """``model``'s JSON schema, self-contained, titled with the operation."""
    return json_schema(model, model.TITLE)


CreateQuotaBody = Annotated[dict[str, Any], DocSchema(CreateQuota)]
UpdateQuotaBody = Annotated[dict[str, Any], DocSchema(UpdateQuota)]
SchedulerConfigBody = Annotated[dict[str, Any], DocSchema(SchedulerConfigRequest)]
RecalculateBody = Annotated[dict[str, Any], DocSchema(Recalculate)]
PauseBody = Annotated[dict[str, Any], DocSchema(Pause)]
