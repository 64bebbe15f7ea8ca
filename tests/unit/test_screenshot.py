"""`python -m devkit.screenshot`: the README's local route to the report writes where it is told, never over the
docs' screenshot unless asked (its default, for the docs)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from devkit import screenshot

README = Path(__file__).parents[2] / "docs" / "getting-started.md"  # what an operator sees, linked from README.md


@pytest.fixture
def rendered(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    steps: list[int] = []

    def page(step: int) -> str:
        steps.append(step)
        return f"<html><body>step {step}</body></html>"

    monkeypatch.setattr(screenshot, "page_of", page)
    return steps


def test_out_html_writes_the_page_there_and_leaves_the_docs_screenshot(tmp_path, rendered, capsys):
    before = screenshot.DEFAULT_OUT.stat().st_mtime_ns
    out = tmp_path / "mine.html"
    assert screenshot.main(["--out", str(out), "--step", "2"]) == 0
    assert out.read_text(encoding="utf-8") == "<html><body>step 2</body></html>" and rendered == [2]
    assert screenshot.DEFAULT_OUT.stat().st_mtime_ns == before
    assert f"wrote {out.resolve()}" in capsys.readouterr().out


def test_the_path_is_given_once(tmp_path, rendered):
    with pytest.raises(SystemExit) as exited:
        screenshot.main([str(tmp_path / "a.png"), "--out", str(tmp_path / "b.png")])
    assert exited.value.code == 2 and rendered == []


def test_the_readmes_local_route_writes_outside_the_docs():
    commands = re.findall(r"`(uv run --frozen python -m devkit\.screenshot[^`]*)`", README.read_text(encoding="utf-8"))
    assert commands, "the README names no local route to the report"
    for command in commands:
        out = command.split("--out", 1)[1].split()[0] if "--out" in command else str(screenshot.DEFAULT_OUT)
        assert not Path(out).resolve().is_relative_to(screenshot.ROOT / "docs"), command
