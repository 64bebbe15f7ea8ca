"""Every link between the documents lands: the file exists and, for ``#anchor``, the target has that heading (as
GitHub makes its anchor) or an ``<a id>``. The documents link to one another instead of restating the stack, so a
moved or renamed section must not leave a link pointing nowhere."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).parents[2]
DOCS = [
    "README.md",
    "CHANGELOG.md",
    "infra/README.md",
    "events/README.md",
    *sorted(str(p.relative_to(REPO)) for p in REPO.glob("docs/*.md")),
]


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped (``-`` and ``_`` kept), spaces to ``-``."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
    found = {slug(h) for h in re.findall(r"^#{1,6} (.+)$", text, re.M)}
    return found | set(re.findall(r'<a id="([^"]+)"', text))


def links(doc: str) -> list[tuple[str, str]]:
    text = re.sub(r"```.*?```", "", (REPO / doc).read_text(), flags=re.S)
    return [
        (target, anchor)
        for target, anchor in re.findall(r"\]\(([^)#\s]*)(?:#([^)\s]+))?\)", text)
        if not re.match(r"[a-z]+:", target)
    ]


def test_slug_is_githubs() -> None:
    assert (
        slug("Objects idleshare did not create (`ForeignObject`)") == "objects-idleshare-did-not-create-foreignobject"
    )
    assert slug("Deploying (`cdk deploy`)") == "deploying-cdk-deploy"


@pytest.mark.parametrize("doc", DOCS)
def test_every_link_lands(doc: str) -> None:
    broken = []
    for target, anchor in links(doc):
        path = (REPO / doc).parent / target if target else REPO / doc
        if not path.exists():
            broken.append(f"{target}: no such file")
        elif anchor and path.suffix == ".md" and anchor not in anchors(path):
            broken.append(f"{target}#{anchor}: no such heading")
    assert broken == [], f"{doc}: {broken}"
