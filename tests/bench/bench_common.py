"""What the benchmarks share: result rows and the summary table, the machine, best-of timing, and the
backends of an end-to-end run (DynamoDB Local + the real kube-apiserver + Kueue of ``devkit.kube.stack``
+ a synthetic cluster seeded into it).

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

from idleshare.domain.cluster_settings import ClusterSettings

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(ROOT))

from tests.aws_env import FAKE_ENV  # noqa: E402 - after the path is set (run as a script)

# What a benchmark run needs in its environment (``use_bench_env``, called by each script's ``main``;
# never at import: pytest imports this module too, and other tests need their own credentials).
BENCH_ENV = {
    **FAKE_ENV,
    "POWERTOOLS_TRACE_DISABLED": "1",
    "POWERTOOLS_METRICS_NAMESPACE": "idleshare",
    "IDLESHARE_DDB_LOCAL_START_TIMEOUT": "90",
}


def use_bench_env() -> None:
    """Fake AWS credentials, no account-based endpoints, a quiet tracer."""
    for key, value in BENCH_ENV.items():
        os.environ.setdefault(key, value)
    os.environ.pop("AWS_PROFILE", None)


def script_main(argv: list[str], run: Callable[..., object], *, dynamodb: bool = True) -> int:
    """A benchmark script's ``main``: the bench environment, ``run(report, endpoint, quick=...)`` (``endpoint``:
    a DynamoDB Local's, started for the run, or None without ``dynamodb``), then the summary table; 1 when a
    target was missed."""
    use_bench_env()
    report = Report()
    with dynamodb_local() if dynamodb else contextlib.nullcontext(None) as endpoint:
        run(report, endpoint, quick="--quick" in argv)
    print(table(report.rows))
    return 1 if report.failed else 0


def sized_run(
    measure: Callable[..., dict[str, Any]],
    detail: Callable[[dict[str, Any]], str],
    rows: Callable[[dict[str, Any]], list[Row]],
    *,
    size: int,
    quick_size: int,
    **options: Any,
) -> Callable[..., dict[str, Any]]:
    """The ``run(report, endpoint, *, quick=False, stack=None)`` of a benchmark on the real stack (``bench_all`` and
    :func:`script_main` call it): ``measure(size, endpoint, stack=stack, **options)`` (``quick_size`` with ``quick``),
    its ``detail`` printed, its ``rows`` into the report; it returns the measurement."""

    def run(report: Report, endpoint: str, *, quick: bool = False, stack: Any = None) -> dict[str, Any]:
        m = measure(quick_size if quick else size, endpoint, stack=stack, **options)
        print(detail(m), flush=True)
        report.add(*rows(m))
        return m

    return run


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


def kube_counts(proxy: Any) -> tuple[int, int, Counter[str]]:
    """(requests, writes, by method) the recording proxy (``devkit.kube.proxy.FaultProxy``) forwarded since
    its last ``clear_requests``."""
    by_method = Counter(r.method for r in proxy.requests)
    return sum(by_method.values()), sum(n for m, n in by_method.items() if m in KUBE_WRITES), by_method


def cpu_seconds(pids: dict[str, int]) -> dict[str, float]:
    """CPU seconds (user + system) each process has used so far (``/proc/<pid>/stat``), and this one's."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {"idleshare": time.process_time()}
    for name, pid in pids.items():
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            out[name] = (int(fields[11]) + int(fields[12])) / tick
    return out


def cpu_delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {k: after[k] - before[k] for k in after if k in before}


def settle(pids: dict[str, int], *, busy: float = 0.15, interval: float = 0.5, timeout: float = 60.0) -> float:
    """Wait until the stack's processes (``pids``) use less than ``busy`` of one CPU together over ``interval``
    (Kueue reconciles every ClusterQueue after a change, for seconds): a measurement starts on an idle server.
    Returns the seconds waited (``timeout`` at most)."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        before = cpu_seconds(pids)
        time.sleep(interval)
        used = cpu_delta(before, cpu_seconds(pids))
        if sum(v for k, v in used.items() if k != "idleshare") < busy * interval:
            break
    return time.monotonic() - started


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


@contextlib.contextmanager
def kube_stack(stack: Any = None) -> Iterator[Any]:
    """``stack`` if given (a benchmark run shares one), else a real stack of its own (etcd + kube-apiserver +
    Kueue, ``devkit.kube.stack.running``), stopped afterwards."""
    if stack is not None:
        yield stack
        return
    from devkit.kube.stack import running

    with running() as started:
        yield started


def idleshare_kube(stack: Any, server: str | None = None, *, timeout: float = 120) -> Any:
    """idleshare's adapter as its own RBAC user: straight to the apiserver (TLS, the stack's CA), or to
    ``server`` (the recording proxy's plain-HTTP URL, which forwards the same token)."""
    from idleshare.adapters.kube import LightkubeCluster

    if server is None:
        return LightkubeCluster(
            stack.server, stack.ca_pem, lambda: stack.idleshare_token, timeout=timeout, name="bench"
        )
    return LightkubeCluster(server, token=lambda: stack.idleshare_token, timeout=timeout, name="bench")


def clear_kueue_objects(admin: Any) -> None:
    """Every Kueue object and team namespace gone, the nodes kept (a second "first" recompute)."""
    from devkit.kube.client import SYSTEM_NAMESPACES

    for kind in ("Workload", "LocalQueue"):
        admin.delete_all(kind)
    for kind in ("ClusterQueue", "Cohort", "ResourceFlavor", "WorkloadPriorityClass"):
        admin.delete_all(kind)
    teams = [n["metadata"]["name"] for n in admin.objects("Namespace")]
    admin.map(admin.drop_namespace, [n for n in teams if n not in SYSTEM_NAMESPACES], workers=8)
    admin.wait_for(
        lambda: not admin.objects("ClusterQueue") and not admin.objects("Cohort"), "Kueue objects deleted", timeout=600
    )


def seed_nodes(admin: Any, items: list[dict[str, Any]], *, workers: int = 8) -> float:
    """``items`` as the cluster's only nodes (``Kube.seed_nodes``; the apiserver drops a ``deletionTimestamp``
    on create, so a node being deleted — it carries a finalizer — is deleted after, as a drain would); ms."""
    started = time.perf_counter()
    admin.seed_nodes(items, workers=workers)
    deleting = [n["metadata"]["name"] for n in items if n["metadata"].get("deletionTimestamp")]
    admin.map(lambda name: admin.delete("Node", name), deleting, workers=workers)
    return (time.perf_counter() - started) * 1000


@dataclass
class Cluster:
    """A governed cluster: a synthetic node set in the real apiserver, its quotas in a DynamoDB table."""

    admin: Any  # devkit.kube.client.Kube, as system:masters
    table: Any
    store: Any
    record: Any
    nodes_bytes: bytes
    n_nodes: int
    quotas: list[dict[str, Any]]
    seed_ms: float

    @property
    def n_quotas(self) -> int:
        return len(self.quotas)


def seed_cluster(
    admin: Any,
    table: Any,
    n_nodes: int,
    *,
    cluster_id: str = "bench",
    prefix: str = "hyperpod-ns-",
    n_teams: int = 200,
    seed: int = 0,
    basis: Any = None,
) -> Cluster:
    """``n_nodes`` synthetic nodes into the apiserver ``admin`` talks to (replacing any) and ``n_teams``
    teams' quotas into ``table`` for ``cluster_id``, governed on ``basis`` (None: the default, Quota)."""

    from tests.bench.synthetic import _node_list_bytes, make_nodes_list, make_quotas

    items, eligible = make_nodes_list(n_nodes, seed=seed)
    quotas = make_quotas(eligible, n_teams=n_teams, seed=seed)
    nodes_bytes = _node_list_bytes(items)
    seed_ms = seed_nodes(admin, items)
    del items
    store, record = add_cluster(table, quotas, cluster_id=cluster_id, prefix=prefix, basis=basis)
    return Cluster(admin, table, store, record, nodes_bytes, n_nodes, quotas, seed_ms)


def add_cluster(
    table: Any, quotas: list[dict[str, Any]], *, cluster_id: str, prefix: str, basis: Any = None
) -> tuple[Any, Any]:
    """A cluster record (its ``BorrowLimitBasis``: ``basis``, None for the default) and its quotas in ``table``:
    (store, record)."""
    from idleshare.adapters.ports import ClusterRecord
    from idleshare.adapters.store import DynamoStore

    store = DynamoStore(table)
    record = ClusterRecord(
        cluster_id, f"{cluster_id}-eks", settings=ClusterSettings(namespace_prefix=prefix, cohort_name=f"{prefix}pool")
    )
    if basis is not None:
        record = record.with_settings(borrow_limit_basis=basis)
    store.put_cluster(record)
    for q in quotas:
        store.create_quota(cluster_id, q)
    return store, record


def child_env(stack: Any, endpoint: str, table: str, **extra: str) -> dict[str, str]:
    """The environment of a benchmark's child process running the recompute (``bench_memory``, ``bench_scale``): this
    repository importable, the stack's apiserver, CA and idleshare's token, the DynamoDB Local table; ``extra`` more."""
    return (
        dict(os.environ)
        | {
            "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
            "BENCH_KUBE": stack.server,
            "BENCH_CA": str(stack.ca_file),
            "BENCH_TOKEN": stack.idleshare_token,
            "BENCH_DDB": endpoint,
            "BENCH_TABLE": table,
        }
        | extra
    )


def child_kube(timeout: float, **options: Any) -> Any:
    """In a child run with :func:`child_env`: idleshare's adapter to the stack's apiserver as its RBAC user."""
    from idleshare.adapters.kube import LightkubeCluster

    ca = Path(os.environ["BENCH_CA"]).read_bytes()
    return LightkubeCluster(os.environ["BENCH_KUBE"], ca, lambda: os.environ["BENCH_TOKEN"], timeout=timeout, **options)


def child_table() -> Any:
    """In a child run with :func:`child_env`: the DynamoDB Local table."""
    return ddb_resource(os.environ["BENCH_DDB"]).Table(os.environ["BENCH_TABLE"])


def peak_rss() -> int:
    """This process's peak resident set in bytes (``VmHWM``, what Lambda holds to its memory size)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def bus_envelope(detail_type: str, detail: dict[str, Any]) -> dict[str, Any]:
    """An idleshare event as the bus rule delivers it to the router (``detail_type``, ``detail``)."""
    from idleshare import names

    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "source": names.EVENT_SOURCE,
        "detail-type": detail_type,
        "account": "123456789012",
        "time": "2026-01-01T00:00:00Z",
        "region": "us-east-1",
        "resources": [],
        "detail": detail,
    }


def sqs_event(cluster_id: str, n: int = 1) -> dict[str, Any]:
    """What the SQS event source hands the recompute Lambda: ``n`` requests for one cluster."""
    import json

    from devkit import sqs

    messages = [
        {
            "MessageId": f"m-{i}",
            "ReceiptHandle": f"rh-{i}",
            "Body": json.dumps({"cluster": cluster_id, "reason": "bench", "requestId": f"bench-{i}"}),
            "Attributes": {"MessageGroupId": cluster_id},
        }
        for i in range(n)
    ]
    return sqs.sqs_event(messages, "arn:aws:sqs:us-east-1:123456789012:recompute.fifo")


@contextlib.contextmanager
def quiet_handlers() -> Iterator[None]:
    """The handlers' JSON logs and EMF metrics go to a sink, not the terminal (their cost is still paid)."""
    import io

    from idleshare.runtime.observability import logger

    sink = io.StringIO()
    # swapped, not setStream(): that flushes the stream it replaces, which may be closed (a test's captured stdout,
    # when the logger was made in a test with capsys)
    handler = logger.registered_handler
    old, handler.stream = handler.stream, sink
    try:
        with contextlib.redirect_stdout(sink):
            yield
    finally:
        handler.stream = old
