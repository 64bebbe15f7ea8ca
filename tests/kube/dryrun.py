"""Server-side dry-run against the real kube-apiserver + Kueue: does it accept a Kueue object, and if not, why.

A dry run (``dryRun=All``) goes through everything a real write does — the CRD's structural schema and CEL
rules, Kueue's mutating and validating webhooks (all ``sideEffects: None``), server-side apply's typed
merge with ``fieldValidation=Strict`` — and stores nothing. As admin, so RBAC is not what is being tested.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from devkit.kube.client import Kube, KubeRequestError
from idleshare.adapters.kube import KINDS

MANAGER = "idleshare"
PLURALS = {kind: plural for kind, (_, plural, _) in KINDS.items()}  # every kind idleshare writes
_TYPED_PATCH = re.compile(r"^failed to create typed patch object \([^)]*\): \.?")
_WEBHOOK = re.compile(r'^admission webhook "[^"]+" denied the request: ')
_NEXT_FIELD = re.compile(r", (?=[a-zA-Z][\w.\[\]/-]*: )")


def object_path(obj: Mapping[str, Any]) -> str:
    """The object's URL from its own apiVersion and kind (so a wrong version is the server's 404)."""
    api_version, meta = obj["apiVersion"], obj["metadata"]
    base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    if meta.get("namespace"):
        base += f"/namespaces/{meta['namespace']}"
    return f"{base}/{PLURALS[obj['kind']]}/{meta.get('name', '')}"


def dry_run_apply(kube: Kube, obj: Mapping[str, Any]) -> dict[str, Any]:
    """The object as the server would store it after a server-side apply by ``idleshare`` (nothing is stored)."""
    params = {"fieldManager": MANAGER, "dryRun": "All", "fieldValidation": "Strict"}
    return kube.request(  # type: ignore[no-any-return]
        "PATCH", object_path(obj), obj, params=params, content_type="application/apply-patch+yaml"
    )


def refusal(kube: Kube, obj: Mapping[str, Any]) -> list[str]:
    """``[]`` when the server accepts ``obj``; else its errors as ``"field: message"``, one per cause."""
    try:
        dry_run_apply(kube, obj)
    except KubeRequestError as exc:
        return errors_of(exc.status, exc.body)
    return []


def errors_of(status: int, body: Any) -> list[str]:
    if not isinstance(body, dict):
        return [f"HTTP {status}: {str(body).strip()}"]
    causes = (body.get("details") or {}).get("causes") or []
    if causes:
        return [f"{c.get('field', '<nil>')}: {c.get('message', '')}" for c in causes]
    message = str(body.get("message", ""))
    if _TYPED_PATCH.match(message):  # server-side apply's typed merge: ".spec.x: field not declared in schema"
        return [_TYPED_PATCH.sub("", message)]
    if _WEBHOOK.match(message):  # a Kueue webhook's field.ErrorList, flattened into one message
        inner = _WEBHOOK.sub("", message)
        if inner.startswith("[") and inner.endswith("]"):
            inner = inner[1:-1]
        return _NEXT_FIELD.split(inner)
    return [message]


def assert_refused(kube: Kube, obj: Mapping[str, Any], field: str, fragment: str) -> list[str]:
    """The server refuses ``obj`` with an error on ``field`` whose message contains ``fragment``."""
    errs = refusal(kube, obj)
    assert any(e.startswith(field + ": ") and fragment in e for e in errs), (
        f"expected an error on {field!r} containing {fragment!r}, got {errs}"
    )
    return errs


def ensure_namespace(kube: Kube, name: str) -> None:
    """A namespace for namespaced dry runs (the apiserver checks that it exists)."""
    if kube.get("Namespace", name) is None:
        try:
            kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
        except KubeRequestError as exc:
            if exc.status != 409:
                raise
