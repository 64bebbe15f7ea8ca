"""Request body types of the admin API as the OpenAPI document shows them.

Powertools validates only that a body is a JSON object (``dict``); the fields are validated by
:mod:`idleshare.service.admin` with the edge parsers, so that every error names its field the same
way everywhere (422). The schemas in the document are generated from those same parser models
(``idleshare.parse.quotas.SHAPES``), built only when the document is (not at cold start).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Annotated, Any

from idleshare.service.admin import DESCRIPTION_MAX, MAX_INT32, REASON_MAX, TAG_KEY_MAX, TAG_VALUE_MAX, TAGS_MAX


class DocSchema:
    """Annotated metadata: the field's JSON schema is ``build()`` (called when the document is generated)."""

    def __init__(self, build: Callable[[], dict[str, Any]]) -> None:
        self.build = build

    def __get_pydantic_json_schema__(self, core_schema: Any, handler: Any) -> dict[str, Any]:
        return self.build()


def _inline(schema: Any, defs: dict[str, Any]) -> Any:
    """The schema with every ``#/$defs/X`` reference replaced by X (the shapes are not recursive)."""
    if isinstance(schema, dict):
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            return _inline(defs[ref.removeprefix("#/$defs/")], defs)
        return {k: _inline(v, defs) for k, v in schema.items() if k != "$defs"}
    if isinstance(schema, list):
        return [_inline(v, defs) for v in schema]
    return schema


@cache
def shape(name: str) -> dict[str, Any]:
    """botocore shape ``name`` as the edge parser validates it, self-contained."""
    from idleshare.parse.quotas import SHAPES

    raw = SHAPES[name].model_json_schema()
    inlined: dict[str, Any] = _inline(raw, raw.get("$defs", {}))
    return inlined


_INT32 = {"type": "integer", "minimum": 0, "maximum": MAX_INT32}
_DESCRIPTION = {"type": "string", "maxLength": DESCRIPTION_MAX}
_TAGS = {
    "type": "array",
    "maxItems": TAGS_MAX,
    "items": {
        "type": "object",
        "properties": {
            "Key": {"type": "string", "minLength": 1, "maxLength": TAG_KEY_MAX},
            "Value": {"type": "string", "maxLength": TAG_VALUE_MAX},
        },
        "required": ["Key", "Value"],
        "additionalProperties": False,
    },
}


def _quota_fields() -> dict[str, Any]:
    props = shape("ComputeQuota")["properties"]
    return {k: props[k] for k in ("Name", "ComputeQuotaConfig", "ComputeQuotaTarget", "ActivationState")}


def create_quota_schema() -> dict[str, Any]:
    fields = _quota_fields()
    return {
        "title": "CreateComputeQuota",
        "description": "SageMaker's CreateComputeQuota request without ClusterArn (the cluster is in the path).",
        "type": "object",
        "properties": {
            "Name": fields["Name"],
            "Description": _DESCRIPTION,
            "ComputeQuotaConfig": fields["ComputeQuotaConfig"],
            "ComputeQuotaTarget": fields["ComputeQuotaTarget"],
            "ActivationState": fields["ActivationState"],
            "Tags": _TAGS,
        },
        "required": ["Name", "ComputeQuotaConfig", "ComputeQuotaTarget"],
        "additionalProperties": False,
    }


def update_quota_schema() -> dict[str, Any]:
    fields = _quota_fields()
    return {
        "title": "UpdateComputeQuota",
        "description": "SageMaker's UpdateComputeQuota request without ComputeQuotaId (the name is in the path); "
        "fields not given keep their value.",
        "type": "object",
        "properties": {
            "TargetVersion": {**_INT32, "description": "the ComputeQuotaVersion this update expects"},
            "ComputeQuotaConfig": fields["ComputeQuotaConfig"],
            "ComputeQuotaTarget": fields["ComputeQuotaTarget"],
            "ActivationState": fields["ActivationState"],
            "Description": _DESCRIPTION,
        },
        "required": ["TargetVersion"],
        "additionalProperties": False,
    }


def scheduler_config_schema() -> dict[str, Any]:
    return {
        "title": "PutSchedulerConfig",
        "description": "Without TargetVersion: create (409 if one exists); with it: update that version.",
        "type": "object",
        "properties": {
            "SchedulerConfig": shape("SchedulerConfig"),
            "TargetVersion": {**_INT32, "description": "the SchedulerConfigVersion this update expects"},
        },
        "required": ["SchedulerConfig"],
        "additionalProperties": False,
    }


def recalculate_schema() -> dict[str, Any]:
    return {
        "title": "Recalculate",
        "type": "object",
        "properties": {"reason": {"type": "string", "maxLength": REASON_MAX}},
        "additionalProperties": False,
    }


CreateQuotaBody = Annotated[dict[str, Any], DocSchema(create_quota_schema)]
UpdateQuotaBody = Annotated[dict[str, Any], DocSchema(update_quota_schema)]
SchedulerConfigBody = Annotated[dict[str, Any], DocSchema(scheduler_config_schema)]
RecalculateBody = Annotated[dict[str, Any], DocSchema(recalculate_schema)]
