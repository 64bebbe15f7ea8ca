"""Benchmark: cold start of each Lambda handler module vs ``import boto3`` alone (``make bench``).

Import time: each module is imported in a fresh interpreter (``python -c``), timed inside it with
``perf_counter`` around the ``import`` statement (interpreter start-up excluded), best of N rounds;
the rounds interleave the modules so drift on a shared machine hits them alike. Everything the
module imports at module level counts. The handlers import ``boto3`` at module level (they always
need it), so the floor is also part of each figure.

Two modes:

- ``pyc``: bytecode cached (a private ``PYTHONPYCACHEPREFIX``, filled by a discarded first round) —
  what a bundle shipping ``.pyc`` files gives; the targets are checked here;
- ``source``: ``PYTHONDONTWRITEBYTECODE=1`` and no cache prefix: every module without a ``.pyc``
  beside its source is compiled on each start. ``infra/bundling.py`` strips ``__pycache__`` from the
  Lambda asset, so in Lambda idleshare and its bundled dependencies start this way, while boto3 (from
  the runtime) has its bytecode: the real ratio is worse than both figures. Reported, not checked.

First invocation: the lazy parts (the X-Ray SDK the Powertools Tracer loads, the boto3 clients and
resources, lightkube, the engine modules) are paid by the first call, so a child process also times
two identical calls right after the import — router: a Recalculation Requested event against
DynamoDB Local and a loopback SQS stand-in, with the adapters built from the environment as in
Lambda; recompute: a no-op recompute of a small cluster (DynamoDB Local + the real kube-apiserver)
— and reports ``first - second`` (the cold-only cost) next to the import time. The tracer runs
disabled (``POWERTOOLS_TRACE_DISABLED``): it still imports the X-Ray SDK; it does not patch botocore.

Usage: ``uv run python tests/bench/bench_coldstart.py [--quick]``.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.bench import bench_common as bc
from tests.loopback import QuietJsonHandler, serving

FLOOR = "boto3"
# module -> (label, target ratio to the floor or None)
MODULES: dict[str, tuple[str, float | None]] = {
    "idleshare.handlers.router": ("router", 1.5),
    "idleshare.handlers.recompute": ("recompute", 2.0),
    "idleshare.api.app": ("api", None),
}
ROUNDS = 7
QUICK_ROUNDS = 3
# boto3 first, then the module: every child gives a floor sample taken at the same moment as its
# module's, so a busy machine slows both alike. The module imports boto3 itself (wiring.py), so
# "boto3, then the module" loads exactly the modules "the module" alone loads.
TIME_IMPORT = (
    "import time\n"
    "c0, w0 = time.process_time(), time.perf_counter()\n"
    "import boto3\n"
    "c1, w1 = time.process_time(), time.perf_counter()\n"
    "import {module}\n"
    "c2, w2 = time.process_time(), time.perf_counter()\n"
    "print(*(1000 * x for x in (c1 - c0, w1 - w0, c2 - c0, w2 - w0)))\n"
)


def available(module: str) -> bool:
    """Whether ``module`` exists (``idleshare.api.app`` arrives with the admin API), without importing it."""
    import importlib.util

    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


def child_env(mode: str, cache_dir: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHONPYCACHEPREFIX", "PYTHONDONTWRITEBYTECODE"))}
    env["PYTHONPATH"] = os.pathsep.join([str(bc.ROOT), str(bc.ROOT / "functions"), env.get("PYTHONPATH", "")])
    if mode == "pyc":
        env["PYTHONPYCACHEPREFIX"] = cache_dir
    else:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def import_ms(module: str, env: dict[str, str]) -> tuple[tuple[float, float], tuple[float, float]]:
    """((CPU ms, wall ms) of ``import boto3``, (CPU ms, wall ms) of boto3 + ``module``) in a fresh interpreter."""
    out = subprocess.run(
        [sys.executable, "-c", TIME_IMPORT.format(module=module)],
        env=env,
        cwd=bc.ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    if out.returncode != 0:
        raise RuntimeError(f"importing {module} failed:\n{out.stderr[-2000:]}")
    b_cpu, b_wall, m_cpu, m_wall = (float(x) for x in out.stdout.strip().splitlines()[-1].split())
    return (b_cpu, b_wall), (m_cpu, m_wall)


def measure_imports(modules: list[str], rounds: int) -> dict[str, dict[str, tuple[float, float]]]:
    """mode -> module -> (best CPU ms, best wall ms); the floor (``boto3``) is the best of every child."""
    best: dict[str, dict[str, tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="idleshare-pyc-") as cache:
        for mode in ("pyc", "source"):
            env = child_env(mode, cache)
            if mode == "pyc":
                for m in modules:  # fill the cache; not measured
                    import_ms(m, env)
            floor: list[tuple[float, float]] = []
            times: dict[str, list[tuple[float, float]]] = {m: [] for m in modules}
            for _ in range(rounds):
                for m in modules:
                    boto, total = import_ms(m, env)
                    floor.append(boto)
                    times[m].append(total)
            best[mode] = {FLOOR: (min(c for c, _ in floor), min(w for _, w in floor))}
            for m, t in times.items():
                if m != FLOOR:
                    best[mode][m] = (min(c for c, _ in t), min(w for _, w in t))
    return best


# -- first invocation ----------------------------------------------------------------------------------


class _SqsStub(QuietJsonHandler):
    """Answers SendMessage (JSON protocol) like SQS: a message id and the body's MD5."""

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
        target = self.headers.get("X-Amz-Target", "")
        if target.endswith("SendMessage"):
            md5 = hashlib.md5(body["MessageBody"].encode(), usedforsecurity=False).hexdigest()
            answer: dict[str, Any] = {"MessageId": str(uuid.uuid4()), "MD5OfMessageBody": md5, "SequenceNumber": "1"}
        else:
            answer = {}
        self.answer_json(answer, "application/x-amz-json-1.0")


CHILD_ROUTER = """
import json, os, sys, time
t = time.perf_counter()
import idleshare.handlers.router as h
t_import = (time.perf_counter() - t) * 1000
from devkit.lambda_context import LambdaContext
from tests.bench.bench_common import quiet_handlers
event = json.loads(open("events/inbound/idleshare-recalculation-requested.json").read())
event["detail"] = {"cluster": os.environ["BENCH_CLUSTER"]}
calls = []
for _ in range(3):
    with quiet_handlers():
        t = time.perf_counter()
        out = h.handler(event, LambdaContext())
        calls.append((time.perf_counter() - t) * 1000)
    assert out.get("enqueued") == [os.environ["BENCH_CLUSTER"]], out
print(json.dumps({"import": t_import, "calls": calls}))
"""

CHILD_RECOMPUTE = """
import json, os, sys, time
t = time.perf_counter()
import idleshare.handlers.recompute as h
t_import = (time.perf_counter() - t) * 1000
from idleshare.runtime import wiring
from devkit.lambda_context import LambdaContext
from tests.bench.bench_common import quiet_handlers, sqs_event
_kube = []
def kube_for(cluster):  # in Lambda: EksConnector + LightkubeCluster.from_eks (lazy imports, first call)
    if not _kube:
        from idleshare.adapters.kube import LightkubeCluster
        ca = open(os.environ["BENCH_CA"], "rb").read()
        _kube.append(LightkubeCluster(os.environ["BENCH_KUBE"], ca, lambda: os.environ["BENCH_TOKEN"], timeout=60))
    return _kube[0]
def first_time_setup():
    if wiring._installed is None:
        deps = wiring._from_environment()
        deps.kube_for = kube_for
        wiring.install(deps)
calls = []
for _ in range(3):
    with quiet_handlers():
        t = time.perf_counter()
        first_time_setup()
        out = h.handler(sqs_event(os.environ["BENCH_CLUSTER"]), LambdaContext())
        calls.append((time.perf_counter() - t) * 1000)
    assert out == {"batchItemFailures": []}, out
print(json.dumps({"import": t_import, "calls": calls}))
"""


def run_child(code: str, env: dict[str, str]) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=bc.ROOT, capture_output=True, text=True, check=False, timeout=300
    )
    if out.returncode != 0:
        raise RuntimeError(f"first-invocation child failed:\n{out.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def measure_first_invocation(endpoint: str, rounds: int, *, stack: Any = None) -> dict[str, dict[str, float]]:
    """handler label -> import, first call, warm call (ms; best of ``rounds`` children, pyc mode), on ``stack``
    (emptied first) or a real stack of its own."""
    from devkit.kube.client import Kube
    from idleshare import names

    with bc.kube_stack(stack) as ks:
        admin = Kube.admin(ks)
        admin.reset()
        table = bc.new_table(endpoint)
        cluster = bc.seed_cluster(admin, table, 100, cluster_id="cold", n_teams=10)
        # the initial recompute happens before: the children's calls are identical no-op recomputes
        with bc.quiet_handlers():
            from idleshare.service.recompute import Recomputer

            kube = bc.idleshare_kube(ks)
            Recomputer(cluster.store, lambda c: kube, None).recompute("cold")
            kube.close()
        clusters_cfg = json.dumps([{"id": "cold", "eks_cluster_name": "cold-eks", "prefix": "hyperpod-ns-"}])
        results: dict[str, dict[str, float]] = {}
        with serving(_SqsStub) as sqs, tempfile.TemporaryDirectory(prefix="idleshare-pyc-") as cache:
            env = child_env("pyc", cache) | {
                names.ENV_TABLE_NAME: table.name,
                names.ENV_QUEUE_URL: f"{sqs}/123456789012/recompute.fifo",
                names.ENV_CLUSTERS: clusters_cfg,
                "AWS_ENDPOINT_URL_DYNAMODB": endpoint,
                "AWS_ENDPOINT_URL_SQS": sqs,
                "BENCH_CLUSTER": "cold",
                "BENCH_KUBE": ks.server,
                "BENCH_CA": str(ks.ca_file),
                "BENCH_TOKEN": ks.idleshare_token,
            }
            env.pop(names.ENV_EVENT_BUS_NAME, None)
            for label, code in (("router", CHILD_ROUTER), ("recompute", CHILD_RECOMPUTE)):
                run_child(code, env)  # fills the bytecode cache
                runs = [run_child(code, env) for _ in range(rounds)]
                results[label] = {
                    "import": min(r["import"] for r in runs),
                    "first": min(r["calls"][0] for r in runs),
                    "warm": min(min(r["calls"][1:]) for r in runs),
                }
        admin.close()
        return results


# -- report --------------------------------------------------------------------------------------------


def rows(imports: dict[str, dict[str, tuple[float, float]]], first: dict[str, dict[str, float]] | None) -> list[bc.Row]:
    out: list[bc.Row] = []
    for mode in ("pyc", "source"):
        floor_cpu, floor_wall = imports[mode][FLOOR]
        out.append(
            bc.Row("coldstart", f"floor: import boto3 ({mode})", f"{floor_cpu:.0f} ms cpu, {floor_wall:.0f} wall")
        )
        for module, (cpu, wall) in imports[mode].items():
            if module == FLOOR:
                continue
            label, target = MODULES[module]
            checked = mode == "pyc" and target is not None
            ratio = cpu / floor_cpu
            out.append(
                bc.Row(
                    "coldstart",
                    f"import {label} ({mode})",
                    f"{cpu:.0f} ms cpu, {wall:.0f} wall ({wall / floor_wall:.2f}x)",
                    "boto3",
                    ratio,
                    f"<= {target:g}x" if checked else "",
                    (ratio <= target) if checked and target is not None else None,
                )
            )
    if first:
        floor_wall = imports["pyc"][FLOOR][1]
        for label, r in first.items():
            extra = r["first"] - r["warm"]
            out.append(
                bc.Row(
                    "coldstart",
                    f"{label}: 1st call extra (pyc, wall)",
                    f"{extra:.0f} ms (1st {r['first']:.0f}, warm {r['warm']:.0f})",
                    "boto3",
                    extra / floor_wall,
                )
            )
            out.append(
                bc.Row(
                    "coldstart",
                    f"{label}: import + 1st call extra",
                    f"{r['import'] + extra:.0f} ms wall",
                    "boto3",
                    (r["import"] + extra) / floor_wall,
                )
            )
    return out


def run(report: bc.Report, endpoint: str | None, *, quick: bool = False, stack: Any = None) -> None:
    modules = [m for m in MODULES if available(m)]
    rounds = QUICK_ROUNDS if quick else ROUNDS
    imports = measure_imports(modules, rounds)
    first = measure_first_invocation(endpoint, QUICK_ROUNDS, stack=stack) if endpoint else None
    print(f"cold start (best of {rounds} fresh interpreters per module and mode):", flush=True)
    for mode, by_module in imports.items():
        print(f"  {mode:6} " + ", ".join(f"{m} {c:.0f} ms cpu / {w:.0f} wall" for m, (c, w) in by_module.items()))
    if first:
        for label, r in first.items():
            print(
                f"  first invocation {label}: import {r['import']:.0f} ms, 1st call {r['first']:.0f} ms, "
                f"warm call {r['warm']:.0f} ms"
            )
    report.add(*rows(imports, first))


def main(argv: list[str]) -> int:
    return bc.script_main(argv, run, dynamodb="--no-invoke" not in argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
