"""`idleshare report --cluster c --html FILE`: one self-contained HTML page of a deployed cluster, read through
the admin API: the pool and its grants, every excluded node, the usage now and over a period (last 7 days by
default). A cluster whose usage routes answer 404 (none sampled yet, or an API without them) still gets its
page, which says that there is no usage yet."""

from __future__ import annotations

import argparse
import os
import sys
from datetime import UTC, datetime, timedelta
from typing import Any

from idleshare_cli import remote
from idleshare_cli.main import UsageError
from idleshare_cli.pool import whole_pool

DEFAULT_DAYS = 7
GRANULARITIES = ("hour", "day")
HOURLY_UP_TO = timedelta(days=2)  # a longer period defaults to daily columns


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = remote.cluster_command(
        sub,
        "report",
        "one self-contained HTML page: pool, limits and why, usage over a period, excluded nodes (admin API)",
        report,
    )
    p.add_argument("--html", required=True, metavar="FILE", help="write the page here ('-': standard output)")
    p.add_argument("--from", dest="start", metavar="TIME", help=f"ISO 8601 (default: {DEFAULT_DAYS} days before --to)")
    p.add_argument("--to", dest="end", metavar="TIME", help="ISO 8601 (default: now)")
    p.add_argument(
        "--granularity",
        choices=GRANULARITIES,
        help=f"usage columns (default: hour for up to {HOURLY_UP_TO.days} days, else day)",
    )
    p.epilog = "--format json prints the documents the page was built from, --format table one line about it."


def period(start: str | None, end: str | None, now: datetime | None = None) -> tuple[str, str]:
    """(from, to) as the API takes them (ISO 8601, UTC, to the second): by default the last 7 days."""
    to = _moment(end, "--to") if end else (now or datetime.now(UTC)).replace(microsecond=0)
    since = _moment(start, "--from") if start else to - timedelta(days=DEFAULT_DAYS)
    if since >= to:
        raise UsageError(f"--from {_iso(since)} must be before --to {_iso(to)}")
    return _iso(since), _iso(to)


def _moment(text: str, flag: str) -> datetime:
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"{flag} {text!r}: not an ISO 8601 date or time (2026-12-01, 2026-12-01T10:00:00Z)") from None
    from idleshare.service.usage import EARLIEST, LATEST  # the API's bounds of a period

    try:
        moment = (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).astimezone(UTC).replace(microsecond=0)
    except OverflowError:  # before year 1 or after 9999 once in UTC
        moment = EARLIEST - timedelta(days=1)
    if not EARLIEST + timedelta(days=DEFAULT_DAYS) <= moment <= LATEST:
        raise UsageError(
            f"{flag} {text!r}: must be from {_iso(EARLIEST + timedelta(days=DEFAULT_DAYS))} to {_iso(LATEST)}"
        )
    return moment


def _iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def optional(api: remote.ApiClient, path: list[str], query: dict[str, object] | None = None) -> tuple[Any, str | None]:
    """(the answer, None), or (None, why not) when the route answers 404 or does not exist."""
    try:
        return remote.fetch_usage(api, path[1], query), None
    except remote.ApiError as exc:
        if not remote.missing(exc):
            raise
        return None, f"No usage yet: GET /{'/'.join(path)} answered HTTP {exc.status} ({exc.api_message})."


def collect(api: remote.ApiClient, cluster: str, start: str, end: str, granularity: str) -> dict[str, Any]:
    """Every document the page shows."""
    path = ["clusters", cluster]
    pool = whole_pool(api, path)  # every team, excluded node and issue, of one generation
    grants = {"cluster": cluster, "generation": pool.get("generation"), "teams": pool.get("teams") or {}}
    usage, usage_missing = optional(api, [*path, "usage"])
    history, history_missing = optional(api, [*path, "usage"], {"from": start, "to": end, "granularity": granularity})
    return {
        "pool": pool,
        "grants": grants,
        "excludedNodes": pool.get("excludedNodes") or {},
        "usage": usage if isinstance(usage, dict) else None,
        "history": history if isinstance(history, dict) else None,
        "usageNote": usage_missing or history_missing,
    }


def render(docs: dict[str, Any], generated_at: str | None = None) -> str:
    from idleshare_cli.report_html import render as render_html

    return render_html(
        docs["pool"],
        grants=docs.get("grants"),
        excluded_nodes=docs.get("excludedNodes"),
        usage=docs.get("usage"),
        history=docs.get("history"),
        usage_note=docs.get("usageNote"),
        generated_at=generated_at,
    )


def report(args: argparse.Namespace) -> int:
    if not args.cluster.strip():
        raise UsageError("--cluster: must not be empty")
    if not args.html.strip():
        raise UsageError("--html: must not be empty")
    if args.html == "-" and args.format == "json":
        raise UsageError("--html - writes the page to standard output: --format json cannot go there too")
    start, end = period(args.start, args.end)
    span = datetime.fromisoformat(end) - datetime.fromisoformat(start)
    granularity = args.granularity or ("hour" if span <= HOURLY_UP_TO else "day")
    api = remote.connect(args)
    docs = collect(api, args.cluster, start, end, granularity)
    page = render(docs, generated_at=_iso(datetime.now(UTC)))
    if args.html == "-":
        sys.stdout.write(page)
    else:
        try:
            with open(args.html + ".tmp", "w", encoding="utf-8") as file:
                file.write(page)
            os.replace(args.html + ".tmp", args.html)
        except OSError as exc:
            raise UsageError(f"--html {args.html}: cannot write: {exc.strerror or exc}") from None
    if args.format == "json":
        remote.emit(args, {"from": start, "to": end, "granularity": granularity, **docs}, str)
    elif args.html != "-":
        usage = "no usage yet" if docs["usageNote"] else f"usage {start} to {end} by {granularity}"
        print(f"wrote {args.html} ({len(page.encode())} bytes): cluster {args.cluster}, {usage}")
    return 0
