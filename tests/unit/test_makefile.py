"""`make help` lists every target a user runs, from the Makefile's own `## ` comments: a target added to .PHONY
without one, or a .PHONY name with no rule, fails here (the help cannot drift from the targets)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

REPO = Path(__file__).parents[2]
MAKEFILE = REPO / "Makefile"


def phony(makefile: Path) -> set[str]:
    """The names .PHONY declares (its line continued by backslashes)."""
    text = makefile.read_text().replace("\\\n", " ")
    return {name for line in re.findall(r"^\.PHONY:(.*)$", text, re.MULTILINE) for name in line.split()}


def rules(makefile: Path) -> set[str]:
    return set(re.findall(r"^([A-Za-z0-9_-]+):(?!=)", makefile.read_text(), re.MULTILINE))


def listed(makefile: Path) -> dict[str, str]:
    """What `make help` prints: {target: its text}."""
    proc = subprocess.run(
        ["make", "--no-print-directory", "-s", "-f", str(makefile), "help"],
        cwd=makefile.parent,
        capture_output=True,
        text=True,
        env={**os.environ, "MAKEFLAGS": ""},
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    lines = [re.fullmatch(r"make (\S+) +(.+)", line) for line in proc.stdout.splitlines()]
    assert all(lines), f"a help line not `make <target>  <text>`: {proc.stdout}"
    return {m.group(1): m.group(2) for m in lines if m}


def help_problems(makefile: Path) -> list[str]:
    declared, defined, shown = phony(makefile), rules(makefile), listed(makefile)
    return (
        [f"{t}: .PHONY but no rule" for t in sorted(declared - defined)]
        + [f"{t}: not in `make help` (give its rule a `## ` text)" for t in sorted(declared - set(shown))]
        + [f"{t}: in `make help` but not .PHONY" for t in sorted(set(shown) - declared)]
    )


def test_make_help_lists_every_phony_target_and_only_those():
    # Given the Makefile's .PHONY targets, When `make help` runs, Then it lists each, with its text, and nothing else
    assert help_problems(MAKEFILE) == []
    shown = listed(MAKEFILE)
    for target in ("sync", "npm", "synth", "deploy-check", "kube", "demo", "test", "release"):
        assert shown.get(target), target


def test_the_check_fails_on_a_target_without_help(tmp_path):
    # Given a Makefile whose .PHONY names a target with no `## ` text and one with no rule at all
    (tmp_path / "Makefile").write_text(
        ".PHONY: help shown quiet missing\n"
        "help: ## this list\n"
        "\t@awk -F ':[^#]*## ' '/^[a-zA-Z0-9_-]+:[^=]*## / {printf \"make %-13s %s\\n\", $$1, $$2}' Makefile\n"
        "shown: ## listed\n\t@true\nquiet:\n\t@true\n"
    )
    # Then the check names both
    assert help_problems(tmp_path / "Makefile") == [
        "missing: .PHONY but no rule",
        "missing: not in `make help` (give its rule a `## ` text)",
        "quiet: not in `make help` (give its rule a `## ` text)",
    ]
