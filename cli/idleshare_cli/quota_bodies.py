"""The request bodies of a compute quota file: SageMaker's ``CreateComputeQuota`` (minus ClusterArn) and
``UpdateComputeQuota`` (minus ComputeQuotaId) shapes, validated locally with the admin API's own request models
(:mod:`idleshare.parse.requests`) so a bad file exits 2 naming the field and nothing is sent. Built by
``quota create|update`` and ``quota import`` alike."""

from __future__ import annotations

from decimal import Decimal
from typing import TYPE_CHECKING, Any, TypeVar

from idleshare.parse.errors import FieldError, InputError
from idleshare_cli.main import UsageError

if TYPE_CHECKING:
    from idleshare.parse.requests import Accepted, Request

R = TypeVar("R", bound="Request")

# Read-only fields of the Describe shape: dropped so `quota describe --format json` output can be re-used.
READ_ONLY_FIELDS = (
    "ClusterArn",
    "ClusterId",
    "ComputeQuotaArn",
    "ComputeQuotaId",
    "ComputeQuotaVersion",
    "Status",
    "FailureReason",
    "CreationTime",
    "CreatedBy",
    "LastModifiedTime",
    "LastModifiedBy",
)


def _parse(model: type[R], body: dict[str, Any], source: str) -> Accepted[R]:
    """``body`` as the API will parse it: an InputError naming ``source`` (the file) and each field."""
    from idleshare.parse.requests import parse

    try:
        return parse(model, body)
    except InputError as exc:
        raise InputError(source, exc.errors) from None


def create_body(document: object, source: str) -> dict[str, Any]:
    """The CreateComputeQuota request (minus ClusterArn) from a file, validated as the API does."""
    from idleshare.parse.requests import CreateQuota

    if not isinstance(document, dict):
        raise InputError(source, [FieldError("", "expected one compute quota object (CreateComputeQuota shape)")])
    request = _parse(CreateQuota, {k: v for k, v in document.items() if k not in READ_ONLY_FIELDS}, source)
    body: dict[str, Any] = jsonable(request.given())
    return body


def update_body(document: object, source: str, name: str, target_version: int | None) -> dict[str, Any]:
    """The UpdateComputeQuota request (minus ComputeQuotaId): only the fields to change."""
    from idleshare.parse.requests import UpdateQuota

    if not isinstance(document, dict):
        raise InputError(source, [FieldError("", "expected an object (UpdateComputeQuota shape)")])
    # `quota describe --format json` output can be re-used: its read-only fields and its own Name are dropped
    patch = {k: v for k, v in document.items() if k not in READ_ONLY_FIELDS and (k, v) != ("Name", name)}
    version = target_version if target_version is not None else patch.get("TargetVersion")
    if version is None:
        raise UsageError("--target-version: required (the version you read, see `idleshare quota describe`)")
    if isinstance(version, int) and not isinstance(version, bool) and version < 1:
        raise UsageError(f"--target-version: must be >= 1 (got {version})")
    patch["TargetVersion"] = version
    if len(patch) == 1:
        fields = ", ".join(k for k in UpdateQuota.__struct_fields__ if k != "TargetVersion")
        raise InputError(source, [FieldError("", f"nothing to change: give one of {fields}")])
    body: dict[str, Any] = jsonable(_parse(UpdateQuota, patch, source).given())
    return body


def jsonable(value: Any) -> Any:
    """Decimals (exact JSON numbers from the file) back to JSON numbers: ints stay ints."""
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [jsonable(v) for v in value]
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() and "." not in str(value) else float(value)
    return value
