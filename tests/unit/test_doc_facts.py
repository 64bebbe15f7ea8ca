"""The documents' prose restates numbers that live in the code — a backoff, an alarm's window, a page size, a TTL, a
config default. Each restatement a document keeps is a row of tests/data/doc_facts.tsv: the document, a pattern that finds every place
the document states that fact (whatever number it says), and the value rendered from the one place the code keeps
it (``idleshare.timings``, ``idleshare.pages``, ``idleshare.names``, ``idleshare.table``, the CDK config's model, the
CLI). Given the documents, Then every occurrence says what the code says, so a changed constant fails here until
the prose follows (and a stale copy elsewhere in the same document fails too: every match is checked). What the
generated sections state (infra/README.md's stack and queue, docs/architecture.md's items) is held by their own
tests; the prose links to them instead where it can."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from devkit import scenario
from devkit.kube import kueue_versions as stack_versions
from idleshare import names, pages, table, timings
from idleshare.adapters import aws
from idleshare.domain import ownership
from idleshare.domain.kueue_versions import limits_of
from idleshare.service import usage
from idleshare_cli import report
from infra import config
from infra.constructs import functions, queue

REPO = Path(__file__).parents[2]
OPS, INFRA = "docs/operations.md", "infra/README.md"


@dataclass(frozen=True)
class Fact:
    doc: str
    pattern: str
    """A regular expression over the document's text (whitespace runs read as one space) with one group: the number."""
    value: object
    """What the code says, as the document writes it."""

    @property
    def expected(self) -> str:
        return (
            f"{self.value:,}" if isinstance(self.value, int) and not isinstance(self.value, bool) else str(self.value)
        )


FACTS = REPO / "tests" / "data" / "doc_facts.tsv"


def default(field: str) -> object:
    """The CDK config's default of ``field``."""
    return config.IdleshareConfig.model_fields[field].default


def kueue_minors() -> list[str]:
    """The minor versions of the Kueues the compatibility suite runs, oldest first."""
    return sorted((v.split(".")[1] for v in stack_versions.VERSIONS), key=int)


NAMESPACE = {
    **{
        m.__name__.rsplit(".", 1)[-1]: m
        for m in (timings, pages, names, table, usage, aws, report, scenario, ownership)
    },
    **{"functions": functions, "queue": queue, "default": default, "kueue_minors": kueue_minors},
    "limits_of": limits_of,
}
"""What the expressions of doc_facts.tsv may name: the modules that hold the facts."""


def facts() -> list[Fact]:
    """Every fact the prose restates (tests/data/doc_facts.tsv), rendered from the code as it is now (evaluated at
    call time: monkeypatching a constant changes what is expected)."""
    rows = [line.split("\t") for line in FACTS.read_text().splitlines() if line and not line.startswith("#")]
    return [Fact(doc, pattern, eval(expression, {"__builtins__": {}}, NAMESPACE)) for doc, pattern, expression in rows]


def text(doc: str) -> str:
    return " ".join((REPO / doc).read_text().split())


def disagreements(fact: Fact) -> list[str]:
    """What the document says where it states ``fact`` and the code says otherwise (or that it no longer says it)."""
    found = re.findall(fact.pattern, text(fact.doc))
    if not found:
        return [f"{fact.doc}: nothing matches {fact.pattern!r} (reworded? update this table)"]
    return [
        f"{fact.doc}: {fact.pattern!r} says {said}, the code {fact.expected}" for said in found if said != fact.expected
    ]


@pytest.mark.parametrize("fact", facts(), ids=lambda f: f"{f.doc}:{f.pattern[:40]}")
def test_the_prose_says_what_the_code_says(fact: Fact) -> None:
    assert disagreements(fact) == []


def test_a_changed_constant_makes_its_prose_disagree(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given the constants as the documents state them
    assert not [d for f in facts() for d in disagreements(f)]
    # When a few change in the code
    monkeypatch.setattr(timings, "WATCHER_ALARM_MINUTES", 6)
    monkeypatch.setattr(timings, "COALESCE_SECONDS", 12)
    monkeypatch.setattr(pages, "GRANTS_PAGE_MAX", 250)
    monkeypatch.setattr(aws, "PUT_EVENTS_BATCH", 5)
    # Then exactly their prose disagrees, and names the document and what it says
    wrong = [d for f in facts() for d in disagreements(f)]
    assert len(wrong) == 3 + 2 + 2 + 1, wrong
    assert f"{OPS}: 'below half of (\\\\d+) minutes' says 5, the code 6" in wrong


def test_every_config_field_is_documented_with_the_models_default() -> None:
    # Given infra/README.md's configuration table and the config's model
    rows = dict(re.findall(r"^\| `(\w+)(?:\[\])?` \| ([^|]*?) \|", (REPO / INFRA).read_text(), re.M))
    # Then every field is a row, and its default column is the model's
    for field, info in config.IdleshareConfig.model_fields.items():
        assert field in rows, f"{INFRA}: the configuration table lacks `{field}`"
        if info.is_required():
            assert rows[field] == "required", field
            continue
        default = info.get_default(call_default_factory=True)
        if isinstance(default, bool):
            expected = str(default).lower()
        elif default is None:
            expected = "none"
        elif isinstance(default, list):
            expected = ", ".join(default)
        else:
            expected = str(default)
        assert rows[field] == expected, (field, rows[field], expected)


def test_docs_operations_lists_every_metric_idleshare_emits_and_only_those() -> None:
    # Given the metric names idleshare emits (names.METRIC_*, not the dimensions) and operations.md's Metrics table
    emitted = {v for k, v in vars(names).items() if k.startswith("METRIC_") and not k.startswith("METRIC_DIM_")}
    ops = (REPO / OPS).read_text()
    table = ops[ops.index("## Metrics") : ops.index("\n## ", ops.index("## Metrics") + 1)]
    listed = {name for cell in re.findall(r"^\| (`[^|]+`) \|", table, re.M) for name in re.findall(r"`(\w+)`", cell)}
    # Then the table lists exactly those
    assert listed == emitted, (sorted(listed - emitted), sorted(emitted - listed))
