"""`make demo`: a day in the life of a HyperPod cluster, locally, no AWS account.

Plays ``events/scenarios/day-in-the-life.yaml`` (borrowing up to a share of the team's own quota, an absolute cap,
a type outside the quota, a lender's reclaim, nodes failing and recovering, idle sharing off and on), then
``events/scenarios/fair-sharing.yaml`` (two teams contending for the idle GPUs by weight, a team's high-priority
Job preempting its own low-priority one) through
idleshare's real router and recompute handlers on embedded services (moto in-process, one real kube-apiserver +
Kueue on 127.0.0.1, built from pinned modules on the first run): after each step, the pool, each team's borrow
limits with the bound that set them, the Kueue objects that changed, what Kueue did with the teams' Jobs, and,
when teams borrow side by side, the shares Kueue gave them and why.

``python -m devkit.demo [--all-resources] [SCENARIO ...]``
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from devkit import scenario as scenarios
from devkit.embedded import one_stack
from devkit.kube.stack import StackError
from devkit.report import render_step, summary_line
from idleshare.domain.model import BorrowLimitBasis

DEFAULT = [
    scenarios.REPO / "events" / "scenarios" / "day-in-the-life.yaml",
    scenarios.REPO / "events" / "scenarios" / "fair-sharing.yaml",
]


def intro(sc: scenarios.Scenario) -> str:
    types = Counter(
        (n.get("metadata", {}).get("labels") or {}).get("node.kubernetes.io/instance-type", "?")
        for n in sc.nodes.get("items", [])
    )
    sharing_basis = sc.cluster.settings.borrow_limit_basis
    lines = [
        f"idleshare demo: {sc.description or sc.name} ({Path(sc.source).name})",
        f"cluster: {sum(types.values())} nodes: " + ", ".join(f"{n} x {t}" for t, n in sorted(types.items())),
        "teams:",
    ]
    for q in sc.quotas:
        cfg = q.get("ComputeQuotaConfig", {})
        sharing = cfg.get("ResourceSharingConfig", {})
        entries = ", ".join(f"{e['InstanceType']} {_entry(e)}" for e in cfg.get("ComputeQuotaResources", []))
        borrow = ""
        if sharing.get("Strategy", "LendAndBorrow") == "LendAndBorrow":
            of = "of its quota" if sharing_basis is BorrowLimitBasis.QUOTA else "of the pool"
            borrow = f", BorrowLimit {sharing.get('BorrowLimit', 50)}% {of}"
            for a in sharing.get("AbsoluteBorrowLimits", []):
                borrow += f", absolute limit {_absolute(a)} on {a['InstanceType']}"
        weight = q.get("ComputeQuotaTarget", {}).get("FairShareWeight")
        borrow += f", weight {weight}" if weight is not None else ""
        lines.append(
            f"  {q['ComputeQuotaTarget']['TeamName']:<12} {sharing.get('Strategy', 'LendAndBorrow')}{borrow}: {entries}"
        )
    if sharing_basis is not BorrowLimitBasis.QUOTA:
        lines.append(f"BorrowLimit basis: {sharing_basis} (a percentage of the pool each team sees; docs/spec.md §2)")
    config = scenarios.scheduler_body(sc.scheduler_config)
    if config:
        classes = ", ".join(f"{c.get('Name')} {c.get('Weight')}" for c in config.get("PriorityClasses") or [])
        lines.append(
            f"scheduler: FairShare {config.get('FairShare', 'Enabled')}, IdleResourceSharing "
            f"{config.get('IdleResourceSharing', 'Enabled')}" + (f", priority classes {classes}" if classes else "")
        )
    lines.append("Each step goes through the real router -> SQS FIFO -> recompute -> DynamoDB -> Kubernetes API.")
    return "\n".join(lines)


def _absolute(e: dict[str, Any]) -> str:
    """An AbsoluteBorrowLimits entry in a few words: ``8 accelerators``, ``2 instances``, ``10 x mig-1g.5gb``."""
    parts = []
    if "Count" in e:
        parts.append(f"{e['Count']} instances")
    if "Accelerators" in e:
        parts.append(f"{e['Accelerators']} accelerators")
    if isinstance(e.get("AcceleratorPartition"), dict):
        parts.append(f"{e['AcceleratorPartition'].get('Count')} x {e['AcceleratorPartition'].get('Type')}")
    if "VCpu" in e:
        parts.append(f"{e['VCpu']} vCPU")
    if "MemoryInGiB" in e:
        parts.append(f"{e['MemoryInGiB']} GiB")
    return " + ".join(parts) or "?"


def _entry(e: dict[str, Any]) -> str:
    parts = []
    for k, v in e.items():
        if k == "AcceleratorPartition" and isinstance(v, dict):
            parts.append(f"{v.get('Count')} x {v.get('Type')}")
        elif k != "InstanceType":
            parts.append(f"{k} {v}")
    return " ".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devkit.demo", description=__doc__.splitlines()[0])
    parser.add_argument("scenario", nargs="*", default=[str(p) for p in DEFAULT])
    parser.add_argument("--all-resources", action="store_true", help="cpu, memory and efa too")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    try:
        loaded = [scenarios.load(path) for path in args.scenario]  # every file checked before anything runs
    except scenarios.InputError as exc:
        print(f"demo: {exc}", file=sys.stderr)
        return 2
    bad = 0
    try:
        with one_stack():  # one cluster for every scenario, emptied between them
            for sc in loaded:
                bad += play(sc, all_resources=args.all_resources)
    except StackError as exc:
        print(f"demo: the local Kubernetes + Kueue stack: {exc}", file=sys.stderr)
        return 1
    elapsed = time.perf_counter() - started
    print(f"{len(loaded)} scenario(s); {elapsed:.1f} s")
    print("Next: `./idleshare replay events/scenarios/*.yaml --local`, `./idleshare plan --help`, events/README.md")
    return 1 if bad else 0


def play(sc: scenarios.Scenario, *, all_resources: bool) -> int:
    """One scenario, step by step as each is ready; how many expectations failed or recomputes failed."""
    print(intro(sc) + "\n")
    previous: list[scenarios.StepReport] = []
    aliases = scenarios.NodeRefs(sc.nodes).aliases()

    def show(report: scenarios.StepReport) -> None:
        print(
            render_step(
                report,
                previous[-1] if previous else None,
                all_resources=all_resources,
                total=len(sc.steps),
                aliases=aliases,
            )
        )
        print(flush=True)
        previous.append(report)

    reports = scenarios.run(sc, on_step=show)
    print(f"{sc.name}: {summary_line(reports)}\n", flush=True)
    return sum(len(r.mismatches) + len(r.failures) for r in reports)


if __name__ == "__main__":
    sys.exit(main())
