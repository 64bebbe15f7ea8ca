"""The `--bus` commands events/README.md shows, run as written on moto's EventBridge (the bus's name for its
placeholder), and `replay --bus` without a region: one line naming it, exit 2 (no traceback). The `--local` ones run
on the real stack in tests/integration/test_docs_commands.py."""

from __future__ import annotations

import glob
import shlex
from pathlib import Path

import boto3
import pytest
from moto import mock_aws

from idleshare_cli.main import main
from tests.aws_env import fake_aws_env

ROOT = Path(__file__).parents[2]
BUS = "idleshare-BusReplay"


def readme_commands(doc: str = "events/README.md") -> list[str]:
    """Every `./idleshare …` line of the document's sh/bash blocks, comments dropped."""
    out, inside = [], False
    for line in (ROOT / doc).read_text().splitlines():
        if line.startswith("```"):
            inside = not inside and line.strip("`").strip() in ("sh", "bash")
            continue
        if inside and line.startswith("./idleshare "):
            out.append(line.split("  #")[0].strip())
    return out


def argv_of(command: str, *, bus: str = BUS, optional: bool = True) -> list[str]:
    """The command's argv as a shell runs it from the root: globs expanded, the bus placeholder named, an optional
    `[…]` part kept or dropped."""
    command = command.replace("idleshare-Bus…", bus)
    if "[" in command:
        head, rest = command.split("[", 1)
        inner, tail = rest.split("]", 1)
        command = head + (inner if optional else "") + tail
    words = shlex.split(command)[1:]
    argv: list[str] = []
    for w in words:
        matches = sorted(glob.glob(str(ROOT / w))) if "*" in w else []
        argv += [str(Path(m).relative_to(ROOT)) for m in matches] if matches else [w]
    return argv


def test_the_readme_shows_local_and_bus_replays() -> None:
    commands = readme_commands()
    assert sum("--local" in c for c in commands) >= 3
    assert sum("--bus" in c for c in commands) >= 1


@pytest.mark.parametrize("optional", [True, False], ids=["with-region", "region-from-env"])
def test_every_bus_command_puts_every_event_on_the_bus(optional, monkeypatch, capsys) -> None:
    monkeypatch.chdir(ROOT)
    with fake_aws_env(AWS_DEFAULT_REGION="us-west-2"), mock_aws():
        boto3.client("events", region_name="us-west-2").create_event_bus(Name=BUS)
        for command in [c for c in readme_commands() if "--bus" in c]:
            argv = argv_of(command, optional=optional)
            paths = [a for a in argv if a.endswith(".json")]
            assert len(paths) >= 3, argv  # the glob matched idleshare's own events
            assert main(argv) == 0
            out = capsys.readouterr().out
            assert f"{len(paths)} of {len(paths)} events put on {BUS}" in out


def test_bus_without_a_region_is_one_line_naming_it(monkeypatch, capsys, tmp_path) -> None:
    monkeypatch.chdir(ROOT)
    for var in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    argv = ["replay", "events/inbound/idleshare-node-changed.json", "--bus", BUS]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "--region" in err and "region" in err.split(":", 1)[1]
