"""The bad-input corpus (tests/corpus) through every real entry point.

Given a corpus file and the field it breaks (tests/corpus/expected.json), When it reaches
`idleshare plan`, an edge parser, the router handler or the admin API's request models, Then it is refused with
one clear message naming the file and the field, no traceback, and nothing stored changes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from idleshare.adapters.ports import ClusterRecord
from idleshare.adapters.store import PK, SK, DynamoStore
from idleshare.handlers import router
from idleshare.parse import requests
from idleshare.parse.errors import InputError
from idleshare.parse.events import parse_event
from idleshare.parse.nodes import node_from_dict, parse_nodes
from idleshare.parse.quotas import parse_quotas, parse_scheduler_config
from idleshare.parse.requests import CreateQuota, SchedulerConfigRequest
from idleshare.runtime import wiring
from idleshare_cli.main import EXIT_INPUT, main
from tests.aws_env import create_table, fake_aws_env
from tests.corpus import make_corpus
from tests.fakes import HYPERPOD_ARN
from tests.fakes import ROUTER_CONTEXT as CONTEXT

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "events" / "examples"
INDEX: dict[str, dict[str, str]] = json.loads((REPO / "tests" / "corpus" / "expected.json").read_text())


def files(kind: str) -> list[str]:
    return sorted(path for path, entry in INDEX.items() if entry["kind"] == kind)


def load(path: str) -> Any:
    return json.loads((REPO / path).read_text(encoding="utf-8"))


def names_field(error: InputError, field: str, *, prefix: bool = False) -> bool:
    """An error is at ``field`` ("" = the whole document; with ``prefix``, at or below it), and the message says so."""
    locs = [e.loc for e in error.errors]
    return (field in locs or (prefix and any(loc.startswith(field) for loc in locs))) and field in str(error)


# ------------------------------------------------------------------------------ the corpus itself
def test_the_checked_in_corpus_is_what_make_corpus_generates() -> None:
    # When this fails: `uv run python tests/corpus/make_corpus.py` and check the diff in.
    wanted, found = make_corpus.build(), make_corpus.on_disk()
    assert sorted(set(wanted) ^ set(found)) == []
    assert [name for name in sorted(wanted) if wanted[name] != found[name]] == []


def test_the_corpus_covers_every_kind_and_constraint_and_every_file_is_indexed() -> None:
    counts = {kind: len(files(kind)) for kind in ("quotas", "scheduler", "nodes", "events")}
    assert counts["quotas"] > 100 and counts["scheduler"] > 15 and counts["nodes"] > 40 and counts["events"] > 40
    for path in INDEX:
        assert (REPO / path).is_file(), path
    on_disk = {f"tests/corpus/{name}" for name in make_corpus.on_disk() if name != "expected.json"}
    assert on_disk <= set(INDEX)
    # the quota and scheduler files break each kind of botocore constraint
    reasons = {Path(p).stem.split("--")[1] for p in files("quotas") + files("scheduler")}
    kinds = {"required-missing", "below-min", "above-max", "not-in-enum", "enum-wrong-case", "too-long", "too-short"}
    assert kinds | {"too-many-items", "unknown-member", "string-not-object", "pattern-mismatch-0"} <= reasons


# ----------------------------------------------------------------------------------------- CLI
def plan_args(kind: str, path: str) -> list[str]:
    nodes, quotas = str(EXAMPLES / "nodes.json"), str(EXAMPLES / "quotas.json")
    args = {"nodes": ["--nodes", path, "--quotas", quotas], "quotas": ["--nodes", nodes, "--quotas", path]}.get(
        kind, ["--nodes", nodes, "--quotas", quotas, "--scheduler-config", path]
    )
    return ["plan", *args, "--format", "json"]


CLI_FILES = [p for kind in ("quotas", "scheduler", "nodes") for p in files(kind)]


@pytest.mark.parametrize("path", CLI_FILES)
def test_idleshare_plan_exits_2_with_one_line_naming_file_and_field(
    path: str, capsys: pytest.CaptureFixture[str]
) -> None:
    full = str(REPO / path)
    code = main(plan_args(INDEX[path]["kind"], full))
    out, err = capsys.readouterr()
    assert (code, out, err.count("\n")) == (EXIT_INPUT, "", 1), err
    assert err.startswith(f"idleshare plan: {full}: ") and INDEX[path]["field"] in err and "Traceback" not in err


SAMPLE = [
    "tests/corpus/quotas/ComputeQuotaConfig-ResourceSharingConfig-BorrowLimit--above-max.json",
    "tests/corpus/nodes/quantity-10e30-integer.json",
]


def test_the_real_command_prints_one_line_and_no_traceback() -> None:
    # Real processes: what a user sees on the terminal (a sample; the in-process test covers all).
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "functions"), str(REPO / "cli"), str(REPO)])}
    command = [sys.executable, "-m", "idleshare_cli.main"]
    pipes: dict[str, Any] = {
        "stdout": subprocess.PIPE,
        "stderr": subprocess.PIPE,
        "text": True,
        "cwd": REPO,
        "env": env,
    }
    running = {path: subprocess.Popen([*command, *plan_args(INDEX[path]["kind"], path)], **pipes) for path in SAMPLE}
    for path, process in running.items():
        out, err = process.communicate(timeout=120)
        assert (process.returncode, out, err.count("\n")) == (EXIT_INPUT, "", 1), err
        assert path in err and INDEX[path]["field"] in err and "Traceback" not in err


# ------------------------------------------------------------------------------------- parsers
PARSERS = {"quotas": parse_quotas, "scheduler": parse_scheduler_config, "nodes": parse_nodes}


@pytest.mark.parametrize("path", [path for kind in PARSERS for path in files(kind)])
def test_the_parser_of_its_kind_names_the_field(path: str) -> None:
    parse = PARSERS[INDEX[path]["kind"]]
    raw = (REPO / path).read_bytes()
    for document in (raw, raw.decode(), json.loads(raw)):
        with pytest.raises(InputError) as caught:
            parse(document, source=path)
        assert caught.value.source == path
        assert names_field(caught.value, INDEX[path]["field"]), str(caught.value)


# The recompute Lambda reads the API page by page: one Node at a time through node_from_dict.
PER_NODE = [p for p in files("nodes") if INDEX[p]["field"].startswith("items[1]") and "duplicate" not in p]


@pytest.mark.parametrize("path", PER_NODE)
def test_node_from_dict_names_the_field_of_the_bad_node(path: str) -> None:
    good, bad = load(path)["items"]
    field = "node" + INDEX[path]["field"].removeprefix("items[1]")
    node_from_dict(good)
    with pytest.raises(InputError) as caught:
        node_from_dict(bad, source="api")
    assert names_field(caught.value, field), str(caught.value)


@pytest.mark.parametrize("path", files("events"))
def test_parse_event_names_the_field(path: str) -> None:
    with pytest.raises(InputError) as caught:
        parse_event(load(path), source=path)
    assert names_field(caught.value, INDEX[path]["field"], prefix=True), str(caught.value)


# -------------------------------------------------------------------------------------- router
@pytest.mark.parametrize("path", files("events"))
def test_the_router_drops_each_malformed_event_and_enqueues_nothing(
    path: str, router_deps: wiring.Dependencies, logs: Any
) -> None:
    event = load(path)
    store: Any = router_deps.store
    clusters_before = dict(store.clusters)
    outcome = router.handler(event, CONTEXT)
    assert outcome == {"enqueued": [], "dropped": "Malformed"}
    queue: Any = router_deps.queue
    assert queue.sent == []
    assert store.clusters == clusters_before and store.writes == 0
    (line,) = [json.loads(x) for x in logs.getvalue().splitlines() if "malformed" in x]
    assert line["level"] == "WARNING" and INDEX[path]["field"] in line["reason"]


# ------------------------------------------------------------- the request models, then the store
# The admin API's request models are the one gate of a write (the store stores what it is given): every
# quota and scheduler file is refused there naming its field, and nothing stored changes.
@pytest.fixture(scope="module")
def seeded() -> Iterator[Any]:
    """A table holding a cluster, a valid quota and a scheduler config (shared: tests never write)."""
    with fake_aws_env(), mock_aws():
        table = create_table(boto3.resource("dynamodb", region_name="us-east-1"))
        store = DynamoStore(table)
        store.put_cluster(ClusterRecord("demo", "demo-eks", HYPERPOD_ARN))
        store.create_quota("demo", load("events/examples/quotas.json")[0])
        store.put_scheduler_config("demo", load("events/examples/scheduler-config.json"))
        yield table


def scan(table: Any) -> list[dict[str, Any]]:
    """Every item (a handful: one page)."""
    page = table.scan(ConsistentRead=True)
    assert "LastEvaluatedKey" not in page
    return sorted(page["Items"], key=lambda i: (i[PK], i[SK]))


@pytest.mark.parametrize("path", files("quotas") + files("scheduler"))
def test_validated_writes_refuse_each_file_and_change_nothing_stored(path: str, seeded: Any) -> None:
    store, before, doc = DynamoStore(seeded), scan(seeded), load(path)
    with pytest.raises(InputError) as caught:
        if INDEX[path]["kind"] == "quotas":
            for body in doc:
                store.create_quota("demo", requests.parse(CreateQuota, body).given())
        else:
            request = requests.parse(SchedulerConfigRequest, doc)
            store.put_scheduler_config("demo", request.given("TargetVersion"), target_version=1)
    assert names_field(caught.value, INDEX[path]["field"].removeprefix("[0]."))  # a body's fields start at the quota
    assert scan(seeded) == before
