"""`idleshare quota create|describe|list|update|delete`: compute quotas through the admin API.

Files are SageMaker's shapes (``CreateComputeQuota`` for create; ``UpdateComputeQuota`` without
``ComputeQuotaId`` for update) and are validated locally with the admin API's own request models
(:mod:`idleshare.parse.requests`, loaded only by these commands) before anything is sent, so a bad
file exits 2 naming the field with the API's message and changes nothing.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from idleshare import pages
from idleshare_cli import remote
from idleshare_cli.main import UsageError
from idleshare_cli.quota_bodies import create_body, update_body


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    verbs = remote.verbs(sub, "quota", "compute quotas of a governed cluster (admin API)")

    p = remote.cluster_command(verbs, "create", "create a quota from a CreateComputeQuota JSON file", create)
    p.add_argument("--file", required=True, metavar="Q.json")

    p = remote.cluster_command(verbs, "describe", "one quota", describe)
    p.add_argument("--name", required=True)

    p = remote.cluster_command(verbs, "list", "every quota of a cluster", list_quotas)
    p.add_argument("--name-contains", metavar="TEXT")
    p.add_argument("--activation-state", choices=["Enabled", "Disabled"])
    p.add_argument(
        "--page-size",
        type=int,
        default=pages.QUOTAS_PAGE_MAX,
        metavar="N",
        help=f"MaxResults per request (1..{pages.QUOTAS_PAGE_MAX})",
    )

    p = remote.cluster_command(verbs, "update", "change a quota (UpdateComputeQuota JSON file)", update)
    p.add_argument("--name", required=True)
    p.add_argument("--target-version", type=int, metavar="V", help="the version you read (default: the file's)")
    p.add_argument("--file", required=True, metavar="PATCH.json")

    p = remote.cluster_command(verbs, "delete", "delete a quota", delete)
    p.add_argument("--name", required=True)
    p.add_argument("--target-version", type=int, metavar="V", help="refuse if the quota has changed since")

    from idleshare_cli import quota_import  # it builds on this module's bodies

    quota_import.register(verbs)


# ---------------------------------------------------------------------------------- commands
def create(args: argparse.Namespace) -> int:
    body = create_body(_load(args.file, "--file"), args.file)
    api = remote.connect(args)
    _, described = api.post(_quotas(args.cluster), body)
    remote.emit(args, described, describe_text)
    return 0


def describe(args: argparse.Namespace) -> int:
    _check_name(args.name)
    api = remote.connect(args)
    remote.emit(args, api.get([*_quotas(args.cluster), args.name]), describe_text)
    return 0


def list_quotas(args: argparse.Namespace) -> int:
    if not 1 <= args.page_size <= pages.QUOTAS_PAGE_MAX:
        raise UsageError(f"--page-size: must be between 1 and {pages.QUOTAS_PAGE_MAX} (got {args.page_size})")
    api = remote.connect(args)
    query = {"NameContains": args.name_contains, "ActivationState": args.activation_state, "MaxResults": args.page_size}
    items = api.pages(_quotas(args.cluster), "ComputeQuotaSummaries", query)
    remote.emit(args, {"ComputeQuotaSummaries": items}, list_text)
    return 0


def update(args: argparse.Namespace) -> int:
    _check_name(args.name)
    body = update_body(_load(args.file, "--file"), args.file, args.name, args.target_version)
    api = remote.connect(args)
    described = api.put([*_quotas(args.cluster), args.name], body)
    remote.emit(args, described, describe_text)
    return 0


def delete(args: argparse.Namespace) -> int:
    _check_name(args.name)
    if args.target_version is not None and args.target_version < 1:
        raise UsageError(f"--target-version: must be >= 1 (got {args.target_version})")
    api = remote.connect(args)
    api.delete([*_quotas(args.cluster), args.name], {"TargetVersion": args.target_version})
    if args.format != "json":
        print(f"Deleted compute quota {args.name} of cluster {args.cluster}.")
    return 0


# ---------------------------------------------------------------------------------- bodies
def _quotas(cluster: str) -> list[str]:
    if not cluster.strip():
        raise UsageError("--cluster: must not be empty")
    return ["clusters", cluster, "compute-quotas"]


def _load(path: str, flag: str) -> object:
    from idleshare.parse.quotas import decode

    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise UsageError(f"{flag} {path}: cannot read: {exc.strerror or exc}") from None
    return decode(raw, path)


def _check_name(name: str) -> None:
    from idleshare.parse.requests import name_problem

    problem = name_problem(name)
    if problem:
        raise UsageError(f"--name {name!r}: {problem}")


# ---------------------------------------------------------------------------------- rendering
def _strategy(quota: dict[str, Any]) -> tuple[str, str]:
    sharing = (quota.get("ComputeQuotaConfig") or {}).get("ResourceSharingConfig") or {}
    strategy = sharing.get("Strategy") or "LendAndBorrow"
    borrow = sharing.get("BorrowLimit")
    return strategy, ("-" if strategy != "LendAndBorrow" else f"{borrow if borrow is not None else 50}%")


def _resources(entries: list[dict[str, Any]] | None) -> str:
    parts = []
    for entry in entries or []:
        amounts = []
        for key, label in (("Count", "instances"), ("Accelerators", "accel"), ("VCpu", "vcpu"), ("MemoryInGiB", "GiB")):
            if entry.get(key) is not None:
                amounts.append(f"{entry[key]} {label}")
        partition = entry.get("AcceleratorPartition")
        if partition:
            amounts.append(f"{partition.get('Count')}x {partition.get('Type')}")
        parts.append(f"{entry.get('InstanceType')}: {', '.join(amounts) or '-'}")
    return "; ".join(parts) or "-"


def describe_text(quota: dict[str, Any]) -> str:
    config = quota.get("ComputeQuotaConfig") or {}
    sharing = config.get("ResourceSharingConfig") or {}
    target = quota.get("ComputeQuotaTarget") or {}
    strategy, borrow = _strategy(quota)
    rows: list[list[object]] = [
        ["Name", quota.get("Name")],
        ["Cluster", quota.get("ClusterId")],
        ["Version", quota.get("ComputeQuotaVersion")],
        ["Status", quota.get("Status")],
        ["ActivationState", quota.get("ActivationState")],
        ["Team", target.get("TeamName")],
        ["FairShareWeight", target.get("FairShareWeight")],
        ["Strategy", strategy],
        ["BorrowLimit", borrow],
        ["PreemptTeamTasks", config.get("PreemptTeamTasks") or "Never"],
        ["Description", quota.get("Description")],
        ["Id", quota.get("ComputeQuotaId")],
        ["Created", quota.get("CreationTime")],
        ["LastModified", quota.get("LastModifiedTime")],
    ]
    out = [remote.table(rows, ["FIELD", "VALUE"])]
    entries = (
        ("quota", config.get("ComputeQuotaResources")),
        ("absolute borrow cap", sharing.get("AbsoluteBorrowLimits")),
    )
    resource_rows = [
        [
            kind,
            e.get("InstanceType"),
            e.get("Count"),
            e.get("Accelerators"),
            e.get("VCpu"),
            e.get("MemoryInGiB"),
            _partition(e),
        ]
        for kind, listed in entries
        for e in listed or []
    ]
    if resource_rows:
        out += [
            "",
            remote.table(resource_rows, ["KIND", "INSTANCE TYPE", "COUNT", "ACCEL", "VCPU", "MEM GiB", "PARTITION"]),
        ]
    return "\n".join(out)


def _partition(entry: dict[str, Any]) -> str | None:
    partition = entry.get("AcceleratorPartition")
    return f"{partition.get('Count')}x {partition.get('Type')}" if partition else None


def list_text(page: dict[str, Any]) -> str:
    rows = []
    for quota in page.get("ComputeQuotaSummaries") or []:
        strategy, borrow = _strategy(quota)
        rows.append(
            [
                quota.get("Name"),
                (quota.get("ComputeQuotaTarget") or {}).get("TeamName"),
                quota.get("ComputeQuotaVersion"),
                quota.get("ActivationState"),
                strategy,
                borrow,
                _resources((quota.get("ComputeQuotaConfig") or {}).get("ComputeQuotaResources")),
                quota.get("LastModifiedTime"),
            ]
        )
    return remote.table(rows, ["NAME", "TEAM", "VERSION", "STATE", "STRATEGY", "BORROW", "RESOURCES", "LAST MODIFIED"])
