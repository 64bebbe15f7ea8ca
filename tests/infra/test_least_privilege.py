"""Day one after `cdk deploy`: every Lambda flow under exactly the IAM policy the template gives its role.

Given the synthesized template, moto with IAM enforcement (``set_initial_no_auth_action_count``), one
assumed role per template role holding its statements (``least_privilege.py``: resources ``*``, transaction
items checked per action), each function's environment exactly as the template sets it, and a Kubernetes
API server (the real kube-apiserver + Kueue); When the deploy-time registrar registers the clusters, the router takes its first event
(a HyperPod node-health event) and every other inbound type and an unknown cluster, the admin API serves
every route, the recompute Lambda is fed by its SQS event source (simulated poller) and reaches EKS
(``eks:DescribeCluster`` + the STS-presigned token), and a recalculation runs once through the idempotency
table; Then nothing is denied, the router writes nothing, and each role's grants are exactly what was used.
"""

from __future__ import annotations

import copy
import http.server
import json
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import boto3
import pytest
from moto import mock_aws

from devkit import sqs as event_source
from devkit.lambda_context import LambdaContext
from idleshare import names, timings
from tests.aws_env import create_idempotency_table, create_table, fifo_queue
from tests.fakes import EXPECTED_CLUSTERS
from tests.infra.conftest import SAMPLE, synth
from tests.infra.least_privilege import RUNTIME_ACTIONS, Recorder, Roles, enforced, running_as
from tests.kube.fixtures import make_node

REPO = Path(__file__).resolve().parents[2]
EVENTS = REPO / "events"
# The inbound events name sample-cluster, which a real HyperPod ARN (and the CDK config) cannot
DEMO_ARN = "arn:aws:sagemaker:us-west-2:111122223333:cluster/samplecluster1"
OTHER_ARN = "arn:aws:sagemaker:us-west-2:111122223333:cluster/abcd1234efgh"
CONFIG = copy.deepcopy(SAMPLE) | {
    "clusters": [
        {"id": "demo", "eks_cluster_name": "my-hyperPod-eks-cluster", "hyperpod_cluster_arn": DEMO_ARN},
        {"id": "other", "eks_cluster_name": "other-eks", "hyperpod_cluster_arn": OTHER_ARN},
    ]
}
EXPECTED_ROUTES = EXPECTED_CLUSTERS  # the same routing as with fakes, now under the router's policy
WALL_CLOCK = time.time  # the real one: the flow below pretends, for the router, that time has passed
HANDLERS = (names.REGISTRAR_HANDLER, names.ROUTER_HANDLER, names.RECOMPUTE_HANDLER, names.API_HANDLER)


def context(name: str) -> LambdaContext:
    return LambdaContext(function_name=name, aws_request_id=f"{name}-1")


def inbound(name: str) -> dict[str, Any]:
    return json.loads(
        (EVENTS / "inbound" / name).read_text().replace("cluster/sample-cluster", "cluster/samplecluster1")
    )


class _CloudFormation(http.server.BaseHTTPRequestHandler):
    """The custom resource's presigned ResponseURL (loopback): keeps what the registrar answers."""

    answers: ClassVar[list[dict[str, Any]]] = []

    def do_PUT(self) -> None:
        length = int(self.headers["Content-Length"])
        type(self).answers.append(json.loads(self.rfile.read(length)))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@dataclass
class DayOne:
    granted: dict[str, set[str]]
    used: dict[str, set[str]]
    roles: dict[str, str]  # handler -> role logical id
    registrar: list[dict[str, Any]] = field(default_factory=list)
    teardown: list[dict[str, Any]] = field(default_factory=list)  # the registrar's answer to the stack's deletion
    registered_before_teardown: list[str] = field(default_factory=list)
    registered_after_teardown: list[str] = field(default_factory=list)
    denied: list[tuple[str, str, str]] = field(default_factory=list)
    returned: list[str] = field(default_factory=list)  # SQS calls the recompute made to hand records back
    routes: dict[str, Any] = field(default_factory=dict)
    api: dict[str, int] = field(default_factory=dict)
    recompute: list[dict[str, Any]] = field(default_factory=list)
    tokens: list[str] = field(default_factory=list)
    caller: str = ""
    cold_start_writes: list[str] = field(default_factory=list)
    kueue: list[str] = field(default_factory=list)
    receipt: dict[str, Any] = field(default_factory=dict)


def _create_services() -> dict[str, str]:
    ddb = boto3.client("dynamodb", region_name="us-east-1")
    create_table(ddb, "idleshare-state")
    create_idempotency_table(ddb, "idleshare-idempotency")
    queue_url = fifo_queue(boto3.client("sqs", region_name="us-east-1"))  # a failure: again at once
    boto3.client("events", region_name="us-east-1").create_event_bus(Name="idleshare")
    eks = boto3.client("eks", region_name="us-east-1")
    for c in CONFIG["clusters"]:
        eks.create_cluster(
            name=c["eks_cluster_name"], roleArn="arn:aws:iam::123456789012:role/eks", resourcesVpcConfig={}
        )
    return {"table": "idleshare-state", "idempotency": "idleshare-idempotency", "queue": queue_url, "bus": "idleshare"}


def _resolve(stack: Any, services: dict[str, str]) -> dict[str, str]:
    """Logical id of each template resource a variable refers to -> the moto resource's name / URL."""
    logical = stack.get_logical_id
    return {
        logical(stack.storage.table.node.default_child): services["table"],
        logical(stack.storage.idempotency_table.node.default_child): services["idempotency"],
        logical(stack.queue.queue.node.default_child): services["queue"],
        logical(stack.events.bus.node.default_child): services["bus"],
    }


def day_one(tmp: Path, monkeypatch: pytest.MonkeyPatch, sim: Any) -> DayOne:
    from idleshare.adapters.eks_auth import EksConnector
    from idleshare.api import app as api
    from idleshare.errors import RetryableError
    from idleshare.handlers import recompute, registrar, router
    from idleshare.runtime import observability, wiring
    from tests.builders import proxy_event

    synthesized = synth(CONFIG, tmp=tmp / "cdk.out")
    template = synthesized.json
    for var, value in {
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "setup",
        "AWS_SECRET_ACCESS_KEY": "setup",
        "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled",
        "POWERTOOLS_TRACE_DISABLED": "1",
        "POWERTOOLS_METRICS_NAMESPACE": "idleshare",
    }.items():
        monkeypatch.setenv(var, value)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    monkeypatch.setattr(observability.logger.registered_handler, "stream", open("/dev/null", "w"))  # noqa: SIM115
    sim.reset()  # the real kube-apiserver + Kueue of the session (tests/realkube.py), emptied
    server = http.server.HTTPServer(("127.0.0.1", 0), _CloudFormation)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _CloudFormation.answers = []
    recorder = Recorder()
    try:
        sim.seed_nodes([make_node(f"p5-{i}") for i in range(4)])
        with mock_aws(), recorder.install():
            services = _create_services()
            roles = Roles(template, recorder)
            resolve = _resolve(synthesized.stack, services)
            out = DayOne(
                granted={roles.function_role(h): roles.granted[roles.function_role(h)] for h in HANDLERS},
                used=recorder.used,
                roles={h: roles.function_role(h) for h in HANDLERS},
            )

            # deploy time: CloudFormation creates the registry custom resource (its Clusters: the function's config)
            with running_as(roles, names.REGISTRAR_HANDLER, resolve):
                configured = json.loads(os.environ[names.ENV_CLUSTERS])
                request = {
                    "RequestType": "Create",
                    "ResponseURL": f"http://127.0.0.1:{server.server_port}/cfn-response",
                    "StackId": "arn:aws:cloudformation:us-east-1:123456789012:stack/idleshare/1",
                    "RequestId": "r-1",
                    "LogicalResourceId": "ClusterRegistry",
                    "ResourceType": "Custom::IdleshareClusterRegistry",
                    "ResourceProperties": {"Clusters": json.dumps(configured)},
                }

                def update(new: list[dict[str, Any]], old: list[dict[str, Any]]) -> None:
                    event = request | {
                        "RequestType": "Update",
                        "PhysicalResourceId": "idleshare-cluster-registry",
                        "ResourceProperties": {"Clusters": json.dumps(new)},
                        "OldResourceProperties": {"Clusters": json.dumps(old)},
                    }
                    enforced(lambda: registrar.handler(event, context("registrar")))

                enforced(lambda: registrar.handler(request, context("registrar")))
                update(configured, configured)
                # a later deploy renames a cluster's EKS cluster: its old lookup goes in the same transaction
                renamed = copy.deepcopy(configured)
                renamed[1]["eks_cluster_name"] = "other-eks-2"
                update(renamed, configured)
                update(configured, renamed)
                # a deploy without the second cluster deregisters it; the next one registers it again
                update(configured[:1], configured)
                update(configured, configured[:1])
            teardown = request | {"RequestType": "Delete", "PhysicalResourceId": "idleshare-cluster-registry"}
            out.registrar = list(_CloudFormation.answers)

            # the router's first cold start after the deploy: a HyperPod node-health event
            with running_as(roles, names.ROUTER_HANDLER, resolve) as role:
                first = enforced(lambda: router.handler(inbound("hyperpod-node-health-event.json"), context("router")))
                out.routes["first cold start"] = first
                out.cold_start_writes = sorted(
                    a
                    for a in recorder.used[role]
                    if a.split(":")[1].startswith(("Put", "Update", "Delete", "Transact", "Batch"))
                )
                for name in EXPECTED_ROUTES:
                    out.routes[name] = enforced(lambda name=name: router.handler(inbound(name), context("router")))
                unknown = inbound("hyperpod-node-health-event.json")
                unknown["detail"]["ClusterArn"] = "arn:aws:sagemaker:us-west-2:111122223333:cluster/zzzz9999zzzz"
                out.routes["unknown cluster"] = enforced(lambda: router.handler(unknown, context("router")))

            def call(method: str, path: str, body: Any = None, query: dict[str, str] | None = None) -> dict[str, Any]:
                reply = enforced(lambda: api.handler(proxy_event(method, path, body=body, query=query), context("api")))
                out.api[f"{method} {path}"] = reply["statusCode"]
                return json.loads(reply["body"]) if reply.get("body") else {}

            create = json.loads((EVENTS / "api" / "create-compute-quota.json").read_text())
            name, team = create["Name"], create["ComputeQuotaTarget"]["TeamName"]
            with running_as(roles, names.API_HANDLER, resolve):
                call("GET", "/clusters")
                call("POST", "/clusters/demo/compute-quotas", create)
                call("GET", "/clusters/demo/compute-quotas")
                call("GET", f"/clusters/demo/compute-quotas/{name}")
                call(
                    "PUT",
                    f"/clusters/demo/compute-quotas/{name}",
                    json.loads((EVENTS / "api" / "update-compute-quota.json").read_text()),
                )
                call(
                    "PUT",
                    "/clusters/demo/scheduler-config",
                    json.loads((EVENTS / "api" / "put-scheduler-config.json").read_text()),
                )
                call("GET", "/clusters/demo/scheduler-config")
                call("GET", "/openapi.json")

            def poll_and_invoke(rounds: int, phase: str) -> None:
                """What the SQS event source mapping does with the function's role, then the function."""
                event_source.drain(
                    boto3.client("sqs"),
                    services["queue"],
                    recompute.handler,
                    context("recompute"),
                    max_batches=rounds,
                    on_answer=lambda answer: out.recompute.append({"phase": phase, **answer}),
                )

            def recompute_as_deployed(phase: str, *, outage: bool = False) -> None:
                with running_as(roles, names.RECOMPUTE_HANDLER, resolve):
                    deps = wiring.dependencies()

                    def kube_for(cluster: Any) -> Any:
                        if outage:
                            raise RetryableError("the cluster's API server is unreachable", operation="list nodes")
                        connector = EksConnector(boto3.client("eks"), boto3.Session())
                        connector.describe(cluster.eks_cluster_name)  # eks:DescribeCluster, the role's
                        token = connector.token(cluster.eks_cluster_name)  # presigned locally with its credentials
                        out.tokens.append(token)
                        out.caller = boto3.client("sts").get_caller_identity()["Arn"]  # what EKS asks STS
                        return sim.idleshare_adapter()  # idleshare's RBAC user on the real apiserver

                    deps.kube_for = kube_for
                    deps.clock = lambda: 4e9  # every coalescing window has closed
                    # SQS on a clock that has moved past every backoff a failed record was handed back with
                    sqs_clock[0] = max(sqs_clock[0], WALL_CLOCK()) + timings.RETRY_MAX_SECONDS + 1
                    with event_source.sqs_time(lambda: sqs_clock[0]):
                        enforced(lambda: poll_and_invoke(1 if outage else 20, phase))

            sqs_clock = [WALL_CLOCK()]
            recompute_as_deployed("events")
            with running_as(roles, names.API_HANDLER, resolve):
                for path in ("pool", "grants", f"grants/{team}", "history", "excluded-nodes"):
                    call("GET", f"/clusters/demo/{path}")
                # usage over a period: Query on the USAGE# items, GetItem on the cursor
                call(
                    "GET", "/clusters/demo/usage", query={"from": "2026-12-01T00:00:00Z", "to": "2026-12-02T00:00:00Z"}
                )
                request_id = call("POST", "/clusters/demo/recalculate", {"reason": "day one"}).get("requestId")
            # the bus's rule hands the Recalculation Requested event to the router
            with running_as(roles, names.ROUTER_HANDLER, resolve):
                recalc = inbound("idleshare-recalculation-requested.json")
                recalc["detail"]["requestId"] = request_id
                out.routes["recalculation"] = enforced(lambda: router.handler(recalc, context("router")))
                enforced(lambda: router.handler(recalc, context("router")))  # EventBridge delivers at least once
            # a transient failure: the idempotency record is deleted, SQS delivers again, the retry recomputes
            recompute_as_deployed("outage", outage=True)
            recompute_as_deployed("recalculation")
            # a redelivery after SQS's deduplication window: answered by the idempotency record
            with running_as(roles, names.ROUTER_HANDLER, resolve):
                monkeypatch.setattr("idleshare.adapters.aws.time.time", lambda: 4e9 + 600)
                enforced(lambda: router.handler(recalc, context("router")))
            recompute_as_deployed("redelivery")
            with running_as(roles, names.API_HANDLER, resolve):
                out.receipt = call("GET", f"/clusters/demo/recalculations/{request_id}")
                call("DELETE", "/clusters/demo/scheduler-config")
                call("DELETE", f"/clusters/demo/compute-quotas/{name}")
                call("POST", "/clusters/demo/pause", {"reason": "day one"})  # the PAUSE item: PutItem
                call("POST", "/clusters/demo/resume")  # and Recalculation Requested on the bus
            out.kueue = sorted(f"{o['kind']}/{o['metadata']['name']}" for o in sim.idleshare_adapter().list_managed())
            out.returned = sorted(a for a in recorder.used[out.roles[names.RECOMPUTE_HANDLER]] if "Visibility" in a)

            # the stack is deleted: CloudFormation deletes the registry custom resource
            with running_as(roles, names.API_HANDLER, resolve):
                out.registered_before_teardown = [c["ClusterId"] for c in call("GET", "/clusters")["Clusters"]]
            with running_as(roles, names.REGISTRAR_HANDLER, resolve):
                answered = len(_CloudFormation.answers)
                enforced(lambda: registrar.handler(teardown, context("registrar")))
                out.teardown = _CloudFormation.answers[answered:]
            with running_as(roles, names.API_HANDLER, resolve):
                out.registered_after_teardown = [c["ClusterId"] for c in call("GET", "/clusters")["Clusters"]]
            out.denied = list(recorder.denied)
            return out
    finally:
        server.shutdown()


@pytest.fixture(scope="module")
def day(tmp_path_factory: pytest.TempPathFactory, kube_admin: Any) -> DayOne:
    with pytest.MonkeyPatch.context() as monkeypatch:
        return day_one(tmp_path_factory.mktemp("least-privilege"), monkeypatch, kube_admin)


def test_the_registrar_registers_the_clusters_at_deploy_time(day: DayOne) -> None:
    assert [a["Status"] for a in day.registrar] == ["SUCCESS"] * 6, day.registrar
    assert [a["Data"]["Registered"] for a in day.registrar] == ["demo,other", "", "other", "other", "", "other"]
    # (an update with the same clusters writes nothing)


def test_the_registrar_deregisters_a_removed_cluster_and_every_cluster_on_delete(day: DayOne) -> None:
    assert [a["Data"]["Deregistered"] for a in day.registrar] == ["", "", "", "", "other", ""]
    assert [(a["Status"], a["Data"]) for a in day.teardown] == [("SUCCESS", {"Deregistered": "demo,other"})]
    assert (day.registered_before_teardown, day.registered_after_teardown) == (["demo", "other"], [])


def test_nothing_is_denied(day: DayOne) -> None:
    assert day.denied == []


def test_the_recompute_hands_a_failed_record_back_with_its_role(day: DayOne) -> None:
    # the outage's failed record: ChangeMessageVisibilityBatch, which SQS authorises as ChangeMessageVisibility
    assert day.returned == ["sqs:ChangeMessageVisibility"]


def test_the_router_routes_its_first_event_and_writes_nothing(day: DayOne) -> None:
    assert day.routes["first cold start"] == {"enqueued": ["demo"]}
    assert day.cold_start_writes == []
    assert day.used[day.roles[names.ROUTER_HANDLER]] <= {"dynamodb:GetItem", "dynamodb:Query", "sqs:SendMessage"}


@pytest.mark.parametrize("name", sorted(EXPECTED_ROUTES))
def test_the_router_routes_every_inbound_type_under_its_policy(day: DayOne, name: str) -> None:
    assert day.routes[name] == {"enqueued": EXPECTED_ROUTES[name]}


def test_the_router_drops_an_unknown_cluster(day: DayOne) -> None:
    assert day.routes["unknown cluster"] == {"enqueued": [], "dropped": "UnknownCluster"}


def test_the_admin_api_serves_every_route_under_its_policy(day: DayOne) -> None:
    assert {k: v for k, v in day.api.items() if v >= 300} == {}
    routes = {k.split(" ", 1)[0] + " " + "/".join(k.split(" ", 1)[1].split("/")[:4]) for k in day.api}
    assert len(day.api) == 20, sorted(day.api)
    assert routes >= {
        "POST /clusters/demo/recalculate",
        "POST /clusters/demo/pause",
        "POST /clusters/demo/resume",
        "GET /clusters/demo/recalculations",
        "DELETE /clusters/demo/compute-quotas",
    }


def test_the_recompute_reads_eks_signs_its_token_and_converges(day: DayOne) -> None:
    failures = [(r["phase"], len(r["batchItemFailures"])) for r in day.recompute if r["batchItemFailures"]]
    assert failures == [("outage", 1)], day.recompute  # transient: reported to SQS, which delivers it again
    assert {r["phase"] for r in day.recompute} == {"events", "outage", "recalculation", "redelivery"}
    assert day.tokens and all(t.startswith("k8s-aws-v1.") for t in day.tokens)
    assert day.caller.endswith(
        f":assumed-role/{day.roles[names.RECOMPUTE_HANDLER]}/{day.roles[names.RECOMPUTE_HANDLER]}"
    )
    assert "ClusterQueue/hyperpod-ns-research-clusterqueue" in day.kueue


def test_a_recalculation_runs_once_with_its_idempotency_record(day: DayOne) -> None:
    assert day.receipt["status"] == "Done", day.receipt.get("message")
    recompute_role = day.roles[names.RECOMPUTE_HANDLER]
    assert {"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:GetItem"} <= day.used[recompute_role]


@pytest.mark.parametrize("handler", HANDLERS)
def test_each_role_grants_exactly_what_its_flows_use(day: DayOne, handler: str) -> None:
    role = day.roles[handler]
    used = day.used[role] - {"sts:GetCallerIdentity"}  # the test's stand-in for EKS: needs no grant
    assert day.granted[role] - RUNTIME_ACTIONS == used, (
        f"granted, never used: {sorted(day.granted[role] - RUNTIME_ACTIONS - day.used[role])}; "
        f"used, not granted: {sorted(used - day.granted[role])}"
    )
