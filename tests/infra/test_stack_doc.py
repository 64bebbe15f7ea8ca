"""infra/README.md's "The stack as synthesized" is the synthesized template, as `make docs` renders it: the section
and a fresh synth agree, and a change to the template or to infra/k8s/rbac.yaml changes what the section says. The
other documents link to it rather than restate a function, a grant, an alarm or an access entry."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest

from devkit import docgen
from idleshare import names
from infra import stack_doc
from infra.constructs.eks_access import RBAC_MANIFEST
from tests.infra.conftest import REPO_ROOT, policy_statements


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return stack_doc.synthesize()


@pytest.fixture(scope="module")
def rendered(template) -> str:
    return stack_doc.render(template, RBAC_MANIFEST.read_text())


def documented() -> str:
    return docgen.section((REPO_ROOT / "infra" / "README.md").read_text(), "stack")


def test_the_section_is_the_synthesized_template(rendered) -> None:
    assert documented() == rendered, "infra/README.md's stack section differs from the template: run `make docs`"


def test_every_function_alarm_access_entry_and_output_of_the_template_is_in_it(template, rendered) -> None:
    kinds = {r["Type"] for r in template["Resources"].values()}
    assert {"AWS::Lambda::Function", "AWS::CloudWatch::Alarm", "AWS::EKS::AccessEntry"} <= kinds
    handlers = {
        r["Properties"]["Handler"] for r in template["Resources"].values() if r["Type"] == "AWS::Lambda::Function"
    }
    # every function idleshare configures (names.FUNCTION_ENV), each with its role's every action
    assert handlers == set(names.FUNCTION_ENV)
    assert all(f"`{h}`" in rendered for h in handlers)
    for _, _, statement in policy_statements(template):
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        assert f"`{', '.join(actions)}`" in rendered
    alarms = [r for r in template["Resources"].values() if r["Type"] == "AWS::CloudWatch::Alarm"]
    assert len(re.findall(r"^\| \S+ \| .* \| Observability/AlarmTopic \|$", rendered, re.M)) == len(alarms)
    assert all(f"| `{key}` |" in rendered for key in template["Outputs"] if key != "BootstrapVersion")


def _drop_action(template: dict[str, Any], action: str) -> dict[str, Any]:
    changed = copy.deepcopy(template)
    for res in changed["Resources"].values():
        if res["Type"] == "AWS::IAM::Policy":
            for s in res["Properties"]["PolicyDocument"]["Statement"]:
                if isinstance(s["Action"], list) and action in s["Action"]:
                    s["Action"].remove(action)
    return changed


def test_a_changed_template_or_rbac_changes_the_section(template, rendered) -> None:
    # a grant dropped (the recompute's DeleteItem), a function resized, an alarm added, a group unbound
    dropped = stack_doc.render(_drop_action(template, "dynamodb:DeleteItem"), RBAC_MANIFEST.read_text())
    assert dropped != rendered and "dynamodb:UpdateItem, dynamodb:DeleteItem`" not in dropped

    resized = copy.deepcopy(template)
    fn = next(r for r in resized["Resources"].values() if r["Type"] == "AWS::Lambda::Function")
    fn["Properties"]["MemorySize"] = 4096
    assert "4096 MB" in stack_doc.render(resized, RBAC_MANIFEST.read_text())

    more = copy.deepcopy(template)
    logical_id, alarm = next((k, r) for k, r in more["Resources"].items() if r["Type"] == "AWS::CloudWatch::Alarm")
    extra = copy.deepcopy(alarm)
    extra["Metadata"][stack_doc.PATH_METADATA] = "idleshare/Observability/QuotaOverriddenAlarm-ml-cluster/Resource"
    more["Resources"][logical_id + "X"] = extra
    assert "| QuotaOverriddenAlarm-<c> |" in stack_doc.render(more, RBAC_MANIFEST.read_text())

    unbound = RBAC_MANIFEST.read_text().replace("name: idleshare-node-watcher\n", "name: someone-else\n")
    assert "**none: rbac.yaml binds no ClusterRole to it**" in stack_doc.render(template, unbound)


def test_the_other_documents_link_to_it_instead_of_restating_it() -> None:
    readme = (REPO_ROOT / "README.md").read_text()
    assert "infra/README.md#the-stack-as-synthesized" in readme
    # the grants, the functions, the alarms are not restated (they were, and drifted)
    for doc in ("README.md", "docs/architecture.md", "docs/operations.md"):
        text = (REPO_ROOT / doc).read_text()
        assert "dynamodb:" not in text and "`GetItem`/`Query`" not in text, doc
    infra_readme = (REPO_ROOT / "infra" / "README.md").read_text()
    outside = infra_readme.replace(docgen.section(infra_readme, "stack"), "")
    assert "dynamodb:" not in outside and "Alarm`" not in outside


def test_docs_operations_tells_what_to_do_for_every_alarm_and_only_those(rendered) -> None:
    alarms = set(re.findall(r"^\| (\S+) \| .* \| Observability/AlarmTopic \|$", rendered, re.M))
    ops = (REPO_ROOT / "docs" / "operations.md").read_text()
    table = ops[ops.index("## Alarms: what each means") : ops.index("## Metrics")]
    rows = set(re.findall(r"^\| `([^`]+)` \|", table, re.M)) - {names.METRIC_POOL_ISSUES}
    assert rows == alarms
