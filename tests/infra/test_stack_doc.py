"""infra/README.md's "The stack as synthesized" is the synthesized template, as `make docs` renders it: the section
and a fresh synth agree, and a change to the template or to infra/k8s/rbac.yaml changes what the section says. The
other documents link to it rather than restate a function, a grant, an alarm or an access entry."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest

from devkit import docgen
from idleshare import names, timings
from infra import stack_doc
from infra.constructs.eks_access import RBAC_MANIFEST, rbac_text
from tests.infra.conftest import REPO_ROOT, policy_statements


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return stack_doc.synthesize()


@pytest.fixture(scope="module")
def rendered(template) -> str:
    return stack_doc.render(template, rbac_text())


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
    dropped = stack_doc.render(_drop_action(template, "dynamodb:DeleteItem"), rbac_text())
    assert dropped != rendered and "dynamodb:UpdateItem, dynamodb:DeleteItem`" not in dropped

    resized = copy.deepcopy(template)
    fn = next(r for r in resized["Resources"].values() if r["Type"] == "AWS::Lambda::Function")
    fn["Properties"]["MemorySize"] = 4096
    assert "4096 MB" in stack_doc.render(resized, rbac_text())

    more = copy.deepcopy(template)
    logical_id, alarm = next((k, r) for k, r in more["Resources"].items() if r["Type"] == "AWS::CloudWatch::Alarm")
    extra = copy.deepcopy(alarm)
    extra["Metadata"][stack_doc.PATH_METADATA] = "idleshare/Observability/QuotaOverriddenAlarm-ml-cluster/Resource"
    more["Resources"][logical_id + "X"] = extra
    assert "| QuotaOverriddenAlarm-<c> |" in stack_doc.render(more, rbac_text())

    unbound = RBAC_MANIFEST.read_text().replace("name: idleshare-node-watcher\n", "name: someone-else\n")
    assert "**none: rbac.yaml binds no ClusterRole to it**" in stack_doc.render(template, unbound)


def test_the_other_documents_link_to_it_instead_of_restating_it() -> None:
    deploy = (REPO_ROOT / "docs" / "getting-started.md").read_text()  # the deploy the README links to
    assert "infra/README.md#the-stack-as-synthesized" in deploy
    # the grants, the functions, the alarms are not restated (they were, and drifted)
    for doc in ("README.md", "docs/getting-started.md", "docs/architecture.md", "docs/operations.md"):
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


ALARM_PROSE = {
    # docs/operations.md's "fires when" of an alarm, as the synthesized alarm says it: {cmp} {threshold} compared
    # in {datapoints} of {periods} periods of {period} minutes ({window}: datapoints x period, in minutes)
    "ShortfallAlarm-<c>": "> {threshold} for {window} minutes",
    "IdleWhilePendingAlarm-<c>": "> {threshold} for {window} minutes",
    "RecomputeErrorsAlarm": "in {datapoints} of {periods} periods of {period} minutes",
    "WatchNotRunning-<c>": (
        "below half of {period} minutes of holds, or missing, for {datapoints} periods of {period} minutes"
    ),
    "UnboundPodsAlarm-<c>": "≥ {threshold}",
    "PermanentFailuresAlarm": "≥ {threshold}",
}


def _alarm_windows(rendered: str) -> dict[str, dict[str, str]]:
    rows = re.findall(r"^\| (\S+) \| .* \| ([<>≥≤]) (\S+) in (\d+) of (\d+) × (\d+) s \| (\w+) \|", rendered, re.M)
    return {
        name: {
            "cmp": cmp,
            "threshold": threshold,
            "datapoints": datapoints,
            "periods": periods,
            "period": f"{int(seconds) // 60}",
            "window": f"{int(datapoints) * int(seconds) // 60}",
            # half of what a watch held for the default node_watch_seconds each minute of the period adds up to
            "half": f"{int(seconds) // 60 * timings.DEFAULT_NODE_WATCH_SECONDS // 2}",
        }
        for name, cmp, threshold, datapoints, periods, seconds, _ in rows
    }


def test_docs_operations_states_each_alarms_threshold_and_window_as_the_template_has_them(rendered) -> None:
    # Given each alarm as synthesized and docs/operations.md's "fires when" of it
    windows = _alarm_windows(rendered)
    ops = (REPO_ROOT / "docs" / "operations.md").read_text()
    table = ops[ops.index("## Alarms: what each means") : ops.index("## Metrics")]
    fires = dict(re.findall(r"^\| `([^`]+)` \| ([^|]+) \|", table, re.M))
    # Then the prose says the template's threshold and window
    assert set(ALARM_PROSE) <= set(windows), set(ALARM_PROSE) - set(windows)
    for alarm, prose in ALARM_PROSE.items():
        assert prose.format(**windows[alarm]) in fires[alarm], (alarm, fires[alarm], windows[alarm])
    # and the watch's "half of" is the template's threshold
    watch = windows["WatchNotRunning-<c>"]
    assert (watch["cmp"], watch["threshold"]) == ("<", watch["half"])


def test_a_changed_alarm_window_disagrees_with_the_prose(rendered) -> None:
    changed = rendered.replace("| > 0 in 3 of 3 × 300 s |", "| > 0 in 4 of 4 × 300 s |")
    prose = ALARM_PROSE["ShortfallAlarm-<c>"].format(**_alarm_windows(changed)["ShortfallAlarm-<c>"])
    assert prose == "> 0 for 20 minutes"
    assert prose not in (REPO_ROOT / "docs" / "operations.md").read_text()


PROSE_DOCS = (
    "README.md",
    "docs/getting-started.md",
    "docs/operations.md",
    "docs/architecture.md",
    "events/README.md",
    "docs/spec.md",
)


def test_every_stack_output_and_alarm_the_prose_names_is_the_templates(rendered) -> None:
    # Given the outputs and alarms of the synthesized template (its generated description)
    outputs = set(re.findall(r"^\| `(\w+)` \|", rendered, re.M))
    alarms = set(re.findall(r"^\| (\S+Alarm\S*|WatchNotRunning\S*) \|", rendered, re.M))
    assert outputs and alarms
    for doc in PROSE_DOCS:
        text = " ".join((REPO_ROOT / doc).read_text().split())
        # Then every output the prose names is one, and every alarm (`<cluster>` as the template's `<c>`)
        named = set(re.findall(r"(?:stack output|output) `(\w+)`|`(\w+)` output", text))
        assert {a or b for a, b in named} <= outputs, (doc, {a or b for a, b in named} - outputs)
        prose_alarms = {
            a.replace("<cluster>", "<c>") for a in re.findall(r"`(\w+Alarm[^`]*|WatchNotRunning[^`]*)`", text)
        }
        assert prose_alarms <= alarms, (doc, prose_alarms - alarms)
