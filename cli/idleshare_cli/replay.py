"""`idleshare replay PATH… --local | --bus NAME`: scenarios and event files through the pipeline.

``--local`` runs them through the real router and recompute handlers on embedded services (the devkit:
moto in-process and a real kube-apiserver + Kueue on 127.0.0.1, built from pinned modules on the first
run, with progress) — the devkit is imported lazily here, and only here.
``--bus`` puts the event entries on a deployed EventBridge bus with PutEvents, cut into calls as the deployed
publisher cuts them (:func:`idleshare.adapters.aws.put_events_calls`: 10 entries and 256 KB a call).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def register(sub: Any) -> None:
    p = sub.add_parser(
        "replay",
        help="run scenarios / event files through the pipeline (locally, or onto a deployed bus)",
        description="Scenario files (events/scenarios/) or event files (events/inbound/*.json). "
        "--local: real handlers on embedded services, printing the pool, the borrow limits and the Kueue "
        "changes after each step and checking expectations (exit 1 on a mismatch). --bus: PutEvents.",
    )
    p.add_argument("paths", nargs="+", metavar="PATH", help="scenario (.yaml/.json) or event (.json) files")
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--local", action="store_true", help="embedded services, no AWS account")
    where.add_argument("--bus", metavar="NAME", help="put the events on this deployed event bus")
    p.add_argument("--region", help="with --bus: the bus's region (default: the AWS configuration's)")
    p.add_argument("--format", choices=["table", "json"], default="table")
    p.add_argument("--all-resources", action="store_true", help="show cpu, memory and efa too, not only accelerators")
    p.set_defaults(func=_cmd_replay)


def _cmd_replay(args: argparse.Namespace) -> int:
    from idleshare_cli.main import UsageError

    for path in args.paths:
        try:
            found = Path(path).is_file()
        except OSError as exc:  # a name too long for the file system
            raise UsageError(f"PATH {path[:80]}: {exc.strerror}") from None
        if not found:
            raise UsageError(f"PATH {path[:200]}: no such file")
    if args.region and not args.bus:
        raise UsageError("--region goes with --bus")
    if args.local:
        return _local(args)
    return _bus(args)


# -- --local --------------------------------------------------------------------------------------


def _local(args: argparse.Namespace) -> int:
    from devkit import scenario as scenarios
    from devkit.embedded import one_stack
    from devkit.kube.stack import StackError
    from idleshare_cli.main import CommandError

    loaded = [scenarios.load(p) for p in args.paths]  # every file checked before anything runs
    try:
        with one_stack():  # one cluster for every file (built on first use, with progress)
            return _play(loaded, args)
    except StackError as exc:
        raise CommandError(f"the local Kubernetes + Kueue stack: {exc}") from None


def _play(loaded: list[Any], args: argparse.Namespace) -> int:
    from devkit import scenario as scenarios
    from devkit.report import render_step, summary_line
    from idleshare_cli.main import CommandError

    as_json = args.format == "json"
    results: list[dict[str, Any]] = []
    failed: list[str] = []
    for sc in loaded:
        if not as_json:
            print(f"═══ {sc.name}" + (f": {sc.description}" if sc.description else "") + f"  ({sc.source})")
        previous: list[Any] = [None]
        aliases = scenarios.NodeRefs(sc.nodes).aliases()

        def show(report: Any, sc: Any = sc, previous: list[Any] = previous, aliases: Any = aliases) -> None:
            if not as_json:
                print(
                    render_step(
                        report, previous[0], all_resources=args.all_resources, total=len(sc.steps), aliases=aliases
                    )
                )
                print()
                sys.stdout.flush()
            previous[0] = report

        reports = scenarios.run(sc, on_step=show)
        bad = sum(len(r.mismatches) for r in reports) + sum(len(r.failures) for r in reports)
        if bad:
            failed.append(f"{sc.source} ({bad})")
        if as_json:
            results.append({"scenario": sc.name, "source": sc.source, "steps": [r.to_json() for r in reports]})
        else:
            print(f"{sc.name}: {summary_line(reports)}\n")
    if as_json:
        json.dump(results if len(results) != 1 else results[0], sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
    if failed:
        raise CommandError("expectations failed or recomputes failed in " + ", ".join(failed))
    return 0


# -- --bus ----------------------------------------------------------------------------------------


def event_entries(path: str) -> tuple[list[dict[str, Any]], list[str]]:
    """The events a file stands for (a scenario's explicit event steps, or the file's events), checked,
    and the steps a bus cannot replay (operator actions change local state)."""
    from devkit.scenario import Reader, parse
    from idleshare.parse.events import parse_event

    reader = Reader()  # the file and what it names, bounded; YAML without aliases
    doc = reader.read(Path(path), path)
    skipped: list[str] = []
    if isinstance(doc, dict) and "steps" in doc:
        # A scenario: resolve it fully (files, node references), keep the event steps.
        sc = parse(doc, path, Path(path).parent, reader)
        events = [e for _, e in sc.event_entries()]
        skipped = [f"{s.title} ({s.kind})" for s in sc.steps if s.kind not in ("event", "events")]
        return events, skipped
    events = doc if isinstance(doc, list) else [doc]
    for i, e in enumerate(events):
        parse_event(e, path if len(events) == 1 else f"{path}[{i}]")
    return events, skipped


def to_entry(event: dict[str, Any], bus: str) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "Source": event["source"],
        "DetailType": event["detail-type"],
        "Detail": json.dumps(event.get("detail", {})),
        "EventBusName": bus,
    }
    if event.get("resources"):
        entry["Resources"] = list(event["resources"])
    return entry


def _events_client(region: str | None) -> Any:
    """EventBridge's client in ``region``, else the AWS configuration's; none anywhere: one line naming it (exit 2)."""
    import boto3
    from botocore.exceptions import NoRegionError

    from idleshare_cli.main import UsageError

    try:
        return boto3.client("events", region_name=region) if region else boto3.client("events")
    except NoRegionError:
        raise UsageError(
            "--bus needs the bus's region: pass --region (e.g. --region us-west-2), or set AWS_REGION or a "
            "profile's region"
        ) from None


def _bus(args: argparse.Namespace) -> int:
    from botocore.exceptions import BotoCoreError, ClientError

    from idleshare_cli.main import CommandError

    planned: list[tuple[str, dict[str, Any]]] = []
    for path in args.paths:
        events, skipped = event_entries(path)
        for title in skipped:
            print(
                f"{path}: skipped operator step {title}: it changes local state; run it with --local", file=sys.stderr
            )
        planned += [(path, e) for e in events]
    if not planned:
        raise CommandError("no events to put (operator steps only replay with --local)")
    from idleshare.adapters.aws import MAX_ENTRY_BYTES, entry_size, put_events_calls

    client: Any = _events_client(args.region)
    sent, failures = 0, []
    sized = []
    for path, event in planned:
        entry = to_entry(event, args.bus)
        size = entry_size(entry)
        if size > MAX_ENTRY_BYTES:
            failures.append(
                f"{path}: {event['detail-type']}: {size:,} bytes, over EventBridge's {MAX_ENTRY_BYTES // 1024} KB "
                "entry limit: not sent"
            )
        else:
            sized.append(((path, event, entry), size))
    for batch in put_events_calls(sized):
        try:
            response = client.put_events(Entries=[entry for _, _, entry in batch])
        except (ClientError, BotoCoreError) as exc:
            raise CommandError(f"events:PutEvents on bus {args.bus}: {exc}") from None
        for (path, event, _), result in zip(batch, response.get("Entries", []), strict=False):
            if result.get("ErrorCode"):
                hint = ""
                if result["ErrorCode"] == "NotAuthorizedForSourceException" or event["source"].startswith("aws."):
                    hint = " (aws.* sources are AWS's own: replay them from the bus's archive, see docs/operations.md)"
                failures.append(
                    f"{path}: {event['detail-type']}: {result['ErrorCode']}: {result.get('ErrorMessage', '')}{hint}"
                )
            else:
                sent += 1
                print(f"{path}: {event['detail-type']} -> {result.get('EventId')}")
    print(f"{sent} of {len(planned)} events put on {args.bus}")
    if failures:
        for f in failures:
            print(f"failed: {f}", file=sys.stderr)
        raise CommandError(f"{len(failures)} of {len(planned)} events were not accepted")
    return 0
