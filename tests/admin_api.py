"""The admin HTTP API (``idleshare.api.app``) as API Gateway calls it: a REST proxy event in, the status, JSON body
and headers out; and ``World``, a governed cluster ``demo`` on a fresh DynamoDB table (moto) behind it. The
fixtures ``aws`` and ``world`` are in ``tests/unit/conftest.py``."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from devkit.lambda_context import LambdaContext
from idleshare.adapters.ports import ClusterRecord
from idleshare.adapters.store import DynamoStore
from idleshare.runtime import wiring
from idleshare.service.recompute import Recomputer
from tests.builders import k8s_node, proxy_event
from tests.fakes import FakeKube, FakePublisher

CONTEXT = LambdaContext(function_name="admin-api", account="111122223333", aws_request_id="lambda-req-1")
ARN = "arn:aws:sagemaker:us-west-2:111122223333:cluster/abcdef123456"


@dataclass
class Reply:
    status: int
    body: Any
    headers: dict[str, Any]
    size: int = 0  # bytes of the whole proxy response as the Lambda answers it (what its 6 MB limit counts)


def call(method: str, path: str, body: Any = None, **kwargs: Any) -> Reply:
    from idleshare.api import app

    out = app.handler(proxy_event(method, path, body=body, **kwargs), CONTEXT)
    headers = dict(out.get("headers") or {})
    headers.update({k: v[0] for k, v in (out.get("multiValueHeaders") or {}).items() if v})
    text = out.get("body") or ""
    is_json = "json" in str(headers.get("Content-Type", ""))
    size = len(json.dumps(out).encode())
    return Reply(out["statusCode"], json.loads(text) if text and is_json else text, headers, size)


def pages(path: str, **query: str) -> list[Any]:
    """Every page of a paged GET, following NextToken."""
    out = [call("GET", path, query=query).body]
    while "NextToken" in out[-1]:
        out.append(call("GET", path, query=query | {"NextToken": out[-1]["NextToken"]}).body)
    return out


class World:
    """A governed cluster ``demo`` on a fresh table, idleshare's bus as a FakePublisher, a 4-node cluster."""

    def __init__(self, table: Any) -> None:
        self.table = table
        self.store = DynamoStore(table)
        self.publisher = FakePublisher()
        self.kube = FakeKube([k8s_node(f"p5-{i}") for i in range(4)])
        self.store.put_cluster(ClusterRecord("demo", "demo-eks", ARN))
        self.deps = wiring.Dependencies(store=self.store, publisher=self.publisher, kube_for=lambda c: self.kube)
        wiring.install(self.deps)

    def items(self) -> list[dict[str, Any]]:
        """Everything stored, in a stable order (to show that a refused request changed nothing)."""
        return sorted(self.table.scan(ConsistentRead=True)["Items"], key=lambda i: (i["pk"], i["sk"]))

    def recompute(self) -> Any:
        return Recomputer(self.store, lambda c: self.kube, FakePublisher()).recompute("demo")
