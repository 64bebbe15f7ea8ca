"""`idleshare usage --cluster c [--from ISO --to ISO] [--granularity hour|day] [--format table|json|csv]`:
usage read back from Kueue through the admin API (``GET /clusters/{c}/usage``). Without ``--from``/``--to``: the
latest sample (per flavor: capacity, pool, in use, borrowed, idle; per team: nominal, in use, borrowed, lent;
idle while pending). With them: allocated and borrowed hours per bucket, team, flavor and resource, and the gaps."""

from __future__ import annotations

import argparse
import csv
import io
import json
import sys
from collections.abc import Mapping
from typing import Any

from idleshare_cli import remote
from idleshare_cli.main import UsageError

ROW_FIELDS = ("start", "team", "flavor", "resource", "allocatedHours", "borrowedHours")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = remote.cluster_command(sub, "usage", "usage read back from Kueue: now, or GPU-hours over a period", run)
    p.add_argument("--from", dest="start", metavar="ISO", help="start of the period (with --to)")
    p.add_argument("--to", dest="end", metavar="ISO", help="end of the period, exclusive (with --from)")
    p.add_argument("--granularity", choices=["hour", "day"], default="day")
    # the remote parent's --format offers table|json; usage adds csv
    for action in p._actions:
        if action.dest == "format":
            action.choices = ["table", "json", "csv"]


def query(args: argparse.Namespace) -> dict[str, object] | None:
    if (args.start is None) != (args.end is None):
        raise UsageError("--from and --to go together")
    if args.start is None:
        return None
    return {"from": args.start, "to": args.end, "granularity": args.granularity}


def run(args: argparse.Namespace) -> int:
    if not args.cluster.strip():
        raise UsageError("--cluster: must not be empty")
    params = query(args)
    api = remote.connect(args)
    data = remote.fetch_usage(api, args.cluster, params)
    if args.format == "csv":
        sys.stdout.write(csv_text(data))
    elif args.format == "json":
        json.dump(data, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print(table_text(data))
    return 0


def csv_text(data: Any) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    if isinstance(data, dict) and "rows" in data:
        writer.writerow(ROW_FIELDS)
        for row in data.get("rows") or []:
            writer.writerow([row.get(k, "") for k in ROW_FIELDS])
        for gap in data.get("gaps") or []:
            writer.writerow(
                [gap.get("start", ""), "", "", "", "", "", f"gap until {gap.get('end')}: {gap.get('reason')}"]
            )
        return out.getvalue()
    writer.writerow(
        ("scope", "name", "flavor", "resource", "capacity", "pool", "nominal", "inUse", "borrowed", "lent", "idle")
    )
    for flavor, per in (data.get("flavors") or {}).items():
        for resource, u in per.items():
            writer.writerow(("flavor", flavor, flavor, resource, u.get("capacity"), u.get("pool"), "",
                             u.get("inUse"), u.get("borrowed"), "", u.get("idle")))  # fmt: skip
    for team, t in (data.get("teams") or {}).items():
        for flavor, per in (t.get("flavors") or {}).items():
            for resource, u in per.items():
                writer.writerow(("team", team, flavor, resource, "", "", u.get("nominal"), u.get("inUse"),
                                 u.get("borrowed"), u.get("lent"), ""))  # fmt: skip
    return out.getvalue()


def table_text(data: Any) -> str:
    if not isinstance(data, dict):
        return str(data)
    if "rows" in data:
        rows = [[r.get(k) for k in ROW_FIELDS] for r in data.get("rows") or []]
        text = f"{data.get('cluster')}: {data.get('from')} .. {data.get('to')} by {data.get('granularity')}\n"
        text += remote.table(rows, ["start", "team", "flavor", "resource", "allocated h", "borrowed h"])
        gaps = [[g.get("start"), g.get("end"), g.get("reason")] for g in data.get("gaps") or []]
        if gaps:
            text += "\n\nGaps (no sample: never counted as zero usage)\n" + remote.table(
                gaps, ["start", "end", "reason"]
            )
        return text
    flavors = [
        [f, r, u.get("capacity"), u.get("pool"), u.get("inUse"), u.get("borrowed"), u.get("idle")]
        for f, per in (data.get("flavors") or {}).items()
        for r, u in per.items()
    ]
    teams = [
        [team, f, r, u.get("nominal"), u.get("inUse"), u.get("borrowed"), u.get("lent")]
        for team, t in (data.get("teams") or {}).items()
        for f, per in (t.get("flavors") or {}).items()
        for r, u in per.items()
    ]
    work = [
        [team, w.get("pending"), w.get("reserving"), w.get("admitted"), t.get("preemptions")]
        for team, t in (data.get("teams") or {}).items()
        for w in [t.get("workloads") or {}]
    ]
    waiting = [[i.get("team"), i.get("flavor"), i.get("resource"), i.get("idle"), i.get("pendingReason"),
                i.get("cause"), i.get("why")]
               for i in data.get("idleWhilePending") or []]  # fmt: skip
    above = [[a.get("team"), a.get("flavor"), a.get("resource"), a.get("borrowed"), a.get("limit")]
             for a in data.get("aboveLimit") or []]  # fmt: skip
    pending = [[p.get("team"), p.get("job"), p.get("flavor"), p.get("resource"), p.get("request"), p.get("cause"),
                p.get("why")]
               for p in data.get("pending") or []]  # fmt: skip
    parts = [
        f"{data.get('cluster')}: sampled at {data.get('sampledAt')}",
        remote.table(flavors, ["flavor", "resource", "capacity", "pool", "in use", "borrowed", "idle"]),
        remote.table(teams, ["team", "flavor", "resource", "nominal", "in use", "borrowed", "lent"]),
        remote.table(work, ["team", "pending", "reserving", "admitted", "preemptions"]),
    ]
    if waiting:
        parts.append("Idle while pending (Kueue's reason; the cause idleshare knows)\n"
                     + remote.table(waiting, ["team", "flavor", "resource", "idle", "kueue", "cause", "why"]))  # fmt: skip
    if pending:
        parts.append("Pending Jobs and why (the cause idleshare knows; Kueue's reason: above, or the Workload)\n"
                     + remote.table(pending, ["team", "job", "flavor", "resource", "asks", "cause", "why"]))  # fmt: skip
    if above:
        parts.append("Borrowing above its limit (lowered after Kueue admitted the work; Kueue does not evict it)\n"
                     + remote.table(above, ["team", "flavor", "resource", "borrowed", "limit"]))  # fmt: skip
    parts.extend(unbound_text(data))
    unread = [[u.get("object"), u.get("field"), u.get("problem")] for u in data.get("unreadable") or []]
    if unread:
        parts.append("Not read (a gap, never zero usage: the flavor/resource is left out above, a count shows -)\n"
                     + remote.table(unread, ["object", "field", "problem"]))  # fmt: skip
    return "\n\n".join(parts)


def unbound_text(data: Mapping[str, Any]) -> list[str]:
    """Admitted but not placed: the pods of admitted workloads no node has taken, per team and flavor, and since
    when (the oldest admission); or why they could not be read."""
    if data.get("unboundError"):
        return [f"Admitted but not placed: not read ({data['unboundError']})"]
    rows = [[u.get("team"), u.get("flavor"), u.get("pods"), u.get("workloads"), u.get("since"), u.get("seconds"),
             u.get("reason", "")]
            for u in data.get("unbound") or [] if isinstance(u, Mapping)]  # fmt: skip
    if not rows:
        return []
    return [f"Admitted but not placed: {data.get('unboundPods')} pods no node has taken, the oldest admitted "
            f"{data.get('oldestUnboundSeconds')} s ago (the pool overstates what pods can get)\n"
            + remote.table(rows, ["team", "flavor", "pods", "workloads", "admitted since", "seconds", "scheduler"])]  # fmt: skip
