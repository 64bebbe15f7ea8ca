"""`idleshare quota import`: adopt what a HyperPod cluster has — SageMaker's compute quotas and its scheduler config
— into idleshare, through the admin API (whose quota and scheduler-config routes take SageMaker's shapes).

It reads SageMaker (``ListComputeQuotas``, every page, then ``DescribeComputeQuota`` of each;
``ListClusterSchedulerConfigs`` then ``DescribeClusterSchedulerConfig``) and idleshare (the API's quotas and
scheduler config), and plans, per SageMaker quota: create it (a name idleshare lacks), update the fields that differ
(with the version it read as ``TargetVersion``), or leave it (the same); the scheduler config likewise. It never
deletes: a quota idleshare has and SageMaker does not is kept, and said so. A SageMaker quota being deleted or whose
creation failed is skipped, with its Status (the rule `plan` reads a quota file by), and so is one deleted between
the List and its Describe; one whose Status is ``Updating`` or ``UpdateFailed`` is imported with a note saying so. A
SageMaker quota for a team that idleshare already governs under another quota name, or two SageMaker quotas for one
team, is a conflict (naming both): nothing is written until it is resolved. ``--dry-run`` prints the plan and writes
nothing. Every write goes through the API's validation (and is validated locally with its request models first),
and emits the API's change event, so a recompute follows each.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from idleshare import pages
from idleshare.parse import quotas
from idleshare.service.admin import DEFAULT_SCHEDULER_CONFIG as SCHEDULER_DEFAULTS
from idleshare_cli import remote
from idleshare_cli.main import CommandError, UsageError
from idleshare_cli.quota_bodies import create_body, update_body
from idleshare_cli.scheduler_config import put_body

ADOPTED_FIELDS = quotas.CREATE_FIELDS
"""The fields of a SageMaker quota that idleshare stores (CreateComputeQuota's, without ClusterArn and Tags)."""
SKIPPED_STATUSES = quotas.SKIPPED_STATUSES
"""SageMaker Statuses of quotas and scheduler configs that do not govern the cluster: not imported (the rule
``idleshare plan`` reads a quota file by: :func:`idleshare.parse.quotas.governs`)."""
# botocore's ClusterArn pattern (ListComputeQuotas' request): checked here so a typo is a usage error, not a stack
_CLUSTER_ARN = re.compile(r"arn:aws[a-z\-]*:sagemaker:([a-z0-9\-]*):[0-9]{12}:cluster/[a-z0-9]{12}")


def register(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = remote.cluster_command(
        verbs, "import", "adopt a HyperPod cluster's SageMaker compute quotas and scheduler config", run
    )
    p.add_argument("--hyperpod-cluster-arn", required=True, metavar="ARN", help="the SageMaker HyperPod cluster's ARN")
    p.add_argument("--dry-run", action="store_true", help="print what would be created or updated; write nothing")


def default_sagemaker_client(args: argparse.Namespace, region: str) -> Any:
    """A SageMaker client in the cluster's region, with the same profile as the admin API's requests."""
    import boto3
    from botocore.exceptions import BotoCoreError, ProfileNotFound

    try:
        return boto3.Session(profile_name=args.profile).client("sagemaker", region_name=region)
    except ProfileNotFound:
        raise UsageError(f"--profile {args.profile}: no such profile in the AWS config") from None
    except BotoCoreError as exc:
        raise UsageError(f"AWS configuration: {exc}") from None


# The tests replace it with a client stubbed against botocore's model.
sagemaker_client: Callable[[argparse.Namespace, str], Any] = default_sagemaker_client


# ------------------------------------------------------------------------------------ reading SageMaker
@dataclass(frozen=True)
class SageMakerState:
    quotas: list[dict[str, Any]]  # each: the ADOPTED_FIELDS of DescribeComputeQuota
    skipped: list[tuple[str, str]]  # (quota name, why)
    scheduler_config: dict[str, Any] | None  # DescribeClusterSchedulerConfig's SchedulerConfig
    notes: dict[str, str] = field(default_factory=dict)  # quota name -> what its Status means for the import


def read_sagemaker(client: Any, cluster_arn: str) -> SageMakerState:
    """The cluster's quotas and scheduler config, as SageMaker describes them; a failed call is a CommandError."""
    from botocore.exceptions import BotoCoreError, ClientError

    operation = "ListComputeQuotas"
    try:
        found, skipped, notes = [], [], {}
        for page in client.get_paginator("list_compute_quotas").paginate(ClusterArn=cluster_arn):
            for summary in page["ComputeQuotaSummaries"]:
                if not quotas.governs(summary.get("Status")):
                    skipped.append((summary["Name"], f"SageMaker Status {summary['Status']}"))
                    continue
                operation = "DescribeComputeQuota"
                described = _describe(client, summary)
                status = summary.get("Status") if described is None else described.get("Status")
                if described is None or not quotas.governs(status):
                    why = "deleted between List and Describe" if described is None else f"SageMaker Status {status}"
                    skipped.append((summary["Name"], why))
                    continue
                if status in quotas.NOTED_STATUSES:
                    notes[str(described["Name"])] = f"SageMaker Status {status}: {quotas.NOTED_STATUSES[status]}"
                found.append({k: described[k] for k in ADOPTED_FIELDS if k in described})
        operation = "ListClusterSchedulerConfigs"
        configs = [
            summary
            for page in client.get_paginator("list_cluster_scheduler_configs").paginate(ClusterArn=cluster_arn)
            for summary in page["ClusterSchedulerConfigSummaries"]
            if summary.get("Status") not in SKIPPED_STATUSES
        ]
        if len(configs) > 1:
            ids = ", ".join(c["ClusterSchedulerConfigId"] for c in configs)
            raise CommandError(f"{cluster_arn} has {len(configs)} scheduler configs ({ids}): expected at most one")
        scheduler = None
        if configs:
            operation = "DescribeClusterSchedulerConfig"
            config_id = configs[0]["ClusterSchedulerConfigId"]
            scheduler = client.describe_cluster_scheduler_config(ClusterSchedulerConfigId=config_id)["SchedulerConfig"]
    except ClientError as exc:
        error = exc.response.get("Error", {})
        raise CommandError(
            f"sagemaker {operation}: {error.get('Code', 'error')}: {error.get('Message', exc)}"
        ) from None
    except BotoCoreError as exc:
        raise CommandError(f"sagemaker {operation}: {exc}") from None
    return SageMakerState(found, skipped, scheduler, notes)


def _describe(client: Any, summary: dict[str, Any]) -> dict[str, Any] | None:
    """DescribeComputeQuota of a listed quota; None when it is gone since the list (ResourceNotFound)."""
    from botocore.exceptions import ClientError

    try:
        return dict(client.describe_compute_quota(ComputeQuotaId=summary["ComputeQuotaId"]))
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") == "ResourceNotFound":
            return None
        raise


# ------------------------------------------------------------------------------------ the plan
@dataclass(frozen=True)
class Step:
    action: str  # create | update | unchanged | skip | keep | conflict
    kind: str  # quota | scheduler config
    name: str
    detail: str
    method: str | None = None
    path: list[str] = field(default_factory=list)
    body: dict[str, Any] | None = None

    def json(self) -> dict[str, Any]:
        return {"action": self.action, "kind": self.kind, "name": self.name, "detail": self.detail}


def _same(a: object, b: object) -> bool:
    """Equal as JSON (SageMaker's 4.0 vCPU and the API's 4 are one amount)."""
    return bool(json.loads(json.dumps(a)) == json.loads(json.dumps(b)))


def plan_import(
    cluster: str,
    sagemaker: SageMakerState,
    current: dict[str, dict[str, Any]],
    current_scheduler: dict[str, Any],
) -> list[Step]:
    """What to write so idleshare holds SageMaker's quotas and scheduler config. ``current``: idleshare's quotas by
    name (Describe shape); ``current_scheduler``: its ``GET scheduler-config`` answer."""
    base = ["clusters", cluster, "compute-quotas"]
    steps: list[Step] = []
    teams = {(q.get("ComputeQuotaTarget") or {}).get("TeamName"): name for name, q in current.items()}
    by_team: dict[object, list[str]] = {}
    for q in sagemaker.quotas:
        by_team.setdefault((q.get("ComputeQuotaTarget") or {}).get("TeamName"), []).append(str(q["Name"]))
    for wanted in sorted(sagemaker.quotas, key=lambda q: str(q.get("Name"))):
        name = str(wanted["Name"])
        team = (wanted.get("ComputeQuotaTarget") or {}).get("TeamName")
        source = f"SageMaker quota {name}"
        have = current.get(name)
        twins = sorted(by_team[team])
        if len(twins) > 1:
            detail = f"team {team} has {len(twins)} SageMaker quotas ({' and '.join(twins)}): one team, one quota"
            steps.append(Step("conflict", "quota", name, detail))
            continue
        note = f"; {sagemaker.notes[name]}" if name in sagemaker.notes else ""
        if have is None:
            holder = teams.get(team)
            if holder is not None:
                detail = f"team {team} already has idleshare quota {holder}: delete or rename one of them"
                steps.append(Step("conflict", "quota", name, detail))
                continue
            steps.append(Step("create", "quota", name, f"team {team}{note}", "POST", base, create_body(wanted, source)))
            continue
        changed = [k for k in ADOPTED_FIELDS if k != "Name" and k in wanted and not _same(wanted[k], have.get(k))]
        if not changed:
            steps.append(Step("unchanged", "quota", name, f"team {team}{note}"))
            continue
        patch = {k: wanted[k] for k in changed}
        body = update_body(patch, source, name, have.get("ComputeQuotaVersion"))
        detail = f"team {team}: {', '.join(changed)} (from version {have.get('ComputeQuotaVersion')}){note}"
        steps.append(Step("update", "quota", name, detail, "PUT", [*base, name], body))
    for name, why in sorted(sagemaker.skipped):
        steps.append(Step("skip", "quota", name, why))
    for name in sorted(set(current) - {str(q["Name"]) for q in sagemaker.quotas}):
        steps.append(Step("keep", "quota", name, "idleshare's only (not in SageMaker): left as it is"))
    steps.append(_scheduler_step(cluster, sagemaker.scheduler_config, current_scheduler))
    return steps


def _scheduler_step(cluster: str, wanted: dict[str, Any] | None, current: dict[str, Any]) -> Step:
    if wanted is None:
        return Step("unchanged", "scheduler config", "-", "SageMaker has none: idleshare's kept")
    have = {**SCHEDULER_DEFAULTS, **(current.get("SchedulerConfig") or {})}
    changed = [k for k in SCHEDULER_DEFAULTS if not _same({**SCHEDULER_DEFAULTS, **wanted}[k], have[k])]
    if not changed:
        return Step("unchanged", "scheduler config", "-", "the same as SageMaker's")
    version = current.get("SchedulerConfigVersion")
    action, detail = ("update", f"{', '.join(changed)} (from version {version})") if version else ("create", "")
    body = put_body(dict(wanted), version)
    return Step(
        action, "scheduler config", "-", detail or "SageMaker's", "PUT", ["clusters", cluster, "scheduler-config"], body
    )


# ------------------------------------------------------------------------------------ the command
def run(args: argparse.Namespace) -> int:
    if not args.cluster.strip():
        raise UsageError("--cluster: must not be empty")
    arn = args.hyperpod_cluster_arn.strip()
    match = _CLUSTER_ARN.fullmatch(arn)
    if not match:
        raise UsageError(
            f"--hyperpod-cluster-arn {arn!r}: not a SageMaker HyperPod cluster ARN "
            "(arn:aws:sagemaker:<region>:<account>:cluster/<12-character id>)"
        )
    sagemaker = read_sagemaker(sagemaker_client(args, match.group(1)), arn)
    api = remote.connect(args)
    path = ["clusters", args.cluster, "compute-quotas"]
    wanted = {str(q["Name"]) for q in sagemaker.quotas}
    # the ones SageMaker also has are described (a summary lacks Description); of the others, the team suffices
    current = {
        str(s["Name"]): api.get([*path, s["Name"]]) if s["Name"] in wanted else s
        for s in api.pages(path, "ComputeQuotaSummaries", {"MaxResults": pages.QUOTAS_PAGE_MAX})
    }
    steps = plan_import(args.cluster, sagemaker, current, api.get(["clusters", args.cluster, "scheduler-config"]))
    conflicts = [s for s in steps if s.action == "conflict"]
    writes = [s for s in steps if s.method]
    if args.dry_run or conflicts:
        _report(args, steps, dry_run=True)
        if conflicts:
            raise CommandError(f"{len(conflicts)} conflict(s) above: nothing written")
        return 0
    for done, step in enumerate(writes):
        try:
            if step.method == "POST":
                api.post(step.path, step.body)
            else:
                api.put(step.path, step.body)
        except CommandError as exc:
            raise CommandError(
                f"{exc}\n{done} of {len(writes)} writes done before this one; the import can be run again: it "
                "writes only what still differs"
            ) from None
    _report(args, steps, dry_run=False)
    return 0


def _report(args: argparse.Namespace, steps: list[Step], *, dry_run: bool) -> None:
    if args.format == "json":
        remote.emit(args, {"dryRun": dry_run, "steps": [s.json() for s in steps]}, str)
        return
    writes = sum(1 for s in steps if s.method)
    if dry_run:
        print(f"Dry run: nothing written. Importing would make {writes} change(s) to cluster {args.cluster}:")
    else:
        print(f"Imported into cluster {args.cluster}: {writes} change(s) written (each triggers a recompute):")
    print(remote.table([[s.action, s.kind, s.name, s.detail] for s in steps], ["ACTION", "KIND", "NAME", "DETAIL"]))
