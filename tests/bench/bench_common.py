"""What the benchmarks share: result rows and the summary table, the machine, best-of timing, and the
backends of an end-to-end run (DynamoDB Local + the Kubernetes API simulator + a synthetic cluster).

Every figure is a ratio to a floor measured in the same run on the same machine: absolute times on a
shared 2-vCPU container move by ±50% between runs, ratios far less.
"""

from __future__ import annotations

import contextlib
import gc
import os
import platform
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(ROOT))

# What a benchmark run needs in its environment (``use_bench_env``, called by each script's ``main``;
# never at import: pytest imports this module too, and other tests need their own credentials).
BENCH_ENV = {
    "AWS_ACCESS_KEY_ID": "test",
    "AWS_SECRET_ACCESS_KEY": "test",
    "AWS_SESSION_TOKEN": "test",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1",
    "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled",
    "POWERTOOLS_TRACE_DISABLED": "1",
    "POWERTOOLS_METRICS_NAMESPACE": "idleshare",
    "IDLESHARE_DDB_LOCAL_START_TIMEOUT": "90",
}


def use_bench_env() -> None:
    """Fake AWS credentials, no account-based endpoints, the Kueue CRDs, a quiet tracer."""
    for key, value in BENCH_ENV.items():
        os.environ.setdefault(key, value)
    os.environ.setdefault("KUEUE_CRDS_DIR", str((ROOT.parent / "shared" / "kueue" / "crds").resolve()))
    os.environ.pop("AWS_PROFILE", None)


DDB_WRITES = frozenset({"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"})
KUBE_WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})
MB = 1024 * 1024


@dataclass
class Row:
    """One line of the summary table. ``ok`` is None when the figure has no target."""

    bench: str
    what: str
    value: str
    floor: str = ""
    ratio: float | None = None
    target: str = ""
    ok: bool | None = None


@dataclass
class Report:
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, *rows: Row) -> None:
        self.rows.extend(rows)

    @property
    def failed(self) -> list[Row]:
        return [r for r in self.rows if r.ok is False]


def size_label(n: int) -> str:
    return f"{n // 1000}k" if n >= 1000 and n % 1000 == 0 else str(n)


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return (
        f"{cpu}, {os.cpu_count()} CPUs, Python {platform.python_version()} ({platform.system()} {platform.machine()})"
    )


def table(rows: list[Row]) -> str:
    header = ("benchmark", "measure", "value", "floor", "ratio", "target", "")
    cells = [
        (
            r.bench,
            r.what,
            r.value,
            r.floor,
            "" if r.ratio is None else f"{r.ratio:.2f}x",
            r.target,
            {True: "ok", False: "MISSED", None: ""}[r.ok],
        )
        for r in rows
    ]
    widths = [max(len(str(c[i])) for c in [header, *cells]) for i in range(len(header))]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in [header, *cells]]
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(lines)


def best_ms(fn: Callable[[], object], runs: int) -> float:
    """Best wall time of ``runs`` calls in milliseconds (GC collected before each call)."""
    best = float("inf")
    for _ in range(runs):
        gc.collect()
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best * 1000


def timed_ms(fn: Callable[[], Any]) -> tuple[float, Any]:
    gc.collect()
    start = time.perf_counter()
    out = fn()
    return (time.perf_counter() - start) * 1000, out


# -- counting requests -----------------------------------------------------------------------------


class DynamoCounter:
    """Every DynamoDB API call a boto3 client makes, by operation (a botocore ``before-call`` hook)."""

    def __init__(self, client: Any) -> None:
        self.calls: Counter[str] = Counter()
        client.meta.events.register("before-call.dynamodb", self._count)

    def _count(self, model: Any, **_: Any) -> None:
        self.calls[model.name] += 1

    def clear(self) -> None:
        self.calls.clear()

    @property
    def total(self) -> int:
        return sum(self.calls.values())

    @property
    def writes(self) -> int:
        return sum(n for op, n in self.calls.items() if op in DDB_WRITES)


def kube_counts(sim: Any) -> tuple[int, int, Counter[str]]:
    """(requests, writes, by method) the simulator served since its last ``clear_requests``."""
    by_method = Counter(r.method for r in sim.requests)
    return sum(by_method.values()), sum(n for m, n in by_method.items() if m in KUBE_WRITES), by_method


def fmt_calls(counter: Counter[str]) -> str:
    return " ".join(f"{k}:{v}" for k, v in sorted(counter.items())) or "none"


# -- backends ----------------------------------------------------------------------------------------


@contextlib.contextmanager
def dynamodb_local() -> Iterator[str]:
    """A DynamoDB Local for the run (``tests/integration/dynamodb_local.py``): its endpoint."""
    from tests.integration.dynamodb_local import DynamoDBLocal

    with DynamoDBLocal.start() as server:
        yield server.endpoint


def ddb_resource(endpoint: str) -> Any:
    import boto3
    from botocore.config import Config

    # a session of its own: boto3's default session would keep these credentials for later callers
    return boto3.Session().resource(
        "dynamodb",
        endpoint_url=endpoint,
        region_name="us-east-1",
        config=Config(connect_timeout=5, read_timeout=60, retries={"max_attempts": 3, "mode": "standard"}),
    )


def new_table(endpoint: str) -> Any:
    from tests.integration.conftest import create_table

    return create_table(ddb_resource(endpoint), f"idleshare-bench-{uuid.uuid4().hex[:8]}")


@dataclass
class Cluster:
    """A governed cluster: a synthetic node set in a simulator, its quotas in a DynamoDB table."""

    sim: Any
    table: Any
    store: Any
    record: Any
    nodes_bytes: bytes
    n_nodes: int
    n_quotas: int


def seed_cluster(
    sim: Any,
    table: Any,
    n_nodes: int,
    *,
    cluster_id: str = "bench",
    prefix: str = "hyperpod-ns-",
    n_teams: int = 200,
    seed: int = 0,
) -> Cluster:
    """``n_nodes`` synthetic nodes into ``sim`` and ``n_teams`` teams' quotas into ``table`` for ``cluster_id``."""

    from idleshare.adapters.ports import ClusterRecord
    from idleshare.adapters.store import DynamoStore
    from tests.bench.synthetic import _node_list_bytes, make_nodes_list, make_quotas

    items, eligible = make_nodes_list(n_nodes, seed=seed)
    quotas = make_quotas(eligible, n_teams=n_teams, seed=seed)
    nodes_bytes = _node_list_bytes(items)
    sim.seed_nodes(items)
    del items
    store = DynamoStore(table)
    record = ClusterRecord(cluster_id, f"{cluster_id}-eks", namespace_prefix=prefix, cohort_name=f"{prefix}pool")
    store.put_cluster(record)
    for q in quotas:
        store.create_quota(cluster_id, q)
    return Cluster(sim, table, store, record, nodes_bytes, n_nodes, len(quotas))


def start_simulator() -> Any:
    from devkit.kubesim.simulator import KubeSimulator

    return KubeSimulator().start()


def sqs_event(cluster_id: str, n: int = 1) -> dict[str, Any]:
    """What the SQS event source hands the recompute Lambda: ``n`` requests for one cluster."""
    import json

    return {
        "Records": [
            {
                "messageId": f"m-{i}",
                "receiptHandle": f"rh-{i}",
                "body": json.dumps({"cluster": cluster_id, "reason": "bench", "requestId": f"bench-{i}"}),
                "attributes": {"MessageGroupId": cluster_id},
                "messageAttributes": {},
                "md5OfBody": "",
                "eventSource": "aws:sqs",
                "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:recompute.fifo",
                "awsRegion": "us-east-1",
            }
            for i in range(n)
        ]
    }


class LambdaContext:
    function_name = "bench"
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:bench"
    aws_request_id = "bench"


@contextlib.contextmanager
def quiet_handlers() -> Iterator[None]:
    """The handlers' JSON logs and EMF metrics go to a sink, not the terminal (their cost is still paid)."""
    import io

    from idleshare.handlers.observability import logger

    sink = io.StringIO()
    old = logger.registered_handler.setStream(sink)
    try:
        with contextlib.redirect_stdout(sink):
            yield
    finally:
        logger.registered_handler.setStream(old)
