"""The HTML report in a real headless Chromium (Debian's package: `make browser`), driven by Playwright: the page
built from real documents (the engine on the example cluster, usage as the usage routes answer) opens with no
console error and no request but its own, screenshots, and shows on the page exactly the numbers of the JSON.

Without chromium the browser tests skip on a developer's machine and FAIL under CI (CI=true): a report nobody
opened is not tested. The README's screenshot is rendered from the demo's cluster: ``python -m devkit.screenshot``.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
from collections.abc import Iterator
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from idleshare.domain.model import is_accelerator
from idleshare.domain.quantity import parse_quantity
from idleshare_cli import remote, report_html
from idleshare_cli.main import main
from idleshare_cli.present import human_text
from idleshare_cli.report import period
from tests.apigw_local import ApiGatewayLocal, use_credentials
from tests.fake_admin_api import EXAMPLES, FakeAdminApi, example_pool

CLUSTER = "demo"
HEAD = {"cluster": CLUSTER, "generation": 7, "computedAt": "2026-12-01T10:00:00Z", "applyStatus": "Applied"}
FROM, TO = "2026-11-24T00:00:00Z", "2026-12-01T00:00:00Z"
HOSTILE = "<script>alert('x')</script>"  # a pending reason as Kueue could word it, if it were hostile


# ------------------------------------------------------------------------------------------- fixtures
def pool_doc() -> dict[str, Any]:
    """GET pool's answer for the example cluster: the engine's pool document and the API's head fields."""
    return {**HEAD, **example_pool()}


P5, G5, P4D, TRN1 = "ml.p5.48xlarge", "ml.g5.12xlarge", "ml.p4d.24xlarge", "ml.trn1.32xlarge"
GPU, MIG, NEURON = "nvidia.com/gpu", "nvidia.com/mig-1g.5gb", "aws.amazon.com/neurondevice"


def usage_doc() -> dict[str, Any]:
    """GET usage: ml-research borrows 6 p5 GPUs of nlp's idle nominal; infra borrows g5 GPUs and MIG slices."""

    def use(*values: str) -> dict[str, str]:
        return dict(zip(("nominal", "inUse", "borrowed", "lent"), values, strict=True))

    def flavor(*values: str) -> dict[str, str]:
        return dict(zip(("capacity", "pool", "inUse", "borrowed", "idle"), values, strict=True))

    def team(flavors: dict[str, Any], pending: int, reserving: int, admitted: int, preemptions: int) -> dict[str, Any]:
        workloads = {"pending": pending, "reserving": reserving, "admitted": admitted}
        return {"flavors": flavors, "workloads": workloads, "preemptions": preemptions}

    research = {P5: {GPU: use("24", "30", "6", "0"), "cpu": use("574350m", "400", "0", "0")},
                G5: {GPU: use("0", "10", "10", "0")}, TRN1: {NEURON: use("0", "16", "16", "0")}}  # fmt: skip
    infra = {G5: {GPU: use("0", "4", "4", "0")}, P4D: {MIG: use("0", "20", "20", "0")},
             TRN1: {NEURON: use("64", "48", "0", "0")}}  # fmt: skip
    teams = {
        "ml-research": team(research, pending=1, reserving=0, admitted=5, preemptions=2),
        "nlp": team({P5: {GPU: use("16", "4", "0", "6")}, G5: {GPU: use("8", "8", "0", "0")}}, 0, 0, 3, 0),
        "infra": team(infra, pending=2, reserving=1, admitted=4, preemptions=0),
        "vision": team({P4D: {MIG: use("112", "100", "0", "0")}}, 0, 0, 2, 1),
    }
    flavors = {
        P5: {GPU: flavor("56", "16", "34", "6", "22"), "cpu": flavor("1340150m", "382900m", "400", "0", "940150m")},
        G5: {GPU: flavor("32", "24", "22", "14", "10")},
        P4D: {MIG: flavor("280", "168", "120", "20", "160"), "nvidia.com/mig-3g.20gb": flavor("48", "48", "0", "0", "48")},
        TRN1: {NEURON: flavor("112", "48", "64", "16", "48")},
    }  # fmt: skip
    reason = f"couldn't assign flavors to pod set main: borrowing limit for {GPU} in flavor {P5} exceeded {HOSTILE}"
    pending = [
        {
            "team": "infra",
            "flavor": P5,
            "resource": GPU,
            "idle": "22",
            "pendingReason": reason,
            "cause": "not in quota",
            "why": "the instance type is not in its quota: it may borrow none",
        }
    ]
    above = [{"team": "nlp", "flavor": P5, "resource": GPU, "borrowed": "4", "limit": "2"}]
    return {"cluster": CLUSTER, "sampledAt": "2026-12-01T09:59:00Z", "flavors": flavors, "teams": teams,
            "idleWhilePending": pending, "aboveLimit": above}  # fmt: skip


def history_doc() -> dict[str, Any]:
    """GET usage?from&to&granularity=day: seven days, one of them with a gap of 8 hours."""
    rows = []
    for day in range(7):
        start = f"2026-11-{24 + day:02d}T00:00:00Z"
        short = 16 if day == 3 else 24  # the gap: 8 hours without a sample
        for team, flavor, resource, allocated, borrowed in (
            ("ml-research", P5, GPU, 24 * short, (4 + day % 3) * short),
            ("nlp", P5, GPU, (6 + day) * short, 0),
            ("nlp", G5, GPU, 8 * short, 0),
            ("infra", G5, GPU, 0, (2 + day % 2) * short),
            ("infra", TRN1, NEURON, 40 * short, 0),
            ("ml-research", TRN1, NEURON, 0, 16 * short),
            ("ml-research", P5, "cpu", 9600, None),
        ):
            hours = "0" if borrowed is None else f"{borrowed * 1000 + 500 * (day % 2)}m"
            rows.append({"start": start, "team": team, "flavor": flavor, "resource": resource,
                         "allocatedHours": str(allocated), "borrowedHours": hours})  # fmt: skip
    gaps = [{"start": "2026-11-27T06:00:00Z", "end": "2026-11-27T14:00:00Z", "reason": "kube API unreachable"}]
    return {"cluster": CLUSTER, "from": FROM, "to": TO, "granularity": "day", "rows": rows, "gaps": gaps}


def full_report() -> str:
    pool, at = pool_doc(), "2026-12-01T10:05:00Z"
    grants = {"cluster": CLUSTER, "generation": 7, "teams": pool["teams"]}
    excluded = pool["excludedNodes"]
    return report_html.render(
        pool, grants=grants, excluded_nodes=excluded, usage=usage_doc(), history=history_doc(), generated_at=at
    )


# -------------------------------------------------------------------------------------------- browser
def chromium_path() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    executable = chromium_path()
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        executable = None
    if executable is None:
        message = "no chromium (or no playwright): `make browser` installs Debian's chromium, `make sync` playwright"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(message)
        pytest.skip(message)
    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=executable, args=["--no-sandbox"], headless=True)
        yield launched
        launched.close()


class Opened:
    """A page opened from a file, with what it asked the network for and what it said on the console."""

    def __init__(self, browser: Any, page_html: str, path: Path, width: int = 1280) -> None:
        path.write_text(page_html, encoding="utf-8")
        self.url = path.as_uri()
        self.requests: list[str] = []
        self.errors: list[str] = []
        self.context = browser.new_context(viewport={"width": width, "height": 900})
        self.page = self.context.new_page()
        self.page.on("request", lambda request: self.requests.append(request.url))
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type in ("error", "warning") else None)
        self.page.on("pageerror", lambda exc: self.errors.append(str(exc)))
        self.page.goto(self.url, wait_until="load")

    def __enter__(self) -> Opened:
        return self

    def __exit__(self, *exc: object) -> None:
        self.context.close()

    def numbers(self) -> list[dict[str, Any]]:
        """Every element with ``data-field``: its field, value, team, flavor, resource and shown text."""
        found: list[dict[str, Any]] = self.page.eval_on_selector_all(
            "[data-field]",
            """els => els.map(e => ({field: e.dataset.field, value: e.dataset.value ?? null,
                team: e.dataset.team ?? null, flavor: e.dataset.flavor ?? null,
                resource: e.dataset.resource ?? null, text: e.textContent.trim(),
                tag: e.tagName.toLowerCase()}))""",
        )
        return found

    def assert_clean(self) -> None:
        assert self.errors == [], self.errors
        assert self.requests == [self.url], self.requests  # the page itself, and nothing else


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def places(tree: dict[str, dict[str, Any]]) -> list[tuple[str, str, Any]]:
    """(flavor, resource, value) of each leaf of a {flavor: {resource: value}} document."""
    return [(flavor, resource, value) for flavor, per in tree.items() for resource, value in per.items()]


def cells(numbers: list[dict[str, Any]], field: str) -> dict[tuple[str | None, str | None, str | None], dict[str, Any]]:
    """The table cells of one field, by (team, flavor, resource); each place appears once."""
    found: dict[tuple[str | None, str | None, str | None], dict[str, Any]] = {}
    for n in numbers:
        if n["field"] == field and n["tag"] == "td":
            key = (n["team"], n["flavor"], n["resource"])
            assert key not in found, f"{field} {key} shown twice"
            found[key] = n
    return found


def assert_shown(cell: dict[str, Any], value: object, resource: str) -> None:
    """The cell holds this exact quantity and shows it as the tables do."""
    assert cell["value"] == ("" if value is None else str(value)), cell
    assert cell["text"] == human_text(value, resource), cell


def check_limits(numbers: list[dict[str, Any]], teams: dict[str, Any]) -> None:
    """Every nonzero nominal / borrowing / lending limit of the JSON is on the page, equal; nothing else is."""
    for field in ("nominal", "borrowingLimit", "lendingLimit"):
        shown = cells(numbers, field)
        for (team, flavor, resource), cell in shown.items():
            assert team and flavor and resource
            assert_shown(cell, teams[team][field].get(flavor, {}).get(resource), resource)
        for team, grant in teams.items():
            for flavor, resource, value in places(grant[field]):
                assert not parse_quantity(value) or (team, flavor, resource) in shown, (field, team, flavor, resource)


NO_BORROW_LIMIT = ("strategy", "disabled")


def check_why(numbers: list[dict[str, Any]], teams: dict[str, Any]) -> None:
    expected = {(team, f, r): why for team, grant in teams.items() for f, r, why in places(grant["why"])}
    assert expected
    assert any(w["bound"] in NO_BORROW_LIMIT and w["percent"] is not None for w in expected.values())
    for key in ("basis", "pool", "percent", "percentCap", "absoluteCap", "limit", "bound"):
        shown = cells(numbers, f"why.{key}")
        assert set(shown) == set(expected), key
        for (team, flavor, resource), cell in shown.items():
            value = expected[(team, flavor, resource)][key]
            if key in ("percent", "percentCap") and expected[(team, flavor, resource)]["bound"] in NO_BORROW_LIMIT:
                value = None  # a Lend / DontLend / Disabled team: no BorrowLimit in effect, none shown (not a 50%)
            assert cell["value"] == ("" if value is None else str(value)), cell
            text = {"percent": f"{value}%", "bound": value, "basis": value}.get(key) or human_text(
                value, str(resource), "0"
            )
            assert cell["text"] == ("-" if value is None and key != "bound" else text), cell


# ----------------------------------------------------------------------------------------------- tests
def test_the_report_in_chromium_shows_the_numbers_of_the_json(browser, tmp_path):
    # Given the page of the example cluster with usage now and over seven days
    pool, usage, history = pool_doc(), usage_doc(), history_doc()
    with Opened(browser, full_report(), tmp_path / "report.html") as opened:
        page = opened.page
        # Then it loads nothing but itself and says nothing on the console
        opened.assert_clean()
        # and its screenshot is a real picture of a long page
        data = page.screenshot(path=str(tmp_path / "report.png"), full_page=True)
        width, height = png_size(data)
        assert width == 1280 and height > 1500 and len(data) > 50_000
        assert (tmp_path / "report.png").read_bytes() == data

        numbers = opened.numbers()
        # the limits and their why equal the pool document's
        check_limits(numbers, pool["teams"])
        check_why(numbers, pool["teams"])
        # and the why section says which basis the limits are on, its rule, and what each rule that won means:
        # the example's infra has no p5 in its quota ("not in quota"), ml-research an absolute limit on p5
        legend = page.locator("#why p.meta")
        assert legend.is_visible()
        said = legend.inner_text()
        assert "Quota basis: borrowing limit = BorrowLimit% x the team's quota" in said and "Pool basis" not in said
        assert "not in quota = the instance type is not in the team's quota" in said
        assert "absolute = the AbsoluteBorrowLimits cap" in said
        assert {c["text"] for c in cells(numbers, "why.basis").values()} == {"Quota"}
        # each flavor's usage equals GET usage's, in the table and beside its bar
        for field in ("inUse", "borrowed", "idle"):
            shown = cells(numbers, field)
            for flavor, resource, u in places(usage["flavors"]):
                assert_shown(shown[(None, flavor, resource)], u[field], resource)
        bars = {(n["flavor"], n["resource"], n["field"]): n for n in numbers if n["tag"] == "b" and n["flavor"]}
        for flavor, resource, u in places(usage["flavors"]):
            if is_accelerator(resource):
                guaranteed = parse_quantity(u["inUse"]) - parse_quantity(u["borrowed"])
                assert bars[(flavor, resource, "guaranteedInUse")]["text"] == str(guaranteed)
                for field in ("capacity", "borrowed", "idle"):
                    assert bars[(flavor, resource, field)]["value"] == u[field]
        # the bar's segments are drawn to scale: p5 GPUs 28 guaranteed, 6 borrowed, 22 idle of 56
        widths = page.eval_on_selector_all(
            f'[data-bar="{P5}|{GPU}"] rect[data-segment]', "rs => rs.map(r => r.getBBox().width)"
        )
        assert [round(w / sum(widths) * 56, 3) for w in widths] == [28, 6, 22]
        # each team's use, borrowing and lending equal the snapshot's, with its workloads and preemptions
        for field in ("inUse", "borrowed", "lent"):
            shown = cells(numbers, field)
            for team, t in usage["teams"].items():
                for flavor, resource, u in places(t["flavors"]):
                    assert_shown(shown[(team, flavor, resource)], u[field], resource)
        for team, t in usage["teams"].items():
            counts = {n["field"]: n for n in numbers if n["team"] == team and n["tag"] == "b"}
            for key, value in [*t["workloads"].items(), ("preemptions", t["preemptions"])]:
                assert counts[key]["value"] == str(value) and counts[key]["text"] == str(value)
        # the period's totals are the exact sums of its rows, and the chart's columns add up to them
        totals: dict[tuple[str, str, str, str], Fraction] = {}
        for row in history["rows"]:
            for field in ("allocatedHours", "borrowedHours"):
                key = (row["team"], row["flavor"], row["resource"], field)
                totals[key] = totals.get(key, Fraction(0)) + parse_quantity(row[field])
        columns: dict[tuple[str, str, str, str], Fraction] = {}
        for chart in page.eval_on_selector_all("svg[data-chart]", "cs => cs.map(c => c.dataset.chart)"):
            flavor, resource = chart.split("|")
            for team, field, value in page.eval_on_selector_all(
                f'svg[data-chart="{chart}"] rect[data-field]',
                "rs => rs.map(r => [r.dataset.team, r.dataset.field, r.dataset.value])",
            ):
                key = (team, flavor, resource, field)
                columns[key] = columns.get(key, Fraction(0)) + parse_quantity(value)
        for field in ("allocatedHours", "borrowedHours"):
            shown = cells(numbers, f"total.{field}")
            assert {(*k, field) for k in shown} == {k for k in totals if k[3] == field}
            for (team, flavor, resource), cell in shown.items():
                assert parse_quantity(cell["value"]) == totals[(team, flavor, resource, field)]
                if is_accelerator(resource):  # charted; cpu is in the folded table only
                    assert columns.get((team, flavor, resource, field), 0) == totals[(team, flavor, resource, field)]
        assert page.locator("svg[data-chart]").count() == 3  # p5 and g5 GPUs, trn1 Neuron devices
        assert page.locator("rect[data-gap-rect]").count() == 3  # the gap, on each chart
        assert page.locator("tr[data-gap]").inner_text().split("\t")[-1] == "kube API unreachable"
        # excluded nodes with their reasons, idle-while-pending with Kueue's words shown as text, run as nothing
        excluded = page.eval_on_selector_all(
            "tr[data-excluded-node]", "rs => rs.map(r => [r.dataset.excludedNode, r.cells[1].textContent])"
        )
        assert dict(excluded) == pool["excludedNodes"] and len(excluded) == 4
        pending = page.locator("tr[data-idle-pending]")
        assert pending.count() == 1 and HOSTILE in pending.inner_text()
        # beside Kueue's words, the cause idleshare knows; a team above its lowered limit flagged
        assert pending.locator("td[data-cause]").inner_text().startswith("not in quota: the instance type is not")
        assert page.locator("tr[data-above-limit]").inner_text().split("\t") == ["nlp", P5, "gpu", "4", "2"]
        assert page.locator("script").count() == 0
        assert cells(numbers, "idleWhilePending")[("infra", P5, GPU)]["value"] == "22"
        assert page.locator("[data-usage=none]").count() == 0


def test_plan_format_html_shows_the_pool_limits_and_why_and_says_usage_needs_a_cluster(browser, tmp_path, capsys):
    # Given `idleshare plan --format html` on the example cluster (offline: no Kueue status)
    files = [EXAMPLES / "nodes.json", EXAMPLES / "quotas.json", EXAMPLES / "scheduler-config.json"]
    argv = ["plan", "--nodes", str(files[0]), "--quotas", str(files[1]), "--scheduler-config", str(files[2])]
    assert main([*argv, "--format", "html"]) == 0
    page_html = capsys.readouterr().out
    assert main([*argv, "--format", "json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    # "lendable pool" means one thing or is not said: the bars show the unallocated quota (the Cohort's own), the
    # why table the pool a team sees (unallocated + what lenders do not use)
    assert "lendable pool" not in page_html.lower()
    assert "unallocated (the Cohort" in page_html and "pool the team sees (unallocated + lenders" in page_html
    with Opened(browser, page_html, tmp_path / "plan.html") as opened:
        opened.assert_clean()
        assert png_size(opened.page.screenshot(path=str(tmp_path / "plan.png"), full_page=True))[1] > 1000
        numbers = opened.numbers()
        # Then its limits, why and pool table are the plan's JSON
        check_limits(numbers, plan["teams"])
        check_why(numbers, plan["teams"])
        for field in ("capacity", "allocated", "unallocated"):
            for (_, flavor, resource), cell in cells(numbers, field).items():
                assert flavor and resource
                assert_shown(cell, plan[field][flavor].get(resource), resource)
        # and instead of usage it says a deployed cluster has it
        notes = opened.page.locator("[data-usage=none]")
        assert notes.count() == 3 and notes.first.is_visible()
        assert "needs a deployed cluster" in notes.first.inner_text()
        assert not cells(numbers, "inUse") and opened.page.locator("svg[data-chart]").count() == 0


# --------------------------------------------------------------------------------------- the command
class UsageApi(FakeAdminApi):
    """The fake admin API with the usage routes: answered, or 404 as before any sample."""

    def __init__(self, usage: bool = True) -> None:
        super().__init__()
        self.pool = {**self.pool, "excludedNodes": example_pool()["excludedNodes"]}
        self.usage = usage
        self.POOL_SAMPLE = self.TEAMS_SAMPLE = 1  # GET pool shows one of each: the rest come from their pages

    def __call__(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        parts = event["path"].strip("/").split("/")
        if event["httpMethod"] == "GET" and parts[2:] == ["usage"]:
            if not self.usage:
                return self.reply(404, {"message": "no usage sampled yet for cluster 'demo'", "errors": []})
            query = event["queryStringParameters"] or {}
            if "from" in query:
                return self.reply(200, {**history_doc(), "from": query["from"], "to": query["to"]})
            return self.reply(200, usage_doc())
        return super().__call__(event, context)


@pytest.fixture
def gateway(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[UsageApi, ApiGatewayLocal]]:
    use_credentials(monkeypatch)
    monkeypatch.setattr(remote, "sleep", lambda seconds: None)
    fake = UsageApi()
    with ApiGatewayLocal(fake) as gate:
        yield fake, gate


def test_report_reads_pool_grants_every_excluded_node_and_usage_through_the_api(gateway, tmp_path, capsys):
    _, gate = gateway
    out = tmp_path / "report.html"
    argv = ["report", "--cluster", CLUSTER, "--html", str(out), "--endpoint", gate.url]
    code = main([*argv, "--from", "2026-11-24", "--to", "2026-12-01T00:00:00Z", "--granularity", "day"])
    printed = capsys.readouterr()
    assert (code, printed.err) == (0, "") and printed.out.startswith(f"wrote {out} (")
    assert "usage 2026-11-24T00:00:00Z to 2026-12-01T00:00:00Z" in printed.out
    calls = [(e["path"], e["queryStringParameters"]) for e in gate.requests]
    assert ("/clusters/demo/usage", {"from": FROM, "to": TO, "granularity": "day", "limit": "10000"}) in calls
    assert ("/clusters/demo/usage", {"limit": "10000"}) in calls
    assert [p for p, _ in calls].count("/clusters/demo/excluded-nodes") == 2  # 4 nodes, 2 a page
    assert [p for p, _ in calls].count("/clusters/demo/grants") == 2  # 4 teams, 2 a page
    page = out.read_text()
    assert page.startswith("<!DOCTYPE html>") and 'data-field="total.allocatedHours"' in page
    assert page.count("data-excluded-node=") == 4 and "No usage yet" not in page
    # --format json: the documents the page was built from
    assert main([*argv, "--format", "json", "--granularity", "hour"]) == 0
    docs = json.loads(capsys.readouterr().out)
    assert docs["granularity"] == "hour" and docs["usage"] == usage_doc() and docs["usageNote"] is None


def test_report_without_usage_routes_still_writes_the_page_and_says_no_usage_yet(browser, gateway, tmp_path, capsys):
    fake, gate = gateway
    fake.usage = False
    out = tmp_path / "report.html"
    assert main(["report", "--cluster", CLUSTER, "--html", str(out), "--endpoint", gate.url]) == 0
    assert "no usage yet" in capsys.readouterr().out
    with Opened(browser, out.read_text(), tmp_path / "served.html") as opened:
        opened.assert_clean()
        note = opened.page.locator("[data-usage=none]").first
        assert note.is_visible() and "No usage yet: GET /clusters/demo/usage answered HTTP 404" in note.inner_text()
        check_limits(opened.numbers(), example_pool()["teams"])


def test_report_arguments(capsys):
    now = datetime(2026, 12, 1, 10, 30, tzinfo=UTC)  # the last 7 days by default
    assert period(None, None, now=now) == ("2026-11-24T10:30:00Z", "2026-12-01T10:30:00Z")
    assert period("2026-11-30T12:00:00+02:00", "2026-12-01") == ("2026-11-30T10:00:00Z", "2026-12-01T00:00:00Z")
    for argv, message in (
        (["--html", "x.html", "--from", "2026-12-02", "--to", "2026-12-01"], "must be before --to"),
        (["--html", "x.html", "--from", "yesterday"], "not an ISO 8601 date"),
        (["--html", "-", "--format", "json"], "cannot go there too"),
    ):
        assert main(["report", "--cluster", "c", *argv, "--endpoint", "http://127.0.0.1:9/"]) == 2
        assert message in capsys.readouterr().err


def test_a_pool_stored_before_the_basis_is_explained_on_the_pool_basis():
    # Given a pool document stored before derivations named their basis (the Pool basis was the only one)
    pool = pool_doc()
    for grant in pool["teams"].values():
        for per in grant["why"].values():
            for d in per.values():
                del d["basis"]
    page = report_html.render(pool, generated_at="2026-12-01T10:05:00Z")
    # Then the why section gives the Pool basis's rule, not the Quota basis's
    why = page.split('<section id="why">', 1)[1].split("</p>", 1)[0]
    assert "Pool basis: borrowing limit = min(BorrowLimit% x pool seen, absolute cap, pool seen)" in why
    assert "Quota basis" not in why


def test_everything_shown_is_escaped():
    pool = pool_doc()
    pool["summary"] = "<b>bold</b>"
    pool["teams"]["<img src=x onerror=alert(1)>"] = pool["teams"].pop("nlp")
    pool["excludedNodes"] = {'node"><script>x</script>': "NotReady & <gone>"}
    page = report_html.render(pool, usage_note="<i>")
    assert "<img src=x" not in page and "<script>" not in page and "<b>bold" not in page and "<i>" not in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page and "NotReady &amp; &lt;gone&gt;" in page
    assert "http://" not in page and "https://" not in page and "src=" not in page.replace("src=x", "")


def _shortfall_pool() -> dict[str, Any]:
    p4d, p5, mig, gpu = "ml.p4d.24xlarge", "ml.p5.48xlarge", "nvidia.com/mig-1g.5gb", "nvidia.com/gpu"
    why = {p5: {gpu: {"basis": "Quota", "bound": "percentage of quota", "percent": 50, "limit": "4"}}}
    borrower = {"strategy": "LendAndBorrow", "activationState": "Enabled", "nominal": {p5: {gpu: "8"}},
                "borrowingLimit": {p5: {gpu: "4"}}, "why": why}  # fmt: skip
    lender = {"strategy": "DontLend", "activationState": "Enabled", "nominal": {p4d: {mig: "56"}}, "why": {}}
    return {
        "idleResourceSharing": "Enabled",
        "capacity": {p5: {gpu: "16"}, p4d: {mig: "112"}},
        "allocated": {p5: {gpu: "24"}, p4d: {mig: "56"}},
        "unallocated": {p4d: {mig: "56"}},
        "shortfall": {p5: {gpu: "8"}},
        "teams": {"ml": borrower, "vision": lender},
    }


def test_the_report_shows_the_shortfall_per_flavor_with_its_amounts() -> None:
    from idleshare_cli.report_html import render

    page = render(_shortfall_pool())
    row = page.split('<tr data-shortfall="ml.p5.48xlarge|nvidia.com/gpu">', 1)[1].split("</tr>", 1)[0]
    assert 'data-field="shortCapacity" data-value="16"' in row and 'data-field="shortGuaranteed" data-value="24"' in row
    assert 'data-field="short" data-value="8"' in row
    assert "data-shortfall=" not in render({**_shortfall_pool(), "shortfall": {}})


def test_the_report_names_capacity_no_team_may_borrow_on_the_quota_basis_and_why() -> None:
    from idleshare_cli.report_html import render, unborrowable_reason

    pool = _shortfall_pool()
    page = render(pool)
    row = page.split('<tr data-unborrowable="ml.p4d.24xlarge|nvidia.com/mig-1g.5gb">', 1)[1].split("</tr>", 1)[0]
    assert 'data-value="56"' in row and "no borrowing team&#x27;s quota names ml.p4d.24xlarge" in row
    assert "or the cluster&#x27;s Pool basis, makes it lendable" in row  # and what would make it lendable
    # once a borrowing team's quota names it and gives it a limit, it is borrowable: not listed
    ml = pool["teams"]["ml"]
    ml["nominal"]["ml.p4d.24xlarge"] = {"nvidia.com/mig-1g.5gb": "8"}
    ml["borrowingLimit"]["ml.p4d.24xlarge"] = {"nvidia.com/mig-1g.5gb": "4"}
    assert unborrowable_reason(pool, pool["teams"], "ml.p4d.24xlarge", "nvidia.com/mig-1g.5gb") is None
    # idle sharing off: the unallocated is not lent, said as such
    off = {**_shortfall_pool(), "idleResourceSharing": "Disabled"}
    assert "IdleResourceSharing is Disabled" in str(
        unborrowable_reason(off, off["teams"], "ml.p4d.24xlarge", "nvidia.com/mig-1g.5gb")
    )
