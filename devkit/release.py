"""``make release``: cut a release of idleshare — the annotated tag ``v<version>`` on the current commit.

The version is ``functions/idleshare/__init__.py``'s ``__version__`` (the one place). Refused, nothing tagged,
each reason named: a working tree with changes (tracked or not); a version that is not ``X.Y.Z``; a CHANGELOG.md
without a section ``## [X.Y.Z] - YYYY-MM-DD`` for it (undated, ``Unreleased`` or a date that is not one), or whose
newest release section is another version, or whose section has no ``### Upgrade notes`` saying what happens to the
stored data; a tag ``vX.Y.Z`` that exists already. The tag's message is the release's section; nothing is pushed.

``python -m devkit.release [--check] [--repo DIR]``: ``--check`` says whether the release could be cut, tagging
nothing; ``--repo`` the checkout (default: this one).
"""

from __future__ import annotations

import datetime
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
VERSION_FILE = Path("functions/idleshare/__init__.py")
CHANGELOG = Path("CHANGELOG.md")

_VERSION = re.compile(r'^__version__ = "([^"]*)"$', re.MULTILINE)
_SEMVER = re.compile(r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)")
_SECTION = re.compile(r"^## \[([^\]]+)\](.*)$", re.MULTILINE)
_DATE = re.compile(r" - (\d{4}-\d{2}-\d{2})")


class ReleaseRefused(Exception):
    """Why no release is cut (each reason a line)."""


@dataclass(frozen=True)
class Release:
    version: str
    date: str
    notes: str
    """The changelog's section for the version: what the tag's message says."""

    @property
    def tag(self) -> str:
        return f"v{self.version}"


def read_version(repo: Path) -> str:
    """``__version__`` as ``functions/idleshare/__init__.py`` writes it (read as text: any checkout, no import)."""
    try:
        found = _VERSION.findall((repo / VERSION_FILE).read_text())
    except OSError as exc:
        raise ReleaseRefused(f"{VERSION_FILE}: cannot be read ({exc.strerror})") from None
    if len(found) != 1:
        raise ReleaseRefused(f'{VERSION_FILE}: no one line `__version__ = "X.Y.Z"` (found {len(found)})')
    if not _SEMVER.fullmatch(found[0]):
        raise ReleaseRefused(f"{VERSION_FILE}: __version__ {found[0]!r} is not X.Y.Z (Semantic Versioning)")
    return found[0]


def changelog_problems(text: str, version: str) -> tuple[list[str], Release | None]:
    """What CHANGELOG.md lacks for releasing ``version``; the release when nothing."""
    sections = list(_SECTION.finditer(text))
    released = [s for s in sections if s.group(1).lower() != "unreleased"]
    mine = [s for s in released if s.group(1) == version]
    want = f"## [{version}] - YYYY-MM-DD"
    if not mine:
        return [f"{CHANGELOG} has no section for {version}: add `{want}` (move [Unreleased]'s entries under it)"], None
    if len(mine) > 1:
        return [f"{CHANGELOG} has {len(mine)} sections for {version}: keep one"], None
    problems: list[str] = []
    heading = mine[0]
    date = _DATE.fullmatch(heading.group(2))
    if date is None:
        problems.append(f"{CHANGELOG}: the section of {version} has no date: `{want}`, not `{heading.group(0)}`")
    else:
        try:
            datetime.date.fromisoformat(date.group(1))
        except ValueError:
            problems.append(f"{CHANGELOG}: the section of {version} is dated {date.group(1)}, not a date")
    if released[0] is not heading:
        problems.append(
            f"{CHANGELOG}: the newest release section is {released[0].group(1)}, not {version}: "
            f"the section of the version released comes first (after [Unreleased])"
        )
    following = [s.start() for s in sections if s.start() > heading.start()]
    body = text[heading.end() : following[0] if following else len(text)].strip()
    upgrade = re.search(r"^### Upgrade notes$(.*?)(?=^### |\Z)", body, re.MULTILINE | re.DOTALL)
    if upgrade is None or not upgrade.group(1).strip():
        problems.append(f"{CHANGELOG}: the section of {version} has no `### Upgrade notes`")
    elif "stored data" not in upgrade.group(1).lower():
        problems.append(
            f"{CHANGELOG}: the upgrade notes of {version} do not say what happens to the stored data "
            f"(a line `Stored data: ...`, `none changed` when none did)"
        )
    if problems:
        return problems, None
    assert date is not None
    return [], Release(version, date.group(1), f"{heading.group(0)}\n\n{body}")


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=False)


def tree_problems(repo: Path) -> list[str]:
    """A working tree that is not the commit about to be tagged: its changes, tracked or not."""
    status = _git(repo, "status", "--porcelain", "--untracked-files=normal")
    if status.returncode != 0:
        return [f"{repo} is not a git checkout: {status.stderr.strip()}"]
    changed = status.stdout.splitlines()
    if not changed:
        return []
    shown = "; ".join(line.strip() for line in changed[:10]) + ("; ..." if len(changed) > 10 else "")
    return [f"the working tree has {len(changed)} uncommitted change(s): commit or stash them first ({shown})"]


def tag_problems(repo: Path, tag: str) -> list[str]:
    found = _git(repo, "rev-parse", "--verify", "--quiet", f"refs/tags/{tag}")
    return [f"the tag {tag} exists already (at {found.stdout.strip()[:12]})"] if found.returncode == 0 else []


def prepare(repo: Path) -> Release:
    """The release the checkout would cut, or ReleaseRefused naming every reason it cannot."""
    version = read_version(repo)
    try:
        text = (repo / CHANGELOG).read_text()
    except OSError:
        raise ReleaseRefused(f"{CHANGELOG} is missing: it needs a section `## [{version}] - YYYY-MM-DD`") from None
    problems, release = changelog_problems(text, version)
    problems += tree_problems(repo) + tag_problems(repo, f"v{version}")
    if problems or release is None:
        raise ReleaseRefused("\n".join(problems))
    return release


def cut(repo: Path, release: Release) -> str:
    """Tag the current commit ``v<version>`` (annotated, the section as its message, kept verbatim: git would
    strip its ``#`` headings as comments); the commit's short hash."""
    tagged = _git(
        repo, "tag", "-a", "--cleanup=verbatim", release.tag, "-m", f"idleshare {release.version}\n\n{release.notes}"
    )
    if tagged.returncode != 0:
        raise ReleaseRefused(f"git tag -a {release.tag} failed: {tagged.stderr.strip()}")
    return _git(repo, "rev-parse", "--short", f"{release.tag}^{{commit}}").stdout.strip()


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    repo = Path(args[args.index("--repo") + 1]) if "--repo" in args[:-1] else REPO_ROOT
    try:
        release = prepare(repo)
        if "--check" in args:
            print(f"release: {release.tag} ({release.date}) can be cut: `make release` tags it")
            return 0
        commit = cut(repo, release)
    except ReleaseRefused as exc:
        for line in str(exc).splitlines():
            print(f"release: {line}", file=sys.stderr)
        print("release: refused, nothing tagged", file=sys.stderr)
        return 1
    print(f"release: tagged {release.tag} ({release.date}) at {commit}; publish it: git push origin {release.tag}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
