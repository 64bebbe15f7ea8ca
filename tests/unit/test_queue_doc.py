"""The recompute queue's timings as infra/README.md states them are generated from
``idleshare.timings`` (``make docs``: devkit/docgen.py), the module the stack reads (tests/infra/test_infra_stack.py
holds the template to it): Given the documents, Then each table is the one the timings give, and a changed timing
changes the table; docs/operations.md links to it instead of restating it."""

from __future__ import annotations

import pytest

from devkit import docgen
from idleshare import timings


def test_the_queue_table_is_generated_from_the_timings() -> None:
    doc, produce = docgen.SECTIONS["queue"]

    assert docgen.section((docgen.REPO_ROOT / doc).read_text(), "queue") == produce(), f"{doc}: run `make docs`"


def test_docs_operations_links_to_the_table_instead_of_restating_it() -> None:
    ops = (docgen.REPO_ROOT / "docs" / "operations.md").read_text()

    assert "infra/README.md#the-recompute-queues-semantics" in ops
    assert "generated: queue" not in ops and "ChangeMessageVisibility` of" not in ops


def test_a_changed_timing_changes_the_tables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(timings, "RETRY_MAX_SECONDS", 30)
    monkeypatch.setattr(timings, "QUEUE_VISIBILITY_TIMEOUT_SECONDS", 345)

    monkeypatch.setattr(timings, "RECOMPUTE_BUDGET_SECONDS", 45.0)

    assert "`ChangeMessageVisibility` of 2, 4, 8, 16, then 30 s" in docgen.queue()
    assert "= 345 s |" in docgen.queue()
    assert "≥ 45 s of the function left" in docgen.queue()
