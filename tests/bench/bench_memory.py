"""Benchmark: peak memory of a 20k-node recompute (``make bench``): does it fit a 512 MB Lambda?

The recompute runs in a child process, alone, the way Lambda runs it: the real recompute handler,
the real ``DynamoStore`` on DynamoDB Local and the real ``LightkubeCluster`` on a real kube-apiserver
(``devkit.kube.stack``, the synthetic nodes seeded into it; other processes, so their memory is not
counted), as idleshare's RBAC user over TLS. Measured:

- the child's peak resident set (``VmHWM``: ``ru_maxrss`` would carry the forking parent's over
  ``exec``) after the initial recompute (nothing stored yet, every Kueue object created): the
  figure Lambda compares with its memory size — target: at most half of 512 MB, the rest is headroom;
- the ``tracemalloc`` peak of a second child's recompute (one node changed: a new generation stored,
  a few objects re-applied; in its own child, as tracemalloc inflates the RSS): the Python heap the
  recompute itself needed, on top of the imports;
- the floor: the ``tracemalloc`` size of ``json.loads`` of the same NodeList in a third child — what
  merely holding the cluster's nodes as Python objects costs.

Seeding 20k nodes into the apiserver (``Kube.seed_nodes``, 8 workers) is timed and printed.

Usage: ``uv run python tests/bench/bench_memory.py [--quick]`` (``--quick``: 2k nodes).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.bench import bench_common as bc

SIZE = 20_000
QUICK_SIZE = 2_000
LAMBDA_MB = 512
TARGET_MB = LAMBDA_MB / 2

CHILD_RECOMPUTE = """
import json, os, sys, time, tracemalloc
import boto3
import idleshare.handlers.recompute as h
from idleshare.adapters.store import DynamoStore
from idleshare.runtime import wiring
from devkit.lambda_context import LambdaContext
from tests.bench.bench_common import child_kube, child_table, peak_rss, quiet_handlers, sqs_event
kube = child_kube(timeout=120)
wiring.install(wiring.Dependencies(store=DynamoStore(child_table()), kube_for=lambda c: kube))
before = peak_rss()
trace = os.environ.get("BENCH_TRACE") == "1"
if trace:
    tracemalloc.start()
t = time.perf_counter()
with quiet_handlers():
    out = h.handler(sqs_event(os.environ["BENCH_CLUSTER"]), LambdaContext())
ms = (time.perf_counter() - t) * 1000
assert out == {"batchItemFailures": []}, out
peak = tracemalloc.get_traced_memory()[1] if trace else 0
print(json.dumps({"rss_before": before, "rss": peak_rss(),
                  "traced_peak": peak, "ms": ms}))
"""

CHILD_JSON = """
import json, sys, tracemalloc
def hwm():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
data = open(sys.argv[1], "rb").read()
before = hwm()
tracemalloc.start()
doc = json.loads(data)
size, peak = tracemalloc.get_traced_memory()
print(json.dumps({"size": size, "peak": peak, "bytes": len(data), "items": len(doc["items"]),
                  "rss_delta": hwm() - before}))
"""


def child(code: str, env: dict[str, str], *args: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-c", code, *args], env=env, cwd=bc.ROOT, capture_output=True, text=True, timeout=900
    )
    if out.returncode != 0:
        raise RuntimeError(f"memory child failed:\n{out.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def measure(n_nodes: int, endpoint: str, *, n_teams: int = 200, stack: Any = None) -> dict[str, Any]:
    """One run at ``n_nodes`` on ``stack`` (emptied first) or a real stack of its own."""
    from devkit.kube.client import Kube
    from tests.bench.bench_recompute import set_ready

    with bc.kube_stack(stack) as ks:
        admin = Kube.admin(ks)
        try:
            admin.reset()
            table = bc.new_table(endpoint)
            cluster = bc.seed_cluster(admin, table, n_nodes, cluster_id="mem", n_teams=n_teams)
            env = bc.child_env(ks, endpoint, table.name, BENCH_CLUSTER="mem")
            initial = child(CHILD_RECOMPUTE, env)
            set_ready(admin, json.loads(cluster.nodes_bytes)["items"][0]["metadata"]["name"], ready=False)
            traced = child(CHILD_RECOMPUTE, env | {"BENCH_TRACE": "1"})
            with tempfile.NamedTemporaryFile(suffix=".json") as f:
                f.write(cluster.nodes_bytes)
                f.flush()
                floor = child(CHILD_JSON, env, f.name)
        finally:
            admin.close()
    return {"n": n_nodes, "seed_ms": cluster.seed_ms, "initial": initial, "traced": traced, "json": floor}


def rows(m: dict[str, Any]) -> list[bc.Row]:
    n = bc.size_label(m["n"])
    floor = m["json"]["size"]
    rss = m["initial"]["rss"]
    return [
        bc.Row("memory", f"seed {n} nodes into the apiserver (8 workers)", f"{m['seed_ms'] / 1000:.1f} s"),
        bc.Row(
            "memory",
            f"floor: json.loads {n} NodeList",
            f"{floor / bc.MB:.0f} MB ({m['json']['bytes'] / bc.MB:.0f} MB JSON)",
        ),
        bc.Row(
            "memory",
            f"recompute {n}: max RSS",
            f"{rss / bc.MB:.0f} MB of {LAMBDA_MB} (imports {m['initial']['rss_before'] / bc.MB:.0f})",
            "json.loads",
            rss / floor,
            f"<= {TARGET_MB:.0f} MB",
            rss / bc.MB <= TARGET_MB,
        ),
        bc.Row(
            "memory",
            f"recompute {n}: tracemalloc peak",
            f"{m['traced']['traced_peak'] / bc.MB:.0f} MB",
            "json.loads",
            m["traced"]["traced_peak"] / floor,
        ),
    ]


def detail(m: dict[str, Any]) -> str:
    i, t, j = m["initial"], m["traced"], m["json"]
    return (
        f"memory of a {m['n']}-node recompute (child process; nodes seeded in {m['seed_ms'] / 1000:.1f} s): max RSS {i['rss'] / bc.MB:.0f} MB "
        f"(after imports {i['rss_before'] / bc.MB:.0f} MB; recompute {i['ms']:.0f} ms), "
        f"tracemalloc peak {t['traced_peak'] / bc.MB:.0f} MB (1 node changed); json.loads of the NodeList "
        f"({j['bytes'] / bc.MB:.0f} MB): {j['size'] / bc.MB:.0f} MB held, RSS +{j['rss_delta'] / bc.MB:.0f} MB"
    )


run = bc.sized_run(measure, detail, rows, size=SIZE, quick_size=QUICK_SIZE)
"""For ``bench_all`` and the script: :func:`measure` at :data:`SIZE` nodes (``--quick``: :data:`QUICK_SIZE`)."""


if __name__ == "__main__":
    sys.exit(bc.script_main(sys.argv[1:], run))
