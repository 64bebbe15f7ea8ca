"""Usage, read back every minute and kept as history.

:func:`sample_usage` runs in the node watcher's per-cluster, per-minute invocation (``handlers/watcher.py``): it
reads idleshare's ClusterQueues and the teams' Workloads (read-only), derives the sample
(:func:`idleshare.domain.usage.derive_usage`), and adds the interval since the previous one to the hourly history:
``allocated = Δt × (inUse − borrowed)`` and ``borrowed = Δt × borrowed`` amount-seconds per team, flavor and
resource, exact (``Fraction``), split at hour boundaries. The interval is the sample's: from the cursor (the last
attempt) to now.

**Gaps, never zeros.** A sample that cannot be taken (the cluster unreachable, RBAC refusing) records the interval
as a gap with the error as its reason (``SampleFailed: ...``) and moves the cursor, keeping the last sample; an
interval longer than :data:`~idleshare.timings.USAGE_MAX_INTERVAL_SECONDS` (the watcher did not run) is a gap ``NoSample`` and adds nothing.
The report names a trailing gap too (no sample since the cursor). Completed days are compacted into day items by
the first sample of a later day (:meth:`UsageStore.compact_usage_day`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from fractions import Fraction
from typing import Any

from idleshare import pages, timings
from idleshare.adapters.ports import (
    UsageBucket,
    UsageCursor,
    UsageHistoryStore,
    UsageKey,
    UsageReader,
    UsageSource,
)
from idleshare.domain.usage import UsageSample, allocations, derive_usage, hours_text, parse_time, sample_document
from idleshare.errors import ConflictError, IdleshareError, NotFoundError
from idleshare.parse import kueue_status
from idleshare.parse import workloads as workload_reads
from idleshare.parse.errors import FieldError
from idleshare.service.paging import BadRequestError, decode_token, encode_token, first_entries

MAX_REPORT_DAYS = {"hour": 62, "day": 400}
GRANULARITIES = ("hour", "day")
EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)  # a report's from/to: no sample is older; in range in every offset
LATEST = datetime(9999, 1, 1, tzinfo=UTC)  # and room left for a bucket's end (year 9999 + 14 h overflowed: a 500)
NO_SAMPLE = "NoSample"
SAMPLE_FAILED = "SampleFailed"
UNREADABLE = "Unreadable"  # a flavor/resource of Kueue's objects the sample could not read


@dataclass(frozen=True)
class SampleOutcome:
    """What one :func:`sample_usage` did: the sample (None when it failed), the failure, whether the history moved."""

    cluster_id: str
    sample: UsageSample | None
    failure: str = ""
    recorded: bool = False
    gap: str = ""


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat()


def _hour_key(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H")


def split_hours(start: datetime, end: datetime) -> list[tuple[str, Fraction]]:
    """``[start, end)`` as (hour key, seconds in that hour), in order; exact."""
    out: list[tuple[str, Fraction]] = []
    at = start
    while at < end:
        next_hour = at.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
        stop = min(end, next_hour)
        out.append((_hour_key(at), Fraction((stop - at) // timedelta(microseconds=1), 10**6)))
        at = stop
    return out


def interval_hours(sample: UsageSample | None, start: datetime, end: datetime, gap: str = "") -> dict[str, UsageBucket]:
    """The hour deltas of one interval: the sample's amount-seconds, or (``gap``) the interval as a gap. What the sample
    could not read of a flavor/resource makes the interval a gap for it too (no amount-seconds there, not zero)."""
    hours: dict[str, UsageBucket] = {}
    pieces = split_hours(start, end)
    if gap:
        hour = pieces[-1][0] if pieces else _hour_key(end)
        return {hour: UsageBucket(start=hour, gaps=((_iso(start), _iso(end), gap),))}
    assert sample is not None
    rows = allocations(sample)
    for hour, seconds in pieces:
        hours[hour] = UsageBucket(
            start=hour,
            rows={(t, f, r): (Fraction(a) * seconds, Fraction(b) * seconds) for t, f, r, a, b in rows},
        )
    if sample.unknown and pieces:
        what = ", ".join(f"{f}/{r}" for f, r in sample.unknown)
        last = hours[pieces[-1][0]]
        hours[last.start] = replace(last, gaps=((_iso(start), _iso(end), f"{UNREADABLE}: {what} not read"),))
    return hours


def _unbound_pods(kube: UsageSource) -> tuple[list[dict[str, Any]] | None, str]:
    """Kueue's pods no node has taken, or (None, why) when they cannot be read (a cluster whose RBAC predates the
    watcher's ``list pods``): the rest of the sample is taken all the same."""
    try:
        return kube.list_unbound_pods(), ""
    except IdleshareError as exc:
        return None, str(exc)


def sample_usage(
    cluster_id: str,
    kube: UsageSource,
    store: UsageHistoryStore,
    *,
    now: datetime | None = None,
    on_sample: Callable[[UsageSample], None] | None = None,
) -> SampleOutcome:
    """Take one sample of the cluster and add it to the history (module docstring). Never raises for a failure
    to read the cluster (it is recorded as a gap); a store failure raises (the caller logs and counts it)."""
    now = (now or datetime.now(UTC)).astimezone(UTC).replace(microsecond=0)
    cursor = store.get_usage_cursor(cluster_id)
    previous = parse_time(cursor.cursor_at) if cursor else None
    if previous is not None and previous >= now:  # a sample already covers this second
        return SampleOutcome(cluster_id, None, recorded=False)
    since = previous or now - timedelta(seconds=timings.USAGE_FIRST_INTERVAL_SECONDS)
    failure = ""
    sample: UsageSample | None = None
    try:
        queues = kube.list_cluster_queues()
        workloads = kube.list_workloads()
        pods, pods_error = _unbound_pods(kube)
        record = store.get_pool(cluster_id)
        sample = derive_usage(
            cluster_id,
            kueue_status.cluster_queues(queues),
            kueue_status.workloads(workloads),
            record.pool if record else None,
            since=since,
            until=now,
            unbound_pods=None if pods is None else workload_reads.unbound_pods(pods),
            unbound_error=pods_error,
        )
    except IdleshareError as exc:
        failure = f"{SAMPLE_FAILED}: {exc}"
    gap = ""
    hours: dict[str, UsageBucket] = {}
    if previous is not None:
        seconds = (now - previous).total_seconds()
        if failure:
            gap = failure
        elif seconds > timings.USAGE_MAX_INTERVAL_SECONDS:
            gap = f"{NO_SAMPLE}: no sample for {int(seconds)} s (the node watcher did not run)"
        hours = interval_hours(sample, previous, now, gap)
    elif failure:
        gap = failure
        hours = interval_hours(None, since, now, gap)
    new_cursor = UsageCursor(
        cluster_id=cluster_id,
        cursor_at=_iso(now),
        sampled_at=_iso(now) if sample is not None else "",
        sample=sample_document(sample) if sample is not None else None,
        failure=failure,
    )
    try:
        store.add_usage(new_cursor, hours, expected=cursor.cursor_at if cursor else None)
    except ConflictError:
        return SampleOutcome(cluster_id, sample, failure, recorded=False, gap=gap)
    if previous is not None and previous.date() < now.date():
        day = previous.date()
        while day < now.date() and day >= now.date() - timedelta(days=3):
            store.compact_usage_day(cluster_id, day.isoformat())
            day += timedelta(days=1)
    if sample is not None and on_sample is not None:
        on_sample(sample)
    return SampleOutcome(cluster_id, sample, failure, recorded=True, gap=gap)


# -- the read side ------------------------------------------------------------------------------------------


def _known(store: UsageReader, cluster_id: str) -> None:
    if store.get_cluster(cluster_id) is None:
        raise NotFoundError(f"cluster {cluster_id!r} is not governed by idleshare", operation="get_cluster")


def _limit(limit: int) -> None:
    if isinstance(limit, bool) or not 1 <= limit <= pages.USAGE_PAGE_MAX:
        raise BadRequestError("query", [FieldError("limit", f"must be between 1 and {pages.USAGE_PAGE_MAX}")])


def _bad_token() -> BadRequestError:
    return BadRequestError("query", [FieldError("NextToken", "is not a token this API issued")])


BY_TEAM = ("idleWhilePending", "pending", "aboveLimit", "unbound")
"""The latest sample's lists of per-team entries, paged with their teams (each page holds its teams' entries)."""


def latest_usage(
    store: UsageReader, cluster_id: str, *, limit: int = pages.USAGE_PAGE_MAX, next_token: str | None = None
) -> dict[str, Any]:
    """The latest sample's document (``GET /clusters/{c}/usage``); 404 before the first one. Its ``teams`` are paged
    by name (``limit`` and :data:`idleshare.pages.PAGE_MAX_BYTES` a page; ``NextToken`` continues after the last
    team, ``teamsTotal`` counts them all), each page with its teams' ``idleWhilePending``, ``pending`` and ``aboveLimit`` and every flavor; every
    page names the sample (``sampledAt``): a reader that sees it change starts again."""
    _limit(limit)
    token = decode_token(next_token)
    after = token.get("afterTeam") if token else None
    if token is not None and (not isinstance(after, str) or not after):
        raise _bad_token()
    _known(store, cluster_id)
    cursor = store.get_usage_cursor(cluster_id)
    if cursor is None or cursor.sample is None:
        why = f" (last attempt {cursor.cursor_at}: {cursor.failure})" if cursor and cursor.failure else ""
        raise NotFoundError(f"cluster {cluster_id!r} has no usage sample yet{why}", operation="get_usage")
    sample = cursor.sample
    found = sample.get("teams")
    teams: Mapping[str, Any] = found if isinstance(found, dict) else {}
    page, more = first_entries(teams, after, limit)
    out = {**sample, "teams": page, "teamsTotal": len(teams)}
    for key in BY_TEAM:  # each page holds its teams' entries
        entries = sample.get(key)
        out[key] = [
            i for i in (entries if isinstance(entries, list) else []) if isinstance(i, dict) and i.get("team") in page
        ]
    return out | ({"NextToken": encode_token({"afterTeam": list(page)[-1]})} if more else {})


def _row_key(row: Mapping[str, Any]) -> list[str]:
    return [str(row[k]) for k in ("start", "team", "flavor", "resource")]


def _report_page(
    rows: list[dict[str, Any]], gaps: list[dict[str, str]], limit: int, next_token: str | None
) -> tuple[list[dict[str, Any]], list[dict[str, str]], str | None]:
    """One page of a report: its rows, then its gaps (``limit`` of them and
    :data:`idleshare.pages.PAGE_MAX_BYTES` in all), and the token of the next page. A token continues after a row
    (by key: a row added meanwhile is not read twice) or at a gap."""
    token = decode_token(next_token)
    after, gap_at = (token.get("afterRow"), token.get("gap")) if token else (None, None)
    if token is not None:
        row_ok = isinstance(after, list) and len(after) == 4 and all(isinstance(p, str) for p in after)
        gap_ok = isinstance(gap_at, int) and not isinstance(gap_at, bool) and gap_at >= 0
        if not (row_ok or gap_ok):
            raise _bad_token()
    if after is not None:
        rows = [r for r in rows if _row_key(r) > after]
    base = 0
    if isinstance(gap_at, int):
        rows, base, gaps = [], gap_at, gaps[gap_at:]
    stream: list[tuple[bool, dict[str, Any]]] = [(True, r) for r in rows] + [(False, g) for g in gaps]
    shown, more = pages.take(stream, limit, lambda item: pages.json_size(item[1]))
    rows_page = [r for is_row, r in shown if is_row]
    gaps_page = [g for is_row, g in shown if not is_row]
    if not more:
        return rows_page, gaps_page, None
    last_is_row, last = shown[-1]
    return (
        rows_page,
        gaps_page,
        encode_token({"afterRow": _row_key(last)} if last_is_row else {"gap": base + len(gaps_page)}),
    )


def _instant(text: str, field: str) -> datetime:
    parsed = parse_time(text)
    if parsed is None:
        raise BadRequestError("usage", [FieldError(field, f"expected an ISO 8601 time, found {text!r}")])
    try:
        moment = parsed.astimezone(UTC)
    except OverflowError:
        moment = EARLIEST - timedelta(days=1)  # past either end once in UTC: refused below
    if not EARLIEST <= moment <= LATEST:
        window = f"{_iso(EARLIEST)} to {_iso(LATEST)}"
        raise BadRequestError("usage", [FieldError(field, f"must be from {window} (found {text!r})")])
    return moment


def _bucket_time(key: str) -> datetime:
    return datetime.strptime(key if "T" in key else key + "T00", "%Y-%m-%dT%H").replace(tzinfo=UTC)


@dataclass(frozen=True)
class _ReportAsk:
    """A report's request, checked: its period and, for a later page, where its rows start."""

    start: datetime
    end: datetime
    first_start: str = ""
    """A later page builds only the rows from its first bucket on (the rows before it are the earlier pages')."""
    done_with_rows: bool = False
    """The page starts at a gap: no row is left."""


def _report_ask(start_text: str, end_text: str, granularity: str, limit: int, next_token: str | None) -> _ReportAsk:
    """The request checked, each problem a 400 naming its field (a bad token before anything is read)."""
    _limit(limit)
    token = decode_token(next_token)
    after = token.get("afterRow") if token else None
    start, end = _instant(start_text, "from"), _instant(end_text, "to")
    if granularity not in GRANULARITIES:
        raise BadRequestError("usage", [FieldError("granularity", f"expected hour or day, found {granularity!r}")])
    if end <= start:
        raise BadRequestError("usage", [FieldError("to", "must be after from")])
    if end - start > timedelta(days=MAX_REPORT_DAYS[granularity]):
        days = MAX_REPORT_DAYS[granularity]
        raise BadRequestError("usage", [FieldError("to", f"at most {days} days after from by {granularity}")])
    first_start = str(after[0]) if isinstance(after, list) and after else ""
    return _ReportAsk(start, end, first_start, done_with_rows=bool(token) and "gap" in (token or {}))


def _report_buckets(store: UsageReader, cluster_id: str, granularity: str, ask: _ReportAsk) -> list[UsageBucket]:
    """The period's buckets in order: its hours, or its days (a day not compacted yet: its hours summed)."""
    last_moment = ask.end - timedelta(microseconds=1)
    if granularity == "hour":
        return store.usage_buckets(cluster_id, "hour", _hour_key(ask.start), _hour_key(last_moment))
    first_day, last_day = ask.start.date().isoformat(), last_moment.date().isoformat()
    days = {b.start: b for b in store.usage_buckets(cluster_id, "day", first_day, last_day)}
    live: dict[str, UsageBucket] = {}
    for hour in store.usage_buckets(cluster_id, "hour", f"{first_day}T00", f"{last_day}T23"):
        day = hour.start[:10]
        if day in days:
            continue
        merged = live.get(day, UsageBucket(day))
        rows: dict[UsageKey, tuple[Fraction, Fraction]] = dict(merged.rows)
        for key, (a, b) in hour.rows.items():
            old = rows.get(key, (Fraction(0), Fraction(0)))
            rows[key] = (old[0] + a, old[1] + b)
        live[day] = UsageBucket(day, rows, (*merged.gaps, *hour.gaps))
    return sorted([*days.values(), *live.values()], key=lambda b: b.start)


def _report_rows(buckets: list[UsageBucket], ask: _ReportAsk) -> list[dict[str, Any]]:
    """Allocated and borrowed hours per bucket, team, flavor and resource (this page's and the following ones')."""
    return [
        {
            "start": _iso(_bucket_time(b.start)),
            "team": team,
            "flavor": flavor,
            "resource": resource,
            "allocatedHours": hours_text(a),
            "borrowedHours": hours_text(bw),
        }
        for b in buckets
        if not ask.done_with_rows and _iso(_bucket_time(b.start)) >= ask.first_start
        for (team, flavor, resource), (a, bw) in sorted(b.rows.items())
    ]


def _report_gaps(
    buckets: list[UsageBucket], cursor: UsageCursor | None, ask: _ReportAsk, now: datetime
) -> list[dict[str, str]]:
    """The buckets' gaps within the period, and the trailing one (no sample since the cursor, or never), in order."""
    start, end = ask.start, ask.end
    gaps: list[dict[str, str]] = []
    for bucket in buckets:
        for g_start, g_end, reason in bucket.gaps:
            gs, ge = _instant(g_start, "gap"), _instant(g_end, "gap")
            if ge > start and gs < end:
                gaps.append({"start": _iso(max(gs, start)), "end": _iso(min(ge, end)), "reason": reason})
    horizon = min(end, now)
    if cursor is None:
        if horizon > start:
            gaps.append({"start": _iso(start), "end": _iso(horizon), "reason": f"{NO_SAMPLE}: never sampled"})
    else:
        last = _instant(cursor.cursor_at, "cursor")
        if (now - last).total_seconds() > timings.USAGE_MAX_INTERVAL_SECONDS and horizon > max(last, start):
            reason = f"{NO_SAMPLE}: no sample since {_iso(last)}"
            gaps.append({"start": _iso(max(last, start)), "end": _iso(horizon), "reason": reason})
    return sorted(gaps, key=lambda g: (g["start"], g["end"]))


def usage_report(
    store: UsageReader,
    cluster_id: str,
    start_text: str,
    end_text: str,
    granularity: str = "day",
    *,
    now: datetime | None = None,
    limit: int = pages.USAGE_PAGE_MAX,
    next_token: str | None = None,
) -> dict[str, Any]:
    """Allocated and borrowed hours per bucket, team, flavor and resource in ``[from, to)``, and the gaps: a page of
    them (:func:`_report_page`; ``NextToken`` continues)."""
    ask = _report_ask(start_text, end_text, granularity, limit, next_token)
    _known(store, cluster_id)
    now = (now or datetime.now(UTC)).astimezone(UTC)
    buckets = _report_buckets(store, cluster_id, granularity, ask)
    rows = _report_rows(buckets, ask)
    gaps = _report_gaps(buckets, store.get_usage_cursor(cluster_id), ask, now)
    rows_page, gaps_page, following = _report_page(rows, gaps, limit, next_token)
    out = {
        "cluster": cluster_id,
        "from": _iso(ask.start),
        "to": _iso(ask.end),
        "granularity": granularity,
        "rows": rows_page,
        "gaps": gaps_page,
    }
    return out | ({"NextToken": following} if following else {})


def document_of(outcome: SampleOutcome) -> Mapping[str, Any] | None:
    return sample_document(outcome.sample) if outcome.sample is not None else None
