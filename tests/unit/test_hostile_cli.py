"""The CLI against the hostile-input table (tests/hostile.py): every verb (walked from its argparse parser: a verb or
an option added later is covered) with every value-taking option set to every hostile argument, and every file it
reads holding every hostile document. Each run ends with an exit code and, on a refusal, a message on stderr: never
a traceback. The verbs talk to the fake admin API behind the local API Gateway emulator."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from idleshare_cli import quota_import, remote
from idleshare_cli.main import build_parser, main
from tests.apigw_local import ApiGatewayLocal, use_credentials
from tests.builders import quota_body
from tests.fake_admin_api import EXAMPLES, FakeAdminApi
from tests.hostile import ARGUMENT_VALUES, BODIES, report

# Options whose value is a file the verb reads, and a valid one (a hostile run replaces one of them at a time).
FILES = {
    "--file": json.dumps(quota_body("cli")),
    "--nodes": (EXAMPLES / "nodes.json").read_text(),
    "--quotas": (EXAMPLES / "quotas.json").read_text(),
    "--scheduler-config": json.dumps({"SchedulerConfig": {"FairShare": "Enabled"}}),
    "paths": (Path(__file__).parents[2] / "events" / "inbound" / "idleshare-node-changed.json").read_text(),
    # uninstall's: a cluster nothing listens for (connection refused at once)
    "--kubeconfig": json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
            "users": [{"name": "u", "user": {"token": "t"}}],
            "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
            "current-context": "x",
        }
    ),
}
ALIAS_BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{c}: &{c} [{', '.join(['*' + p] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi", strict=True)
)
FILE_CONTENTS = {**BODIES, "alias-bomb": ALIAS_BOMB, "not-utf8": "\udcff"}
NOTHING = {"empty-array", "null"}  # no nodes, no quotas, the default scheduler config: a file may say so
VALUES = {
    "--cluster": "demo",
    "--name": "q",
    "--html": "out.html",
    "--bus": "idleshare-bus",
    "--team": "a",
    "--table": "idleshare",
}
VALUES["--hyperpod-cluster-arn"] = "arn:aws:sagemaker:us-west-2:123456789012:cluster/k1ft7ynfs0qz"
# What a verb needs besides its required options (replay runs nowhere without --local or --bus).
EXTRA = {("replay",): ["--bus", "idleshare-bus"]}


def leaves(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield prefix, parser
        return
    for name, sub in subs[0].choices.items():
        yield from leaves(sub, (*prefix, name))


VERBS = dict(leaves(build_parser()))


def options(verb: tuple[str, ...]) -> list[argparse.Action]:
    """The verb's value-taking options and positionals."""
    return [
        a for a in VERBS[verb]._actions if not isinstance(a, argparse._HelpAction) and a.nargs != 0 and a.dest != "verb"
    ]


def key(action: argparse.Action) -> str:
    return action.option_strings[0] if action.option_strings else action.dest


class _EmptyHyperPod:
    """`quota import`'s SageMaker: a HyperPod cluster with no quotas and no scheduler config (never AWS)."""

    def get_paginator(self, operation: str) -> Any:
        pages = [{"ComputeQuotaSummaries": [], "ClusterSchedulerConfigSummaries": []}]
        return type("Paginator", (), {"paginate": lambda self, **kwargs: iter(pages)})()


@pytest.fixture
def endpoint(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    use_credentials(monkeypatch)
    monkeypatch.setattr(remote, "sleep", lambda seconds: None)
    monkeypatch.setattr(quota_import, "sagemaker_client", lambda args, region: _EmptyHyperPod())
    with ApiGatewayLocal(FakeAdminApi()) as gate:
        yield gate.url


def argv_for(verb: tuple[str, ...], tmp: Path, hostile: tuple[str, str] | None, endpoint: str) -> list[str]:
    """The verb's required arguments with valid values (files written to ``tmp``), ``hostile`` = (option, value) in
    place of its own."""
    out = [*verb]
    given = dict([hostile]) if hostile else {}
    for action in options(verb):
        name = key(action)
        if name in given:
            value = given[name]
        elif not action.required:
            continue
        elif name in FILES:
            (tmp / f"valid-{action.dest}.json").write_text(FILES[name])
            value = str(tmp / f"valid-{action.dest}.json")
        else:
            value = VALUES[name]
        if name == "--html" and value and "\x00" not in value and "\ud800" not in value:
            value = str(tmp / value)  # never the working directory (the repository)
        out += [value] if not action.option_strings else [name, value]
    if any(a.dest == "endpoint" for a in options(verb)) and "--endpoint" not in given:
        out += ["--endpoint", endpoint]
    return out + EXTRA.get(verb, [])


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[Any, str]:
    try:
        code: Any = main(argv)
    except SystemExit as exc:  # argparse refusing an argument: exit 2 with its usage line
        code = exc.code
    return code, capsys.readouterr().err


def test_the_verbs_are_found() -> None:
    assert {v[0] for v in VERBS} >= {"plan", "quota", "pool", "recalc", "replay", "report", "usage"}


@pytest.mark.parametrize("verb", sorted(VERBS), ids=" ".join)
def test_every_argument_of_every_verb_against_the_hostile_table(
    verb: tuple[str, ...], endpoint: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    failures = []
    for action in options(verb):
        for name, value in ARGUMENT_VALUES.items():
            argv = argv_for(verb, tmp_path, (key(action), value), endpoint)
            try:
                code, err = run(argv, capsys)
            except Exception as exc:
                failures.append(f"{key(action)}={name}: raised {type(exc).__name__}: {exc}"[:300])
                continue
            if not isinstance(code, int) or "Traceback" in err:
                failures.append(f"{key(action)}={name}: exit {code!r}, {err[-300:]}")
            elif code != 0 and not err.strip():
                failures.append(f"{key(action)}={name}: exit {code} without a message")
    assert not failures, report(failures)


FILE_VERBS = sorted((v, key(a)) for v in VERBS for a in options(v) if key(a) in FILES)


@pytest.mark.parametrize(("verb", "option"), FILE_VERBS, ids=lambda v: " ".join(v) if isinstance(v, tuple) else v)
def test_every_file_a_verb_reads_against_the_hostile_documents(
    verb: tuple[str, ...], option: str, endpoint: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    failures = []
    for name, text in FILE_CONTENTS.items():
        for suffix in (".json", ".yaml"):
            path = tmp_path / f"hostile-{name}{suffix}"
            path.write_bytes(text.encode("utf-8", "surrogateescape"))
            code, err = run(argv_for(verb, tmp_path, (option, str(path)), endpoint), capsys)
            refused = code not in (0, None) and err.strip()
            if "Traceback" in err or not (refused or (name in NOTHING and code == 0)):
                failures.append(f"{name}{suffix}: exit {code!r}, {err[-300:]!r}")
    assert not failures, report(failures)
    assert len(FILE_VERBS) >= 6
