"""The one schema of a cluster's settings (``domain/cluster_settings.ClusterSettings``), read the same way from the
CDK config, the Lambdas' environment, the cluster registry and a scenario: a JSON-shaped mapping of setting -> value
becomes the frozen type (its defaults for what is absent; an enum from its value), which checks each value's type and
rule itself; every refusal is a :class:`SettingError` naming the setting. The settings, their types and defaults are
the type's own fields: nothing here names one of them.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from idleshare.domain.cluster_settings import ClusterSettings, SettingError, describe_type, setting_type

SETTINGS = tuple(f.name for f in dataclasses.fields(ClusterSettings))
"""The settings' names, in the type's order: the keys the schema reads."""


def read_settings(raw: object) -> ClusterSettings:
    """A cluster's settings from a mapping of setting -> JSON value (a DynamoDB number may be a ``Decimal``); what is
    absent takes its default. An unknown key, a wrong type or a value its rule refuses -> :class:`SettingError`."""
    if not isinstance(raw, Mapping):
        raise SettingError("settings", f"an object is required (got {type(raw).__name__})")
    unknown = sorted(str(k) for k in raw if k not in SETTINGS)
    if unknown:
        raise SettingError(unknown[0], f"unknown setting (the settings are {', '.join(SETTINGS)})")
    values: dict[str, Any] = {str(name): _value(str(name), value) for name, value in raw.items()}
    return ClusterSettings(**values)


def settings_json(settings: ClusterSettings) -> dict[str, Any]:
    """The settings as JSON values, every one of them (what :func:`read_settings` reads back as equal)."""
    values = ((f.name, getattr(settings, f.name)) for f in dataclasses.fields(settings))
    return {name: v.value if isinstance(v, enum.Enum) else v for name, v in values}


def _value(name: str, value: object) -> object:
    """A JSON value as the setting's type holds it: an enum's member by its value, a DynamoDB ``Decimal`` as the JSON
    number it was written as; anything else as it is, for the type to check."""
    kind = setting_type(name)
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        try:
            return kind(value)
        except (ValueError, TypeError):
            raise SettingError(name, f"{describe_type(kind)} (got {value!r})") from None
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    return value
