"""What a cluster's Kueue can carry of idleshare's objects, said on the pool: the versions they are written in and,
as warnings, each field those versions lack (``kueue_versions`` holds the versions and the conversions; this module
is where they meet the pool's result, so that neither imports the other)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from idleshare.domain.kueue_versions import KUEUE_FIELD_UNSUPPORTED, KueueApi, kind_version, lacking
from idleshare.domain.pool import Issue, PoolResult


def with_kueue_api(result: PoolResult, manifests: Sequence[Mapping[str, Any]], api: KueueApi) -> PoolResult:
    """``result`` naming the versions in use (``kueue_api``) and, as :data:`~idleshare.domain.kueue_versions.KUEUE_FIELD_UNSUPPORTED` warnings, each
    field of ``manifests`` those versions lack: one issue per kind and field, counting the objects."""
    found: dict[tuple[str, str], tuple[str, int]] = {}
    for obj in manifests:
        kind, version = kind_version(obj)
        if not version:
            continue
        for path, instead in lacking(obj, api.version(kind)):
            _, count = found.get((kind, path), (instead, 0))
            found[(kind, path)] = (instead, count + 1)
    extra: list[Issue] = [
        Issue(
            "warning",
            KUEUE_FIELD_UNSUPPORTED,
            f"{kind}.{path}",
            f"{path} not written on {count} {kind}(s): this cluster's Kueue ({api.release}) serves {kind} as "
            f"{api.api_version(kind)}, which has no {path}; {instead}",
        )
        for (kind, path), (instead, count) in sorted(found.items())
    ]
    issues = sorted(set(result.issues) | set(extra), key=lambda i: (i.severity, i.code, i.subject))
    return replace(result, kueue_api=api, issues=tuple(issues))
