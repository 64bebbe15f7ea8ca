"""Benchmark: a burst of node events through the whole pipeline.

10,000 HyperPod node health events for one cluster and 100 for each of 4 others, interleaved at
random, each preceded by the node change it reports, delivered as fast as this process can: the router
handler in-process, SQS FIFO on moto, the recompute handler fed batches of 10 like the SQS event source
(polled every ``--poll-every`` events and at the end), one real kube-apiserver + etcd per cluster (Kueue's
CRDs and idleshare's RBAC, no Kueue manager; 4 nodes, two quotas each; ``--others`` sets how many besides the
big one: each apiserver takes seconds and ~400 MB to start), DynamoDB Local. The deployed queue on the wall clock
plus the waits skipped (``devkit.sqs.WallClock``): a trailing message's wait for its window costs no time.

Printed: events per second (router alone, and end to end), recomputes per cluster and per event, and the
router's time per event as a ratio to its floor measured in the same run, between the burst's events —
the cluster lookup by HyperPod ARN (two DynamoDB GetItems) plus one SQS SendMessage (to a queue of its
own), called directly. Checked afterwards (exit 1 if
not): every cluster's stored pool is exactly a fresh ``idleshare plan`` of its nodes and quotas, the
cluster holds exactly its objects, history is complete, and the big cluster was recomputed at most twice per
coalescing window (leading and trailing edge).

Usage: ``uv run python tests/bench/bench_burst.py [--scale 0.1] [--poll-every 500]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a script from anywhere

from tests.bench.bench_common import Report, Row, dynamodb_local, machine, new_table, quiet_handlers, table


class Floor:
    """The least a router can do per event, called directly on the same backends: look the cluster up
    by its HyperPod ARN (as the router does) and enqueue one message. Sampled between the burst's
    events (every ``every``-th), so floor and router run under the same load; the median is the floor."""

    def __init__(self, rig: object, cluster_id: str, every: int = 20) -> None:
        from tests.integration.test_burst import BurstRig, arn

        assert isinstance(rig, BurstRig)
        self.rig, self.arn, self.every = rig, arn(cluster_id), every
        self.samples: list[float] = []

    def sample(self, i: int) -> None:
        if i % self.every:
            return
        started = time.perf_counter()
        self.rig.store.find_cluster(hyperpod_arn=self.arn)
        self.rig.sqs.send_message(
            QueueUrl=self.rig.floor_queue_url, MessageBody="{}", MessageGroupId="floor", MessageDeduplicationId=str(i)
        )
        self.samples.append((time.perf_counter() - started) * 1000)
        # moto's send slows down with every message a queue holds: keep the floor's queue empty
        for m in self.rig.sqs.receive_message(QueueUrl=self.rig.floor_queue_url).get("Messages", []):
            self.rig.sqs.delete_message(QueueUrl=self.rig.floor_queue_url, ReceiptHandle=m["ReceiptHandle"])

    @property
    def ms(self) -> float:
        return statistics.median(self.samples)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of the 10,000 + 20 x 100 events")
    parser.add_argument(
        "--others", type=int, default=4, help="clusters besides the big one (each its own kube-apiserver)"
    )
    parser.add_argument("--poll-every", type=int, default=500, help="events between two polls of the queue")
    args = parser.parse_args()
    report = Report()
    with dynamodb_local() as endpoint:
        run(report, endpoint, scale=args.scale, others=args.others, poll_every=args.poll_every)
    print(f"machine: {machine()}")
    print(table(report.rows))
    for note in report.notes:
        print(note)
    return 1 if report.failed else 0


def run(report: Report, endpoint: str, *, scale: float = 1.0, others: int = 4, poll_every: int = 500) -> None:
    """The burst on DynamoDB Local at ``endpoint``; rows (and a note when the final state is wrong) into
    ``report``. For ``bench_all`` too."""
    from moto import mock_aws

    from tests.integration.test_burst import BurstRig, cluster_ids

    big_n = max(1, round(10_000 * scale))
    other_n = max(1, round(100 * scale))
    ids = cluster_ids(others)
    print(
        f"burst: {big_n:,} + {others} x {other_n} node events; poll every {poll_every}; SQS batch 10; "
        "dedup window 10 s (real clock)",
        flush=True,
    )
    with mock_aws(), quiet_handlers():
        rig = BurstRig(new_table(endpoint), ids)
        try:
            rig.floor_queue_url = rig.sqs.create_queue(  # type: ignore[attr-defined]
                QueueName="floor.fifo", Attributes={"FifoQueue": "true"}
            )["QueueUrl"]
            floor = Floor(rig, "big")
            for i in range(20):  # warm the floor's own code path before the burst
                floor.sample(i * floor.every)
            floor.samples.clear()
            clock_start = rig.time()
            stats = rig.burst(
                {"big": big_n, **{cid: other_n for cid in ids[1:]}},
                poll_every=poll_every,
                after_event=floor.sample,
            )
            windows = int((rig.time() - clock_start) // WINDOW) + 1  # the coalescing windows the burst spanned
            ok = True
            try:
                rig.check()
            except AssertionError as exc:
                ok = False
                report.notes.append(f"final-state check FAILED: {exc}")
        finally:
            rig.close()

    events = stats.total_events
    router_ms = stats.router_seconds * 1000 / events
    counts = [stats.recomputes[cid] for cid in ids[1:]]
    report.add(
        Row("burst", "events (big + others)", f"{events:,} ({big_n:,} + {len(ids) - 1} x {other_n})"),
        Row(
            "burst",
            "router per event (floor: lookup + enqueue)",
            f"{router_ms:.2f} ms",
            f"{floor.ms:.2f} ms",
            router_ms / floor.ms,
        ),
        Row("burst", "router events/s", f"{events / stats.router_seconds:,.0f}"),
        Row("burst", "end-to-end events/s", f"{events / stats.wall_seconds:,.0f}"),
        Row("burst", "wall (of which router)", f"{stats.wall_seconds:.1f} s", f"{stats.router_seconds:.1f} s"),
        Row("burst", "recompute handler time", f"{stats.drain_seconds:.1f} s", f"{stats.batches} batches"),
        Row("burst", "recomputes: big", f"{stats.recomputes['big']}", f"{big_n:,} events"),
        Row(
            "burst",
            "recomputes of big per coalescing window",
            f"{stats.recomputes['big'] / windows:.2f}",
            f"{windows} windows",
            target="<= 2 (leading + trailing)",
            ok=stats.recomputes["big"] <= 2 * windows,
        ),
        Row(
            "burst",
            "recomputes: each other",
            f"min {min(counts)} / median {statistics.median(counts):g} / max {max(counts)}",
            f"{other_n} events",
        ),
        Row(
            "burst",
            "recomputes per event",
            f"{stats.total_recomputes / events:.4f}",
            f"{stats.total_recomputes} recomputes",
            target="<= (window, poll) slots",
            ok=ok,
        ),
        Row("burst", "final state exact", "yes" if ok else "NO", ok=ok),
    )


WINDOW = 10  # idleshare.timings.COALESCE_SECONDS


if __name__ == "__main__":
    sys.exit(main())
