"""`make demo`, the main job: ``python -m devkit.demo`` as a newcomer runs it (both scenarios, every step
rendered), on the session's kube-apiserver + Kueue instead of a new one. Given the demo, When it plays, Then it
exits 0 with every step shown and every expectation held; and a demo whose expectation is wrong exits 1 naming it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from devkit import demo, scenario
from devkit.embedded import Embedded

pytestmark = pytest.mark.integration
REPO = Path(__file__).parents[2]


@pytest.fixture(autouse=True)
def session_stack(kube, monkeypatch):
    monkeypatch.setattr(Embedded, "shared_kube", kube)
    return kube


def test_the_demo_plays_both_scenarios_step_by_step_and_every_expectation_holds(capsys):
    # Given the demo's scenarios (what `make demo` plays)
    played = [scenario.load(path) for path in demo.DEFAULT]
    # When the demo runs with its defaults
    code = demo.main([])
    out, err = capsys.readouterr()
    # Then it exits 0, shows every step of each scenario in order, and each scenario ends with nothing failed
    assert code == 0, out[-3000:] + err
    for sc in played:
        headers = re.findall(rf"── (\d+)/{len(sc.steps)} ", out.split(f"({Path(sc.source).name})", 1)[1])
        assert [int(h) for h in headers[: len(sc.steps)]] == list(range(1, len(sc.steps) + 1))
        assert re.search(
            rf"^{re.escape(sc.name)}: {len(sc.steps)} steps, \d+ expectations checked, 0 failed$", out, re.M
        )
    # And each step shows the pool, the Kueue objects written, and the usage read back; the contention
    # scenario shows the shares Kueue gave the teams
    assert out.count("\n  usage (read back from Kueue)") == sum(len(sc.steps) for sc in played)
    assert "+ created" in out and "~ ClusterQueue" in out
    assert "fair sharing (Kueue): share = borrowed x 1000 / lendable / weight" in out
    assert "2 scenario(s);" in out and "✗" not in out


def test_a_demo_scenario_with_a_wrong_expectation_exits_1_and_shows_the_mismatch(tmp_path, capsys):
    # Given the demo's first scenario cut to its first step, expecting what no engine grants
    doc = yaml.safe_load(demo.DEFAULT[0].read_text())
    for key in ("nodes", "quotas", "schedulerConfig"):
        if isinstance(doc.get(key), str):
            doc[key] = str(REPO / doc[key])
    first = doc["steps"][0]
    doc["steps"] = [
        first | {"expect": {"teams": {"ml-research": {"ml.p5.48xlarge": {"gpu": {"borrowingLimit": 999}}}}}}
    ]
    path = tmp_path / "wrong.yaml"
    path.write_text(yaml.safe_dump(doc, allow_unicode=True))
    # When the demo plays it
    code = demo.main([str(path)])
    out = capsys.readouterr().out
    # Then it exits 1 and names the team, the flavor, the limit and both values
    assert code == 1
    assert "team ml-research ml.p5.48xlarge/gpu borrowingLimit: expected 999, got 8" in out
    assert re.search(r"1 steps?, \d+ expectations checked, 1 failed", out)
