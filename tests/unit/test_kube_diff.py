"""docs/spec.md §3: only objects whose desired state differs are applied; only idleshare's leftovers are deleted."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from idleshare.domain.kueue import KUEUE_API, MANAGED_BY_LABEL, TEAM_LABEL
from idleshare.domain.kueue_diff import CREATED_BY_ANNOTATION, diff, first_difference, foreign, terminating
from tests.corpus.make_corpus import mutate

OURS, P5 = {MANAGED_BY_LABEL: "idleshare"}, "ml.p5.48xlarge"


def meta(name: str, team: str | None = None, namespace: str | None = None) -> dict[str, Any]:
    labels = OURS | ({TEAM_LABEL: team} if team else {})
    return {"name": name, "labels": labels} | ({"namespace": namespace} if namespace else {})


def obj(kind: str, name: str, team: str | None = None, namespace: str | None = None, **body: Any) -> dict[str, Any]:
    api = "v1" if kind == "Namespace" else KUEUE_API
    return {"apiVersion": api, "kind": kind, "metadata": meta(name, team, namespace), **body}


def cq(team: str, nominal: str = "8", *, memory: str = "2Gi", weight: str | None = None) -> dict[str, Any]:
    mem = {"name": "memory", "nominalQuota": memory, "borrowingLimit": "0", "lendingLimit": memory}
    gpu = {"name": "nvidia.com/gpu", "nominalQuota": nominal, "borrowingLimit": "0", "lendingLimit": "0"}
    group = {"coveredResources": ["memory", "nvidia.com/gpu"], "flavors": [{"name": P5, "resources": [mem, gpu]}]}
    spec: dict[str, Any] = {
        "cohortName": "shared-pool",
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": f"hyperpod-ns-{team}"}},
        "resourceGroups": [group],
        "preemption": {"reclaimWithinCohort": "Any", "withinClusterQueue": "Never"},
        "stopPolicy": "None",
    } | ({"fairSharing": {"weight": weight}} if weight is not None else {})
    return obj("ClusterQueue", f"hyperpod-ns-{team}-clusterqueue", team, spec=spec)


def lq(team: str) -> dict[str, Any]:
    spec = {"clusterQueue": f"hyperpod-ns-{team}-clusterqueue"}
    return obj("LocalQueue", f"hyperpod-ns-{team}-localqueue", team, f"hyperpod-ns-{team}", spec=spec)


def ns(team: str) -> dict[str, Any]:
    return obj("Namespace", f"hyperpod-ns-{team}", team)


def rf(flavor: str) -> dict[str, Any]:
    return obj("ResourceFlavor", flavor, spec={"nodeLabels": {"node.kubernetes.io/instance-type": flavor}})


def wpc(name: str, value: int | str = 90, description: str = "inference") -> dict[str, Any]:
    return obj("WorkloadPriorityClass", name, value=value, description=description)


MARKED = {CREATED_BY_ANNOTATION: "idleshare"}


def as_stored(obj: dict[str, Any], *, created: bool = True, **changes: Any) -> dict[str, Any]:
    """What the apiserver returns for ``obj``: server metadata added (with idleshare's creation marker unless
    ``created`` is False: someone else created it), ``changes`` applied by path."""
    server = {"uid": "u-1", "resourceVersion": "42", "generation": 1, "creationTimestamp": "2025-01-01T00:00:00Z"}
    if created:
        server["annotations"] = {**obj["metadata"].get("annotations", {}), **MARKED}
    stored = mutate(obj, ("metadata",), obj["metadata"] | server)
    for path, value in changes.items():
        stored = mutate(stored, tuple(int(p) if p.isdigit() else p for p in path.split("__")), value)
    return stored


def keys(objs: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(o["kind"], o["metadata"]["name"]) for o in objs]


# -- what is applied -----------------------------------------------------------------------------
S, PC, COVERED = as_stored, "inference-priority", ["memory", "nvidia.com/gpu"]
DEFAULTED = {  # what the apiserver adds
    "spec__queueingStrategy": "BestEffortFIFO",
    "spec__flavorFungibility": {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"},
    "spec__preemption__borrowWithinCohort": {"policy": "Never"},
    "status": {"pendingWorkloads": 3},
}
APPLIED = {
    "missing object is applied": (cq("a"), None, True),
    "identical: nothing to send": (cq("a"), S(cq("a")), False),
    "1000 == 1k": (cq("a", "1000"), S(cq("a", "1k")), False),
    "2048Mi == 2Gi": (cq("a", memory="2048Mi"), S(cq("a", memory="2Gi")), False),
    "0.5Gi == 512Mi": (cq("a", memory="0.5Gi"), S(cq("a", memory="512Mi")), False),
    "weight 1 == 1000m": (cq("a", weight="1"), S(cq("a", weight="1000m")), False),
    "quota changed": (cq("a", "8"), S(cq("a", "16")), True),
    "2Gi != 2G": (cq("a", memory="2Gi"), S(cq("a", memory="2G")), True),
    "weight changed": (cq("a", weight="2"), S(cq("a", weight="1")), True),
    "fairSharing added": (cq("a", weight="2"), S(cq("a")), True),
    "apiserver defaults and status are ignored": (cq("a"), S(cq("a"), **DEFAULTED), False),
    "extra label of someone else is ignored": (
        cq("a"),
        S(cq("a"), metadata__labels={**OURS, TEAM_LABEL: "a", "o": "p"}),
        False,
    ),
    "team label changed": (cq("a"), S(cq("a"), metadata__labels={**OURS, TEAM_LABEL: "b"}), True),
    "our label missing": (cq("a"), S(cq("a"), metadata__labels={TEAM_LABEL: "a"}), True),
    "stopPolicy changed": (cq("a"), S(cq("a"), spec__stopPolicy="Hold"), True),
    "non-quantity strings compare as text": (cq("a"), S(cq("a"), spec__cohortName="other"), True),
    "list length differs": (cq("a"), S(cq("a"), spec__resourceGroups__0__coveredResources=[*COVERED, "cpu"]), True),
    "WPC same": (wpc(PC), S(wpc(PC)), False),
    "WPC value": (wpc(PC, 90), S(wpc(PC, 80)), True),
    "WPC value type": (wpc(PC, 90), S(wpc(PC, "90")), True),
    "WPC description": (wpc(PC, description="new"), S(wpc(PC, description="old")), True),
    "LocalQueue same": (lq("a"), S(lq("a")), False),
    "LQ retargeted": (lq("a"), S(lq("a"), spec__clusterQueue="hyperpod-ns-b-clusterqueue"), True),
}


@pytest.mark.parametrize(("desired", "current", "applied"), APPLIED.values(), ids=APPLIED)
def test_an_object_is_applied_only_when_the_cluster_does_not_hold_its_desired_state(desired, current, applied):
    to_apply, to_delete = diff([desired], [current] if current else [])
    assert (keys(to_apply), to_delete) == (keys([desired]) if applied else [], [])


def test_a_field_idleshare_owns_but_no_longer_sets_makes_the_object_differ():
    before = cq("a", weight="3")
    owned = {"f:metadata": {"f:labels": {"f:app.kubernetes.io/managed-by": {}}}, "f:spec": {"f:fairSharing": {}}}
    entry = {"manager": "idleshare", "operation": "Apply", "fieldsType": "FieldsV1", "fieldsV1": owned}
    current = as_stored(before, metadata__managedFields=[entry])
    to_apply, _ = diff([cq("a")], [current])  # server-side apply removes the field idleshare no longer sets
    assert keys(to_apply) == [("ClusterQueue", "hyperpod-ns-a-clusterqueue")]
    assert "spec.fairSharing" in (first_difference(cq("a"), current) or "")
    # ... but not when that field belongs to another manager: it is none of idleshare's business
    entry_other = {**entry, "manager": "kubectl"}
    assert diff([cq("a")], [as_stored(before, metadata__managedFields=[entry_other])])[0] == []


def test_owned_map_list_entries_are_matched_by_key():
    # Given idleshare owns the nodeLabels of flavor ml.p5, and entries of a map-list ("k:" keys)
    owned = {"f:spec": {"f:nodeLabels": {"f:node.kubernetes.io/instance-type": {}}}}
    entry = {"manager": "idleshare", "operation": "Apply", "fieldsType": "FieldsV1", "fieldsV1": owned}
    current = as_stored(rf("ml.p5"), metadata__managedFields=[entry])
    # Then a desired flavor that still sets those fields is in sync
    assert first_difference(rf("ml.p5"), current) is None
    keyed = {"f:spec": {"f:items": {'k:{"name":"x"}': {".": {}, "f:v": {}}}}}
    want = {"spec": {"items": [{"name": "x", "v": 1}]}}
    cur = {"spec": {"items": [{"name": "x", "v": 1}]}, "metadata": {"managedFields": [{**entry, "fieldsV1": keyed}]}}
    assert first_difference(want, cur) is None
    gone = {"spec": {"items": [{"name": "y", "v": 1}]}}
    assert first_difference(gone, cur) is not None


# -- what is deleted, and never ---------------------------------------------------------------------------------
DELETING = {"deletionTimestamp": "2026-01-01T00:00:00Z", "finalizers": ["kueue.x-k8s.io/resource-in-use"]}


def terminating_copy(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` as the apiserver returns it after a delete its finalizer holds back (workloads still admitted)."""
    stored = as_stored(obj)
    stored["metadata"].update(copy.deepcopy(DELETING))
    return stored


def stored(*objs: dict[str, Any]) -> list[dict[str, Any]]:
    return [as_stored(o) for o in objs]


LQ_GONE, CQ_GONE = ("LocalQueue", "hyperpod-ns-gone-localqueue"), ("ClusterQueue", "hyperpod-ns-gone-clusterqueue")
DIFFS = {
    # a's namespace exists (with a label someone changed): only b's is ensured, a's is never patched
    "namespace-only-when-missing": (
        [ns("a"), ns("b")],
        [as_stored(ns("a"), metadata__labels={"x": "y"})],
        [("Namespace", "hyperpod-ns-b")],
        [],
    ),
    "namespace-never-deleted": ([], stored(ns("gone"), cq("gone"), lq("gone")), [], [LQ_GONE, CQ_GONE]),
    "gone-team-in-reverse-dependency-order": (
        [rf("ml.p5"), ns("a"), cq("a"), lq("a")],
        stored(rf("ml.p5"), ns("a"), cq("a"), lq("a"), ns("b"), cq("b"), lq("b")),
        [],
        [("LocalQueue", "hyperpod-ns-b-localqueue"), ("ClusterQueue", "hyperpod-ns-b-clusterqueue")],
    ),
    # a flavor with no node left, a priority class no longer configured: after the queues, the flavor last
    "shared-objects-after-the-queues": (
        [rf("ml.p5")],
        stored(rf("ml.p5"), rf("ml.g5"), wpc("old-priority"), cq("gone"), lq("gone")),
        [],
        [LQ_GONE, CQ_GONE, ("WorkloadPriorityClass", "old-priority"), ("ResourceFlavor", "ml.g5")],
    ),
    "a-kind-idleshare-does-not-write": ([], [obj("Workload", "job-1", "gone", "hyperpod-ns-gone")], [], []),
    # team b's queues deleted by an earlier recompute, still held by Kueue's finalizer: left to finish
    "terminating-not-deleted-again": (
        [cq("a")],
        [as_stored(cq("a")), terminating_copy(cq("b")), terminating_copy(lq("b")), as_stored(lq("c"))],
        [],
        [("LocalQueue", "hyperpod-ns-c-localqueue")],
    ),
    "terminating-namespace-not-created": ([ns("b")], [terminating_copy(ns("b"))], [], []),
    "applied-in-the-given-dependency-order": (
        [rf("ml.p5"), wpc("inference-priority"), ns("a"), cq("a"), lq("a")],
        [],
        keys([rf("ml.p5"), wpc("inference-priority"), ns("a"), cq("a"), lq("a")]),
        [],
    ),
    # objects that are not idleshare's (a caller passed more than list_managed returns) are never deleted
    **{
        f"not-ours-{name}": (
            [],
            [as_stored(o, metadata__labels=labels) for o in (cq("x"), lq("x"), rf("ml.x"))],
            [],
            [],
        )
        for name, labels in [
            ("no-labels", {}),
            ("team-label-only", {TEAM_LABEL: "x"}),
            ("managed-by-someone-else", {MANAGED_BY_LABEL: "helm", TEAM_LABEL: "x"}),
        ]
    },
}


# -- what idleshare did not create: never written, never deleted (issue 35) ------------------------------------
FOREIGN = {"ResourceFlavor": rf("ml.p5"), "WorkloadPriorityClass": wpc(PC), "Cohort": obj("Cohort", "shared-pool")}
FOREIGN |= {"ClusterQueue": cq("a"), "LocalQueue": lq("a")}
# what another manager's object can look like under a name idleshare wants: as they made it, with idleshare's
# managed-by label (an older Take applied to it), with its spec too (and with idleshare's fields), a foreign
# annotation beside it: never the creation marker
LOOKS = {
    "as-they-made-it": {"metadata__labels": {"team": "platform"}},
    "labelled-by-an-old-take": {},
    "labelled-and-other-annotations": {"metadata__annotations": {"note": "platform's", CREATED_BY_ANNOTATION: "x"}},
}


@pytest.mark.parametrize("look", LOOKS.values(), ids=LOOKS)
@pytest.mark.parametrize("kind", FOREIGN)
def test_an_object_idleshare_did_not_create_is_neither_written_nor_deleted(kind, look):
    theirs = as_stored(FOREIGN[kind], created=False, **look)
    labelled = ((theirs["metadata"].get("labels") or {}).get(MANAGED_BY_LABEL)) == "idleshare"
    changed = mutate(FOREIGN[kind], ("metadata", "labels", "changed"), "yes")  # idleshare wants it otherwise
    # wanted (the same, or otherwise): not applied, and named as foreign when the managed list shows it
    for wanted in (FOREIGN[kind], changed):
        to_apply, to_delete = diff([wanted], [theirs])
        assert (to_apply, to_delete) == ([], [])
        assert keys(foreign([wanted], [theirs])) == [(kind, FOREIGN[kind]["metadata"]["name"])]
    # not wanted any more: never deleted, named nowhere (no name idleshare wants)
    assert diff([], [theirs]) == ([], []) and foreign([], [theirs]) == []
    # ... while the same object created by idleshare is applied when it differs, and deleted when not wanted
    ours = as_stored(FOREIGN[kind])
    assert keys(diff([changed], [ours])[0]) == keys([changed]) and diff([], [ours])[1] == [ours]
    assert foreign([changed], [ours]) == [] and labelled == ("team" not in str(look))


def test_the_creation_marker_is_not_a_difference_and_a_namespace_needs_none():
    # the marker is set by the create only, never applied: an object that carries it is in sync without it
    assert first_difference(cq("a"), as_stored(cq("a"))) is None
    assert diff([cq("a")], [as_stored(cq("a"))]) == ([], [])
    # a team's namespace is only ever created if missing, never patched nor deleted: one that exists is used
    assert diff([ns("a")], [as_stored(ns("a"), created=False)]) == ([], [])
    assert foreign([ns("a")], [as_stored(ns("a"), created=False)]) == []


@pytest.mark.parametrize(("desired", "current", "applied", "deleted"), DIFFS.values(), ids=DIFFS)
def test_what_is_applied_and_deleted(desired, current, applied, deleted):
    to_apply, to_delete = diff(desired, current)
    assert (keys(to_apply), keys(to_delete)) == (applied, deleted)


def test_an_object_wanted_again_while_it_terminates_is_left_until_it_is_gone():
    # team b's ClusterQueue terminating (with other values than desired), and team b desired again
    current = [terminating_copy(cq("b", nominal="4")), as_stored(lq("b"))]
    desired = [cq("b", nominal="16"), lq("b")]
    to_apply, to_delete = diff(desired, current)
    # neither applied (that would land on the object going away) nor deleted again
    assert to_apply == [] and to_delete == []
    assert keys(terminating(desired, current)) == [("ClusterQueue", "hyperpod-ns-b-clusterqueue")]
    # once it is gone, the next diff creates it
    to_apply, _ = diff(desired, [as_stored(lq("b"))])
    assert keys(to_apply) == [("ClusterQueue", "hyperpod-ns-b-clusterqueue")]


def test_the_docs_name_the_creation_marker_the_issue_and_the_metric_as_the_code_does():
    from pathlib import Path

    from idleshare import names
    from idleshare.service.recompute import FOREIGN_OBJECT

    docs = Path(__file__).resolve().parents[2] / "docs"
    operations, spec, decisions = ((docs / f).read_text() for f in ("operations.md", "spec.md", "decisions.md"))
    for text in (operations, spec, decisions):
        assert CREATED_BY_ANNOTATION in text and FOREIGN_OBJECT in text
    assert (
        f"`{names.METRIC_FOREIGN_OBJECTS}` > 0" in operations and f"| `{names.METRIC_FOREIGN_OBJECTS}` |" in operations
    )
    assert f"kubectl annotate <kind> <name> [-n <namespace>] {CREATED_BY_ANNOTATION}=idleshare" in operations
