"""`make deploy-check`'s checks (infra/deploy_check.py) and the asset on Python 3.12 (infra/runtime_check.py).

Given the synthesized template, Then the access entry and rbac.yaml agree, each function has exactly its
own variables and each resolves, the registry custom resource is wired, every alarm has an action; each
check fails on an injected violation. Given the Lambda asset built for this machine, Then every handler
imports on Python 3.12 with only the asset and boto3 (a missing Python 3.12 fails, it is never skipped).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from idleshare import names
from infra import deploy_check
from infra.bundling import bundle_into
from infra.constructs.eks_access import RBAC_MANIFEST
from infra.runtime_check import HANDLER_MODULES, check_runtime, machine_platform

MANIFEST = RBAC_MANIFEST.read_text()


def _of(template: dict[str, Any], type_: str) -> dict[str, Any]:
    return next(r for r in template["Resources"].values() if r["Type"] == type_)


def _fn(template: dict[str, Any], handler: str) -> dict[str, Any]:
    return next(
        r
        for r in template["Resources"].values()
        if r["Type"] == "AWS::Lambda::Function" and r["Properties"]["Handler"] == handler
    )


@pytest.mark.parametrize("shape", ["public", "private"])
def test_the_synthesized_app_passes_every_check(request: pytest.FixtureRequest, shape: str) -> None:
    assert deploy_check.findings(request.getfixturevalue(shape).json, MANIFEST) == []


def _group(t: dict[str, Any]) -> None:
    _of(t, "AWS::EKS::AccessEntry")["Properties"]["KubernetesGroups"] = ["system:masters"]


def _missing(t: dict[str, Any]) -> None:
    del _fn(t, names.ROUTER_HANDLER)["Properties"]["Environment"]["Variables"][names.ENV_QUEUE_URL]


def _extra(t: dict[str, Any]) -> None:
    _fn(t, names.ROUTER_HANDLER)["Properties"]["Environment"]["Variables"][names.ENV_CLUSTERS] = "[]"


def _dangling(t: dict[str, Any]) -> None:
    _fn(t, names.API_HANDLER)["Properties"]["Environment"]["Variables"][names.ENV_TABLE_NAME] = {"Ref": "Gone"}


def _token(t: dict[str, Any]) -> None:
    _fn(t, names.API_HANDLER)["Properties"]["Environment"]["Variables"][names.ENV_EVENT_BUS_NAME] = "${Token[X.1]}"


def _silent(t: dict[str, Any]) -> None:
    _of(t, "AWS::CloudWatch::Alarm")["Properties"].pop("AlarmActions")


def _no_registry(t: dict[str, Any]) -> None:
    t["Resources"] = {k: r for k, r in t["Resources"].items() if r["Type"] != "Custom::IdleshareClusterRegistry"}


def _early_registry(t: dict[str, Any]) -> None:
    _of(t, "Custom::IdleshareClusterRegistry")["DependsOn"] = []


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (_group, "group 'system:masters' is not bound by rbac.yaml"),
        (_missing, f"{names.ENV_QUEUE_URL} missing"),
        (_extra, f"{names.ENV_CLUSTERS} is not this function's configuration"),
        (_dangling, "resolves to no resource of the stack"),
        (_token, "unresolved CDK token"),
        (_silent, "no alarm action"),
        (_no_registry, "nothing would register the clusters"),
        (_early_registry, "before the registrar's policy is attached"),
    ],
)
def test_each_check_fails_on_an_injected_violation(public: Any, mutate: Any, expected: str) -> None:
    template = copy.deepcopy(public.json)
    mutate(template)
    found = deploy_check.findings(template, MANIFEST)
    assert any(expected in f for f in found), found


def test_rbac_that_binds_another_group_is_found(public: Any) -> None:
    other = MANIFEST.replace(f"name: {names.K8S_GROUP}\n", "name: someone-else\n")
    assert other != MANIFEST
    assert any("is not bound by rbac.yaml" in f for f in deploy_check.rbac_findings(public.json, other))


@pytest.fixture(scope="module")
def asset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("asset") / "asset"
    bundle_into(out, machine_platform())
    return out


def test_the_rehearsal_imports_the_handler_of_every_function_the_stack_deploys(public: Any) -> None:
    deployed = {fn["Properties"]["Handler"] for fn in public.resources("AWS::Lambda::Function").values()}

    assert {h.rsplit(".", 1)[0] for h in deployed} == set(HANDLER_MODULES)


def test_every_handler_imports_from_the_asset_on_python_312(asset: Path) -> None:
    report = check_runtime(asset)
    print("\n".join(report.lines()))  # cold import times (pytest -rP shows them; make deploy-check prints them)
    assert report.version.startswith("3.12."), report.version
    assert report.problems == []
    assert set(report.imports) == set(HANDLER_MODULES) and all(ms > 0 for ms in report.imports.values())


def test_a_dev_only_or_missing_import_in_the_asset_is_found(asset: Path, tmp_path: Path) -> None:
    import shutil

    broken = tmp_path / "asset"
    shutil.copytree(asset, broken)
    router = broken / "idleshare" / "handlers" / "router.py"
    router.write_text(router.read_text() + "\nimport moto  # a dev-only package\n")
    report = check_runtime(broken)
    assert any(p.startswith("import idleshare.handlers.router: ModuleNotFoundError") for p in report.problems), (
        report.problems
    )


def test_the_deploy_check_rehearses_a_shell_without_uv(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", f"{Path.home() / '.local' / 'bin'}:/usr/bin:/bin")
    assert deploy_check.fresh_shell_path().split(":") == ["/usr/bin", "/bin"]
    assert json.loads((deploy_check.REPO_ROOT / "cdk.json").read_text())["app"] == "python3 infra/launch.py"


def test_a_role_binding_whose_role_is_in_another_namespace_is_found(public: Any) -> None:
    assert deploy_check.rbac_findings(public.json, MANIFEST) == []
    # the Kueue config's RoleBinding moved out of the namespace its Role is in
    moved = MANIFEST.replace(
        "kind: RoleBinding\nmetadata:\n  name: idleshare-recompute-kueue-config\n  namespace: kueue-system",
        "kind: RoleBinding\nmetadata:\n  name: idleshare-recompute-kueue-config\n  namespace: default",
    )
    assert moved != MANIFEST
    found = deploy_check.rbac_findings(public.json, moved)
    assert any("refers to Role 'idleshare-recompute-kueue-config'" in f for f in found), found
