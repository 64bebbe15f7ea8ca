"""Benchmark: what one governed cluster costs on AWS per month (``make cost``, part of ``make bench``).

The real handlers (router, recompute, node watcher, admin API) run with the deployed wiring
(``idleshare.runtime.wiring.Dependencies``: ``DynamoStore``, ``SqsRecomputeQueue`` on the deployed FIFO queue,
``EventBridgePublisher``, the recompute's Powertools idempotency table) on moto's DynamoDB, SQS and EventBridge, and
a synthetic cluster of ``--nodes`` real-shaped nodes and ``--teams`` teams (``synthetic.py``) served in memory by
``tests.fakes.FakeKube`` (what the Kubernetes API answers costs AWS nothing; its time is in the durations only
through the parsing: ``bench_recompute.py`` measures the real apiserver's). Every ClusterQueue reports half its
quota in use and one pending workload, so the usage sample emits what a busy cluster does.

Each kind of invocation of the event model runs :data:`SAMPLES` times; ``cost.Meter`` counts at the boundary what
AWS bills for each (DynamoDB units from the items' sizes, SQS requests in 64 KB chunks with the event source's
receives and deletes, EventBridge events), the handlers' output gives the log bytes and the unique metrics (name x
dimension set, ``cost.emf_metrics``), the durations are measured. A day is each kind's mean times its count in
:data:`DAY` (the event model, per cluster); the synthesized stack gives the alarms and dashboards; the price table
(``tests/bench/prices.json``) gives the month, line by line. The node watcher's billed duration is its hold (the
watch it keeps open: ``--holds``) plus its measured work; the SQS event source's long polls are
:data:`SQS_POLLERS` pollers each receiving every 20 s.

Usage: ``uv run python tests/bench/bench_cost.py [--nodes 5000] [--teams 200] [--holds 5,10,30,60,65]``.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import io
import json
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.bench import cost

SAMPLES = 3
DAY: dict[str, float] = {
    "node change": 60 * 24,  # 60 node changes an hour (1.2 %/h of 5,000 nodes), a minute apart: one recompute each
    "scheduled": 12 * 24,  # the safety-net schedule every 5 minutes: a no-op recompute
    "quota change": 20,  # compute quotas updated through the admin API: a recompute each
    "api read": 200,  # admin API reads (pool, history, usage)
    "watch": 60 * 24,  # the node watcher, invoked every minute (its usage sample included)
}
"""The event model, per cluster and day."""
SQS_POLLERS = 5
"""Long polls the SQS event source keeps open on the recompute queue (Lambda starts with 5), 20 s each."""
HOLDS = (5.0, 10.0, 30.0, 60.0, 65.0)
"""The node watcher's hold per invocation (seconds): today's is ~65 s (its timeout less the stop margin)."""
TARGET_USD = 12.0


@dataclass
class Sample:
    """One invocation of a function: its duration, what it made AWS count, its output."""

    function: str
    seconds: float
    counts: cost.Counts
    lines: list[str] = field(default_factory=list)


@dataclass
class Kind:
    """What one event of the model costs: its invocations, averaged over its samples."""

    name: str
    samples: list[list[Sample]] = field(default_factory=list)

    def per_event(self) -> tuple[dict[str, tuple[float, float]], cost.Counts, int, list[str]]:
        """(per function: (invocations, seconds) per event; the counts per event; log bytes per event; every line)"""
        n = max(1, len(self.samples))
        functions: dict[str, list[float]] = {}
        counts = cost.Counts()
        lines: list[str] = []
        for run in self.samples:
            for s in run:
                functions.setdefault(s.function, [0.0, 0.0])
                functions[s.function][0] += 1
                functions[s.function][1] += s.seconds
                counts.add(s.counts)
                lines += s.lines
        scaled = cost.Counts(wru=counts.wru / n, rru=counts.rru / n, sqs_requests=round(counts.sqs_requests / n))
        scaled.events = round(counts.events / n)
        _, log_bytes, _ = cost.emf_metrics(lines)
        return {f: (v[0] / n, v[1] / n) for f, v in functions.items()}, scaled, log_bytes // n, lines


def memory_mb() -> dict[str, int]:
    """Each function's configured memory (the CDK app's)."""
    from idleshare import names, timings
    from infra.constructs.functions import DEFAULT_MEMORY

    return {
        "router": DEFAULT_MEMORY,
        "recompute": timings.RECOMPUTE_MEMORY_MB,
        "watcher": timings.WATCHER_MEMORY_MB,
        "api": DEFAULT_MEMORY,
        names.SERVICE: DEFAULT_MEMORY,
    }


def busy_status(cq: dict[str, Any]) -> dict[str, Any]:
    """A ClusterQueue's status as Kueue reports a busy one: half of each nominal quota in use, one workload pending."""
    usage = []
    for group in cq.get("spec", {}).get("resourceGroups", []):
        for flavor in group.get("flavors", []):
            resources = []
            for r in flavor.get("resources", []):
                nominal = str(r.get("nominalQuota", "0"))
                half = str(int(float(nominal) // 2)) if nominal.replace(".", "").isdigit() else "0"
                resources.append({"name": r["name"], "total": half, "borrowed": "0"})
            usage.append({"name": flavor["name"], "resources": resources})
    return {"flavorsUsage": usage, "flavorsReservation": usage, "pendingWorkloads": 1, "admittedWorkloads": 1}


class Rig:
    """The deployed wiring on moto with one synthetic cluster in memory."""

    def __init__(self, n_nodes: int, n_teams: int) -> None:
        self.n_nodes, self.n_teams = n_nodes, n_teams
        self.meter = cost.Meter()
        self.stack = contextlib.ExitStack()
        self.cluster_id = "bench"

    def __enter__(self) -> Rig:
        import boto3
        from moto import mock_aws

        from devkit import embedded
        from devkit import sqs as event_source
        from idleshare import names
        from idleshare import table as schema
        from idleshare.adapters.aws import EventBridgePublisher, SqsRecomputeQueue
        from idleshare.adapters.ports import ClusterRecord
        from idleshare.adapters.sqs_records import SqsRecordReturns
        from idleshare.adapters.store import DynamoStore
        from idleshare.runtime import wiring
        from tests.bench.synthetic import make_nodes_list, make_quotas
        from tests.fakes import FakeKube

        s = self.stack
        s.enter_context(embedded._environment())
        s.enter_context(mock_aws())
        ddb = boto3.resource("dynamodb", region_name=embedded.REGION)
        table = ddb.create_table(**schema.create_table_kwargs(embedded.TABLE_NAME))
        ddb.meta.client.create_table(**schema.idempotency_table_kwargs(embedded.IDEMPOTENCY_TABLE_NAME))
        import os

        for var, value in (
            (names.ENV_IDEMPOTENCY_TABLE_NAME, embedded.IDEMPOTENCY_TABLE_NAME),
            (names.ENV_TABLE_NAME, embedded.TABLE_NAME),
            (names.ENV_EVENT_BUS_NAME, embedded.BUS_NAME),
        ):
            os.environ[var] = value
            s.callback(os.environ.pop, var, None)
        self.sqs = boto3.client("sqs", region_name=embedded.REGION)
        self.clock = event_source.Clock([1_000_000.0])
        s.enter_context(event_source.sqs_time(self.clock))
        self.queues = event_source.create_queue(self.sqs, embedded.QUEUE_NAME)
        events = boto3.client("events", region_name=embedded.REGION)
        events.create_event_bus(Name=embedded.BUS_NAME)
        items, eligible = make_nodes_list(self.n_nodes)
        self.quotas = make_quotas(eligible, n_teams=self.n_teams)
        self.kube = FakeKube(items, rv="1")
        self.store = DynamoStore(table)
        self.deps = wiring.Dependencies(
            store=self.store,
            queue=SqsRecomputeQueue(
                event_source.Deduplicating(self.sqs, self.clock), self.queues.url, clock=self.clock
            ),
            publisher=EventBridgePublisher(events, embedded.BUS_NAME),
            kube_for=lambda _cluster: self.kube,
            clock=self.clock,
            returns=SqsRecordReturns(self.sqs),
        )
        wiring.install(self.deps)
        s.callback(wiring.install, None)
        self.store.put_cluster(ClusterRecord(self.cluster_id, f"{self.cluster_id}-eks"))
        for q in self.quotas:
            self.store.create_quota(self.cluster_id, q)
        s.enter_context(self.meter.installed())
        return self

    def __exit__(self, *exc: object) -> None:
        self.stack.close()

    # -- invocations ------------------------------------------------------------------------------

    def _invoke(self, function: str, call: Callable[[], Any]) -> Sample:
        from idleshare.runtime.observability import logger

        sink = io.StringIO()
        handler = logger.registered_handler
        old, handler.stream = handler.stream, sink
        self.meter.take()
        started = time.perf_counter()
        try:
            with contextlib.redirect_stdout(sink):
                call()
        finally:
            handler.stream = old
        seconds = time.perf_counter() - started
        return Sample(function, seconds, self.meter.take(), sink.getvalue().splitlines())

    def route(self, event: dict[str, Any]) -> Sample:
        from idleshare.handlers import router
        from tests.fakes import ROUTER_CONTEXT

        return self._invoke("router", lambda: router.handler(copy.deepcopy(event), ROUTER_CONTEXT))

    def _answering(self, inner: Callable[[dict[str, Any], Any], Any]) -> Callable[[dict[str, Any], Any], Any]:
        from idleshare.handlers import recompute

        def call(event: dict[str, Any], context: Any) -> Any:
            answer: dict[str, Any] = {}

            def run() -> None:
                answer.update(recompute.handler(event, context) or {})

            self_sample = self._invoke("recompute", run)
            inner_samples.append(self_sample)
            return answer

        inner_samples: list[Sample] = []
        self._last = inner_samples
        return call

    def recompute_after(self, event: dict[str, Any]) -> list[Sample]:
        """An event routed, the queue drained: the router's and the recomputes' samples."""
        from devkit import sqs as event_source

        routed = self.route(event)
        esm = event_source.EventSourceMapping(self.sqs, self.queues.url, self._answering(lambda e, c: None), self.clock)
        self.meter.take()
        esm.run(max_seconds=120)
        rest = self.meter.take()  # the event source's receives and deletes
        samples = [routed, *self._last]
        samples[-1].counts.add(rest)
        self.clock.advance(60)
        self.busy()
        return samples

    def busy(self) -> None:
        for obj in self.kube.objects.values():
            if obj.get("kind") == "ClusterQueue":
                obj["status"] = busy_status(obj)

    def node_change(self, i: int) -> list[Sample]:
        from idleshare import names
        from tests.bench.bench_common import bus_envelope

        node = self.kube.nodes[(i * 7919) % len(self.kube.nodes)]
        spec = node.setdefault("spec", {})
        spec["unschedulable"] = not spec.get("unschedulable", False)
        name = node["metadata"]["name"]
        detail = {"cluster": self.cluster_id, "node": name, "change": "cordon", "changes": ["unschedulable"]}
        return self.recompute_after(bus_envelope(names.DT_NODE_CHANGED, detail))

    def scheduled(self) -> list[Sample]:
        from idleshare import names

        event = {
            "version": "0",
            "id": "schedule",
            "source": names.SCHEDULE_SOURCE,
            "detail-type": names.DT_SCHEDULED_RECOMPUTE,
            "account": "123456789012",
            "time": "2026-01-01T00:00:00Z",
            "region": "us-east-1",
            "resources": [],
            "detail": {},
        }
        return self.recompute_after(event)

    def api(self, method: str, path: str, body: Any = None) -> Sample:
        from devkit.lambda_context import LambdaContext
        from idleshare.api import app

        event = api_event(method, path, body)
        answer: dict[str, Any] = {}

        def call() -> None:
            answer.update(app.handler(event, LambdaContext(function_name="api", aws_request_id="api")))

        sample = self._invoke("api", call)
        if answer.get("statusCode", 500) >= 400:
            raise RuntimeError(f"{method} {path}: {answer.get('statusCode')} {answer.get('body')}")
        sample.lines.append(json.dumps(answer))  # kept only for the parsed body below
        return sample

    def quota_change(self, i: int) -> list[Sample]:
        q = self.quotas[i % len(self.quotas)]
        stored = self.store.get_quota(self.cluster_id, q["Name"])
        assert stored is not None
        body = {
            "ComputeQuotaConfig": q["ComputeQuotaConfig"],
            "ComputeQuotaTarget": {**q["ComputeQuotaTarget"], "FairShareWeight": (i * 13) % 100},
            "TargetVersion": stored.version,
        }
        sample = self.api("PUT", f"/clusters/{self.cluster_id}/compute-quotas/{q['Name']}", body)
        sample.lines.pop()
        # the API's Compute Quota Changed event, as the bus rule hands it to the router
        from idleshare import names
        from tests.bench.bench_common import bus_envelope

        detail = {"cluster": self.cluster_id, "quotaName": q["Name"]}
        return [sample, *self.recompute_after(bus_envelope(names.DT_QUOTA_CHANGED, detail))]

    def api_read(self, i: int) -> list[Sample]:
        path = ("pool", "history", "usage")[i % 3]
        sample = self.api("GET", f"/clusters/{self.cluster_id}/{path}")
        sample.lines.pop()
        return [sample]

    def watch(self) -> list[Sample]:
        """One node-watcher invocation with no hold (its watch ends at once): its work, the minute's usage sample
        included; the hold is billed as the bench's ``--holds``."""
        from devkit.lambda_context import LambdaContext
        from idleshare import timings
        from idleshare.handlers import watcher

        deadline = time.monotonic() + timings.WATCHER_STOP_BEFORE_SECONDS

        class Context(LambdaContext):
            def get_remaining_time_in_millis(self) -> int:
                return int((deadline - time.monotonic()) * 1000)

        time.sleep(1.05)  # the usage sample covers whole seconds: a new one
        context = Context(function_name="watcher", aws_request_id=f"watch-{time.monotonic()}")
        return [self._invoke("watcher", lambda: watcher.handler({"cluster": self.cluster_id}, context))]


def api_event(method: str, path: str, body: Any = None) -> dict[str, Any]:
    """An API Gateway REST proxy event, IAM-authorized (as ``tests/apigw_local.py`` makes them)."""
    identity = {"accountId": "123456789012", "caller": "AIDABENCH", "userArn": "arn:aws:iam::123456789012:user/bench"}
    return {
        "resource": "/{proxy+}",
        "path": path,
        "httpMethod": method,
        "headers": {"Content-Type": "application/json"},
        "multiValueHeaders": {"Content-Type": ["application/json"]},
        "queryStringParameters": None,
        "multiValueQueryStringParameters": None,
        "pathParameters": {"proxy": path.lstrip("/")},
        "stageVariables": None,
        "requestContext": {
            "accountId": "123456789012",
            "resourcePath": "/{proxy+}",
            "httpMethod": method,
            "path": f"/prod{path}",
            "requestId": "bench",
            "stage": "prod",
            "identity": identity,
        },
        "body": json.dumps(body) if body is not None else None,
        "isBase64Encoded": False,
    }


def alarms_and_dashboards() -> tuple[int, int, int]:
    """(alarms, metrics they alarm on: each a billed alarm metric, dashboards) of the synthesized stack, one
    cluster (the example config)."""
    import tempfile

    from aws_cdk import App
    from aws_cdk.assertions import Template

    from infra.app import build_app
    from infra.config import CONTEXT_STUB_ASSET, parse_config, rehearsal_config

    with tempfile.TemporaryDirectory() as tmp:
        app = App(outdir=tmp, context={CONTEXT_STUB_ASSET: "true"})
        stack = build_app(app, config=parse_config(rehearsal_config()), nag=False)
        template = Template.from_stack(stack).to_json()
    alarms = [r for r in template["Resources"].values() if r["Type"] == "AWS::CloudWatch::Alarm"]
    dashboards = sum(1 for r in template["Resources"].values() if r["Type"] == "AWS::CloudWatch::Dashboard")
    alarmed = 0
    for a in alarms:
        stats = [m for m in a["Properties"].get("Metrics", []) if "MetricStat" in m]
        alarmed += max(1, len(stats))
    return len(alarms), alarmed, dashboards


def measure(n_nodes: int, n_teams: int, samples: int = SAMPLES) -> dict[str, Kind]:
    kinds = {name: Kind(name) for name in DAY}
    with Rig(n_nodes, n_teams) as rig:
        rig.scheduled()  # the first recompute: everything written once (not part of a day)
        rig.watch()  # the watcher's first pass: its baseline listing
        for i in range(samples):
            kinds["node change"].samples.append(rig.node_change(i))
            kinds["scheduled"].samples.append(rig.scheduled())
            kinds["quota change"].samples.append(rig.quota_change(i))
            kinds["api read"].samples.append(rig.api_read(i))
            kinds["watch"].samples.append(rig.watch())
    return kinds


def day_counts(kinds: dict[str, Kind], hold: float, memory: dict[str, int]) -> tuple[dict[str, float], set[Any]]:
    """A day's quantities for the bill (the watcher held ``hold`` seconds), and the unique metrics seen."""
    day: Counter[str] = Counter()
    unique: set[Any] = set()
    for name, kind in kinds.items():
        per_fn, counts, log_bytes, lines = kind.per_event()
        n = DAY[name]
        for fn, (invocations, seconds) in per_fn.items():
            billed = seconds + (hold * invocations if fn == "watcher" else 0.0)
            day[f"{fn} invocations"] += invocations * n
            day[f"{fn} GB-s"] += cost.gb_seconds(billed, memory[fn]) * n
            if fn == "api":
                day["api"] += invocations * n
        day["wru"] += counts.wru * n
        day["rru"] += counts.rru * n
        day["sqs"] += counts.sqs_requests * n
        day["events"] += counts.events * n
        day["log bytes"] += log_bytes * n
        unique |= cost.emf_metrics(lines)[0]
    day["sqs"] += SQS_POLLERS * 86_400 / 20
    day["schedules"] += DAY["watch"] + DAY["scheduled"]
    return dict(day), unique


def run(
    report: Any = None, *, quick: bool = False, nodes: int = 5_000, teams: int = 200, holds: tuple[float, ...] = HOLDS
) -> dict[str, Any]:
    from tests.bench.bench_common import Row

    if quick:
        nodes, teams = 500, 20
    started = time.perf_counter()
    kinds = measure(nodes, teams, 1 if quick else SAMPLES)
    measured_s = time.perf_counter() - started
    n_alarms, alarmed, dashboards = alarms_and_dashboards()
    memory = memory_mb()
    bills: dict[float, list[cost.Line]] = {}
    unique: set[Any] = set()
    for hold in holds:
        day, unique = day_counts(kinds, hold, memory)
        day.update(metrics=len(unique), alarms=alarmed, dashboards=dashboards)
        bills[hold] = cost.bill(day)
    print(f"\ncost at {nodes:,} nodes / {teams} teams, {measured_s:.0f} s to measure; event model per day: {DAY}")
    print(f"{len(unique)} unique metrics: {sorted(Counter(m[1] for m in unique).items())}")
    print(f"{n_alarms} alarms on {alarmed} metrics, {dashboards} dashboard(s)")
    for name, kind in kinds.items():
        per_fn, counts, log_bytes, _ = kind.per_event()
        fns = ", ".join(f"{f} {n:g}x {s * 1000:.0f} ms" for f, (n, s) in per_fn.items())
        print(
            f"  {name}: {fns}; {counts.wru:.0f} WRU, {counts.rru:.1f} RRU, {counts.sqs_requests} SQS, "
            f"{counts.events} events, {log_bytes:,} log bytes"
        )
    for hold, lines in bills.items():
        print(f"\nwatcher hold {hold:g} s: ${cost.total(lines):.2f} per cluster-month")
        print(cost.table_text(lines))
    default = bills.get(10.0) or next(iter(bills.values()))
    if report is not None:
        total = cost.total(default)
        report.add(
            Row("cost", f"USD per cluster-month, {nodes:,} nodes / {teams} teams, watcher hold 10 s", f"{total:.2f}",
                target=f"<= {TARGET_USD:g}", ok=None if quick else total <= TARGET_USD),
        )  # fmt: skip
    return {"bills": bills, "metrics": len(unique), "kinds": kinds}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5_000)
    parser.add_argument("--teams", type=int, default=200)
    parser.add_argument("--holds", default=",".join(f"{h:g}" for h in HOLDS))
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    from tests.bench.bench_common import Report, use_bench_env

    use_bench_env()
    report = Report()
    run(
        report,
        quick=args.quick,
        nodes=args.nodes,
        teams=args.teams,
        holds=tuple(float(h) for h in args.holds.split(",")),
    )
    return 1 if report.failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
