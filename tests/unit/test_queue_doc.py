"""The recompute queue's timings as infra/README.md and docs/operations.md state them are generated from
``idleshare.timings`` (``make docs``: devkit/docgen.py), the module the stack reads (tests/infra/test_infra_stack.py
holds the template to it): Given the documents, Then each table is the one the timings give, and a changed timing
changes the table."""

from __future__ import annotations

import pytest

from devkit import docgen
from idleshare import timings


@pytest.mark.parametrize("key", ["queue", "queue-summary"])
def test_each_documents_queue_table_is_generated_from_the_timings(key: str) -> None:
    doc, produce = docgen.SECTIONS[key]

    assert docgen.section((docgen.REPO_ROOT / doc).read_text(), key) == produce(), f"{doc}: run `make docs`"


def test_a_changed_timing_changes_the_tables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(timings, "RETRY_MAX_SECONDS", 30)
    monkeypatch.setattr(timings, "QUEUE_VISIBILITY_TIMEOUT_SECONDS", 345)

    assert (
        "| backoff of a failed record (`ChangeMessageVisibility`) | 2, 4, 8, 16, then 30 s |" in docgen.queue_summary()
    )
    assert "= 345 s |" in docgen.queue()
