"""`make release` (devkit/release.py) tags v<version> only from a clean tree whose CHANGELOG.md has the version's
dated section with its upgrade notes, and refuses otherwise, naming why and tagging nothing. Each case is a git
repository of its own (tmp_path): the checkout's tags are never touched."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from devkit import release

REPO = Path(__file__).parents[2]

SECTION = """## [{version}] - {date}

### Added

- **Something**: what it does.

### Upgrade notes

- Stored data: none changed.
"""


def changelog(version: str = "1.2.0", date: str = "2026-12-07", *, unreleased: str = "Nothing yet.\n") -> str:
    older = SECTION.format(version="1.1.0", date="2026-11-01")
    return f"# Changelog\n\n## [Unreleased]\n\n{unreleased}\n{SECTION.format(version=version, date=date)}\n{older}"


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com"}
    env |= {"GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=env).stdout


def checkout(tmp_path: Path, *, version: str = "1.2.0", log: str | None = None) -> Path:
    """A committed checkout at ``version`` with ``log`` as its CHANGELOG.md (None: none)."""
    repo = tmp_path / "repo"
    (repo / release.VERSION_FILE).parent.mkdir(parents=True)
    (repo / release.VERSION_FILE).write_text(f'"""The package."""\n\n__version__ = "{version}"\n')
    if log is not None:
        (repo / release.CHANGELOG).write_text(log)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.name", "t")  # the tagger too (release.main runs git with the caller's environment)
    git(repo, "config", "user.email", "t@example.com")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "the release")
    return repo


def run(repo: Path, capsys: pytest.CaptureFixture[str], *flags: str) -> tuple[int, str, str]:
    code = release.main(["--repo", str(repo), *flags])
    out, err = capsys.readouterr()
    return code, out, err


def tags(repo: Path) -> list[str]:
    return git(repo, "tag", "--list").split()


def test_a_clean_tree_with_the_dated_section_is_tagged_with_that_section(tmp_path, capsys):
    # Given a clean checkout at 1.2.0 whose changelog has `## [1.2.0] - 2026-12-07` with its upgrade notes
    repo = checkout(tmp_path, log=changelog())
    # When `--check` runs, Then it could be cut and nothing is tagged
    assert run(repo, capsys, "--check")[0] == 0 and tags(repo) == []
    # When the release is cut
    code, out, err = run(repo, capsys)
    # Then v1.2.0 is an annotated tag on the commit, its message the 1.2.0 section (not 1.1.0's), and how to push it
    assert (code, err) == (0, "")
    assert tags(repo) == ["v1.2.0"] and git(repo, "cat-file", "-t", "v1.2.0").strip() == "tag"
    assert git(repo, "rev-parse", "v1.2.0^{commit}") == git(repo, "rev-parse", "HEAD")
    message = git(repo, "tag", "-l", "--format=%(contents)", "v1.2.0")
    assert message.startswith("idleshare 1.2.0\n\n## [1.2.0] - 2026-12-07\n") and "Stored data: none" in message
    assert "1.1.0" not in message
    assert "git push origin v1.2.0" in out
    # And a second run is refused: the tag exists
    code, _, err = run(repo, capsys)
    assert code == 1 and "the tag v1.2.0 exists already" in err


@pytest.mark.parametrize(
    ("log", "reason"),
    [
        (None, "CHANGELOG.md is missing"),
        (changelog(version="1.1.9"), "CHANGELOG.md has no section for 1.2.0"),
        (changelog().replace("## [1.2.0] - 2026-12-07", "## [1.2.0]"), "the section of 1.2.0 has no date"),
        (changelog(date="2026-13-40"), "the section of 1.2.0 is dated 2026-13-40, not a date"),
        (
            changelog(unreleased=SECTION.format(version="1.3.0", date="2026-12-08")),
            "the newest release section is 1.3.0, not 1.2.0",
        ),
        (changelog().replace("### Upgrade notes\n\n- Stored data: none changed.\n", "", 1), "no `### Upgrade notes`"),
        (changelog().replace("- Stored data: none changed.", "- Run make sync.", 1), "what happens to the stored data"),
        (changelog() + SECTION.format(version="1.2.0", date="2026-12-08"), "has 2 sections for 1.2.0"),
    ],
    ids=[
        "no-changelog",
        "no-section",
        "undated",
        "bad-date",
        "not-newest",
        "no-upgrade-notes",
        "no-stored-data",
        "twice",
    ],
)
def test_a_changelog_without_the_versions_release_is_refused(tmp_path, capsys, log, reason):
    # Given a clean checkout at 1.2.0 whose changelog lacks what the release needs
    repo = checkout(tmp_path, log=log)
    # When the release is cut
    code, out, err = run(repo, capsys)
    # Then it is refused naming why, and nothing is tagged
    assert code == 1 and reason in err and "refused, nothing tagged" in err and out == ""
    assert tags(repo) == []


@pytest.mark.parametrize("change", ["modified", "untracked", "staged"])
def test_a_tree_with_changes_is_refused(tmp_path, capsys, change):
    # Given a checkout whose changelog is ready but whose tree has a change not committed
    repo = checkout(tmp_path, log=changelog())
    if change == "modified":
        (repo / release.CHANGELOG).write_text(changelog() + "\nmore\n")
    else:
        (repo / "notes.txt").write_text("draft")
        if change == "staged":
            git(repo, "add", "notes.txt")
    # When the release is cut
    code, _, err = run(repo, capsys)
    # Then it is refused naming the change, nothing tagged
    assert code == 1 and "uncommitted change(s): commit or stash them first" in err
    assert ("CHANGELOG.md" if change == "modified" else "notes.txt") in err
    assert tags(repo) == []


@pytest.mark.parametrize("version", ["1.2", "v1.2.0", "01.2.0", "1.2.0-rc1"])
def test_a_version_that_is_not_x_y_z_is_refused(tmp_path, capsys, version):
    repo = checkout(tmp_path, version=version, log=changelog(version=version))
    code, _, err = run(repo, capsys)
    assert code == 1 and f"__version__ {version!r} is not X.Y.Z" in err and tags(repo) == []


def test_make_release_refuses_a_dirty_tree(tmp_path):
    # Given a checkout with an uncommitted change, When `make release` runs on it (RELEASE_FLAGS names the checkout)
    repo = checkout(tmp_path, log=changelog())
    (repo / "notes.txt").write_text("draft")
    proc = subprocess.run(
        ["make", "--no-print-directory", "-s", "release", f"RELEASE_FLAGS=--repo {repo}"],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "MAKEFLAGS": ""},
        timeout=300,
    )
    # Then make fails with the reason, and nothing is tagged
    assert proc.returncode != 0 and "uncommitted change(s)" in proc.stderr, proc.stderr
    assert tags(repo) == []


def test_this_checkouts_changelog_has_the_versions_release():
    # Given this checkout's version (the one place) and CHANGELOG.md
    version = release.read_version(REPO)
    # Then the changelog has its dated section, first, with upgrade notes naming the stored data
    problems, found = release.changelog_problems((REPO / release.CHANGELOG).read_text(), version)
    assert problems == [] and found is not None and found.version == version
