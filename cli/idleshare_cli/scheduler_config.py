"""`idleshare scheduler-config show|set`: a cluster's SchedulerConfig (FairShare, IdleResourceSharing, priority
classes) through the admin API, in SageMaker's shape.

``set`` reads the stored config and its version, changes only what its flags name, and writes it back with
that version as ``TargetVersion`` (the API's PUT: a config changed since the read is refused with 409 naming the
current version, and nothing changes); ``--target-version`` names the version you read yourself. The body is
validated locally with the API's own request model first, so a bad flag exits 2 naming it and sends nothing.
"""

from __future__ import annotations

import argparse
from typing import Any

from idleshare.parse.errors import InputError
from idleshare_cli import remote
from idleshare_cli.main import UsageError

STATES = ("Enabled", "Disabled")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    verbs = remote.verbs(sub, "scheduler-config", "a cluster's SchedulerConfig: sharing, fair share, priorities")
    remote.cluster_command(
        verbs, "show", "the scheduler config and its version (the defaults, version 0, if none)", show
    )
    p = remote.cluster_command(verbs, "set", "change the scheduler config (only what the flags name)", set_config)
    p.add_argument("--fair-share", choices=STATES, help="Kueue fair sharing between the teams' queues")
    p.add_argument(
        "--idle-resource-sharing",
        choices=STATES,
        help="Disabled: the unallocated capacity (in no team's quota) is not lent; teams still borrow what"
        " the lending teams leave unused (docs/spec.md §2)",
    )
    classes = p.add_mutually_exclusive_group()
    classes.add_argument(
        "--priority-class",
        action="append",
        metavar="NAME=WEIGHT",
        help="a priority class (repeatable; the given ones replace the stored list)",
    )
    classes.add_argument("--no-priority-classes", action="store_true", help="remove every priority class")
    p.add_argument("--target-version", type=int, metavar="V", help="the version you read (default: the one read now)")


# ---------------------------------------------------------------------------------- commands
def show(args: argparse.Namespace) -> int:
    api = remote.connect(args)
    remote.emit(args, api.get(_path(args.cluster)), show_text)
    return 0


def set_config(args: argparse.Namespace) -> int:
    path = _path(args.cluster)
    changes = _changes(args)
    if args.target_version is not None and args.target_version < 0:
        raise UsageError(f"--target-version: must be >= 0 (got {args.target_version})")
    api = remote.connect(args)
    current = api.get(path)
    stored = current.get("SchedulerConfig") if isinstance(current, dict) else None
    version = args.target_version if args.target_version is not None else current.get("SchedulerConfigVersion")
    body = put_body({**(stored or {}), **changes}, version)
    remote.emit(args, api.put(path, body), show_text)
    return 0


# ---------------------------------------------------------------------------------- bodies
def _path(cluster: str) -> list[str]:
    if not cluster.strip():
        raise UsageError("--cluster: must not be empty")
    return ["clusters", cluster, "scheduler-config"]


def _changes(args: argparse.Namespace) -> dict[str, Any]:
    """The SchedulerConfig fields the flags set; at least one."""
    changes: dict[str, Any] = {}
    if args.fair_share:
        changes["FairShare"] = args.fair_share
    if args.idle_resource_sharing:
        changes["IdleResourceSharing"] = args.idle_resource_sharing
    if args.no_priority_classes:
        changes["PriorityClasses"] = []
    elif args.priority_class:
        changes["PriorityClasses"] = [_priority_class(text) for text in args.priority_class]
    if not changes:
        raise UsageError("nothing to change: give --fair-share, --idle-resource-sharing or --priority-class")
    return changes


def _priority_class(text: str) -> dict[str, Any]:
    name, sep, weight = text.partition("=")
    if not sep or not name or not weight.strip().isdigit():
        raise UsageError(f"--priority-class {text!r}: expected NAME=WEIGHT, WEIGHT a whole number (e.g. training=50)")
    return {"Name": name, "Weight": int(weight)}


def put_body(config: dict[str, Any], version: object) -> dict[str, Any]:
    """The PUT body for ``config`` expecting ``version`` (0 or None: none stored yet, so a create), validated as
    the API validates it: an InputError naming each bad field."""
    from idleshare.parse.requests import SchedulerConfigRequest, parse

    body: dict[str, Any] = {"SchedulerConfig": config}
    if version:
        body["TargetVersion"] = version
    try:
        parse(SchedulerConfigRequest, body)
    except InputError as exc:
        raise InputError("scheduler config", exc.errors) from None
    return body


# ---------------------------------------------------------------------------------- rendering
def show_text(described: dict[str, Any]) -> str:
    from idleshare.service.admin import DEFAULT_SCHEDULER_CONFIG

    config = {**DEFAULT_SCHEDULER_CONFIG, **(described.get("SchedulerConfig") or {})}
    rows: list[list[object]] = [
        ["Cluster", described.get("ClusterId")],
        ["Version", described.get("SchedulerConfigVersion")],
        ["Status", described.get("Status")],
        ["FairShare", config["FairShare"]],
        ["IdleResourceSharing", config["IdleResourceSharing"]],
        ["LastModified", described.get("LastModifiedTime")],
    ]
    out = remote.table(rows, ["FIELD", "VALUE"])
    classes = [[pc.get("Name"), pc.get("Weight")] for pc in config.get("PriorityClasses") or []]
    return out + "\n\n" + (remote.table(classes, ["PRIORITY CLASS", "WEIGHT"]) if classes else "(no priority classes)")
