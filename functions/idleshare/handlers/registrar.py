"""Registrar Lambda: the CloudFormation custom resource that registers the CDK-configured clusters.

``cdk deploy`` creates (and, when the ``clusters`` config changes, updates) the custom resource
``Custom::IdleshareClusterRegistry``; CloudFormation invokes this function with the request, and it writes
the clusters of its ``IDLESHARE_CLUSTERS`` into the registry (``service/registry.py``), then answers
CloudFormation on the request's presigned ``ResponseURL``. Delete writes nothing: the table is retained
with the stack's data. Every failure is answered FAILED with its reason (never left to CloudFormation's
one-hour timeout).
"""

from __future__ import annotations

import json
import urllib.request
from typing import Any

from idleshare import names
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


@logger.inject_lambda_context(clear_state=True)
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    from idleshare.runtime.env import settings
    from idleshare.service.registry import register_clusters

    kind = event.get("RequestType") if isinstance(event, dict) else None
    try:
        if kind in ("Create", "Update"):
            written = register_clusters(dependencies().store, settings(handler=names.REGISTRAR_HANDLER).clusters)
            logger.info("clusters registered", extra={"request": kind, "written": written})
            data = {"Registered": ",".join(written)}
        elif kind == "Delete":
            data = {}  # the table and its registry are retained with the stack's data
        else:
            raise ValueError(f"RequestType: Create, Update or Delete expected (got {kind!r})")
    except Exception as exc:
        logger.exception("cluster registration failed", extra={"request": kind})
        send_response(event, "FAILED", f"{type(exc).__name__}: {exc}")
        return {"Status": "FAILED"}
    send_response(event, "SUCCESS", data=data)
    return {"Status": "SUCCESS", **data}
