"""`idleshare pause` / `idleshare resume` against the API Gateway emulator wrapping a fake admin API, and what an
operator sees of a paused cluster: `pool show`, `pool history` and the HTML report."""

from __future__ import annotations

import json

from idleshare_cli.report_html import render
from tests.apigw_local import ApiGatewayLocal
from tests.fake_admin_api import FakeAdminApi
from tests.unit.test_cli_remote import run, sent


def test_pause_prints_who_and_why_and_pool_show_and_history_show_it(
    api: ApiGatewayLocal, fake: FakeAdminApi, capsys
) -> None:
    code, out, _ = run(api, capsys, "pause", "--cluster", "demo", "--reason", "GPU maintenance")
    assert code == 0 and "is now paused since" in out and "(GPU maintenance)" in out and "user/admin" in out
    assert json.loads(api.requests[-1]["body"]) == {"reason": "GPU maintenance"}
    code, out, _ = run(api, capsys, "pool", "show", "--cluster", "demo")
    assert code == 0 and out.startswith("PAUSED: paused since 2026-12-01T10:00:00+00:00 by ")
    assert "(GPU maintenance); 0 recompute(s) skipped" in out
    code, out, _ = run(api, capsys, "pool", "history", "--cluster", "demo")
    assert code == 0 and "Pauses and resumes, newest first" in out and "GPU maintenance" in out


def test_pausing_again_says_it_already_was_and_resume_names_the_recompute(api, fake, capsys) -> None:
    run(api, capsys, "pause", "--cluster", "demo")
    code, out, _ = run(api, capsys, "pause", "--cluster", "demo")
    assert code == 0 and "was already paused" in out
    code, out, _ = run(api, capsys, "resume", "--cluster", "demo", "--format", "json")
    assert code == 0 and json.loads(out)["requestId"] == "req-resume"
    code, out, _ = run(api, capsys, "pool", "show", "--cluster", "demo")
    assert "PAUSED" not in out
    code, out, _ = run(api, capsys, "resume", "--cluster", "demo")
    assert "is not paused" in out
    assert [e["action"] for e in fake.pauses] == ["Resumed", "Paused"]


def test_a_bad_reason_or_cluster_exits_2_and_sends_nothing(api, capsys) -> None:
    code, _, err = run(api, capsys, "pause", "--cluster", "demo", "--reason", "x" * 1025)
    assert code == 2 and "--reason" in err
    code, _, err = run(api, capsys, "resume", "--cluster", " ")
    assert code == 2 and "--cluster" in err
    assert sent(api) == []


def test_an_unknown_cluster_exits_1_naming_it(api, capsys) -> None:
    code, _, err = run(api, capsys, "pause", "--cluster", "nope")
    assert code == 1 and "nope" in err


def test_the_report_shows_a_paused_banner_only_when_paused() -> None:
    pool = {"cluster": "demo", "generation": 3}
    paused = {
        "paused": True,
        "since": "2026-12-01T10:00:00+00:00",
        "by": "arn:aws:iam::1:user/ops",
        "reason": "<drain>",
    }
    page = render({**pool, "pause": paused})
    assert 'data-field="pause"' in page and "by arn:aws:iam::1:user/ops (&lt;drain&gt;)" in page
    assert 'data-field="pause"' not in render({**pool, "pause": {"paused": False}})
