"""Benchmark: `idleshare plan`'s work against the floor of decoding the same bytes (``make bench``).

For 1k, 5k and 20k synthetic nodes (``tests/bench/synthetic.py``: real-sized Node objects, 200
teams' quotas) it measures, best of several runs each:

- floor: ``json.loads(nodes_bytes)`` — the least any Python program must spend to look at the input;
- parse: ``idleshare.parse.nodes.parse_nodes(nodes_bytes)``;
- plan: ``idleshare_cli.plan.plan_from_bytes(nodes_bytes, quotas_bytes, None)`` — parse nodes and
  quotas, compute the pool and grants, build the Kueue manifests and the JSON result.

It prints ratios to the floor and the per-node time (20k vs 1k shows whether the work grows
linearly), and exits non-zero when plan at 5k nodes takes more than ``TARGET`` x the floor.

Then the whole command, as an operator runs it (a fresh process each time, best of several, its bytecode
cached as an installed command's is after its first start — ``PYTHONPYCACHEPREFIX``, filled by a discarded run):

- ``idleshare plan`` on an empty cluster (no nodes, no quotas) against the bare interpreter
  (``python -c pass``): target ``STARTUP_TARGET`` (imports are the whole cost here);
- ``idleshare plan --format json`` on ``PROCESS_NODES`` nodes (the NodeList file, ~7 KB a node) and
  200 teams against ``python -c "json.load(open(F))"`` of the same file: target ``PROCESS_TARGET``.

Usage: ``uv run python tests/bench/bench_plan.py [--quick] [--process-only]`` (``--quick``: 1k and 5k
only, and 5k nodes for the whole-process ratio).
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a script from anywhere

from idleshare.parse.nodes import parse_nodes
from tests.bench.synthetic import make_cluster

TARGET = 3.0
STARTUP_TARGET = 8.0
"""The empty cluster's whole process <= 8x ``python -c pass`` (was 12x)."""
PROCESS_TARGET = 0.5
"""20k real-shaped nodes, 200 teams, the whole process <= 0.5x ``json.load`` of the file (was 1x)."""
PROCESS_NODES = 20_000
CHECKED_SIZE = 5_000
SIZES = (1_000, 5_000, 20_000)
RUNS = {1_000: 7, 5_000: 5, 20_000: 3}

try:
    from idleshare_cli.plan import plan_from_bytes
except ImportError:  # pragma: no cover - before the CLI existed
    plan_from_bytes = None  # type: ignore[assignment]


def best_ms(fn: Callable[[], object], runs: int) -> float:
    """Best wall time of ``runs`` calls, GC collected before each and disabled during it."""
    times = []
    for _ in range(runs):
        gc.collect()
        gc.disable()
        try:
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
        finally:
            gc.enable()
    return min(times) * 1000


def measure(sizes: tuple[int, ...]) -> dict[int, tuple[float, float, float | None]]:
    """Print the engine table for ``sizes``; return nodes -> (floor, parse, plan) in ms."""
    rows = []
    for n in sizes:
        nodes, quotas = make_cluster(n)
        runs = RUNS.get(n, 3)
        floor = best_ms(partial(json.loads, nodes), runs)
        parse = best_ms(partial(parse_nodes, nodes), runs)
        plan = best_ms(partial(plan_from_bytes, nodes, quotas, None), runs) if plan_from_bytes is not None else None
        rows.append((n, len(nodes), floor, parse, plan))
        del nodes, quotas
        gc.collect()

    print(f"idleshare plan vs json.loads floor (Python {sys.version.split()[0]}; best of 3-7 runs)")
    header = (
        f"{'nodes':>7} {'MB':>7} {'B/node':>7} {'floor ms':>9} {'parse ms':>9} {'parse/x':>8} "
        f"{'plan ms':>9} {'plan/x':>7} {'target':>7} {'plan us/node':>13}"
    )
    print(header)
    print("-" * len(header))
    for n, size, floor, parse, plan in rows:
        plan_ms = f"{plan:9.1f}" if plan is not None else f"{'n/a':>9}"
        plan_ratio = f"{plan / floor:6.2f}x" if plan is not None else f"{'n/a':>7}"
        per_node = f"{(plan if plan is not None else parse) / n * 1000:13.1f}"
        print(
            f"{n:>7} {size / 1e6:7.1f} {size // n:>7} {floor:9.1f} {parse:9.1f} {parse / floor:7.2f}x "
            f"{plan_ms} {plan_ratio} {'<= ' + format(TARGET, 'g') + 'x':>7} {per_node}"
        )

    by_size = {n: (floor, parse, plan) for n, _, floor, parse, plan in rows}
    if SIZES[0] in by_size and SIZES[-1] in by_size:
        first, last = by_size[SIZES[0]], by_size[SIZES[-1]]

        def growth(i: int) -> str:
            a, b = first[i], last[i]
            return "n/a" if a is None or b is None else f"{(b / SIZES[-1]) / (a / SIZES[0]):.2f}x"

        print(
            f"per-node time {SIZES[-1] // 1000}k vs {SIZES[0] // 1000}k (1.00x = linear): "
            f"floor {growth(0)}, parse {growth(1)}, plan {growth(2)} "
            "(plan includes a fixed cost per team and flavor, so its per-node time falls with size)"
        )

    return by_size


def best_process_ms(argv: list[str], runs: int, env: dict[str, str] | None = None) -> float:
    """Best wall time of ``runs`` fresh processes running ``argv`` in ``env`` (output discarded; must exit 0), after
    one discarded run (which fills the bytecode cache, when ``env`` has one)."""
    subprocess.run(argv, stdout=subprocess.DEVNULL, check=True, env=env)
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, check=True, env=env)
        times.append(time.perf_counter() - start)
    return min(times) * 1000


def _plan_argv(nodes: str, quotas: str) -> list[str]:
    script = Path(sys.executable).with_name("idleshare")  # the console script, as an operator runs it
    head = [str(script)] if script.exists() else [sys.executable, "-m", "idleshare_cli.main"]
    return [*head, "plan", "--nodes", nodes, "--quotas", quotas, "--format", "json"]


def bytecode_env(cache: str) -> dict[str, str]:
    """The environment with bytecode cached in ``cache``, as an installed command runs after its first start (the
    dev container sets ``PYTHONDONTWRITEBYTECODE``: every module would be compiled from source on each start)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    env["PYTHONPYCACHEPREFIX"] = cache
    return env


def measure_process(n_nodes: int = PROCESS_NODES) -> list[tuple[str, float, str, float, float, float]]:
    """(what, ms, floor name, floor ms, ratio, target) for the empty cluster and for ``n_nodes`` nodes, every process
    (the floors' too) with its bytecode cached (:func:`bytecode_env`)."""
    nodes, quotas = make_cluster(n_nodes)
    with tempfile.TemporaryDirectory() as tmp, tempfile.TemporaryDirectory(prefix="idleshare-pyc-") as cache:
        env = bytecode_env(cache)
        paths = {name: os.path.join(tmp, name) for name in ("nodes.json", "quotas.json", "empty.json", "none.json")}
        Path(paths["nodes.json"]).write_bytes(nodes)
        Path(paths["quotas.json"]).write_bytes(quotas)
        Path(paths["empty.json"]).write_bytes(b'{"apiVersion": "v1", "kind": "List", "items": []}')
        Path(paths["none.json"]).write_bytes(b"[]")
        del nodes
        gc.collect()
        bare = best_process_ms([sys.executable, "-c", "pass"], 9, env)
        empty = best_process_ms(_plan_argv(paths["empty.json"], paths["none.json"]), 7, env)
        load = best_process_ms([sys.executable, "-c", f"import json; json.load(open({paths['nodes.json']!r}))"], 3, env)
        full = best_process_ms(_plan_argv(paths["nodes.json"], paths["quotas.json"]), 3, env)
    rows = [
        ("plan, empty cluster (whole process)", empty, "python -c pass", bare, empty / bare, STARTUP_TARGET),
        (
            f"plan, {n_nodes // 1000}k nodes, 200 teams (whole process)",
            full,
            "python json.load",
            load,
            full / load,
            PROCESS_TARGET,
        ),
    ]
    print("idleshare plan as a command (fresh processes, best of 3-9)")
    for what, ms, floor_name, floor_ms, ratio, target in rows:
        verdict = "PASS" if ratio <= target else "FAIL"
        print(
            f"  {what}: {ms:.0f} ms vs {floor_name} {floor_ms:.0f} ms = {ratio:.2f}x (target <= {target:g}x) {verdict}"
        )
    return rows


def main(argv: list[str]) -> int:
    failed = False
    if "--process-only" not in argv:
        by_size = measure(SIZES[:2] if "--quick" in argv else SIZES)
        floor, parse, plan = by_size[CHECKED_SIZE]
        measured, what = (plan, "plan") if plan is not None else (parse, "parse (plan_from_bytes not available)")
        ratio = measured / floor
        verdict = "PASS" if ratio <= TARGET else "FAIL"
        print(f"{verdict}: {what} at {CHECKED_SIZE} nodes = {ratio:.2f}x json.loads (target <= {TARGET:g}x)")
        failed = ratio > TARGET
    rows = measure_process(CHECKED_SIZE if "--quick" in argv else PROCESS_NODES)
    failed = failed or any(ratio > target for *_, ratio, target in rows)
    return 1 if failed else 0


def run(
    report: Any, *, quick: bool = False, sizes: tuple[int, ...] | None = None, process_nodes: int | None = None
) -> None:
    """For ``bench_all``: the engine table, then one summary row per size (the target checked at
    ``CHECKED_SIZE``), the whole command at ``process_nodes`` (default: ``PROCESS_NODES``, ``CHECKED_SIZE``
    when ``quick``; 0: not run) and the per-node growth from the smallest to the largest size."""
    from tests.bench.bench_common import Row, size_label

    sizes = sizes or (SIZES[:2] if quick else SIZES)
    by_size = measure(sizes)
    for n in sizes:
        floor, parse, plan = by_size[n]
        measured = plan if plan is not None else parse
        checked = n == CHECKED_SIZE
        report.add(
            Row(
                "engine",
                f"plan {size_label(n)} nodes, 200 teams",
                f"{measured:.0f} ms (json.loads {floor:.0f})",
                "json.loads",
                measured / floor,
                f"<= {TARGET:g}x" if checked else "",
                (measured / floor <= TARGET) if checked else None,
            )
        )
    if process_nodes is None:
        process_nodes = CHECKED_SIZE if quick else PROCESS_NODES
    for what, ms, floor_name, floor_ms, ratio, target in measure_process(process_nodes) if process_nodes else []:
        report.add(
            Row(
                "engine",
                what,
                f"{ms:.0f} ms ({floor_name} {floor_ms:.0f})",
                floor_name,
                ratio,
                f"<= {target:g}x",
                ratio <= target,
            )
        )
    first, last = sizes[0], sizes[-1]
    if first != last:
        a = by_size[first][2] or by_size[first][1]
        b = by_size[last][2] or by_size[last][1]
        report.add(
            Row(
                "engine",
                f"per-node time {size_label(last)} vs {size_label(first)}",
                f"{(b / last) / (a / first):.2f}x (1 = linear)",
            )
        )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
