"""Registrar Lambda: the CloudFormation custom resource that registers the CDK-configured clusters.

``cdk deploy`` creates (and, when the ``clusters`` config changes, updates) the custom resource
``Custom::IdleshareClusterRegistry``; CloudFormation invokes this function with the request, and it makes the
registry hold exactly the clusters of the request's ``Clusters`` property (the same JSON as the function's
``IDLESHARE_CLUSTERS``, which is used when a request carries none): on Create and Update every registered
cluster not configured — those of ``OldResourceProperties`` and any other left in the registry — is
deregistered, then the configured ones are written (``service/registry.py``); on Delete every configured
cluster is deregistered. The request's properties, not the environment, are what CloudFormation asks for: in
an update's rollback they are the previous config while the function still has the new one. Deregistering
deletes a cluster's registry entries only (by id, EKS name, ARN): its pools, history and quotas stay in the
table, which is retained with the stack's data. Then it answers CloudFormation on the request's presigned
``ResponseURL``. Every failure is answered FAILED with its reason (never left to CloudFormation's one-hour
timeout).
"""

from __future__ import annotations

import json
import urllib.request
from typing import Any

from idleshare import names
from idleshare.adapters.ports import ClusterRecord
from idleshare.runtime.observability import logger
from idleshare.runtime.wiring import dependencies

PHYSICAL_ID = "idleshare-cluster-registry"
RESPONSE_TIMEOUT_SECONDS = 20


def send_response(event: dict[str, Any], status: str, reason: str = "", data: dict[str, Any] | None = None) -> None:
    """PUT the custom resource's result to CloudFormation (the request's presigned S3 URL)."""
    body = json.dumps(
        {
            "Status": status,
            "Reason": reason[:3000] or status,
            "PhysicalResourceId": event.get("PhysicalResourceId") or PHYSICAL_ID,
            "StackId": event.get("StackId", ""),
            "RequestId": event.get("RequestId", ""),
            "LogicalResourceId": event.get("LogicalResourceId", ""),
            "NoEcho": False,
            "Data": data or {},
        }
    ).encode()
    url = str(event.get("ResponseURL", ""))
    if not url.startswith(("https://", "http://")):
        raise ValueError(f"ResponseURL: an http(s) URL is required (got {url[:80]!r})")
    request = urllib.request.Request(
        url, data=body, method="PUT", headers={"Content-Type": "", "Content-Length": str(len(body))}
    )
    with urllib.request.urlopen(request, timeout=RESPONSE_TIMEOUT_SECONDS) as response:
        response.read()


def _clusters(properties: Any, where: str) -> tuple[ClusterRecord, ...] | None:
    """The ``Clusters`` of a request's properties (None when it has none); invalid -> ValueError naming it."""
    from idleshare.runtime.env import EnvError, parse_clusters

    raw = properties.get("Clusters") if isinstance(properties, dict) else None
    if raw is None:
        return None
    if not isinstance(raw, str):
        raise ValueError(f"{where}.Clusters: the clusters as a JSON string are required (got {type(raw).__name__})")
    try:
        return parse_clusters(raw)
    except EnvError as exc:
        raise ValueError(f"{where}.Clusters: {exc}") from None


@logger.inject_lambda_context(clear_state=True)
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    from idleshare.runtime.env import settings
    from idleshare.service.registry import deregister_clusters, reconcile_clusters

    kind = event.get("RequestType") if isinstance(event, dict) else None
    try:
        if kind not in ("Create", "Update", "Delete"):
            raise ValueError(f"RequestType: Create, Update or Delete expected (got {kind!r})")
        configured = _clusters(event.get("ResourceProperties"), "ResourceProperties")
        if configured is None:
            configured = settings(handler=names.REGISTRAR_HANDLER).clusters
        if kind == "Delete":
            removed = deregister_clusters(dependencies().store, (c.cluster_id for c in configured))
            logger.info("clusters deregistered", extra={"request": kind, "deregistered": removed})
            data = {"Deregistered": ",".join(removed)}
        else:
            previous = _clusters(event.get("OldResourceProperties"), "OldResourceProperties") or ()
            done = reconcile_clusters(dependencies().store, configured, previous=previous)
            logger.info(
                "clusters registered",
                extra={"request": kind, "written": done.registered, "deregistered": done.deregistered},
            )
            data = {"Registered": ",".join(done.registered), "Deregistered": ",".join(done.deregistered)}
    except Exception as exc:
        logger.exception("cluster registration failed", extra={"request": kind})
        send_response(event, "FAILED", f"{type(exc).__name__}: {exc}")
        return {"Status": "FAILED"}
    send_response(event, "SUCCESS", data=data)
    return {"Status": "SUCCESS", **data}
