"""``make bench``: every benchmark, then one table; exit 1 only when a target is missed.

1. engine (``bench_plan.py``): ``idleshare plan`` at 1k / 5k / 20k nodes, 200 teams, vs ``json.loads``; the
   whole command on an empty cluster vs ``python -c pass`` and on 20k nodes vs ``json.load`` of the file;
2. cold start (``bench_coldstart.py``): each handler module's import vs ``import boto3``, and the
   first invocation's extra cost;
3. recompute (``bench_recompute.py``): the recompute handler end to end at 5k nodes, 200 teams, on DynamoDB
   Local and the real kube-apiserver + Kueue: time and requests vs ``kubectl get nodes -o json`` on the same
   server, no-op writes nothing, one node changed writes the Cohort only (the default Quota basis);
4. memory (``bench_memory.py``): peak memory of a 20k-node recompute (real apiserver) vs a 512 MB Lambda;
5. burst (``bench_burst.py``): 10,000 node events for one cluster and 100 for each of 20 others through
   the router, the queue and the recompute handler: events per second, recomputes per event, exact end;
6. watcher (``bench_watcher.py``): ``kubectl cordon`` to the new pool in Kueue on the real stack, through the
   node watcher, router, queue (with its delivery delay) and recompute: median / p95 vs the coalescing window;
7. health (``bench_watcher.py --health``): a HyperPod node health event to the new pool in Kueue
   (router, queue, recompute, the real apiserver), median / p95 vs the window;
8. recovery (``bench_recovery.py``): for each fault class, fault end -> the right borrowingLimit in the
   ClusterQueue on the deployed queue's semantics, vs the coalescing window + 30 s;
9. cost (``bench_cost.py``, also ``make cost``): a simulated day per cluster at 5,000 nodes / 200 teams through the
   real handlers, counted at the AWS boundaries and priced (``prices.json``): USD per cluster-month vs $12.

One DynamoDB Local serves 2-5; one real stack (``devkit.kube.stack``) serves 2-4, emptied before each. Usage: ``uv run python tests/bench/bench_all.py [--quick] [--only NAME ...]``
(NAME: engine, coldstart, recompute, memory, burst, watcher, health, recovery, cost; ``--quick``: small sizes, for a smoke run).
"""

from __future__ import annotations

import contextlib
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.bench import bench_common as bc

BENCHES = ("engine", "coldstart", "recompute", "memory", "burst", "watcher", "health", "recovery", "cost")


def main(argv: list[str]) -> int:
    bc.use_bench_env()
    quick = "--quick" in argv
    only = set(argv[argv.index("--only") + 1 :]) if "--only" in argv else set(BENCHES)
    unknown = only - set(BENCHES)
    if unknown:
        print(f"unknown benchmark(s) {sorted(unknown)}; choose from {', '.join(BENCHES)}", file=sys.stderr)
        return 2
    report = bc.Report()
    started = time.perf_counter()
    print(f"machine: {bc.machine()}", flush=True)

    if "engine" in only:
        from tests.bench import bench_plan

        bench_plan.run(report, quick=quick)
    needs_ddb = only & {"coldstart", "recompute", "memory", "burst"}
    needs_kube = only & {"coldstart", "recompute", "memory"}
    with (
        bc.dynamodb_local() if needs_ddb else contextlib.nullcontext("") as endpoint,
        bc.kube_stack() if needs_kube else contextlib.nullcontext(None) as stack,
    ):
        if "coldstart" in only:
            from tests.bench import bench_coldstart

            bench_coldstart.run(report, endpoint, quick=quick, stack=stack)
        if "recompute" in only:
            from tests.bench import bench_recompute

            bench_recompute.run(report, endpoint, quick=quick, stack=stack)
        if "memory" in only:
            from tests.bench import bench_memory

            bench_memory.run(report, endpoint, quick=quick, stack=stack)
        if "burst" in only:
            from tests.bench import bench_burst

            bench_burst.run(report, endpoint, scale=0.05 if quick else 1.0)
    if "recovery" in only:
        from tests.bench import bench_recovery

        bench_recovery.run(report, quick=quick)
    if "watcher" in only:
        from tests.bench import bench_watcher

        bench_watcher.run(report, quick=quick)
    if "health" in only:
        from tests.bench import bench_watcher

        bench_watcher.run(report, quick=quick, trigger="health")
    if "cost" in only:
        from tests.bench import bench_cost

        bench_cost.run(report, quick=quick)

    print()
    print(f"idleshare benchmarks — {bc.machine()}; {time.perf_counter() - started:.0f} s")
    print(bc.table(report.rows))
    missed = report.failed
    if missed:
        print(f"MISSED {len(missed)} target(s): " + "; ".join(f"{r.bench} {r.what}" for r in missed))
        return 1
    print("every target met")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
