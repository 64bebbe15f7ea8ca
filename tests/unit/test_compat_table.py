"""The README's Kueue support table is the compatibility suite's results (docs/compat.json), not typed by hand;
the Kueue versions the stack runs are one table (devkit/kube/kueue_versions.py) that the pinned modules match."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from devkit.kube import kueue_versions
from tests.compat import results

COMPAT_TESTS = Path(results.__file__).with_name("test_compat.py")


def test_the_readme_table_is_the_one_generated_from_docs_compat_json() -> None:
    readme = results.README.read_text()
    assert results.with_table(readme, results.load()) == readme, (
        "run `make compat` (or python -m tests.compat.results readme)"
    )


def test_every_feature_is_one_compat_case_and_every_case_a_feature() -> None:
    tree = ast.parse(COMPAT_TESTS.read_text())
    cases = {n.name for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")}
    assert {results.feature_of(c) for c in cases} == set(results.FEATURES)
    assert len(cases) == len(results.FEATURES)


def test_recorded_results_name_only_known_versions_features_and_outcomes() -> None:
    data = results.load()
    for version, run in data["versions"].items():
        assert version in kueue_versions.VERSIONS, version
        assert set(run["features"]) == set(results.FEATURES), version
        assert set(run["features"].values()) <= {results.PASS, results.FAIL}, version
        assert re.fullmatch(r"\d{4}-\d\d-\d\d", run["date"]), run


def test_the_table_shows_each_versions_outcomes_and_what_was_not_run() -> None:
    features = dict.fromkeys(results.FEATURES, results.PASS) | {"lender_reclaims": results.FAIL}
    data = {"versions": {"v0.16.1": {"api": "kueue.x-k8s.io/v1beta2", "date": "2026-01-02", "features": features}}}
    rows = {line.split(" | ")[0].strip("| "): line for line in results.table(data).splitlines()}
    cells = rows["v0.16.1"].strip("| ").split(" | ")
    assert cells[1] == "v1beta2 (v1beta1, v1beta2)"
    assert cells[2:] == [results.MARKS[features[f]] for f in results.FEATURES]
    assert rows["v0.12.3"].count(results.NOT_RUN) == len(results.FEATURES)
    assert "not run (v1alpha1, v1beta1)" in rows["v0.12.3"]
    assert "(run of 2026-01-02)" in results.table(data)


def test_a_readme_without_the_markers_is_an_error_naming_them() -> None:
    with pytest.raises(ValueError, match="compat-table:begin"):
        results.with_table("# no table here\n", {"versions": {}})


def test_each_version_has_its_own_pinned_module_and_every_module_a_version() -> None:
    here = Path(kueue_versions.__file__).parent
    modules = {p.parent.name for p in (here / "kueue").glob("*/go.mod")}
    assert modules == set(kueue_versions.VERSIONS) - {kueue_versions.DEFAULT}
    assert kueue_versions.DEFAULT in kueue_versions.VERSIONS
    for version, facts in kueue_versions.VERSIONS.items():
        go_mod = (facts.module / "go.mod").read_text()
        assert re.search(rf"^\s*(require )?sigs\.k8s\.io/kueue {re.escape(version)}$", go_mod, re.MULTILINE), version
        assert (facts.module / "go.sum").stat().st_size > 0 and (facts.module / "tools.go").exists(), version
        assert facts.api in facts.served and facts.cohort_api in facts.served, version


def test_an_unknown_kueue_version_names_the_known_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(kueue_versions.ENV, "v0.13.0")
    with pytest.raises(
        kueue_versions.UnknownKueueVersion, match=r"'v0.13.0' \(from IDLESHARE_KUEUE_VERSION\).*v0.12.3, v0.14.0"
    ):
        kueue_versions.get()
