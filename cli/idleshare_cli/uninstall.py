"""`idleshare uninstall --kubeconfig PATH [--context NAME] --cluster ID --table NAME [--dry-run]`: remove from a
cluster the Kueue objects idleshare created (:mod:`idleshare_cli.removal`), with your kubeconfig's credentials, and
say what it removed and what it left: the namespaces labelled as idleshare's (never deleted: their Jobs; never
recorded, so it cannot say which it created and which were applied by hand), and objects labelled as
idleshare's that it did not create (copies among them). What idleshare created is the cluster's ownership record in
idleshare's table (the stack output ``TableName``; the table is kept by ``cdk destroy``), read with your AWS
credentials (``--profile``/``--region``). Run it after ``cdk destroy`` (or after removing the cluster from the
config), else the next recompute writes the objects again.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from idleshare.domain.kueue import MANAGED_BY, MANAGED_BY_LABEL
from idleshare_cli.main import CommandError, UsageError


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("uninstall", help="remove from a cluster the Kueue objects idleshare created (kubeconfig)")
    p.add_argument("--kubeconfig", required=True, metavar="PATH", help="a kubeconfig for the cluster")
    p.add_argument("--context", metavar="NAME", help="its context to use (default: its current context)")
    p.add_argument("--cluster", required=True, metavar="ID", help="the cluster's id in idleshare (its CDK config)")
    p.add_argument(
        "--table", required=True, metavar="NAME", help="idleshare's DynamoDB table (the stack output TableName)"
    )
    p.add_argument("--profile", help="AWS profile to read the table with (default: the usual chain)")
    p.add_argument("--region", help="AWS region of the table (default: the profile's)")
    p.add_argument("--dry-run", action="store_true", help="print what would be removed; remove nothing")
    p.add_argument("--format", choices=["table", "json"], default="table", help="output (default: table)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from idleshare.adapters.kube import LightkubeCluster
    from idleshare.errors import IdleshareError
    from idleshare_cli.removal import uninstall

    try:
        kube = LightkubeCluster.from_kubeconfig(args.kubeconfig, args.context)
    except (OSError, ValueError) as exc:
        raise UsageError(f"--kubeconfig {args.kubeconfig}: {exc}") from None
    try:
        removal = uninstall(kube, _store(args), args.cluster, dry_run=args.dry_run)
    except IdleshareError as exc:
        raise CommandError(f"{kube.name}: {exc}") from None
    finally:
        kube.close()
    if args.format == "json":
        document = {
            "dryRun": args.dry_run,
            "removed": [_ref(o) for o in removal.removed],
            "keptNamespaces": [_ref(o) for o in removal.namespaces],
            "keptForeign": [_ref(o) for o in removal.foreign],
            "keptLost": [_ref(o) for o in removal.lost],
        }
        json.dump(document, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    _print(kube.name, removal, dry_run=args.dry_run)
    return 0


def _store(args: argparse.Namespace) -> Any:
    """idleshare's table, through the store the recompute uses (the same ownership record)."""
    import boto3
    from botocore.exceptions import BotoCoreError, ProfileNotFound

    from idleshare.adapters.store import DynamoStore

    try:
        session = boto3.Session(profile_name=args.profile, region_name=args.region)
        return DynamoStore(session.resource("dynamodb").Table(args.table))
    except ProfileNotFound:
        raise UsageError(f"--profile {args.profile}: no such profile in the AWS config") from None
    except BotoCoreError as exc:
        raise UsageError(f"--table {args.table}: {exc}") from None


def _ref(obj: dict[str, Any]) -> dict[str, str]:
    meta = obj.get("metadata") or {}
    ref = {"kind": obj.get("kind", ""), "name": meta.get("name", "")}
    if meta.get("namespace"):
        ref["namespace"] = meta["namespace"]
    return ref


def _print(cluster: str, removal: Any, *, dry_run: bool) -> None:
    from idleshare_cli.remote import table

    rows = [[r["kind"], r.get("namespace"), r["name"]] for r in map(_ref, removal.removed)]
    verb = "Would remove" if dry_run else "Removed"
    dry = " (dry run: nothing removed)" if dry_run else ""
    print(f"{verb} {len(rows)} object(s) idleshare created, through kubeconfig context {cluster}{dry}:")
    print(table(rows, ["KIND", "NAMESPACE", "NAME"]))
    if removal.namespaces:
        names = " ".join(_ref(o)["name"] for o in removal.namespaces)
        print(
            f"\nKept {len(removal.namespaces)} namespace(s) labelled {MANAGED_BY_LABEL}={MANAGED_BY} (a namespace is"
            " never recorded: whether idleshare created it or it was applied by hand, idleshare cannot tell;"
            f" deleting one deletes its Jobs): {names}\n"
            f"  once their Jobs are done, and if they are yours to remove: kubectl delete namespace {names}"
        )
    if removal.foreign:
        print(
            f"\nKept {len(removal.foreign)} object(s) labelled {MANAGED_BY_LABEL}={MANAGED_BY} that idleshare did not"
            " record creating (copies of its objects among them):"
        )
        print(
            table(
                [[r["kind"], r.get("namespace"), r["name"]] for r in map(_ref, removal.foreign)],
                ["KIND", "NAMESPACE", "NAME"],
            )
        )
    if removal.lost:
        print(
            f"\nKept {len(removal.lost)} object(s) at a name idleshare recorded, made anew by someone else (another uid):"
        )
        print(
            table(
                [[r["kind"], r.get("namespace"), r["name"]] for r in map(_ref, removal.lost)],
                ["KIND", "NAMESPACE", "NAME"],
            )
        )
    print(
        "\nidleshare's RBAC stays: kubectl delete -f infra/k8s/rbac.yaml -f infra/k8s/rbac-headroom-all.yaml --ignore-not-found"
    )
