"""No answer of the admin API can pass Lambda's 6 MB response limit, whatever valid input was stored: each list is
cut by count and by size (``idleshare.pages``), tested at the sizes that broke it (issue 35, item 7)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from idleshare import pages
from idleshare.adapters.ports import PoolRecord, UsageCursor
from tests.admin_api import World, call
from tests.builders import quota_body

QUOTAS = "/clusters/demo/compute-quotas"
LETTER = "\U0001d400"  # MATHEMATICAL BOLD CAPITAL A: a letter (\p{L}), 4 bytes of UTF-8, 12 of escaped JSON
# A page's entries are at most PAGE_MAX_BYTES; the rest of an answer (its summaries, the proxy envelope's escaping of
# the body) stays well inside the limit: every answer is checked against the limit itself, and against 2x a page.
BOUND = 2 * pages.PAGE_MAX_BYTES + 64 * 1024


def every_page(path: str, **query: str) -> list[Any]:
    """Every reply of a paged GET, following NextToken; each must be a 200 under the bound."""
    replies = [call("GET", path, query=query)]
    while "NextToken" in replies[-1].body:
        replies.append(call("GET", path, query=query | {"NextToken": replies[-1].body["NextToken"]}))
    for reply in replies:
        assert reply.status == 200, reply.body
        assert reply.size < min(BOUND, pages.LAMBDA_MAX_RESPONSE_BYTES), (path, reply.size)
    return [r.body for r in replies]


@pytest.mark.parametrize(
    ("items", "limit", "sizes", "max_bytes", "expected"),
    [
        ([1, 2, 3], 5, [1, 1, 1], 100, ([1, 2, 3], False)),  # all fit
        ([1, 2, 3], 2, [1, 1, 1], 100, ([1, 2], True)),  # cut by count
        ([1, 2, 3], 5, [40, 40, 40], 100, ([1, 2], True)),  # cut by size (40+1 + 40+1 <= 100 < 123)
        ([1, 2], 5, [500, 1], 100, ([1], True)),  # the first always, even past the budget
        ([], 5, [], 100, ([], False)),
    ],
)
def test_take_cuts_by_count_and_by_size(items: list[int], limit: int, sizes: list[int], max_bytes: int, expected):
    size = dict(zip(items, sizes, strict=True))
    assert pages.take(items, limit, size.__getitem__, max_bytes) == expected


def test_a_quota_list_of_long_tags_in_4_byte_letters_pages_by_size(world: World) -> None:
    # Given 40 valid quotas, each with 40 tags of 128 + 256 four-byte letters (each body under 64 KiB of UTF-8):
    # ~185 KB of escaped JSON each, ~7.4 MB for one page of 100 before the fix
    tags = [{"Key": LETTER * 127 + chr(0x41 + i), "Value": LETTER * 256} for i in range(40)]
    names = []
    for i in range(40):
        body = quota_body(f"t{i:02d}", Tags=tags)
        assert len(json.dumps(body, ensure_ascii=False).encode()) < 64 * 1024
        names.append(world.store.create_quota("demo", body).name)
    assert pages.json_size(tags) * 40 > pages.LAMBDA_MAX_RESPONSE_BYTES
    # When every page is read: each under the bound, every quota once, in name order, tags intact
    listed = [q for page in every_page(QUOTAS) for q in page["ComputeQuotaSummaries"]]
    assert [q["Name"] for q in listed] == sorted(names)
    assert all(q["Tags"] == tags for q in listed)


def issues(count: int) -> list[dict[str, str]]:
    """``count`` issues as the recompute writes them: teams' quotas naming instance types no node carries."""
    out = []
    for i in range(count):
        team, kind = f"team-{i // 10:04d}", f"ml.x{i % 10}.48xlarge"
        message = (
            f"quota '{team}-quota' (team {team}) ComputeQuotaResources: no node of flavor {kind} and no catalog entry "
            f"for {kind}: its size is unknown " + "x" * 600
        )
        code = "NoInstanceShape" if i % 3 else "AbsoluteLimitOnUnknownFlavor"
        out.append({"severity": "error", "code": code, "subject": f"{team}-quota/{kind}", "message": message})
    return out


def test_pool_issues_are_summarized_per_code_and_paged_by_their_own_route(world: World) -> None:
    # Given a pool with 15,000 issues (1,500 teams each naming 10 instance types the cluster lacks): ~12 MB
    found = issues(15_000)
    assert pages.json_size(found) > 2 * pages.LAMBDA_MAX_RESPONSE_BYTES
    pool = {"teams": {}, "excludedNodes": {}, "issues": found}
    world.store.put_pool(PoolRecord("demo", 1, "d1", pool, "2026-01-01T00:00:00+00:00"), expected_generation=0)
    # When GET pool is read: the first issues, counted per code, the route named, under the bound
    reply = call("GET", "/clusters/demo/pool")
    assert reply.status == 200 and reply.size < BOUND
    shown = reply.body["issues"]
    assert 0 < len(shown) <= pages.POOL_ISSUES_SAMPLE and shown == found[: len(shown)]
    assert reply.body["issuesSummary"] == {
        "total": 15_000,
        "byCode": {"AbsoluteLimitOnUnknownFlavor": 5000, "NoInstanceShape": 10_000},
        "shown": len(shown),
        "route": "/clusters/demo/issues",
    }
    # And GET issues pages through every one, in order, each page of generation 1 counting them all
    paged = every_page("/clusters/demo/issues")
    assert [i for p in paged for i in p["issues"]] == found and len(paged) > 1
    assert {(p["generation"], p["total"]) for p in paged} == {(1, 15_000)}


@pytest.mark.parametrize(
    ("query", "field"),
    [({"limit": "0"}, "limit"), ({"limit": "1001"}, "limit"), ({"NextToken": "eyJhZnRlciI6ImEifQ"}, "NextToken")],
)
def test_a_bad_issues_query_is_a_400_naming_it(world: World, query: dict[str, str], field: str) -> None:
    pool = {"teams": {}, "excludedNodes": {}, "issues": issues(3)}
    world.store.put_pool(PoolRecord("demo", 1, "d1", pool, "2026-01-01T00:00:00+00:00"), expected_generation=0)
    reply = call("GET", "/clusters/demo/issues", query=query)
    assert (reply.status, [e["field"] for e in reply.body["errors"]]) == (400, [field])


FLAVORS = [f"ml.p{i}.48xlarge" for i in range(8)]
RESOURCES = ("nvidia.com/gpu", "cpu", "memory")


def usage_sample(teams: int) -> dict[str, Any]:
    """A latest-usage document (``domain.usage.sample_document``'s shape) of ``teams`` teams on 8 flavors."""
    amounts = {"nominal": "8", "inUse": "16", "borrowed": "8", "lent": "0"}
    return {
        "cluster": "demo",
        "sampledAt": "2026-01-01T00:00:00+00:00",
        "flavors": {
            f: {r: {"capacity": "64", "pool": "8", "inUse": "8", "borrowed": "0", "idle": "0"} for r in RESOURCES}
            for f in FLAVORS
        },
        "teams": {
            f"team-{i:05d}": {
                "flavors": {f: {r: dict(amounts) for r in RESOURCES} for f in FLAVORS},
                "workloads": {"pending": 1, "reserving": 0, "admitted": 2},
                "preemptions": 0,
            }
            for i in range(teams)
        },
        "idleWhilePending": [
            {"team": f"team-{i:05d}", "flavor": FLAVORS[0], "resource": RESOURCES[0], "idle": "8", "pendingReason": "x"}
            for i in range(0, teams, 7)
        ],
    }


def test_the_latest_usage_pages_by_team_and_each_page_carries_its_teams_idle_while_pending(world: World) -> None:
    # Given a sample of 3,500 teams on 8 flavors (1,000 teams measure 1.8 MB here, 2.4 MB on the real stack): 6.4 MB
    assert pages.json_size(usage_sample(1000)) > 1.8 * 10**6
    sample = usage_sample(3500)
    assert pages.json_size(sample) > pages.LAMBDA_MAX_RESPONSE_BYTES
    cursor = UsageCursor("demo", sample["sampledAt"], sample["sampledAt"], sample)
    world.store.add_usage(cursor, {}, expected=None)
    # When every page is read: each under the bound, naming the sample, every flavor on each
    paged = every_page("/clusters/demo/usage")
    assert len(paged) > 1 and {p["sampledAt"] for p in paged} == {sample["sampledAt"]}
    assert all(p["flavors"] == sample["flavors"] and p["teamsTotal"] == 3500 for p in paged)
    # Then together they are the sample: every team once, each idle-while-pending entry with its team's page
    assert {t: v for p in paged for t, v in p["teams"].items()} == sample["teams"]
    assert [i for p in paged for i in p["idleWhilePending"]] == sample["idleWhilePending"]
    assert all(i["team"] in p["teams"] for p in paged for i in p["idleWhilePending"])


class UsageStoreOf:
    """The usage reader of a report: ``rows`` per hour bucket, one gap per hour, a cursor at ``now``."""

    def __init__(self, teams: int, hours: int) -> None:
        from fractions import Fraction

        from idleshare.adapters.ports import UsageBucket

        self.buckets = [
            UsageBucket(
                f"2026-01-01T{h:02d}",
                {(f"team-{t:04d}", f, r): (Fraction(3600), Fraction(0)) for t in range(teams) for f in FLAVORS[:2]
                 for r in RESOURCES},
                ((f"2026-01-01T{h:02d}:00:00+00:00", f"2026-01-01T{h:02d}:00:30+00:00", "SampleFailed: x" * 20),),
            )
            for h in range(hours)
        ]  # fmt: skip

    def get_cluster(self, cluster_id: str) -> object:
        return object()

    def usage_buckets(self, cluster_id: str, kind: str, first: str, last: str) -> list[Any]:
        return [b for b in self.buckets if first <= b.start <= last] if kind == "hour" else []

    def get_usage_cursor(self, cluster_id: str) -> UsageCursor:
        return UsageCursor(cluster_id, "2026-01-02T00:00:00+00:00")


def test_a_usage_report_pages_by_row_then_gap_and_every_page_is_bounded() -> None:
    from datetime import UTC, datetime

    from idleshare.service.usage import usage_report

    # Given 24 hours of 300 teams on 2 flavors x 3 resources: 43,200 rows, ~7 MB of JSON, and 24 gaps
    store = UsageStoreOf(300, 24)
    now = datetime(2026, 1, 2, tzinfo=UTC)
    args = ("demo", "2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z", "hour")
    # When every page is read (a page small enough that the rows end inside one and the gaps follow)
    got, token = [], None
    while True:
        page = usage_report(store, *args, now=now, next_token=token)  # type: ignore[arg-type]
        assert pages.json_size(page) < pages.PAGE_MAX_BYTES + 4096
        got.append(page)
        token = page.get("NextToken")
        if not token:
            break
    rows = [r for p in got for r in p["rows"]]
    # Then the pages hold every row once, in order, then every gap once
    assert len(rows) == 43_200 and len(got) > 5
    assert sum(pages.json_size(p) for p in got) > pages.LAMBDA_MAX_RESPONSE_BYTES
    keys = [(r["start"], r["team"], r["flavor"], r["resource"]) for r in rows]
    assert keys == sorted(set(keys))
    gaps = [(g["start"], g["end"]) for p in got for g in p["gaps"]]
    assert gaps == [(f"2026-01-01T{h:02d}:00:00+00:00", f"2026-01-01T{h:02d}:00:30+00:00") for h in range(24)]
