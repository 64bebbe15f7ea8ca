"""What `idleshare uninstall` removes (:mod:`idleshare_cli.removal` over a fake cluster and store): exactly the
objects the ownership record holds with their uids (docs/spec.md §3, "Ownership"), LocalQueues first and
ResourceFlavors last; never a namespace; a copy of one of idleshare's objects (its label and marker, another uid)
is kept and named; one whose label someone removed is still removed; a cluster with no record yet is sorted by the
once-only adoption rule, which does not adopt a copy."""

from __future__ import annotations

import copy
from pathlib import Path

from idleshare.adapters.ports import ClusterRecord
from idleshare.domain.kueue import KIND_ORDER
from idleshare.domain.kueue_diff import object_identity
from idleshare.domain.ownership import Record
from idleshare_cli.main import build_parser
from idleshare_cli.plan import plan
from idleshare_cli.removal import uninstall
from tests.fakes import FakeKube, FakeStore

REPO = Path(__file__).parents[2]


def cluster() -> tuple[FakeKube, FakeStore, list[dict]]:
    """The example cluster's objects, created by idleshare's create (each uid recorded as a recompute does)."""
    _, objects = plan(
        (REPO / "events/examples/nodes.json").read_bytes(), (REPO / "events/examples/quotas.json").read_bytes()
    )
    kube, store = FakeKube([]), FakeStore([ClusterRecord("demo", "demo-eks")])
    uids = {object_identity(o): kube.create(o) for o in objects}
    store.put_owned("demo", Record(objects={k: v for k, v in uids.items() if v}))
    return kube, store, objects


def a_copy(kube: FakeKube, identity: tuple[str, str, str], name: str, namespace: str = "") -> tuple[str, str, str]:
    """What ``kubectl get -o yaml``, a rename and ``kubectl create`` make: the label and the marker kept."""
    theirs = copy.deepcopy(kube.objects[identity])
    theirs["metadata"] = {k: v for k, v in theirs["metadata"].items() if k != "uid"}
    theirs["metadata"]["name"] = name
    if namespace:
        theirs["metadata"]["namespace"] = namespace
    kube.objects[object_identity(theirs)] = theirs
    return object_identity(theirs)


def test_only_recorded_objects_are_removed_last_dependency_first_and_namespaces_never():
    kube, store, objects = cluster()
    cq = next(object_identity(o) for o in objects if o["kind"] == "ClusterQueue")
    copied = a_copy(kube, cq, "research-extra-cq")
    dry = uninstall(kube, store, "demo", dry_run=True)
    kinds = [o["kind"] for o in dry.removed]
    assert sorted(map(object_identity, dry.removed)) == sorted(
        object_identity(o) for o in objects if o["kind"] != "Namespace"
    )
    assert kinds == sorted(kinds, key=lambda k: -KIND_ORDER.index(k)) and kinds[0] == "ValidatingAdmissionPolicyBinding"
    assert {o["kind"] for o in dry.namespaces} == {"Namespace"}
    assert [object_identity(o) for o in dry.foreign] == [copied]  # the copy: named, not listed for removal
    assert kube.deletes == 0
    done = uninstall(kube, store, "demo")
    assert [object_identity(o) for o in done.removed] == [object_identity(o) for o in dry.removed]
    assert copied in kube.objects and all(object_identity(o) not in kube.objects for o in done.removed)
    assert store.owned["demo"].objects == {}
    assert store.owned["demo"].removed[0]["object"].startswith("ValidatingAdmissionPolicyBinding/")


def test_an_object_whose_label_and_marker_were_removed_is_still_removed():
    kube, store, objects = cluster()
    cq = next(object_identity(o) for o in objects if o["kind"] == "ClusterQueue")
    kube.objects[cq]["metadata"]["labels"] = {}
    kube.objects[cq]["metadata"]["annotations"] = {}
    assert cq not in {object_identity(o) for o in kube.list_managed()}
    done = uninstall(kube, store, "demo")
    assert cq in {object_identity(o) for o in done.removed} and cq not in kube.objects


def test_with_no_record_yet_the_adoption_rule_removes_idleshares_objects_and_never_a_copy():
    kube, store, objects = cluster()
    store.owned.clear()  # objects an idleshare before the record created
    lq = next(object_identity(o) for o in objects if o["kind"] == "LocalQueue")
    flavor = next(object_identity(o) for o in objects if o["kind"] == "ResourceFlavor")
    copies = {a_copy(kube, lq, "prod-lq", "ml-prod"), a_copy(kube, flavor, "my-flavor")}
    dry = uninstall(kube, store, "demo", dry_run=True)
    assert {object_identity(o) for o in dry.foreign} == copies
    assert sorted(map(object_identity, dry.removed)) == sorted(
        object_identity(o) for o in objects if o["kind"] != "Namespace"
    )


def test_the_uninstall_lines_operations_md_shows_are_command_lines_the_cli_accepts():
    docs = (REPO / "docs/operations.md").read_text()
    lines = [line.split("#")[0] for line in docs.splitlines() if line.startswith("./idleshare uninstall")]
    assert len(lines) == 2 and "--dry-run" in lines[0]
    for line in lines:
        words = line.replace("[--context <name>]", "--context prod").split()[1:]
        args = build_parser().parse_args(words)
        assert (args.kubeconfig, args.context, args.dry_run) == ("~/.kube/config", "prod", "--dry-run" in words)
        assert (args.cluster, args.table) == ("<cluster>", "<table>")


def test_the_table_names_what_was_kept_and_why(capsys):
    from idleshare_cli.removal import Removal
    from idleshare_cli.uninstall import _print

    kube, store, objects = cluster()
    flavor = next(object_identity(o) for o in objects if o["kind"] == "ResourceFlavor")
    copied = a_copy(kube, flavor, "my-flavor")
    lq = next(o for o in objects if o["kind"] == "LocalQueue")
    removal = uninstall(kube, store, "demo", dry_run=True)
    _print("ctx", Removal(removal.removed, removal.namespaces, removal.foreign, [lq]), dry_run=True)
    out = capsys.readouterr().out
    assert f"Would remove {len(removal.removed)} object(s)" in out
    assert "did not record creating (copies of its objects among them)" in out and copied[2] in out
    assert "made anew by someone else" in out and lq["metadata"]["name"] in out
    # the namespaces are said as what idleshare knows of them: labelled as its own, never recorded as created
    (kept,) = [line for line in out.splitlines() if line.startswith("Kept") and "namespace(s)" in line]
    assert "namespace(s) idleshare created" not in kept
    assert "never recorded: whether idleshare created it or it was applied by hand, idleshare cannot tell" in kept
