"""Property-based fuzzing of every edge parser and of the router on top of them: arbitrary JSON, random bytes, or a
real example (events/examples, events/inbound) with one member broken gives a valid domain object or an InputError
naming where, never another exception."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from idleshare.domain.model import Node, Quota, SchedulerConfig
from idleshare.handlers import router
from idleshare.parse.errors import InputError
from idleshare.parse.events import ClusterRef, cluster_ref, parse_event
from idleshare.parse.nodes import QUANTITY_MAX, node_from_dict, parse_nodes
from idleshare.parse.quotas import parse_quotas, parse_scheduler_config
from idleshare.runtime import wiring
from idleshare.runtime.observability import logger
from tests.fakes import ROUTER_CLUSTERS, router_dependencies
from tests.fakes import ROUTER_CONTEXT as CONTEXT
from tests.strategies import NODE_LIST, NODES, json_values, mutations

EVENTS = Path(__file__).resolve().parents[2] / "events"
FUZZ = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])

INBOUND = {p.name: json.loads(p.read_text()) for p in sorted((EVENTS / "inbound").glob("*.json"))}
QUOTAS = json.loads((EVENTS / "examples" / "quotas.json").read_text())
SCHEDULER = json.loads((EVENTS / "examples" / "scheduler-config.json").read_text())


def parsed_or_input_error(call: Callable[[], Any], *, schema_words: bool = False) -> Any:
    """The result, or None after an InputError that names its source and says something."""
    try:
        return call()
    except InputError as error:
        assert error.source and error.errors and all(isinstance(e.loc, str) and e.message for e in error.errors)
        # msgspec says only where it stopped, in its own words (`str`); the walk of the same Struct names each field
        assert not (schema_words and any("`" in e.message for e in error.errors)), error.errors
        assert str(error)
        return None


# ---------------------------------------------------------------------------------------- events
def check_event(raw: Any) -> None:
    event = parsed_or_input_error(lambda: parse_event(raw), schema_words=True)
    if event is not None:
        ref = cluster_ref(event)  # whatever parsed, the router can ask which cluster it concerns
        assert isinstance(ref, ClusterRef)


random_detail = st.builds(
    lambda name, detail: {**INBOUND[name], "detail": detail}, st.sampled_from(sorted(INBOUND)), json_values
)


@FUZZ
@given(json_values)
def test_fuzz_every_parser_with_any_json_value(raw: Any) -> None:
    check_event(raw)
    for parse in (parse_quotas, lambda raw: parse_quotas([raw]), parse_scheduler_config):
        parsed_or_input_error(lambda: parse(raw))  # noqa: B023


@FUZZ
@given(mutations(INBOUND) | random_detail)
def test_fuzz_parse_event_with_one_member_of_a_real_event_broken(raw: Any) -> None:
    check_event(raw)


@pytest.fixture(scope="module")
def router_deps() -> Iterator[wiring.Dependencies]:
    """The router on fakes, ``demo`` the only governed cluster, for the whole module (hypothesis reruns the test)."""
    with router_dependencies(ROUTER_CLUSTERS[:1]) as deps:
        level = logger.log_level
        logger.setLevel("CRITICAL")  # hundreds of "dropped" warnings otherwise
        try:
            yield deps
        finally:
            logger.setLevel(level)


@FUZZ
@given(raw=mutations(INBOUND) | json_values)
def test_fuzz_the_router_returns_normally_for_any_input(raw: Any, router_deps: wiring.Dependencies) -> None:
    queue: Any = router_deps.queue
    sent_before = len(queue.sent)
    outcome = router.handler(raw, CONTEXT)
    enqueued = outcome["enqueued"]
    if "dropped" in outcome:
        assert enqueued == [] and len(queue.sent) == sent_before
        assert outcome["dropped"] in ("Malformed", "UnknownCluster")
    else:
        assert enqueued == ["demo"] and len(queue.sent) == sent_before + 1


# ----------------------------------------------------------------------------------------- nodes
def check_nodes(result: tuple[Node, ...] | None) -> None:
    for node in result or ():
        assert isinstance(node, Node)
        for amount in node.allocatable.values():
            assert type(amount) in (int, Fraction) and 0 <= amount <= QUANTITY_MAX


@FUZZ
@given(mutations({"node": NODES[0], "other": NODES[-1]}) | json_values)
def test_fuzz_node_from_dict_with_one_member_of_a_real_node_broken(raw: Any) -> None:
    node = parsed_or_input_error(lambda: node_from_dict(raw))
    check_nodes(None if node is None else (node,))


@FUZZ
@given(mutations({"list": {**NODE_LIST, "items": NODES}}))
def test_fuzz_parse_nodes_with_one_member_of_a_real_node_list_broken(raw: Any) -> None:
    check_nodes(parsed_or_input_error(lambda: parse_nodes(raw)))
    check_nodes(parsed_or_input_error(lambda: parse_nodes(json.dumps(raw, allow_nan=True))))


@FUZZ
@given(st.binary(max_size=300))
def test_fuzz_every_text_parser_with_random_bytes(raw: bytes) -> None:
    check_nodes(parsed_or_input_error(lambda: parse_nodes(raw)))
    parsed_or_input_error(lambda: parse_quotas(raw))
    parsed_or_input_error(lambda: parse_scheduler_config(raw))


# ------------------------------------------------------------------------- quotas, scheduler config
@FUZZ
@given(mutations({"quotas": QUOTAS}), mutations({"scheduler": SCHEDULER}))
def test_fuzz_parse_quotas_and_scheduler_config_with_one_member_of_the_example_broken(quotas: Any, sched: Any) -> None:
    parsers: list[tuple[Callable[[Any], Any], Any]] = [(parse_quotas, quotas), (parse_scheduler_config, sched)]
    for parse, raw in [(parse, raw) for parse, doc in parsers for raw in (doc, json.dumps(doc))]:
        result = parsed_or_input_error(lambda: parse(raw))  # noqa: B023
        if result is not None:
            assert isinstance(result, SchedulerConfig) or all(isinstance(q, Quota) for q in result)
