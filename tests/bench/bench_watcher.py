"""Node watcher latency: from ``kubectl cordon`` / ``uncordon`` to the new pool in Kueue (the Cohort's quotas, or
the team's ``borrowingLimit`` where the pool caps it), on the real stack (etcd + kube-apiserver + Kueue), through idleshare's real pieces:

watcher (``service/watcher.py``, idleshare's RBAC user) -> ``Node Changed`` -> router handler (as the bus rule
would invoke it) -> SQS FIFO (moto, the deployed queue, polled as the event source mapping does: the leading
message at once) -> recompute handler -> server-side apply -> the Cohort and the ClusterQueue.

An isolated change (nothing else in its coalescing window: the changes are spaced by a window) is recomputed on
the leading edge, at once; target: median and p95 <= 3 s, also shown as a ratio to the window. Also reported: the watcher's cost per cluster per month at
its memory size (one invocation a minute, each billed for about a minute).

Usage: ``uv run python tests/bench/bench_watcher.py [--quick]`` (or ``bench_all.py --only watcher``).
"""

from __future__ import annotations

import functools
import json
import statistics
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from idleshare.domain.model import DEFAULT_COHORT_NAME
from tests.bench import bench_common as bc

CHANGES = 20
CLUSTER = "local"
TEAM_CQ = "hyperpod-ns-a-clusterqueue"
ISOLATED_TARGET_SECONDS = 3.0  # an isolated change, event -> limit, p95
# Lambda arm64 price (us-east-1, first tier) per GB-second and per request; EventBridge Scheduler per invocation.
GB_SECOND = 0.0000133334
PER_REQUEST = 0.20 / 1_000_000
PER_SCHEDULE = 1.00 / 1_000_000
MINUTES_PER_MONTH = 30 * 24 * 60


def monthly_cost(memory_mb: int, billed_seconds: float) -> float:
    """Lambda (duration + requests) + Scheduler for one cluster, one invocation a minute, 30 days."""
    invocations = MINUTES_PER_MONTH
    return invocations * (billed_seconds * memory_mb / 1024 * GB_SECOND + PER_REQUEST + PER_SCHEDULE)


def _borrowing(kube: Any) -> str:
    cq = kube.get("ClusterQueue", TEAM_CQ)
    if cq is None:
        return ""
    return json.dumps(
        [r.get("borrowingLimit") for g in cq["spec"]["resourceGroups"] for f in g["flavors"] for r in f["resources"]]
    )


def _pool(kube: Any) -> str:
    """The pool as Kueue holds it: the Cohort's quotas and the team's borrowing limits. A cordon moves the Cohort; on
    the Quota basis (HyperPod's) a team's limit is a share of its own quota and moves only when the pool caps it."""
    cohort = kube.get("Cohort", DEFAULT_COHORT_NAME)
    return json.dumps([cohort.get("spec") if cohort else None, _borrowing(kube)], sort_keys=True)


def _changed(kube: Any, before: str) -> bool:
    return _pool(kube) != before


HYPERPOD_ARN = "arn:aws:sagemaker:us-east-1:123456789012:cluster/bench0000001"
HEALTH_LABEL = "sagemaker.amazonaws.com/node-health-status"


def run(report: bc.Report, *, quick: bool = False, trigger: str = "cordon") -> None:
    """``trigger``: ``cordon`` (kubectl cordon/uncordon, seen by the node watcher) or ``health`` (the HyperPod
    health agent's verdict: its label on the node and AWS's ``Node Health Event`` to the router, no watcher)."""
    import boto3
    from moto import mock_aws

    from devkit.kube.client import Kube
    from devkit.kube.stack import running
    from devkit.lambda_context import LambdaContext
    from devkit.sqs import Deduplicating, EventSourceMapping, WallClock, create_queue
    from idleshare import names, timings
    from idleshare.adapters.aws import SqsRecomputeQueue
    from idleshare.adapters.ports import ClusterRecord
    from idleshare.adapters.sqs_records import SqsRecordReturns
    from idleshare.handlers import recompute, router
    from idleshare.runtime import wiring
    from tests.builders import k8s_node, quota_body
    from tests.kube.watcher_harness import CollectingPublisher, WatcherThread, moto_table

    changes = 4 if quick else CHANGES
    window = timings.COALESCE_SECONDS
    with running() as stack, mock_aws(), moto_table() as store:
        admin = Kube.admin(stack)
        admin.seed_nodes([k8s_node(f"p5-{i}") for i in range(4)])
        store.put_cluster(ClusterRecord(CLUSTER, "local-eks", HYPERPOD_ARN))
        store.create_quota(CLUSTER, quota_body("a", gpus=8))
        sqs = boto3.client("sqs", region_name="us-east-1")
        url = create_queue(sqs, f"w-{uuid.uuid4().hex[:6]}.fifo").url  # the deployed queue, in real time
        kube = admin.idleshare_adapter(timeout=30)
        deps = wiring.Dependencies(
            store=store,
            queue=SqsRecomputeQueue(Deduplicating(sqs, time.time), url),
            kube_for=lambda _c: kube,
            returns=SqsRecordReturns(sqs),  # trailing messages handed back until their window closes
        )
        wiring.install(deps)
        stop = threading.Event()
        context = LambdaContext(function_name="bench", memory_limit_in_mb=256, aws_request_id="bench")

        def to_router(batch: list[tuple[str, dict[str, Any]]]) -> None:
            for detail_type, detail in batch:  # the bus rule's target: one invocation per event
                router.handler(bc.bus_envelope(detail_type, detail), context)

        esm = EventSourceMapping(sqs, url, recompute.handler, WallClock())

        def deliver() -> None:  # Lambda's poller on the deployed queue, in real time
            while not stop.is_set():
                if esm.poll() is None:
                    time.sleep(0.05)

        # the first recompute (as the schedule would) so the team's ClusterQueue exists
        router.handler({"source": "aws.scheduler", "detail-type": names.DT_SCHEDULED_RECOMPUTE, "detail": {}}, context)
        delivery = threading.Thread(target=deliver, daemon=True)
        delivery.start()
        admin.wait_for(lambda: _borrowing(admin), "the team's ClusterQueue", timeout=60)
        publisher = CollectingPublisher(forward=to_router)
        watcher = None
        if trigger == "cordon":
            watcher = WatcherThread(  # as the node watcher's own RBAC user (the recompute's may not watch nodes)
                admin.watcher_adapter(timeout=30), store, publisher, cluster_id=CLUSTER, window_seconds=15
            ).start()
            watcher.wait_started()
        latencies: list[float] = []
        try:
            with bc.quiet_handlers():  # the handlers' JSON logs and EMF lines go to a sink (their cost is paid)
                for i in range(changes):
                    # an isolated change: the previous one's window (and its trailing recompute) is over, the first
                    # recompute's too
                    time.sleep(window + 1)
                    before = _pool(admin)
                    started = time.monotonic()
                    if trigger == "cordon":
                        stack.kubectl("uncordon" if i % 2 else "cordon", "p5-3")
                    else:  # the health agent labels the node, AWS sends the event; the router gets it from the bus
                        status = "Schedulable" if i % 2 else "UnschedulablePendingReplacement"
                        admin.merge_patch("Node", "p5-3", {"metadata": {"labels": {HEALTH_LABEL: status}}})
                        router.handler(_health_event("p5-3", "Schedulable" if i % 2 else "Unhealthy"), context)
                    admin.wait_for(functools.partial(_changed, admin, before), "a new pool in Kueue", timeout=60)
                    latencies.append(time.monotonic() - started)
                    print(f"  change {i + 1}/{changes}: {latencies[-1]:.2f} s", file=sys.stderr, flush=True)
        finally:
            watch_report = watcher.stop() if watcher is not None else None
            stop.set()
            delivery.join(timeout=30)
            wiring.install(None)
            kube.close()
            admin.close()

    median = statistics.median(latencies)
    p95 = sorted(latencies)[max(0, round(0.95 * len(latencies)) - 1)]
    target = ISOLATED_TARGET_SECONDS
    billed = timings.WATCHER_SCHEDULE_MINUTES * 60 + 5  # a minute of watch, plus the overlap until the handover
    cost = monthly_cost(timings.WATCHER_MEMORY_MB, billed)
    if trigger == "health":
        report.add(
            bc.Row("health", f"HyperPod health event -> the pool in Kueue, median of {changes}", f"{median:.2f} s",
                   f"window {window} s", median / window, f"<= {target:.1f} s", median <= target),
            bc.Row("health", f"HyperPod health event -> the pool in Kueue, p95 of {changes}", f"{p95:.2f} s",
                   f"window {window} s", p95 / window, f"<= {target:.1f} s", p95 <= target),
        )  # fmt: skip
        return
    assert watch_report is not None
    report.add(
        bc.Row("watcher", f"cordon -> the pool in Kueue, median of {changes}", f"{median:.2f} s", f"window {window} s",
               median / window, f"<= {target:.1f} s", median <= target),
        bc.Row("watcher", f"cordon -> the pool in Kueue, p95 of {changes}", f"{p95:.2f} s", f"window {window} s",
               p95 / window, f"<= {target:.1f} s", p95 <= target),
        bc.Row("watcher", f"Node Changed published for {changes} changes", str(watch_report.published),
               "", None, f"== {changes}", watch_report.published == changes),
        bc.Row("watcher", f"cost per cluster-month ({timings.WATCHER_MEMORY_MB} MB arm64, {billed} s/min)",
               f"${cost:.2f}"),
    )  # fmt: skip


def _health_event(node: str, status: str) -> dict[str, Any]:
    """AWS's ``SageMaker HyperPod Cluster Node Health Event`` for ``hyperpod-<instance id>``-less names: the
    router resolves the cluster by its ARN; the instance id is the node's name here."""
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": "SageMaker HyperPod Cluster Node Health Event",
        "source": "aws.sagemaker",
        "account": "123456789012",
        "time": "2026-01-01T00:00:00Z",
        "region": "us-east-1",
        "resources": [HYPERPOD_ARN],
        "detail": {
            "ClusterName": "bench0000001",
            "ClusterArn": HYPERPOD_ARN,
            "InstanceId": node,
            "Tags": {},
            "HealthSummary": {"HealthStatus": status, "HealthStatusReason": "bench", "RepairAction": "Replace"},
        },
    }


def main(argv: list[str]) -> int:
    bc.use_bench_env()
    report = bc.Report()
    run(report, quick="--quick" in argv, trigger="health" if "--health" in argv else "cordon")
    print(bc.table(report.rows))
    return 1 if report.failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
