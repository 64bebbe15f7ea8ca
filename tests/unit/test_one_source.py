"""One setting, one source: each default of the deployed stack is typed once and read from there.

The values are checked where they are read (the Lambdas' environment, the store, the CLI), and our code
(``functions/idleshare``, the CLI's ``cli/idleshare_cli``, ``infra``, ``devkit``) is searched for a second literal, so
that re-typing a default somewhere else fails here even while both copies still agree."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from idleshare import pages, timings
from idleshare.adapters.ports import ClusterRecord
from idleshare.adapters.store.base import TableAccess
from idleshare.domain.model import DEFAULT_COHORT_NAME, DEFAULT_NAMESPACE_PREFIX, Settings
from idleshare.runtime import env
from idleshare_cli.main import build_parser

ROOT = Path(__file__).resolve().parents[2]
CLI = ROOT / "cli" / "idleshare_cli"
DEPLOYED = [ROOT / "functions" / "idleshare", CLI, ROOT / "infra", ROOT / "devkit"]


def _sources() -> list[tuple[Path, str]]:
    files = sorted(p for d in DEPLOYED for p in d.rglob("*.py") if "node_modules" not in p.parts)
    assert len(files) > 50, "the deployed code was not found"
    return [(p, p.read_text(encoding="utf-8")) for p in files]


def _hits(pattern: str, allowed: set[Path]) -> list[str]:
    rx = re.compile(pattern)
    return [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for path, text in _sources()
        if path not in allowed
        for n, line in enumerate(text.splitlines(), 1)
        if rx.search(line)
    ]


def test_the_history_ttl_default_is_read_from_timings_everywhere() -> None:
    assert env.read({}).history_ttl_days == timings.HISTORY_TTL_DAYS
    assert env.Settings().history_ttl_days == timings.HISTORY_TTL_DAYS
    default = inspect.signature(TableAccess.__init__).parameters["history_ttl_days"].default
    assert default == timings.HISTORY_TTL_DAYS
    with pytest.raises(env.EnvError):
        env.read({"IDLESHARE_HISTORY_TTL_DAYS": str(timings.HISTORY_TTL_MAX_DAYS + 1)})


def test_no_second_history_ttl_literal() -> None:
    # `history_ttl_days: int = 30`, `Field(default=90, ...)`, `DEFAULT_HISTORY_TTL_DAYS = 30`, `le=3650`: a number
    # typed on a line about the history TTL, anywhere but timings.py
    hits = _hits(
        r"(?i)(history_ttl|HISTORY_TTL)\w*\s*(:\s*\w+\s*)?(=|default=)\s*\d|history_ttl.*\ble=\d",
        {ROOT / "functions" / "idleshare" / "timings.py"},
    )
    assert hits == []


def test_the_cluster_naming_defaults_come_from_the_domain_settings() -> None:
    assert (Settings().cohort_name, Settings().namespace_prefix) == (DEFAULT_COHORT_NAME, DEFAULT_NAMESPACE_PREFIX)
    record = ClusterRecord("c1", "e1").settings
    assert (record.cohort_name, record.namespace_prefix) == (Settings().cohort_name, Settings().namespace_prefix)
    parsed = env.parse_clusters('[{"id": "c1", "eks_cluster_name": "e1"}]')
    assert parsed[0].settings.namespace_prefix == Settings().namespace_prefix
    args = build_parser("plan").parse_args(["plan", "--nodes", "n.json"])
    assert (args.cohort_name, args.namespace_prefix) == (Settings().cohort_name, Settings().namespace_prefix)


def test_no_second_cluster_naming_literal() -> None:
    model = ROOT / "functions" / "idleshare" / "domain" / "model.py"
    # HyperPod's own lender queues' prefix is HyperPod's name, not a default of idleshare's: it stays whatever
    # idleshare's prefix is set to
    assert _hits(r"""["'](hyperpod-ns-(?!idle-resource-sharing-cq-)|shared-pool["'])""", {model}) == []


def test_cluster_keys_are_built_by_the_table_module() -> None:
    table = ROOT / "functions" / "idleshare" / "table.py"
    assert _hits(r"""["']CLUSTER#""", {table}) == []


def test_the_cli_pages_with_the_apis_maxima() -> None:
    hits = [
        f"{p.name}: {line.strip()}"
        for p in sorted(CLI.rglob("*.py"))
        for line in p.read_text(encoding="utf-8").splitlines()
        if re.search(r"\b\w*PAGE_MAX\s*=|MaxResults\"?:\s*\d|\b1 and 100\b", line)
    ]
    assert hits == []
    assert build_parser().parse_args(["quota", "list", "--cluster", "c1"]).page_size == pages.QUOTAS_PAGE_MAX
