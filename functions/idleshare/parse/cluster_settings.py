"""The one schema of a cluster's settings (``domain/cluster_settings.ClusterSettings``), read the same way from the
CDK config, the Lambdas' environment and the cluster registry: msgspec converts a JSON-shaped mapping straight into
the frozen type (its defaults for what is absent), and every refusal is a :class:`SettingError` naming the setting.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

import msgspec

from idleshare.domain.cluster_settings import ClusterSettings, SettingError, describe_type, setting_type

SETTINGS = tuple(f.name for f in dataclasses.fields(ClusterSettings))
"""The settings' names, in the type's order: the keys the schema reads."""

_AT = re.compile(r" - at `\$\.(?P<field>\w+)`$")


def read_settings(raw: object) -> ClusterSettings:
    """A cluster's settings from a mapping of setting -> JSON value (a DynamoDB number may be a ``Decimal``); what is
    absent takes its default. An unknown key, a wrong type or a value its rule refuses -> :class:`SettingError`."""
    if not isinstance(raw, Mapping):
        raise SettingError("settings", f"an object is required (got {type(raw).__name__})")
    unknown = sorted(str(k) for k in raw if k not in SETTINGS)
    if unknown:
        raise SettingError(unknown[0], f"unknown setting (the settings are {', '.join(SETTINGS)})")
    values = {k: _plain(v) for k, v in raw.items()}
    try:
        return msgspec.convert(values, ClusterSettings, strict=True)
    except SettingError:
        raise
    except msgspec.ValidationError as exc:
        message = str(exc)
        at = _AT.search(message)
        if at is None:  # the type's own rule (__post_init__): its message already names the setting
            raise _from_rule(message) from None
        name = at.group("field")
        raise SettingError(name, f"{describe_type(setting_type(name))} (got {values.get(name)!r})") from None


def settings_json(settings: ClusterSettings) -> dict[str, Any]:
    """The settings as JSON values, every one of them (what :func:`read_settings` reads back as equal)."""
    out: dict[str, Any] = msgspec.to_builtins(settings)
    return out


def _from_rule(message: str) -> SettingError:
    name, _, problem = message.partition(": ")
    return SettingError(name, problem) if name in SETTINGS else SettingError("settings", message)


def _plain(value: object) -> object:
    """A DynamoDB ``Decimal`` as the JSON number it was written as."""
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    return value
