"""Recovery from each fault class: the recovery suite (``tests/integration/test_recovery.py``: the real
router and recompute, DynamoDB Local, the real kube-apiserver + Kueue behind the fault proxy, the deployed queue's
semantics on a controllable clock) run once, its measured table printed: fault end -> the right borrowingLimit in
the ClusterQueue, against the bound (the coalescing window + 30 s) as a ratio.

Usage: ``uv run python tests/bench/bench_recovery.py``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.bench import bench_common as bc

REPO = Path(__file__).resolve().parents[2]


def run(report: bc.Report, endpoint: str | None = None, *, quick: bool = False) -> None:
    from idleshare import timings

    bound = timings.COALESCE_SECONDS + 30
    with tempfile.TemporaryDirectory() as tmp:
        table = Path(tmp) / "recovery.jsonl"
        env = {**os.environ, "IDLESHARE_RECOVERY_TABLE": str(table)}
        selection = ["-k", "5xx or timeout"] if quick else []
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:logging", "-p", "no:cacheprovider",
             "tests/integration/test_recovery.py", *selection],
            cwd=REPO, env=env, capture_output=True, text=True, timeout=1800,
        )  # fmt: skip
        rows = [json.loads(line) for line in table.read_text().splitlines()] if table.exists() else []
    if proc.returncode != 0 or not rows:
        tail = (proc.stdout + proc.stderr).strip().splitlines()[-5:]
        report.add(bc.Row("recovery", "the recovery suite", "failed", target="passes", ok=False))
        print("\n".join(tail), file=sys.stderr)
    for row in rows:
        seconds = float(row["seconds"])
        report.add(
            bc.Row(
                "recovery",
                f"{row['fault']}: fault end -> limit ({row['attempts_during_fault']} retries during the fault)",
                f"{seconds:.1f} s",
                f"window + 30 s = {bound} s",
                seconds / bound,
                f"<= {bound} s, DLQ 0, published once",
                seconds <= bound and row["dead_lettered"] == 0 and row["published"] == 1,
            )
        )


if __name__ == "__main__":
    sys.exit(bc.script_main(sys.argv[1:], run, dynamodb=False))
