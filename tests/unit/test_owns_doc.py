"""What idleshare needs and owns in a cluster restates names that live in the code: docs/operations.md's section
(the API versions it writes, the labels, the kinds idleshare writes, the name suffixes and defaults) and docs/getting-started.md's
short paragraph (the Kueue range the stack proves) are checked here against their one place, so renaming one in the
code fails until the document says the new name."""

from __future__ import annotations

import re
from pathlib import Path

from devkit.kube import kueue_versions as stack_versions
from idleshare import names
from idleshare.domain import kueue, kueue_diff, naming
from idleshare.domain import kueue_versions as kv
from idleshare.domain.model import INSTANCE_TYPE_LABEL, PriorityClass, SchedulerConfig, Settings, Snapshot
from idleshare.domain.pool import compute
from idleshare.parse.nodes import parse_nodes
from idleshare.parse.quotas import parse_quotas

REPO = Path(__file__).parents[2]
README_HEADING = "## What idleshare needs and what it owns"
HEADING = "## What idleshare needs and owns in a cluster"


def section(doc: str = "docs/operations.md", heading: str = HEADING) -> str:
    text = (REPO / doc).read_text()
    start = text.index(heading)
    return text[start : text.index("\n## ", start + len(heading))]


def test_the_readme_links_to_the_section_instead_of_restating_it():
    readme = section("docs/getting-started.md", README_HEADING)
    assert "(operations.md#what-idleshare-needs-and-owns-in-a-cluster)" in readme
    assert "| kind |" not in readme and "kueue.x-k8s.io/queue-name" not in readme


def test_the_kueue_versions_and_apis_are_the_ones_the_stack_proves():
    # Given the Kueues the compatibility suite runs on (devkit/kube/kueue_versions.py) and the versions idleshare writes
    minors = sorted(int(v.split(".")[1]) for v in stack_versions.VERSIONS)
    # Then the README names that range, and docs/operations.md every API version idleshare may write
    assert f"Kueue](https://kueue.sigs.k8s.io) v0.{minors[0]} to v0.{minors[-1]}" in section(
        "docs/getting-started.md", README_HEADING
    )
    text = section()
    for version in dict.fromkeys(v for versions in kv.VERSIONS.values() for v in versions):
        assert f"`{version}`" in text, version


def test_the_labels_and_the_field_manager_are_the_codes():
    text = section()
    assert f"`{kueue.MANAGED_BY_LABEL}: {kueue.MANAGED_BY}`" in text
    assert f"`{kueue.TEAM_LABEL}: <team>`" in text
    assert f"field manager `{names.FIELD_MANAGER}`" in text
    assert f"`{kueue_diff.CREATED_BY_ANNOTATION}: {kueue.MANAGED_BY}`" in text
    assert kueue_diff.created_by_idleshare(kueue_diff.with_creation_marker({"metadata": {}}))
    assert f"`{INSTANCE_TYPE_LABEL}`" in text


def test_every_kind_idleshare_writes_is_listed_with_the_name_the_code_gives_it():
    # Given the objects the engine writes for one team with a priority class, on the example nodes
    nodes = parse_nodes((REPO / "events/examples/nodes.json").read_bytes())
    quotas = parse_quotas((REPO / "events/examples/quotas.json").read_bytes())[:1]
    settings, scheduler = Settings(), SchedulerConfig(priority_classes=(PriorityClass("training", 50),))

    result = compute(Snapshot(nodes=nodes, quotas=quotas, scheduler_config=scheduler, settings=settings))
    written = kueue.desired_objects(result, scheduler, settings)
    team = quotas[0].team
    # Then each kind's table row names it as the code does (the team and the class as placeholders)
    rows = {m.group(1): m.group(2) for m in re.finditer(r"^\| `(\w+)` \| (.*?) \|", section(), re.M)}
    assert set(rows) == {o["kind"] for o in written} == set(kueue.KIND_ORDER)
    for obj in written:
        name = obj["metadata"]["name"].replace(team, "<team>").replace("training-", "<priority class>-")
        if obj["kind"] == "ResourceFlavor":
            assert obj["metadata"]["name"] in result.flavors and "the instance type" in rows["ResourceFlavor"]
        else:
            assert f"`{name}`" in rows[obj["kind"]], (obj["kind"], name)


def test_the_defaults_and_suffixes_it_restates_are_the_codes():
    text, defaults = section(), Settings()
    assert f"prefix `{defaults.namespace_prefix}`, cohort `{defaults.cohort_name}`" in text
    queue = naming.local_queue_name("<team>", defaults)
    assert f"`kueue.x-k8s.io/queue-name: {queue}`" in text
    assert f"`kueue.x-k8s.io/priority-class: {naming.priority_class_name('<class>')}`" in text
    assert f"a Cohort `{defaults.cohort_name}`" in text and f"`{defaults.namespace_prefix.rstrip('-')}-*`" in text
