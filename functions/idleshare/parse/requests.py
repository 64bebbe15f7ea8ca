"""The admin API's request bodies: one set of pydantic models, the one validation path of a write.

The API validates each body with these models before calling :mod:`idleshare.service.admin`, the CLI
checks a file with them before sending it, and the OpenAPI document's request schemas are generated
from them. The quota and scheduler-config fields are :mod:`idleshare.parse.quota_shapes`' models of
botocore's SageMaker shapes (the same bounds the recompute reads with); what only a request has is
here: ``TargetVersion`` (botocore's Integer), ``Description`` (EntityDescription), ``Tags`` (TagList)
and the recalculation ``reason``.

:func:`parse` reports every problem of a body together, as one :class:`InputError` (source
``request body``) of :class:`FieldError` s naming each field: a key the request may not carry (with
"did you mean", or why: set by idleshare, the cluster is the path, ...), a null (omit the field
instead), each botocore bound, and what botocore's model cannot say (an instance type listed twice,
two priority classes with one name). The team name's check against the cluster's namespace prefix
needs the cluster record: the service makes it after the parse.
"""

from __future__ import annotations

import difflib
import json
import unicodedata
from collections.abc import Callable, Mapping
from typing import Annotated, Any, ClassVar, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    TypeAdapter,
    ValidationError,
    ValidatorFunctionWrapHandler,
    model_validator,
)
from pydantic_core import PydanticCustomError

from idleshare.parse.errors import FieldError, InputError, capped
from idleshare.parse.quota_shapes import (
    _Activation,
    _check_quotas,
    _EntityName,
    _loc,
    _message,
    _Quota,
    _QuotaConfig,
    _Scheduler,
    _Target,
    _unknown_field,
    parse_scheduler_config,
)

__all__ = [
    "CreateQuota",
    "FieldError",
    "InputError",
    "Recalculate",
    "Request",
    "SchedulerConfigRequest",
    "UpdateQuota",
    "name_problem",
    "parse",
]

SOURCE = "request body"
MAX_INT32 = 2**31 - 1  # botocore's Integer (TargetVersion)
DESCRIPTION_MAX = 1024  # EntityDescription
TAGS_MAX = 50  # TagList
TAG_KEY_MAX, TAG_VALUE_MAX = 128, 256  # TagKey, TagValue
REASON_MAX = 1024  # OwnDetail.reason on the bus
NULL = "must not be null (omit the field instead)"
# Keys of SageMaker's shapes a request may not carry, and why (the cluster is in the path, ids are idleshare's).
_REFUSED = {
    "ClusterArn": "not accepted here: the cluster is the one in the path",
    **dict.fromkeys(
        (
            "ComputeQuotaId",
            "ComputeQuotaArn",
            "ComputeQuotaVersion",
            "Status",
            "CreationTime",
            "LastModifiedTime",
            "ClusterSchedulerConfigId",
        ),
        "set by idleshare: not accepted in a request",
    ),
}
_TAG_PUNCTUATION = frozenset("_.:/=+-@")
_M = TypeVar("_M", bound="Request")


# ---------------------------------------------------------------------------------- validators
def _show(value: object) -> str:
    text = json.dumps(value) if isinstance(value, str | bool | int | float) or value is None else type(value).__name__
    text = {"dict": "an object", "list": "an array"}.get(text, text)
    return text if len(text) <= 60 else text[:57] + "..."


def _problem(message: str) -> PydanticCustomError:
    return PydanticCustomError("request", message)


def _not_null(value: Any) -> Any:
    if value is None:
        raise _problem(NULL)
    return value


NotNull = AfterValidator(_not_null)
"""An optional field may be omitted, never null (a null would read as "remove it" to some, "keep it" to others)."""


def _target_version(value: object) -> object:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise _problem(f"must be an integer (got {_show(value)})")
    if not 0 <= value <= MAX_INT32:
        raise _problem(f"must be between 0 and {MAX_INT32} (got {_show(value)})")
    return value


def _text(allowed: Callable[[str], bool]) -> Callable[[str], str]:
    def check(value: str) -> str:
        for index, char in enumerate(value):
            if not allowed(char):
                raise _problem(f"character {index} ({char!r}) is not allowed")
        return value

    return check


def _description_char(char: str) -> bool:
    return not unicodedata.category(char).startswith("C")


def _tag_char(char: str) -> bool:
    return unicodedata.category(char)[0] in "LZN" or char in _TAG_PUNCTUATION


def _tag_text(low: int, high: int) -> Callable[[str], str]:
    chars = _text(_tag_char)

    def check(value: str) -> str:
        if not low <= len(value) <= high:
            raise _problem(f"must be {low} to {high} characters (got {len(value)})")
        chars(value)
        return value

    return check


def _present(value: object) -> object:
    if value is None:
        raise _problem("required field is missing")
    return value


_TargetVersion = Annotated[Annotated[int, Field(ge=0, le=MAX_INT32)] | None, BeforeValidator(_target_version), NotNull]
"""botocore's Integer: the version the write expects (a stale one is a 409); optional, never null."""
_RequiredVersion = Annotated[int, Field(ge=0, le=MAX_INT32), BeforeValidator(lambda v: _target_version(_not_null(v)))]
"""The same, required."""
_Description = Annotated[
    Annotated[str, Field(max_length=DESCRIPTION_MAX), AfterValidator(_text(_description_char))] | None, NotNull
]
"""EntityDescription: at most 1024 characters of ``[\\p{L}\\p{M}\\p{Z}\\p{S}\\p{N}\\p{P}]*``."""


class _Tag(BaseModel):
    """``Tag``: a key of ``[\\p{L}\\p{Z}\\p{N}_.:/=+\\-@]*`` and its value."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, title="Tag")

    Key: Annotated[
        str,
        BeforeValidator(_present),
        Field(json_schema_extra={"minLength": 1, "maxLength": TAG_KEY_MAX}),
        AfterValidator(_tag_text(1, TAG_KEY_MAX)),
    ]
    Value: Annotated[
        str,
        BeforeValidator(_present),
        Field(json_schema_extra={"maxLength": TAG_VALUE_MAX}),
        AfterValidator(_tag_text(0, TAG_VALUE_MAX)),
    ]


_Tags = Annotated[Annotated[list[_Tag], Field(max_length=TAGS_MAX)] | None, NotNull]
"""TagList: at most 50 tags."""


# ------------------------------------------------------------------------------------ requests
class Request(BaseModel):
    """A request body. ``given()`` is what it carried, as sent (stored as is: numbers stay exact)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)
    REFUSED: ClassVar[Mapping[str, str]] = _REFUSED
    _given: dict[str, Any] = PrivateAttr(default_factory=dict)

    @model_validator(mode="wrap")
    @classmethod
    def _keep_given(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        request = handler(data)
        if isinstance(data, Mapping):
            request._given = {k: data[k] for k in cls.model_fields if k in data}
        return request

    def given(self, *leave_out: str) -> dict[str, Any]:
        return {k: v for k, v in self._given.items() if k not in leave_out}

    @classmethod
    def checks(cls, body: Mapping[str, Any]) -> list[FieldError]:
        """What the shapes cannot say, for the fields that passed them."""
        return []


def _config_checks(config: object) -> list[FieldError]:
    """An instance type listed twice in ComputeQuotaResources or AbsoluteBorrowLimits (sum or override?)."""
    quota = _Quota.model_construct(
        Name="",
        ComputeQuotaTarget=_Target.model_construct(TeamName=""),
        ComputeQuotaConfig=_QuotaConfig.model_validate(config),
    )
    try:
        _check_quotas([quota], None, SOURCE)
    except InputError as exc:
        return exc.errors
    return []


class CreateQuota(Request):
    """SageMaker's CreateComputeQuota request without ClusterArn (the cluster is in the path)."""

    model_config = ConfigDict(title="CreateComputeQuota")

    Name: Annotated[_EntityName | None, NotNull]
    Description: _Description = None
    ComputeQuotaConfig: Annotated[_QuotaConfig | None, NotNull]
    ComputeQuotaTarget: Annotated[_Target | None, NotNull]
    ActivationState: Annotated[_Activation | None, NotNull] = None
    Tags: _Tags = None

    @classmethod
    def checks(cls, body: Mapping[str, Any]) -> list[FieldError]:
        return _config_checks(body["ComputeQuotaConfig"]) if body.get("ComputeQuotaConfig") is not None else []


class UpdateQuota(Request):
    """SageMaker's UpdateComputeQuota request without ComputeQuotaId (the name is in the path); fields not
    given keep their value."""

    model_config = ConfigDict(title="UpdateComputeQuota")
    REFUSED: ClassVar[Mapping[str, str]] = {
        **_REFUSED,
        "Name": "a compute quota cannot be renamed (its name is in the path)",
        "Tags": "tags are set when the quota is created (UpdateComputeQuota has no Tags)",
    }

    TargetVersion: Annotated[_RequiredVersion, Field(description="the ComputeQuotaVersion this update expects")]
    ComputeQuotaConfig: Annotated[_QuotaConfig | None, NotNull] = None
    ComputeQuotaTarget: Annotated[_Target | None, NotNull] = None
    ActivationState: Annotated[_Activation | None, NotNull] = None
    Description: _Description = None

    @classmethod
    def checks(cls, body: Mapping[str, Any]) -> list[FieldError]:
        return CreateQuota.checks(body)


class SchedulerConfigRequest(Request):
    """Without TargetVersion: create (409 if one exists); with it: update that version."""

    model_config = ConfigDict(title="PutSchedulerConfig")

    SchedulerConfig: Annotated[_Scheduler | None, NotNull]
    TargetVersion: Annotated[_TargetVersion, Field(description="the SchedulerConfigVersion this update expects")] = None

    @classmethod
    def checks(cls, body: Mapping[str, Any]) -> list[FieldError]:
        """Two priority classes with one name (their WorkloadPriorityClasses would collide)."""
        if body.get("SchedulerConfig") is None:
            return []
        try:
            parse_scheduler_config({"SchedulerConfig": body["SchedulerConfig"]}, SOURCE, decoded=True)
        except InputError as exc:
            return exc.errors
        return []


class Recalculate(Request):
    """A recalculation request: why (it goes on idleshare's bus with the request id)."""

    model_config = ConfigDict(title="Recalculate")

    reason: Annotated[str, Field(max_length=REASON_MAX)] | None = None


# ------------------------------------------------------------------------------------- parsing
def parse(model: type[_M], body: object) -> _M:
    """``body`` as a ``model`` request, or :class:`InputError` naming every offending field."""
    if not isinstance(body, Mapping):
        raise InputError(SOURCE, [FieldError("", f"expected a JSON object (got {_show(body)})")])
    try:
        request: _M | None = model.model_validate(body)
        errors: list[FieldError] = []
    except ValidationError as exc:
        request, errors = None, _field_errors(model, exc)
    except RecursionError:
        raise InputError(SOURCE, [FieldError("", "nested too deeply")]) from None
    valid = {k: v for k, v in body.items() if k in model.model_fields and not _under(k, errors)}
    errors += model.checks(valid)
    if errors or request is None:
        raise InputError(SOURCE, capped(errors))
    return request


def name_problem(name: str) -> str | None:
    """What is wrong with ``name`` as a compute quota's Name (EntityName), or None."""
    try:
        TypeAdapter(_EntityName).validate_python(name)
    except ValidationError as exc:
        return _field_errors(CreateQuota, exc)[0].message
    return None


def _under(field: str, errors: list[FieldError]) -> bool:
    return any(e.loc == field or e.loc.startswith((f"{field}.", f"{field}[")) for e in errors)


def _field_errors(model: type[Request], exc: ValidationError) -> list[FieldError]:
    errors: list[FieldError] = []
    for error in exc.errors(include_url=False):
        parts = error["loc"]
        kind = error["type"]
        if kind == "extra_forbidden" and parts and (len(parts) == 1 or parts[0] == "Tags"):
            key = str(parts[-1])
            allowed = model.model_fields if len(parts) == 1 else _Tag.model_fields
            shown = key if len(key) <= 100 else key[:97] + "..."
            errors.append(FieldError(_loc((*parts[:-1], shown)), _unknown_key(key, allowed, model.REFUSED)))
        elif kind == "extra_forbidden" and parts:
            errors.append(FieldError(_loc(parts), _unknown_field(str(parts[-1]), False)))
        elif kind == "request":
            errors.append(FieldError(_loc(parts), error["msg"]))
        else:
            errors.append(
                FieldError(_loc(parts), _message(kind, error.get("ctx") or {}, error.get("input"), error["msg"]))
            )
    return errors


def _unknown_key(key: str, allowed: Mapping[str, object], refused: Mapping[str, str]) -> str:
    if key in refused:
        return refused[key]
    hint = difflib.get_close_matches(key, list(allowed), n=1, cutoff=0.75) if len(key) <= 100 else []
    return "unknown field" + (f"; did you mean {hint[0]}?" if hint else "")
