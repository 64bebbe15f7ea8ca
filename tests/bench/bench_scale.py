"""The scale bench (``make bench-scale``, not CI): idleshare at 20k, 50k and 100k nodes on the real apiserver.

One real stack (etcd + kube-apiserver + Kueue of ``devkit.kube.stack``; no scheduler: nothing is placed here) into
which real-shaped Node objects are loaded, growing from one size to the next (``tests/bench/synthetic.py``: the labels,
annotations, conditions, ``managedFields`` and ``images`` of an EKS/HyperPod node, the allocatable of the real instance
types, 8 flavors, one node in 20 excluded for every reason), with 500 teams' quotas in DynamoDB Local. Per size:

- **the floor**: ``kubectl get nodes -o json`` against the same server (best of :data:`FLOOR_RUNS` up to 20k nodes,
  one run above: minutes each; its output to /dev/null), and the apiserver's CPU seconds meanwhile;
- **the recompute** as Lambda runs it: the real handler in a child process of its own (its peak resident set is
  the figure Lambda compares with its memory size: ``VmHWM``), kept warm between invocations as a Lambda container
  is: a first run (every object created), one node changed (a node goes NotReady), no change. Time, Kubernetes
  requests by method (counted in the child at httpx), the apiserver's CPU seconds;
- **the node watcher**: one pass (a claim, a watch of :data:`WATCH_PASS_SECONDS`, a checkpoint) that sees one
  change, after a pass that listed every node; its checkpoint's items and the largest of them (DynamoDB Local:
  the real 400 KB item limit);
- **an isolated cordon -> the Cohort in Kueue**: ``kubectl cordon``/``uncordon`` through the watcher, the router,
  the deployed queue (moto, polled as the event source mapping does) and the recompute, :data:`CORDONS` times;
- **an AZ fails**: 10% of the nodes NotReady at once (as fast as the server takes the status writes) -> the stored
  pool excludes every one of them: how many recomputes, how long after the last write.

Every figure is a ratio to the floor or checked against its target (:data:`TARGETS`, at 100k nodes); the run exits 1
when one is missed. Usage: ``uv run python tests/bench/bench_scale.py [--sizes 20000,50000,100000] [--teams 500]
[--images 12] [--cordons 5]``.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import math
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.bench import bench_common as bc

SIZES = (20_000, 50_000, 100_000)
TEAMS = 500
IMAGES = 12
FLOOR_RUNS = 2
CORDONS = 5
WATCH_PASS_SECONDS = 10.0
"""A measured watcher pass holds its watch this long from its start (a deployed one: until
``timings.WATCHER_STOP_BEFORE_SECONDS`` before its timeout): claiming 100k nodes' views takes seconds, and a pass whose
deadline passes during the claim watches nothing (at 2 s, the 100k pass returned before its watch: 0 published)."""
AZ_SHARE = 0.10
ETCD_QUOTA_BYTES = 8 * 1024**3
CHECKED_AT = 100_000
"""The size the targets apply to (the issue's): smaller sizes are printed for the trend."""
TARGETS = {
    "changed": 1.0,  # x kubectl
    "noop": 0.5,  # x kubectl
    "memory_mb": 1024.0,
    "watcher": 0.5,  # x kubectl
    "cordon_p95_s": 5.0,
    "az_recomputes": 2,
}


def az_bound_seconds() -> float:
    from idleshare import timings

    return timings.COALESCE_SECONDS + 30.0


# -- the cluster --------------------------------------------------------------------------------------------------


class Loaded:
    """The nodes loaded into the apiserver so far (by name) and, per flavor, how many are eligible."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.known: set[str] = set()
        self.eligible: Counter[str] = Counter()
        self.seconds = 0.0

    def grow(self, admin: Any, n_nodes: int, n_images: int) -> float:
        """The nodes of a cluster of ``n_nodes`` that are not loaded yet, created (8 writers, 2,000 at a time: the
        harness never holds more of them); the seconds it took."""
        from tests.bench.synthetic import iter_nodes

        started = time.perf_counter()
        chunk: list[dict[str, Any]] = []
        for node, ok in iter_nodes(n_nodes, n_images=n_images):
            meta = node["metadata"]
            if meta["name"] in self.known:
                continue
            for key in ("resourceVersion", "uid", "creationTimestamp", "managedFields"):
                meta.pop(key, None)  # as ``Kube.seed_nodes``: what the server sets is not sent
            self.names.append(meta["name"])
            self.known.add(meta["name"])
            if ok:
                self.eligible[meta["labels"]["node.kubernetes.io/instance-type"]] += 1
            chunk.append(node)
            if len(chunk) == 2_000:
                self._create(admin, chunk)
                chunk = []
        self._create(admin, chunk)
        seconds = time.perf_counter() - started
        self.seconds += seconds
        return seconds

    @staticmethod
    def _create(admin: Any, nodes: list[dict[str, Any]]) -> None:
        admin.map(admin.create, nodes, workers=8)
        deleting = [n["metadata"]["name"] for n in nodes if n["metadata"].get("deletionTimestamp")]
        admin.map(lambda name: admin.delete("Node", name), deleting, workers=8)


AGENTS = (  # (name, cpu, memory, node selector): the DaemonSets every GPU node runs, as on EKS/HyperPod
    ("aws-node", "50m", "128Mi", None),
    ("kube-proxy", "100m", "128Mi", None),
    ("nvidia-device-plugin", "100m", "256Mi", {"nvidia.com/gpu.present": "true"}),
    ("dcgm-exporter", "200m", "1Gi", {"nvidia.com/gpu.present": "true"}),
    ("fluent-bit", "250m", "512Mi", None),
)
AGENTS_NAMESPACE = "idleshare-bench-agents"


def agent_pod(ds: dict[str, Any], node: str, index: int) -> dict[str, Any]:
    """A DaemonSet's pod bound to ``node``, as its controller would create it (owner, labels, template, tolerations,
    a volume or two, env): what a cluster-wide pod list returns for each of the thousands of agents."""
    name = ds["metadata"]["name"]
    container = ds["spec"]["template"]["spec"]["containers"][0]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{name}-{index:06d}",
            "namespace": AGENTS_NAMESPACE,
            "labels": {"app.kubernetes.io/name": name, "controller-revision-hash": "6d9f8c7b5", "pod-template-generation": "3"},
            "annotations": {"kubectl.kubernetes.io/restartedAt": "2026-11-30T08:14:52Z"},
            "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": name, "uid": ds["metadata"]["uid"],
                 "controller": True, "blockOwnerDeletion": True}
            ],
        },
        "spec": {
            "nodeName": node,
            "containers": [
                container
                | {
                    "env": [{"name": k, "value": f"value-of-{k.lower()}"} for k in
                            ("NODE_NAME", "CLUSTER_NAME", "AWS_REGION", "LOG_LEVEL", "METRICS_PORT")],
                    "volumeMounts": [{"name": "host-root", "mountPath": "/host", "readOnly": True},
                                     {"name": "run", "mountPath": "/run"}],
                }
            ],
            "volumes": [{"name": "host-root", "hostPath": {"path": "/"}}, {"name": "run", "hostPath": {"path": "/run"}}],
            "tolerations": [{"operator": "Exists"}],
            "priorityClassName": "system-node-critical",
        },
    }  # fmt: skip


def seed_agents(admin: Any, loaded: Loaded, per_node: int, seeded: list[str]) -> float:
    """The :data:`AGENTS` DaemonSets (once) and ``per_node`` of their pods bound to each node loaded since the last
    call (``seeded``: the nodes that have them). Nothing schedules here (no controller runs): the pods are created
    bound, as the DaemonSet controller binds them. Returns the seconds it took."""
    from devkit.kube.client import KubeRequestError

    started = time.perf_counter()
    with contextlib.suppress(KubeRequestError):
        admin.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": AGENTS_NAMESPACE}})
    sets = []
    for name, cpu, memory, selector in AGENTS[:per_node]:
        ds = admin.get("DaemonSet", name, AGENTS_NAMESPACE)
        if ds is None:
            template: dict[str, Any] = {
                "metadata": {"labels": {"app.kubernetes.io/name": name}},
                "spec": {
                    "containers": [
                        {"name": name, "image": f"public.ecr.aws/eks/{name}:v1.0.0",
                         "resources": {"requests": {"cpu": cpu, "memory": memory}}}
                    ],
                    "tolerations": [{"operator": "Exists"}],
                },
            }  # fmt: skip
            if selector:
                template["spec"]["nodeSelector"] = selector
            ds = admin.create(
                {
                    "apiVersion": "apps/v1",
                    "kind": "DaemonSet",
                    "metadata": {"name": name, "namespace": AGENTS_NAMESPACE},
                    "spec": {"selector": {"matchLabels": {"app.kubernetes.io/name": name}}, "template": template},
                }
            )
        sets.append(ds)
    fresh = loaded.names[len(seeded) :]
    pods = [agent_pod(ds, node, len(seeded) + i) for i, node in enumerate(fresh) for ds in sets]
    for i in range(0, len(pods), 2_000):
        admin.map(admin.create, pods[i : i + 2_000], workers=8)
    seeded.extend(fresh)
    return time.perf_counter() - started


def set_ready(admin: Any, name: str, ready: bool) -> None:
    from tests.bench.bench_recompute import set_ready as set_node_ready

    set_node_ready(admin, name, ready)


def kubectl_floor(stack: Any, runs: int) -> tuple[float, dict[str, float]]:
    """(best ms of ``kubectl get nodes -o json`` as admin, straight to the apiserver, its output discarded; the
    stack's CPU seconds during that best run)."""
    best, cpu = float("inf"), {}
    for _ in range(runs):
        bc.settle(stack.pids())
        before = bc.cpu_seconds(stack.pids())
        started = time.perf_counter()
        subprocess.run(
            [str(stack.binaries.kubectl), f"--kubeconfig={stack.kubeconfig()}", "get", "nodes", "-o", "json"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            check=True,
        )
        took = time.perf_counter() - started
        if took < best:
            best, cpu = took, bc.cpu_delta(before, bc.cpu_seconds(stack.pids()))
    cpu.pop("idleshare", None)
    return best * 1000, cpu


# -- the recompute, in a child process as Lambda runs it ------------------------------------------------------------

CHILD = """
import collections, json, os, sys, time
import httpx2 as httpx
counts = collections.Counter()
_send = httpx.Client.send
def send(self, request, *args, **kwargs):
    counts[request.method] += 1
    return _send(self, request, *args, **kwargs)
httpx.Client.send = send
import idleshare.handlers.recompute as h
from idleshare.adapters.node_cache import NodeCache
from idleshare.adapters.store import DynamoStore
from idleshare.runtime import wiring
from devkit.lambda_context import LambdaContext
from tests.bench.bench_common import child_kube, child_table, peak_rss, quiet_handlers, sqs_event
cache = NodeCache() if os.environ.get("BENCH_NODE_CACHE") == "1" else None  # as runtime/wiring.py deploys it
kube = child_kube(timeout=300, node_cache=cache)
wiring.install(wiring.Dependencies(store=DynamoStore(child_table()), kube_for=lambda c: kube))
print("READY " + json.dumps({"rss": peak_rss()}), flush=True)
for line in sys.stdin:
    counts.clear()
    started = time.perf_counter()
    with quiet_handlers():
        out = h.handler(sqs_event(line.strip()), LambdaContext(memory_limit_in_mb=%(memory)d))
    ms = (time.perf_counter() - started) * 1000
    print("RESULT " + json.dumps({"ms": ms, "out": out, "requests": dict(counts), "rss": peak_rss(),
                                  "read_costs": kube.read_costs}), flush=True)
"""


class RecomputeChild:
    """The recompute handler in a process of its own, invoked on demand (``run``), warm between invocations."""

    def __init__(self, stack: Any, endpoint: str, table: str, *, node_cache: bool = True) -> None:
        from idleshare import timings

        env = bc.child_env(stack, endpoint, table, BENCH_NODE_CACHE="1" if node_cache else "0")
        code = CHILD % {"memory": timings.RECOMPUTE_MEMORY_MB}
        self.stack = stack
        self.proc = subprocess.Popen(
            [sys.executable, "-c", code], env=env, cwd=bc.ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        self.imports_rss = self._read("READY ")["rss"]

    def _read(self, prefix: str) -> dict[str, Any]:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith(prefix):
                result: dict[str, Any] = json.loads(line[len(prefix) :])
                return result
        raise RuntimeError(f"the recompute child ended (exit {self.proc.wait()})")

    def run(self, cluster_id: str) -> dict[str, Any]:
        assert self.proc.stdin is not None
        pids = self.stack.pids()
        bc.settle(pids)
        before = bc.cpu_seconds(pids)
        self.proc.stdin.write(cluster_id + "\n")
        self.proc.stdin.flush()
        result = self._read("RESULT ")
        result["cpu"] = {k: v for k, v in bc.cpu_delta(before, bc.cpu_seconds(pids)).items() if k != "idleshare"}
        if result["out"].get("batchItemFailures"):
            raise RuntimeError(f"the recompute failed: {result['out']}")
        return result

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=60)


# -- the node watcher, one pass --------------------------------------------------------------------------------------


WATCH_CHILD = """
import json, os, sys, time, uuid
from idleshare.adapters.store import DynamoStore
from idleshare.service.watcher import watch_cluster
from tests.bench.bench_common import child_kube, child_table, peak_rss, quiet_handlers
from tests.kube.watcher_harness import CollectingPublisher
kube = child_kube(timeout=300)
store = DynamoStore(child_table())
imports = peak_rss()
with quiet_handlers():
    started = time.monotonic()
    report = watch_cluster(os.environ["BENCH_CLUSTER"], kube, store, CollectingPublisher(),
                           deadline=started + float(os.environ["BENCH_SECONDS"]), owner=uuid.uuid4().hex[:8])
    took = time.monotonic() - started
print("RESULT " + json.dumps({"s": took, "published": report.published, "relists": report.relists,
                              "rss": peak_rss(), "imports_rss": imports}), flush=True)
"""


def watcher_pass(stack: Any, endpoint: str, table: str, cluster_id: str, seconds: float) -> dict[str, Any]:
    """One watcher invocation on ``cluster_id`` in a process of its own, as Lambda runs it (claim, watch until
    ``seconds`` from its start, checkpoint), as idleshare's RBAC user: its seconds, events published, relists and
    peak resident set."""
    env = bc.child_env(stack, endpoint, table, BENCH_CLUSTER=cluster_id, BENCH_SECONDS=str(seconds))
    out = subprocess.run(
        [sys.executable, "-c", WATCH_CHILD], env=env, cwd=bc.ROOT, capture_output=True, text=True, timeout=900
    )
    for line in out.stdout.splitlines():
        if line.startswith("RESULT "):
            result: dict[str, Any] = json.loads(line[len("RESULT ") :])
            return result
    raise RuntimeError(f"the watcher child failed (exit {out.returncode}):\n{out.stderr[-3000:]}")


def checkpoint_items(table: Any, cluster_id: str) -> tuple[int, int]:
    """(items, bytes of the largest) of the watcher's checkpoint of ``cluster_id`` (its views and their parts), each
    item's size counted as DynamoDB counts it: attribute names plus values (binary: its bytes)."""
    from boto3.dynamodb.conditions import Key

    from idleshare.table import PART_PREFIX, PK, SK, WATCH_SK, cluster_pk

    watch: list[dict[str, Any]] = []
    for prefix in (WATCH_SK, PART_PREFIX + WATCH_SK):  # a query's page is 1 MB: ask for these items only
        key = Key(PK).eq(cluster_pk(cluster_id)) & Key(SK).begins_with(prefix)
        page: dict[str, Any] = {"LastEvaluatedKey": None}
        while "LastEvaluatedKey" in page:
            start = {"ExclusiveStartKey": page["LastEvaluatedKey"]} if page["LastEvaluatedKey"] else {}
            page = table.query(KeyConditionExpression=key, **start)
            watch += page["Items"]
    return len(watch), max((item_bytes(i) for i in watch), default=0)


def item_bytes(item: dict[str, Any]) -> int:
    """An item's size as DynamoDB bills and bounds it (names + values; numbers and strings by their text)."""

    def size(value: Any) -> int:
        if hasattr(value, "value"):  # boto3's Binary
            return len(value.value)
        if isinstance(value, bytes | bytearray):
            return len(value)
        if isinstance(value, dict):
            return sum(len(k) + size(v) for k, v in value.items())
        if isinstance(value, list | set | tuple):
            return sum(size(v) for v in value)
        return len(str(value).encode())

    return size(item)


# -- the event path: watcher -> router -> queue -> recompute ------------------------------------------------------


@contextlib.contextmanager
def pipeline(stack: Any, store: Any, cluster_id: str, node_cache: bool = True) -> Iterator[dict[str, Any]]:
    """The node watcher in a thread, the router as the bus rule invokes it, the deployed queue (moto) polled as the
    event source mapping does, the recompute handler: ``{"recomputes": n}`` counts the recompute invocations."""
    import boto3

    from devkit.lambda_context import LambdaContext
    from devkit.sqs import Deduplicating, EventSourceMapping, WallClock, create_queue
    from idleshare.adapters.aws import SqsRecomputeQueue
    from idleshare.adapters.sqs_records import SqsRecordReturns
    from idleshare.handlers import recompute, router
    from idleshare.runtime import wiring
    from tests.kube.watcher_harness import CollectingPublisher, WatcherThread

    sqs = boto3.client("sqs", region_name="us-east-1")
    url = create_queue(sqs, f"s-{uuid.uuid4().hex[:6]}.fifo").url
    from idleshare.adapters.kube import LightkubeCluster
    from idleshare.adapters.node_cache import NodeCache

    kube = LightkubeCluster(  # as runtime/wiring.py deploys it: one adapter per cluster, its node list kept
        stack.server,
        stack.ca_pem,
        lambda: stack.idleshare_token,
        timeout=300,
        name="bench",
        node_cache=NodeCache() if node_cache else None,
    )
    wiring.install(
        wiring.Dependencies(
            store=store,
            queue=SqsRecomputeQueue(Deduplicating(sqs, time.time), url),
            kube_for=lambda _c: kube,
            returns=SqsRecordReturns(sqs),
        )
    )
    context = LambdaContext(function_name="bench", memory_limit_in_mb=256, aws_request_id="bench")
    state = {"recomputes": 0}

    def to_router(batch: list[tuple[str, dict[str, Any]]]) -> None:
        for detail_type, detail in batch:  # the bus rule's target: one invocation per event
            router.handler(bc.bus_envelope(detail_type, detail), context)

    def counted(event: Any, ctx: Any) -> Any:
        state["recomputes"] += 1
        return recompute.handler(event, ctx)

    esm = EventSourceMapping(sqs, url, counted, WallClock())
    stop = threading.Event()

    def deliver() -> None:
        while not stop.is_set():
            if esm.poll() is None:
                time.sleep(0.05)

    delivery = threading.Thread(target=deliver, daemon=True)
    watcher = WatcherThread(kube, store, CollectingPublisher(forward=to_router), cluster_id=cluster_id)
    try:
        with bc.quiet_handlers():
            delivery.start()
            watcher.start()
            watcher.wait_started()
            yield state
    finally:
        watcher.stop()
        stop.set()
        delivery.join(timeout=120)
        wiring.install(None)
        kube.close()


def _cohort(admin: Any, name: str) -> str:
    cohort = admin.get("Cohort", name)
    return json.dumps(cohort.get("spec") if cohort else None, sort_keys=True)


def cordons(
    stack: Any, admin: Any, store: Any, cluster_id: str, cohort: str, node: str, n: int, node_cache: bool
) -> list[float]:
    """``n`` isolated cordons/uncordons of ``node`` -> a new Cohort spec in Kueue, through the event path: seconds."""
    from idleshare import timings

    out: list[float] = []
    with pipeline(stack, store, cluster_id, node_cache):
        for i in range(n):
            time.sleep(timings.COALESCE_SECONDS + 1)  # isolated: the window of the previous change has closed
            before = _cohort(admin, cohort)
            started = time.monotonic()
            stack.kubectl("uncordon" if i % 2 else "cordon", node)
            admin.wait_for(lambda b=before: _cohort(admin, cohort) != b, "a new Cohort", timeout=300)
            out.append(time.monotonic() - started)
            print(f"    cordon {i + 1}/{n}: {out[-1]:.2f} s", file=sys.stderr, flush=True)
    return out


def az_fails(
    stack: Any, admin: Any, store: Any, cluster_id: str, names: list[str], share: float, node_cache: bool
) -> dict[str, Any]:
    """``share`` of the nodes NotReady at once -> the stored pool excludes every one: recomputes and seconds."""
    victims = names[:: round(1 / share)]
    generation = store.get_pool(cluster_id).generation
    with pipeline(stack, store, cluster_id, node_cache) as state:
        started = time.monotonic()
        admin.map(lambda n: set_ready(admin, n, False), victims, workers=8)
        written = time.monotonic()
        counted_before = state["recomputes"]

        def done() -> bool:
            pool = store.get_pool(cluster_id)
            excluded = pool.pool.get("excludedNodes", {}) if pool else {}
            return pool is not None and pool.generation > generation and all(v in excluded for v in victims)

        admin.wait_for(done, "the pool without the AZ's nodes", timeout=600)
        finished = time.monotonic()
        time.sleep(1)
        recomputes = state["recomputes"]
    admin.map(lambda n: set_ready(admin, n, True), victims, workers=8)
    return {
        "nodes": len(victims),
        "write_s": written - started,
        "after_last_write_s": finished - written,
        "after_first_write_s": finished - started,
        "recomputes": recomputes,
        "recomputes_after_writes": recomputes - counted_before,
    }


# -- one size ---------------------------------------------------------------------------------------------------------


def measure_size(
    stack: Any, admin: Any, endpoint: str, loaded: Loaded, n_nodes: int, args: argparse.Namespace
) -> dict[str, Any]:
    from tests.bench.synthetic import make_quotas

    m: dict[str, Any] = {"n": n_nodes}
    print(f"== {n_nodes} nodes", file=sys.stderr, flush=True)
    m["load_s"] = loaded.grow(admin, n_nodes, args.images)
    print(f"  loaded in {m['load_s']:.0f} s ({loaded.seconds:.0f} s in all)", file=sys.stderr, flush=True)
    bc.clear_kueue_objects(admin)
    table = bc.new_table(endpoint)
    cluster_id = f"scale{n_nodes}"
    quotas = make_quotas(loaded.eligible, n_teams=args.teams)
    store, record = bc.add_cluster(table, quotas, cluster_id=cluster_id, prefix="hyperpod-ns-")
    m["floor_ms"], m["floor_cpu"] = kubectl_floor(stack, FLOOR_RUNS if n_nodes <= 20_000 else 1)
    print(f"  kubectl get nodes -o json: {m['floor_ms']:.0f} ms", file=sys.stderr, flush=True)
    child = RecomputeChild(stack, endpoint, table.name, node_cache=args.node_cache)
    try:
        m["imports_rss"] = child.imports_rss
        m["initial"] = child.run(cluster_id)
        victim = loaded.names[0]
        set_ready(admin, victim, ready=False)
        m["changed"] = child.run(cluster_id)
        m["noop"] = child.run(cluster_id)
        set_ready(admin, victim, ready=True)
        m["back"] = child.run(cluster_id)
        m["rss"] = max(m[k]["rss"] for k in ("initial", "changed", "noop", "back"))
    finally:
        child.close()
    for key in ("initial", "changed", "noop"):
        r = m[key]
        print(f"  recompute {key}: {r['ms']:.0f} ms, requests {r['requests']}", file=sys.stderr, flush=True)
    if args.pods_per_node:
        m["headroom"] = headroom_costs(stack, admin, endpoint, table, store, record, loaded, args)
    gc.collect()
    relist = watcher_pass(stack, endpoint, table.name, cluster_id, WATCH_PASS_SECONDS)
    stack.kubectl("cordon", loaded.names[1])
    one = watcher_pass(stack, endpoint, table.name, cluster_id, WATCH_PASS_SECONDS)
    stack.kubectl("uncordon", loaded.names[1])
    watcher_pass(stack, endpoint, table.name, cluster_id, WATCH_PASS_SECONDS)  # the uncordon seen: starts clean
    m["watch_relist_s"], m["watch_s"], m["watch_published"] = relist["s"], one["s"], one["published"]
    m["watch_rss"] = max(relist["rss"], one["rss"])
    m["checkpoint_items"], m["checkpoint_largest"] = checkpoint_items(table, cluster_id)
    print(f"  watcher pass: {m['watch_s']:.1f} s (relist {m['watch_relist_s']:.1f} s)", file=sys.stderr, flush=True)
    if args.cordons:
        m["cordons"] = cordons(
            stack, admin, store, cluster_id, record.settings.cohort_name, loaded.names[2], args.cordons, args.node_cache
        )
    if args.az:
        m["az"] = az_fails(stack, admin, store, cluster_id, loaded.names, AZ_SHARE, args.node_cache)
        print(f"  AZ: {m['az']}", file=sys.stderr, flush=True)
    return m


def headroom_costs(
    stack: Any, admin: Any, endpoint: str, table: Any, store: Any, record: Any, loaded: Loaded, args: argparse.Namespace
) -> dict[str, Any]:
    """What each headroom setting costs a recompute (issue 31): with :data:`AGENTS` DaemonSets and ``pods_per_node`` of
    their pods on every node, the recompute (warm, one node changed, then no change) on ``off``, ``daemonsets`` and
    ``all``: time, requests, and the bytes of the DaemonSet and pod lists (the adapter's ``read_costs``)."""

    from idleshare.domain.model import Headroom

    seeded: list[str] = args.agents_seeded
    took = seed_agents(admin, loaded, args.pods_per_node, seeded)
    print(f"  agents: {len(seeded) * args.pods_per_node} pods in {took:.0f} s", file=sys.stderr, flush=True)
    out: dict[str, Any] = {"pods": len(seeded) * args.pods_per_node, "seed_s": took}
    for setting in (Headroom.OFF, Headroom.DAEMONSETS, Headroom.ALL):
        store.put_cluster(record.with_settings(headroom=setting))
        child = RecomputeChild(stack, endpoint, table.name, node_cache=args.node_cache)
        try:
            child.run(record.cluster_id)  # the setting's first recompute (new limits): not measured
            set_ready(admin, loaded.names[3], ready=False)
            changed = child.run(record.cluster_id)
            noop = child.run(record.cluster_id)
            set_ready(admin, loaded.names[3], ready=True)
            child.run(record.cluster_id)
        finally:
            child.close()
        out[str(setting)] = {"changed": changed, "noop": noop}
        print(f"  headroom {setting}: changed {changed['ms']:.0f} ms, no change {noop['ms']:.0f} ms, reads "
              f"{noop['read_costs']}", file=sys.stderr, flush=True)  # fmt: skip
    store.put_cluster(record)
    return out


def headroom_rows(m: dict[str, Any]) -> list[bc.Row]:
    n, floor, h = bc.size_label(m["n"]), m["floor_ms"], m["headroom"]
    out = [bc.Row("headroom", f"{n}: {h['pods']} agent pods seeded ({len(AGENTS)} DaemonSets)", f"{h['seed_s']:.0f} s")]
    for setting in ("off", "daemonsets", "all"):
        for key, label in (("changed", "1 node changed"), ("noop", "no change")):
            r = h[setting][key]
            reads = (
                ", ".join(
                    f"{kind} {req} req {size / bc.MB:.1f} MB" for kind, (req, size) in sorted(r["read_costs"].items())
                )
                or "no workload list"
            )
            checked = key == "changed" and setting == "daemonsets" and m["n"] >= 5_000
            ratio = r["ms"] / floor
            out.append(
                bc.Row(
                    "headroom",
                    f"{n}: {setting}, {label} ({reads})",
                    f"{r['ms']:.0f} ms",
                    "kubectl",
                    ratio,
                    "<= 0.35x (make bench)" if checked else "",
                    (ratio <= 0.35) if checked else None,
                )
            )
    return out  # fmt: skip


def rows(m: dict[str, Any]) -> list[bc.Row]:
    from idleshare import timings

    n, floor = bc.size_label(m["n"]), m["floor_ms"]
    checked = m["n"] >= CHECKED_AT
    out = [
        bc.Row("scale", f"{n}: nodes loaded (8 writers)", f"{m['load_s']:.0f} s"),
        bc.Row("scale", f"{n}: floor kubectl get nodes -o json", f"{floor:.0f} ms",
               target=f"apiserver {m['floor_cpu'].get('kube-apiserver', 0):.1f} CPU s"),
    ]  # fmt: skip
    for key, label, target in (("initial", "first run", None), ("changed", "1 node changed", "changed"),
                               ("noop", "no change", "noop")):  # fmt: skip
        r = m[key]
        ratio = r["ms"] / floor
        goal = TARGETS[target] if target else None
        req = " ".join(f"{k} {v}" for k, v in sorted(r["requests"].items()))
        cpu = r["cpu"].get("kube-apiserver", 0.0)
        out.append(
            bc.Row("scale", f"{n}: recompute, {label} ({req}; apiserver {cpu:.1f} CPU s)", f"{r['ms']:.0f} ms",
                   "kubectl", ratio, f"<= {goal:g}x" if goal and checked else "",
                   (ratio <= goal) if goal and checked else None)
        )  # fmt: skip
    rss_mb = m["rss"] / bc.MB
    out.append(
        bc.Row("scale", f"{n}: recompute peak memory (imports {m['imports_rss'] / bc.MB:.0f} MB)", f"{rss_mb:.0f} MB",
               "", None, f"<= {TARGETS['memory_mb']:.0f} MB" if checked else "",
               (rss_mb <= TARGETS["memory_mb"]) if checked else None)
    )  # fmt: skip
    ratio = m["watch_s"] * 1000 / floor
    out.append(
        bc.Row("scale", f"{n}: watcher pass, 1 change ({m['watch_published']} published; watch {WATCH_PASS_SECONDS:g} s;"
               f" relist pass {m['watch_relist_s']:.1f} s)", f"{m['watch_s']:.1f} s", "kubectl", ratio,
               f"<= {TARGETS['watcher']:g}x" if checked else "",
               (ratio <= TARGETS["watcher"] and m["watch_published"] == 1) if checked else None)
    )  # fmt: skip
    watch_mb = m["watch_rss"] / bc.MB
    out.append(
        bc.Row("scale", f"{n}: watcher peak memory (the relist pass)", f"{watch_mb:.0f} MB", "", None,
               f"<= {timings.WATCHER_MEMORY_MB} MB (its Lambda)", watch_mb <= timings.WATCHER_MEMORY_MB)
    )  # fmt: skip
    out.append(
        bc.Row("scale", f"{n}: watcher checkpoint items, largest", f"{m['checkpoint_items']}, "
               f"{m['checkpoint_largest'] / 1024:.0f} KB", "", None, "<= 400 KB", m["checkpoint_largest"] < 400 * 1024)
    )  # fmt: skip
    if m.get("cordons"):
        c = m["cordons"]
        p95 = sorted(c)[max(0, round(0.95 * len(c)) - 1)]
        out.append(
            bc.Row("scale", f"{n}: cordon -> Cohort, median / p95 of {len(c)}",
                   f"{statistics.median(c):.1f} / {p95:.1f} s", "", None,
                   f"p95 <= {TARGETS['cordon_p95_s']:g} s" if checked else "",
                   (p95 <= TARGETS["cordon_p95_s"]) if checked else None)
        )  # fmt: skip
    if m.get("az"):
        a, bound = m["az"], az_bound_seconds()
        # the writes take the server minutes at 10% of 100k nodes: "at once" is as many coalescing windows as they span
        windows = max(1, math.ceil(a["write_s"] / timings.COALESCE_SECONDS))
        allowed = TARGETS["az_recomputes"] * windows
        ok = a["recomputes"] <= allowed and a["after_last_write_s"] <= bound
        out.append(
            bc.Row("scale", f"{n}: {a['nodes']} nodes NotReady (written in {a['write_s']:.0f} s) -> pool; recomputes",
                   f"{a['after_last_write_s']:.1f} s after the last write; {a['recomputes']}", "", None,
                   f"<= {TARGETS['az_recomputes']} per window ({allowed}), <= {bound:.0f} s" if checked else "",
                   ok if checked else None)
        )  # fmt: skip
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="bench_scale", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default=",".join(str(s) for s in SIZES), help="node counts, ascending")
    parser.add_argument("--teams", type=int, default=TEAMS)
    parser.add_argument("--images", type=int, default=IMAGES, help="images each node lists")
    parser.add_argument("--cordons", type=int, default=CORDONS, help="isolated cordons timed per size (0: none)")
    parser.add_argument("--no-az", dest="az", action="store_false", help="skip the AZ failure")
    parser.add_argument(
        "--pods-per-node",
        type=int,
        default=0,
        choices=range(len(AGENTS) + 1),
        metavar=f"0..{len(AGENTS)}",
        help="agent DaemonSets and their pods on every node, and each headroom setting's cost measured (issue 31)",
    )
    parser.add_argument(
        "--no-node-cache",
        dest="node_cache",
        action="store_false",
        help="the recompute lists every node each time (no warm node list: adapters/node_cache.py)",
    )
    parser.add_argument("--json", type=Path, help="write the measurements here too")
    args = parser.parse_args(argv)
    args.agents_seeded = []
    try:
        sizes = sorted(int(s) for s in args.sizes.split(","))
    except ValueError:
        parser.error(f"--sizes: comma-separated node counts (got {args.sizes!r})")
    bc.use_bench_env()
    from moto import mock_aws

    from devkit.kube.client import Kube
    from devkit.kube.stack import running

    report = bc.Report()
    results = []
    with (
        bc.dynamodb_local() as endpoint,
        mock_aws(),
        running(place_pods=False, etcd_quota_bytes=ETCD_QUOTA_BYTES) as stack,
    ):
        admin = Kube.admin(stack, timeout=600)
        loaded = Loaded()
        try:
            for n in sizes:
                m = measure_size(stack, admin, endpoint, loaded, n, args)
                m["stack_rss"] = stack.rss()
                results.append(m)
                found = rows(m) + (headroom_rows(m) if m.get("headroom") else [])
                report.add(*found)
                print(bc.table(found), flush=True)
        finally:
            admin.close()
    print(bc.table(report.rows))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, default=str))
    return 1 if report.failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
