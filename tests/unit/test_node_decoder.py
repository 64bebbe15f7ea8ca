"""The node decoder (``parse.nodes``, msgspec) asks pydantic (``parse.node_report``) only to report a refusal: the two
accept and refuse the same documents, and a refusal names every bad field."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings

from idleshare.parse import node_report
from idleshare.parse.errors import InputError
from idleshare.parse.nodes import parse_nodes
from tests.unit.test_parse_nodes import documents


def _pydantic_accepts(raw: Any) -> bool:
    return node_report.field_errors(raw) == []


def _msgspec_accepts(raw: Any) -> bool:
    try:
        parse_nodes(raw)
    except InputError as exc:
        # refused for a field (pydantic's report) or missing items, not for a quantity / a duplicate
        return all(
            "allocatable[" in e.loc or "duplicate node name" in e.message or e.loc == "items" for e in exc.errors
        )
    return True


@settings(max_examples=300, deadline=None)
@given(documents)
def test_msgspec_and_pydantic_accept_the_same_node_documents(document: Any) -> None:
    if isinstance(document, dict) and document.get("items", []) is None:
        return  # `items: null`: refused after decoding (required field missing), by both
    try:  # an infinite float has no JSON text (RFC 8259); Python would write `Infinity`: see the test below
        text: str | None = json.dumps(document, allow_nan=False)
    except ValueError:
        text = None
    for raw in (document, text):
        if raw is not None:
            assert _msgspec_accepts(raw) == _pydantic_accepts(raw), raw


@pytest.mark.parametrize("literal", ["Infinity", "-Infinity", "NaN"])
def test_json_text_that_is_not_json_is_refused_with_a_message(literal: str) -> None:
    # Python's json module reads these; JSON does not have them, and neither does kubectl's output
    with pytest.raises(InputError) as info:
        parse_nodes('{"kind": "List", "items": [{"metadata": {"name": "a"}, "x": ' + literal + "}]}")
    assert info.value.errors and all(e.message for e in info.value.errors)


def test_a_refused_document_names_every_bad_field_not_only_the_first() -> None:
    items = [
        {"metadata": {"name": 5}},
        {"metadata": {"name": "b"}, "spec": {"unschedulable": "yes"}},
    ]
    with pytest.raises(InputError) as info:
        parse_nodes(json.dumps(items))
    assert [e.loc for e in info.value.errors] == ["items[0].metadata.name", "items[1] (b).spec.unschedulable"]
