"""Kueue's manager ``Configuration`` (``config.kueue.x-k8s.io``), as the ``kueue-manager-config`` ConfigMap holds it.

:func:`parse_kueue_config` reads the fields idleshare checks (``domain/kueue_config.py``): whether fair sharing is
on, its preemption strategies, the enabled integrations. In ``v1beta2`` (Kueue v0.15+) the presence of the
``fairSharing`` section is what turns fair sharing on (Kueue requires ``preemptionStrategies`` in it); in
``v1beta1`` it is ``fairSharing.enable``. No framework listed means Kueue's default, ``batch/job``.

Anything else than a readable Configuration raises :class:`InputError` (the recompute turns it into a warning).
YAML is read with PyYAML (a dependency of lightkube's), imported on first use.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from idleshare.domain.kueue_config import (
    DEFAULT_FRAMEWORKS,
    KUEUE_CONFIG_KEY,
    KUEUE_CONFIG_NAME,
    KUEUE_CONFIG_NAMESPACE,
    KUEUE_CONFIG_SUBJECT,
    KueueConfig,
    KueueConfigReading,
)
from idleshare.errors import RetryableError
from idleshare.parse.errors import FieldError, InputError

CONFIG_GROUP = "config.kueue.x-k8s.io"
MAX_CONFIG_BYTES = 256 * 1024


def parse_kueue_config(data: Mapping[str, Any], *, source: str = "kueue-manager-config") -> KueueConfig:
    """The ConfigMap's ``data``: its ``controller_manager_config.yaml`` (or its only key) as a Configuration."""
    if not isinstance(data, Mapping) or not data:
        raise InputError(source, [FieldError("data", "no Configuration in the ConfigMap")])
    key = KUEUE_CONFIG_KEY if KUEUE_CONFIG_KEY in data else (next(iter(data)) if len(data) == 1 else None)
    if key is None:
        raise InputError(source, [FieldError("data", f"no {KUEUE_CONFIG_KEY} key (keys: {', '.join(sorted(data))})")])
    text = data[key]
    if not isinstance(text, str) or len(text) > MAX_CONFIG_BYTES:
        raise InputError(source, [FieldError(f"data.{key}", "not a Configuration document")])
    import yaml

    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise InputError(source, [FieldError(f"data.{key}", f"not YAML: {str(exc).splitlines()[0]}")]) from None
    return configuration(doc, source=f"{source} data.{key}")


def configuration(doc: Any, *, source: str = "Kueue Configuration") -> KueueConfig:
    """A parsed Configuration document (a mapping) as :class:`KueueConfig`."""
    if not isinstance(doc, Mapping):
        raise InputError(source, [FieldError("", "not a mapping")])
    api_version, kind = doc.get("apiVersion"), doc.get("kind")
    group, _, version = str(api_version or "").partition("/")
    if kind != "Configuration" or group != CONFIG_GROUP:
        raise InputError(
            source, [FieldError("", f"not a {CONFIG_GROUP} Configuration (apiVersion {api_version!r}, kind {kind!r})")]
        )
    errors: list[FieldError] = []
    fair = doc.get("fairSharing")
    if fair is not None and not isinstance(fair, Mapping):
        errors.append(FieldError("fairSharing", "not a mapping"))
        fair = None
    # v1beta1: fairSharing.enable; v1beta2: the section's presence
    enabled = bool(fair and fair.get("enable") is True) if version == "v1beta1" else fair is not None
    strategies = (fair or {}).get("preemptionStrategies") or ()
    if not isinstance(strategies, list | tuple) or not all(isinstance(s, str) for s in strategies):
        errors.append(FieldError("fairSharing.preemptionStrategies", "not a list of names"))
        strategies = ()
    integrations = doc.get("integrations") or {}
    frameworks: Any = integrations.get("frameworks") if isinstance(integrations, Mapping) else None
    if frameworks is not None and (not isinstance(frameworks, list) or not all(isinstance(f, str) for f in frameworks)):
        errors.append(FieldError("integrations.frameworks", "not a list of names"))
        frameworks = None
    if errors:
        raise InputError(source, errors)
    return KueueConfig(
        fair_sharing=enabled,
        preemption_strategies=tuple(strategies),
        frameworks=tuple(frameworks) if frameworks else DEFAULT_FRAMEWORKS,
    )


def read_kueue_config(get_config_map: Callable[[str, str], Mapping[str, Any]]) -> KueueConfigReading | None:
    """Read and parse ``kueue-system/kueue-manager-config`` through ``get_config_map`` (the cluster port's). What
    cannot be read — refused (403), missing (404), unreachable, not a Configuration — is a reading without a
    config and with the reason, which the pool reports as a warning: never a failure of the recompute. A transient
    error (a :class:`~idleshare.errors.RetryableError`: 429, 5xx, timeouts) is None, not read: the pool says
    nothing of Kueue's configuration this time rather than a warning that would come and go (a new generation each
    way)."""
    try:
        data = get_config_map(KUEUE_CONFIG_NAMESPACE, KUEUE_CONFIG_NAME)
    except Exception as exc:  # the port's errors (idleshare.errors), or whatever else its callable raises
        if isinstance(exc, RetryableError):  # unreachable for now (5xx, timeout): not read, so no issue flaps
            return None
        return KueueConfigReading(None, f"{type(exc).__name__}: {exc}")
    try:
        return KueueConfigReading(parse_kueue_config(data, source=KUEUE_CONFIG_SUBJECT))
    except InputError as exc:
        return KueueConfigReading(None, str(exc))
