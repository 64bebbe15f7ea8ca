"""The admin API on the running system: DynamoDB Local, the real kube-apiserver + Kueue, moto for SQS and
EventBridge (a rule on idleshare's bus delivers to a capture queue, as the real rule delivers to the router).
Given a governed cluster, When an operator creates a quota through the API, Then the event it emits reaches
the router, the recompute writes the pool and the Kueue objects, and the API's read side shows the team."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from idleshare import names
from idleshare.runtime import wiring
from tests.admin_api import call
from tests.builders import quota_body
from tests.integration.test_pipeline import GPU, Harness
from tests.kube.fixtures import make_node

pytestmark = pytest.mark.integration


class ApiHarness(Harness):
    """Harness + a rule on idleshare's bus that captures what the API publishes (EventBridge's delivery)."""

    def __init__(self, table: Any, sim: Any) -> None:
        super().__init__(table, sim)
        events = boto3.client("events", region_name="us-east-1")
        self.capture_url = self.sqs.create_queue(QueueName="bus-capture")["QueueUrl"]
        arn = self.sqs.get_queue_attributes(QueueUrl=self.capture_url, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
        pattern = {"source": [names.EVENT_SOURCE], "detail-type": list(names.OWN_INBOUND_DETAIL_TYPES)}
        events.put_rule(Name="to-router", EventBusName="idleshare", EventPattern=json.dumps(pattern))
        events.put_targets(Rule="to-router", EventBusName="idleshare", Targets=[{"Id": "router", "Arn": arn}])

    def forward(self) -> list[str]:
        """Every event the bus delivered so far -> the router; returns their detail-types."""
        seen = []
        while msgs := self.sqs.receive_message(QueueUrl=self.capture_url, MaxNumberOfMessages=10).get("Messages"):
            for m in msgs:
                event = json.loads(m["Body"])
                event.setdefault("account", "111122223333")  # moto's delivery leaves it out; EventBridge sends it
                assert self.send(event).get("enqueued") == ["demo"], event
                seen.append(event["detail-type"])
                self.sqs.delete_message(QueueUrl=self.capture_url, ReceiptHandle=m["ReceiptHandle"])
        return seen


@pytest.fixture
def api(ddb_table: Any, proxied_kube: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[ApiHarness]:
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "1")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    proxied_kube.seed_nodes([make_node(f"p5-{i}", instance_type="ml.p5.48xlarge") for i in range(4)])
    with mock_aws():
        h = ApiHarness(ddb_table, proxied_kube)
        try:
            yield h
        finally:
            wiring.install(None)
            h.kube.close()


def test_a_quota_created_through_the_api_reaches_the_cluster_and_the_read_side(api: ApiHarness) -> None:
    # Given a 4-node p5 cluster (32 GPUs) and nothing computed yet
    assert call("GET", "/clusters/demo/pool").status == 404
    # When two quotas are created through the API
    assert call("POST", "/clusters/demo/compute-quotas", quota_body("a", 8)).status == 201
    assert call("POST", "/clusters/demo/compute-quotas", quota_body("b", 8, "Lend")).status == 201
    # Then their events reach the router and one recompute follows
    assert api.forward() == [names.DT_QUOTA_CHANGED, names.DT_QUOTA_CHANGED]
    assert api.drain()["batchItemFailures"] == []
    # And the API's pool shows the teams, And the cluster has their ClusterQueues
    pool = call("GET", "/clusters/demo/pool").body
    assert set(pool["teams"]) == {"a", "b"} and pool["applyStatus"] == "Applied"
    assert pool["unallocated"]["ml.p5.48xlarge"][GPU] == "16"
    grant = call("GET", "/clusters/demo/grants/a").body
    # a's limit: 50 % (the default BorrowLimit) of its own 8 GPUs, the rule named in its grant's why
    assert grant["borrowingLimit"]["ml.p5.48xlarge"][GPU] == "4" == api.cq_gpu("a")
    assert grant["why"]["ml.p5.48xlarge"][GPU]["bound"] == "percentage of quota"

    # When team a's quota is raised with its current version
    described = call("GET", "/clusters/demo/compute-quotas/a-quota").body
    update = {
        "TargetVersion": described["ComputeQuotaVersion"],
        "ComputeQuotaConfig": quota_body("a", 16)["ComputeQuotaConfig"],
    }
    assert call("PUT", "/clusters/demo/compute-quotas/a-quota", update).status == 200
    # And an operator asks for a recalculation too
    request_id = call("POST", "/clusters/demo/recalculate", {"reason": "after the quota change"}).body["requestId"]
    assert api.forward() == [names.DT_QUOTA_CHANGED, names.DT_RECALC_REQUESTED]
    assert api.drain()["batchItemFailures"] == []
    # Then the cluster follows, the history has both generations and the request's receipt is readable
    assert api.cq_gpu("a", "nominalQuota") == "16" and api.cohort_gpu() == "8"
    assert api.cq_gpu("a") == "8"  # 50 % of its own 16
    history = call("GET", "/clusters/demo/history").body
    assert [g["generation"] for g in history["generations"]] == [2, 1]
    receipt = call("GET", f"/clusters/demo/recalculations/{request_id}").body
    assert (receipt["status"], receipt["generation"]) == ("Done", 2)
    # And a stale update is refused naming the current version, with nothing changed
    stale = call("PUT", "/clusters/demo/compute-quotas/a-quota", update)
    assert (stale.status, stale.body["CurrentVersion"]) == (409, 2)
    assert api.forward() == []
