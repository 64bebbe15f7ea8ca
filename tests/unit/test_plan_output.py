"""`idleshare plan --format json` writes with msgspec exactly the bytes the stdlib's ``json.dump(..., indent=2)`` wrote."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from idleshare_cli.plan import json_bytes, plan
from idleshare_cli.present import result_json
from tests.bench.synthetic import make_cluster


def stdlib(document: Any) -> bytes:
    """What `idleshare plan` wrote before: ``json.dump(document, sys.stdout, indent=2)`` then a newline."""
    return json.dumps(document, indent=2).encode() + b"\n"


def number_types(value: Any) -> set[type]:
    if isinstance(value, dict | list | tuple):
        return set().union(*map(number_types, value.values() if isinstance(value, dict) else value))
    return {type(value)} if isinstance(value, int | float) and not isinstance(value, bool) else set()


@pytest.fixture(scope="module")
def real_shaped() -> tuple[bytes, bytes]:
    return make_cluster(2_000)  # real-sized nodes (MIG, Neuron, excluded ones), 200 teams


def test_a_real_clusters_document_and_the_command_write_what_json_wrote(real_shaped: Any, tmp_path: Path) -> None:
    nodes, quotas = real_shaped
    result, manifests = plan(nodes, quotas)
    document = result_json(result, manifests)
    assert json_bytes(document) + b"\n" == stdlib(document)
    # and it holds no floats (msgspec and json spell exponents differently): only integers
    assert number_types(document) <= {int}
    # `idleshare plan --format json` as a command, on the files an operator passes: what json.dump wrote
    (tmp_path / "nodes.json").write_bytes(nodes)
    (tmp_path / "quotas.json").write_bytes(quotas)
    files = ["--nodes", str(tmp_path / "nodes.json"), "--quotas", str(tmp_path / "quotas.json")]
    command = [sys.executable, "-m", "idleshare_cli.main", "plan", *files, "--format", "json"]
    assert subprocess.run(command, capture_output=True, check=True).stdout == stdlib(document)


@pytest.mark.parametrize(
    "document",
    [
        {},
        [],
        {"a": {}, "b": [], "c": [{}], "d": [[1, [2, {}]]], "e": None, "f": True, "g": False},
        {"name": "team-é", "other": "ascii"},  # json escapes non-ASCII (ensure_ascii)
        {"note": "del \x7f here"},  # and DEL
        {"controls": '\x00\x01\x1f\t\n\r\b\f"\\/'},
        {"big": 2**70, "small": -(2**63)},  # beyond msgspec's 64 bits
        {"nested": {"k": {"k2": [1, 2, 3]}}, "unicode key é": 1},
    ],
)
def test_edge_cases_are_written_as_json_wrote_them(document: Any) -> None:
    assert json_bytes(document) == json.dumps(document, indent=2).encode()


def test_plan_starts_without_what_it_never_uses(tmp_path: Path) -> None:
    """No shutil (bz2, lzma) for the help width, no OpenSSL, pydantic or Kubernetes client; the help still fits."""
    nodes, quotas = tmp_path / "nodes.json", tmp_path / "quotas.json"
    nodes.write_text('{"apiVersion": "v1", "kind": "List", "items": []}')
    quotas.write_text("[]")
    code = (
        "import sys; from idleshare_cli.main import main\n"
        f"assert main(['plan', '--nodes', {str(nodes)!r}, '--quotas', {str(quotas)!r}, '--format', 'json']) == 0\n"
        "heavy = {'shutil', 'hashlib', 'pydantic', 'lightkube', 'botocore'}\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & heavy), file=sys.stderr)"
    )
    # a process as a user starts it: not measured by coverage (which would import hashlib into it)
    bare = {k: v for k, v in os.environ.items() if not k.startswith(("COV_CORE_", "COVERAGE_"))}
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=bare)
    assert run.stderr.strip() == "[]"
    # the help is what argparse's own formatter prints at the same width
    show = "import argparse; import idleshare_cli.main as m\n{}m.build_parser('plan').parse_args(['plan', '--help'])"
    env = {**os.environ, "COLUMNS": "50"}
    ours, stock = (
        subprocess.run([sys.executable, "-c", show.format(patch)], capture_output=True, text=True, env=env).stdout
        for patch in ("", "m._Help = argparse.HelpFormatter\n")
    )
    assert ours == stock and "--nodes NODES.json" in ours
