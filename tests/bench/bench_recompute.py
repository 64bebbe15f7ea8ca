"""Benchmark: the recompute Lambda handler end to end at 5k nodes (``make bench``).

The real ``idleshare.handlers.recompute.handler`` gets an SQS batch, reads the nodes from the
Kubernetes API simulator (``devkit.kubesim``) through the real ``LightkubeCluster`` adapter, the
quotas from DynamoDB Local through the real ``DynamoStore``, persists the pool and applies the
Kueue objects. Measured, for three recomputes of one cluster:

- initial: nothing stored, nothing applied (the most work: every object is created);
- one node changed: a node goes NotReady (the common event: a new generation, a few objects move);
- no-op: nothing changed since (what the 5-minute safety net mostly does) — must make ZERO
  DynamoDB writes and ZERO Kubernetes writes; the run fails otherwise.

Floors, measured in the same run on the same backends:

- ``list``: reading the nodes through the adapter (``LightkubeCluster.list_nodes``) — the least any
  recompute must do: its pages come from the same simulator over the same loopback HTTP, so the
  simulator's own serving cost (a Python HTTP server in this process) is in both and the ratio shows
  what idleshare adds on top (quotas, engine, DynamoDB, apply);
- ``json.loads``: decoding the same NodeList bytes in memory (the engine benchmark's floor), for scale.

Requests are counted by the simulator's request log and a botocore ``before-call`` hook on the
table's client (API calls, not retries). Usage: ``uv run python tests/bench/bench_recompute.py [--quick]``.
"""

from __future__ import annotations

import json
import sys
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.bench import bench_common as bc

SIZE = 5_000
QUICK_SIZE = 1_000
LIST_RUNS = 3


def run_recompute(cluster: bc.Cluster, kube: Any, counter: bc.DynamoCounter) -> dict[str, Any]:
    """One handler invocation: its time, outcome and the requests it made."""
    from idleshare.handlers import recompute

    cluster.sim.clear_requests()
    counter.clear()
    with bc.quiet_handlers():
        ms, out = bc.timed_ms(lambda: recompute.handler(bc.sqs_event(cluster.record.cluster_id), bc.LambdaContext()))
    if out.get("batchItemFailures"):
        raise RuntimeError(f"the recompute failed: {out}")
    k_total, k_writes, k_methods = bc.kube_counts(cluster.sim)
    return {
        "ms": ms,
        "kube": k_total,
        "kube_writes": k_writes,
        "kube_by_method": k_methods,
        "ddb": counter.total,
        "ddb_writes": counter.writes,
        "ddb_by_op": dict(counter.calls),
    }


def set_ready(sim: Any, name: str, ready: bool) -> None:
    node = sim.get("Node", name)
    for c in node["status"]["conditions"]:
        if c["type"] == "Ready":
            c["status"] = "True" if ready else "False"
    sim.set_node(node)


def measure(
    n_nodes: int,
    endpoint: str | None = None,
    *,
    table: Any = None,
    changes: int = 1,
    repeats: int = 2,
    n_teams: int = 200,
) -> dict[str, Any]:
    """Everything of one run at ``n_nodes`` on DynamoDB Local at ``endpoint`` (a new table) or on ``table``."""
    from idleshare.adapters.kube import LightkubeCluster
    from idleshare.handlers import wiring
    from tests.fakes import FakePublisher

    sim = bc.start_simulator()
    try:
        if table is None:
            assert endpoint is not None, "an endpoint or a table"
            table = bc.new_table(endpoint)
        cluster = bc.seed_cluster(sim, table, n_nodes, n_teams=n_teams)
        kube = LightkubeCluster(sim.url, timeout=60)
        counter = bc.DynamoCounter(table.meta.client)
        publisher = FakePublisher()
        wiring.install(wiring.Dependencies(store=cluster.store, publisher=publisher, kube_for=lambda c: kube))
        try:
            floor_list = bc.best_ms(lambda: sum(1 for _ in kube.list_nodes()), LIST_RUNS)
            floor_json = bc.best_ms(partial(json.loads, cluster.nodes_bytes), LIST_RUNS)
            initial = run_recompute(cluster, kube, counter)
            changed = []
            victim = json.loads(cluster.nodes_bytes)["items"][0]["metadata"]["name"]
            for i in range(changes):
                set_ready(sim, victim, ready=bool(i % 2))
                changed.append(run_recompute(cluster, kube, counter))
            noops = [run_recompute(cluster, kube, counter) for _ in range(repeats)]
        finally:
            wiring.install(None)
        pool = cluster.store.get_pool(cluster.record.cluster_id)
        return {
            "n": n_nodes,
            "quotas": cluster.n_quotas,
            "floor_list": floor_list,
            "floor_json": floor_json,
            "initial": initial,
            "changed": min(changed, key=lambda r: r["ms"]),
            "noop": min(noops, key=lambda r: r["ms"]),
            "noop_writes": max(r["ddb_writes"] + r["kube_writes"] for r in noops),
            "generation": pool.generation if pool else 0,
            "published": len(publisher.events),
        }
    finally:
        sim.stop()


def rows(m: dict[str, Any]) -> list[bc.Row]:
    n = bc.size_label(m["n"])
    out = [
        bc.Row("recompute", f"floor: list {n} nodes via adapter", f"{m['floor_list']:.0f} ms"),
        bc.Row("recompute", f"floor: json.loads {n} NodeList", f"{m['floor_json']:.0f} ms"),
    ]
    for key, label in (("initial", "initial"), ("changed", "1 node changed"), ("noop", "no-op")):
        r = m[key]
        out.append(
            bc.Row(
                "recompute",
                f"{label} {n}: time",
                f"{r['ms']:.0f} ms",
                "list",
                r["ms"] / m["floor_list"],
                "",
                None,
            )
        )
        out.append(
            bc.Row(
                "recompute",
                f"{label} {n}: k8s req / writes",
                f"{r['kube']} / {r['kube_writes']}",
                target="0 writes" if key == "noop" else "",
                ok=(r["kube_writes"] == 0) if key == "noop" else None,
            )
        )
        out.append(
            bc.Row(
                "recompute",
                f"{label} {n}: ddb calls / writes",
                f"{r['ddb']} / {r['ddb_writes']}",
                target="0 writes" if key == "noop" else "",
                ok=(r["ddb_writes"] == 0) if key == "noop" else None,
            )
        )
    return out


def detail(m: dict[str, Any]) -> str:
    lines = [f"recompute handler end to end, {m['n']} nodes, {m['quotas']} quotas (DynamoDB Local + kube simulator)"]
    for key in ("initial", "changed", "noop"):
        r = m[key]
        lines.append(
            f"  {key:8} {r['ms']:8.0f} ms = {r['ms'] / m['floor_list']:5.2f}x list, "
            f"{r['ms'] / m['floor_json']:5.1f}x json.loads | k8s {bc.fmt_calls(r['kube_by_method'])} | "
            f"ddb {bc.fmt_calls(r['ddb_by_op'])}"
        )
    lines.append(f"  floors: list via adapter {m['floor_list']:.0f} ms, json.loads {m['floor_json']:.0f} ms")
    return "\n".join(lines)


def run(report: bc.Report, endpoint: str, *, quick: bool = False) -> dict[str, Any]:
    m = measure(QUICK_SIZE if quick else SIZE, endpoint)
    print(detail(m), flush=True)
    report.add(*rows(m))
    return m


def main(argv: list[str]) -> int:
    bc.use_bench_env()
    report = bc.Report()
    with bc.dynamodb_local() as endpoint:
        run(report, endpoint, quick="--quick" in argv)
    print(bc.table(report.rows))
    return 1 if report.failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
