"""The one Kueue model written down to each version a cluster serves, and read back up (domain/kueue_versions.py),
checked against the CRD schemas of each Kueue release idleshare supports (as each one's pinned module ships them).

The schema check is the API server's structural one, recursively: every field declared (unless the schema keeps
unknown fields), of its type, in its enum, matching its pattern, within its length and item bounds, required
fields present. Kueue's CEL rules and webhook are the real stack's to prove (tests/kube/test_crds.py)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from functools import cache
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from devkit.kube import kueue_versions as stack_versions
from idleshare.domain import kueue_versions as kv
from idleshare.domain.document import pool_document
from idleshare.domain.kueue import desired_objects
from idleshare.domain.kueue_fit import with_kueue_api
from idleshare.domain.model import PriorityClass, SchedulerConfig, Settings
from tests.builders import CLUSTER, QUOTAS, objects

RELEASES = list(stack_versions.VERSIONS)
"""Every Kueue the stack runs; each one's CRDs read from its pinned module (:func:`devkit.kube.kueue_versions.crd_dir`)."""
PLURAL = {
    "ClusterQueue": "clusterqueues",
    "Cohort": "cohorts",
    "LocalQueue": "localqueues",
    "ResourceFlavor": "resourceflavors",
    "WorkloadPriorityClass": "workloadpriorityclasses",
}
WRITTEN = tuple(PLURAL)


@cache
def crd(release: str, kind: str) -> dict[str, Any]:
    path = stack_versions.crd_dir(release) / f"kueue.x-k8s.io_{PLURAL[kind]}.yaml"
    found: dict[str, Any] = yaml.safe_load(path.read_text())
    assert found["spec"]["names"]["kind"] == kind
    return found


def served(release: str) -> dict[str, list[str]]:
    """version -> kinds, as the API server's discovery lists them for this release's CRDs (Workload: as ClusterQueue,
    whose versions it shares in every release)."""
    out: dict[str, list[str]] = {}
    for kind in WRITTEN:
        for version in crd(release, kind)["spec"]["versions"]:
            if version["served"]:
                out.setdefault(version["name"], []).append(kind)
                if kind == "ClusterQueue":
                    out[version["name"]].append("Workload")
    return out


def schema(release: str, kind: str, version: str) -> dict[str, Any]:
    (found,) = [v for v in crd(release, kind)["spec"]["versions"] if v["name"] == version]
    result: dict[str, Any] = found["schema"]["openAPIV3Schema"]
    return result


_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
}


def violations(value: Any, s: Mapping[str, Any], path: str = "") -> Iterator[str]:
    """Where ``value`` breaks the structural schema ``s`` (the API server's checks, CEL aside)."""
    if s.get("x-kubernetes-int-or-string"):
        if isinstance(value, bool) or not isinstance(value, int | str):
            yield f"{path}: {value!r} is not an int or string"
        return
    kind = s.get("type")
    if kind and (not isinstance(value, _TYPES[kind]) or (kind != "boolean" and isinstance(value, bool))):
        yield f"{path}: {value!r} is not of type {kind}"
        return
    if "enum" in s and value not in s["enum"]:
        yield f"{path}: {value!r} not in enum {s['enum']}"
    if isinstance(value, str):
        if "pattern" in s and not re.search(s["pattern"], value):
            yield f"{path}: {value!r} does not match {s['pattern']}"
        if len(value) > s.get("maxLength", len(value)):
            yield f"{path}: longer than {s['maxLength']}"
    if isinstance(value, list):
        if len(value) > s.get("maxItems", len(value)):
            yield f"{path}: more than {s['maxItems']} items"
        for i, item in enumerate(value):
            yield from violations(item, s.get("items", {}), f"{path}[{i}]")
    if isinstance(value, dict):
        for name in s.get("required", ()):
            if name not in value:
                yield f"{path}.{name}: required"
        props = s.get("properties")
        for k, v in value.items():
            if props is not None and k in props:
                yield from violations(v, props[k], f"{path}.{k}")
            elif isinstance(s.get("additionalProperties"), Mapping):
                yield from violations(v, s["additionalProperties"], f"{path}.{k}")
            elif props is not None and not s.get("x-kubernetes-preserve-unknown-fields") and path != ".metadata":
                yield f"{path}.{k}: field not declared in schema"


def every_desired() -> list[dict[str, Any]]:
    """Every field idleshare writes, each value it can take: the builders' cluster (four strategies, fair-sharing
    weights, a disabled team: stopPolicy Hold, preemption LowerPriority and Never) and a Cohort with a parent (the
    other renamed field)."""
    _, found = objects(CLUSTER, QUOTAS)
    cohort = next(o for o in found if o["kind"] == "Cohort")
    found.append({**cohort, "spec": {**cohort["spec"], "parentName": "root", "fairSharing": {"weight": "2"}}})
    return found


def leaves(obj: Any, path: str = "") -> set[str]:
    if isinstance(obj, Mapping):
        return set().union(*(leaves(v, f"{path}.{k}") for k, v in obj.items())) if obj else {path}
    if isinstance(obj, list):
        return set().union(*(leaves(v, f"{path}[]") for v in obj)) if obj else {path}
    return {path}


def test_the_desired_objects_set_every_field_the_check_covers() -> None:
    """The objects checked below do set what the spec says idleshare writes (a field dropped from the builders
    would silently leave it unchecked)."""
    paths = set().union(*(leaves(o) for o in every_desired()))
    for field in (
        ".spec.cohortName",
        ".spec.parentName",
        ".spec.fairSharing.weight",
        ".spec.stopPolicy",
        ".spec.preemption.reclaimWithinCohort",
        ".spec.preemption.withinClusterQueue",
        ".spec.resourceGroups[].flavors[].resources[].lendingLimit",
        ".spec.resourceGroups[].flavors[].resources[].borrowingLimit",
        ".spec.namespaceSelector.matchLabels.kubernetes.io/metadata.name",
        ".spec.clusterQueue",
        ".value",
        ".description",
    ):
        assert field in paths, field
    values = {o["spec"].get("stopPolicy") for o in every_desired() if o["kind"] == "ClusterQueue"}
    assert values == {"None", "Hold"}
    within = {o["spec"]["preemption"]["withinClusterQueue"] for o in every_desired() if o["kind"] == "ClusterQueue"}
    assert within == {"LowerPriority", "Never"}


@pytest.mark.parametrize("release", RELEASES)
def test_every_object_written_down_passes_each_served_versions_schema(release: str) -> None:
    """Each object, written down to every version of its kind this release serves (not only the newest one), is
    one that version's schema takes."""
    kinds = served(release)
    checked = 0
    for version, listed in kinds.items():
        api = kv.KueueApi(tuple((kind, (version,)) for kind in kv.VERSIONS if kind in listed))
        for obj in every_desired():
            if obj["kind"] not in listed or obj["kind"] == "Namespace":
                continue
            written = kv.down(obj, api)
            assert written["apiVersion"] == f"kueue.x-k8s.io/{version}"
            assert list(violations(written, schema(release, obj["kind"], version))) == [], (release, version)
            checked += 1
    assert checked >= len(WRITTEN)


@pytest.mark.parametrize("release", RELEASES)
def test_the_newest_served_version_is_chosen_and_names_the_release(release: str) -> None:
    api = kv.kueue_api(served(release))
    for kind in WRITTEN:
        versions = [v["name"] for v in crd(release, kind)["spec"]["versions"] if v["served"]]
        assert api.version(kind) in versions
        assert kv.VERSIONS[kind].index(api.version(kind)) == min(kv.VERSIONS[kind].index(v) for v in versions)
    label = api.release
    low, _, high = label.removeprefix("v0.").rstrip("+").partition("–v0.")
    minor = int(release.split(".")[1])
    assert int(low) <= minor <= (int(high) if high else int(low) if not label.endswith("+") else 99), label
    assert pool_document_of(api)["kueueApi"] == api.document()


def pool_document_of(api: kv.KueueApi) -> dict[str, Any]:
    result, manifests = objects(CLUSTER, QUOTAS)
    return pool_document(with_kueue_api(result, manifests, api))


def test_the_hub_object_is_not_what_an_older_version_takes() -> None:
    """The check can fail: the v1beta2 ClusterQueue as it is (``cohortName``) is refused by v1beta1's schema, and a
    value outside an enum is caught."""
    cq = next(o for o in every_desired() if o["kind"] == "ClusterQueue")
    assert ".spec.cohortName: field not declared in schema" in violations(
        cq, schema("v0.14.0", "ClusterQueue", "v1beta1")
    )
    bad = {**cq, "spec": {**cq["spec"], "stopPolicy": "Paused"}}
    assert any("enum" in v for v in violations(bad, schema("v0.19.2", "ClusterQueue", "v1beta2")))


KEYS = st.sampled_from(["cohort", "cohortName", "parent", "parentName", "nominalQuota", "x"])
SPEC = st.recursive(
    st.none() | st.booleans() | st.integers() | st.sampled_from(["", "a", "1Gi"]),
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(KEYS, inner, max_size=2),
    max_leaves=5,
)


@given(
    kind=st.sampled_from(WRITTEN),
    spec=st.dictionaries(KEYS, SPEC, max_size=3),
    versions=st.lists(st.sampled_from(kv.KNOWN_VERSIONS), min_size=1, max_size=3, unique=True),
)
def test_down_then_up_gives_back_the_object(kind: str, spec: dict[str, Any], versions: list[str]) -> None:
    """Any object (any values, renamed fields or not) written down to any version its kind has, read back up, is
    the object written."""
    order = kv.VERSIONS[kind]
    kept = tuple(sorted((v for v in versions if v in order), key=order.index)) or order[:1]
    api = kv.KueueApi(tuple((k, kept if k == kind else (kv.HUB,)) for k in kv.VERSIONS))
    obj = {"apiVersion": kv.HUB_API, "kind": kind, "metadata": {"name": "a"}, "spec": spec}
    before = json.dumps(obj, sort_keys=True)
    clash = [old for _, old in kv.RENAMED.get((kind, kept[0]), ()) if old.split(".")[1] in spec]
    if clash:  # a hub object has no field of the older name: named, never written over nor read back as another
        with pytest.raises(ValueError, match=f"{kind}/a: {clash[0]}: not a field of kueue.x-k8s.io/v1beta2"):
            kv.down(obj, api)
    else:
        assert kv.up(kv.down(obj, api)) == obj
    assert json.dumps(obj, sort_keys=True) == before  # neither changes what it is given


def test_renamed_fields_are_written_under_the_old_names() -> None:
    cq = next(o for o in every_desired() if o["kind"] == "ClusterQueue")
    written = kv.down(cq, kv.pinned("v1beta1"))
    assert written["spec"]["cohort"] == cq["spec"]["cohortName"] and "cohortName" not in written["spec"]
    cohort = every_desired()[-1]
    assert kv.down(cohort, kv.pinned("v1alpha1"))["spec"]["parent"] == "root"
    assert kv.down(cohort, kv.pinned("v1beta1"))["spec"]["parentName"] == "root"


def test_managed_fields_written_in_an_older_version_are_read_under_the_hub_names() -> None:
    """idleshare's apply entry recorded by a v1beta1 write says ``f:cohort``: read up, it is ``f:cohortName``, so the
    diff does not take the field for one idleshare owns and no longer sets."""
    entry = {
        "manager": "idleshare",
        "operation": "Apply",
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "fieldsV1": {"f:spec": {"f:cohort": {}, "f:stopPolicy": {}}},
    }
    other = {"manager": "kueue", "apiVersion": "kueue.x-k8s.io/v1beta2", "fieldsV1": {"f:status": {}}}
    obj = {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "ClusterQueue",
        "metadata": {"name": "q", "managedFields": [entry, other]},
        "spec": {"cohort": "p", "stopPolicy": "None"},
    }
    read = kv.up(obj)
    assert read["spec"] == {"cohortName": "p", "stopPolicy": "None"}
    assert read["metadata"]["managedFields"] == [
        {**entry, "apiVersion": kv.HUB_API, "fieldsV1": {"f:spec": {"f:stopPolicy": {}, "f:cohortName": {}}}},
        other,
    ]


def test_an_apiversion_idleshare_does_not_read_is_named() -> None:
    with pytest.raises(ValueError, match=r"ClusterQueue/q: apiVersion 'kueue.x-k8s.io/v1alpha1'"):
        kv.up({"apiVersion": "kueue.x-k8s.io/v1alpha1", "kind": "ClusterQueue", "metadata": {"name": "q"}})
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n"}}
    assert kv.up(namespace) == namespace == kv.down(namespace, kv.pinned("v1beta1"))
    with pytest.raises(ValueError, match="--kueue-api: 'v2'"):
        kv.pinned("v2")


@pytest.mark.parametrize(
    "resources",
    [{}, {"v1alpha1": ["Topology"]}, {"v1": ["ClusterQueue", "Cohort"]}],
    ids=["no group", "no kind idleshare writes", "only a version idleshare does not know"],
)
def test_no_version_idleshare_writes_is_kueue_not_installed(resources: dict[str, list[str]]) -> None:
    with pytest.raises(kv.KueueApiError, match=r"KueueNotInstalled: .*ClusterQueue") as caught:
        kv.kueue_api(resources)
    assert caught.value.code == kv.KUEUE_NOT_INSTALLED


def test_a_field_the_version_lacks_is_left_out_and_named(monkeypatch: pytest.MonkeyPatch) -> None:
    """The mechanism for a field some version lacks (none does today, the schema test above proves): a table entry
    makes it left out of what is written and one pool issue per kind and field, counting the objects."""
    monkeypatch.setitem(kv.LACKING, ("ClusterQueue", "v1beta1"), (("spec.fairSharing", "every team weighs 1"),))
    result, manifests = objects(CLUSTER, QUOTAS)
    weighted = [o for o in manifests if o["kind"] == "ClusterQueue" and "fairSharing" in o["spec"]]
    assert weighted
    api = kv.pinned("v1beta1")
    assert all("fairSharing" not in kv.down(o, api)["spec"] for o in weighted)
    issues = [i for i in with_kueue_api(result, manifests, api).issues if i.code == kv.KUEUE_FIELD_UNSUPPORTED]
    assert [(i.subject, i.severity) for i in issues] == [("ClusterQueue.spec.fairSharing", "warning")]
    assert f"on {len(weighted)} ClusterQueue(s)" in issues[0].message and "every team weighs 1" in issues[0].message
    assert not [
        i for i in with_kueue_api(result, manifests, kv.HUB_ONLY).issues if i.code == kv.KUEUE_FIELD_UNSUPPORTED
    ]


def test_the_plan_default_is_the_hub() -> None:
    result, _ = objects(CLUSTER, QUOTAS)
    sc = SchedulerConfig(priority_classes=(PriorityClass("a", 1),))
    written = desired_objects(result, sc, Settings())
    assert {o["apiVersion"] for o in written if o["apiVersion"].startswith(kv.GROUP)} == {kv.HUB_API}


# -- the recompute on a cluster serving older versions (fakes: tests/fakes.py stores objects as written down) ----


def hub_written(kube: Any) -> dict[tuple[str, str, str], Any]:
    """What the cluster holds, read up to the hub as the adapter reads it, without what only the version changes."""
    return {key: {k: v for k, v in kv.up(o).items() if k != "metadata"} for key, o in kube.objects.items()}


@pytest.mark.parametrize(
    ("version", "release", "cohort_version"), [("v1beta1", "v0.13–v0.14", "v1beta1"), ("v1alpha1", "v0.12", "v1alpha1")]
)
def test_an_older_kueue_gets_the_same_objects_in_its_version_and_the_pool_names_it(
    cluster: Any, version: str, release: str, cohort_version: str
) -> None:
    """Same quotas, same limits: the objects a v1beta2 cluster holds are the ones an older cluster holds under its
    version's names; a second recompute finds nothing to write (the cluster's objects read up compare equal)."""
    store, kube, _, r = cluster
    r.recompute("demo")
    newest = hub_written(kube)
    kube.objects.clear()
    kube.kueue = kv.pinned(version)
    store.pools.clear()
    r.recompute("demo")
    held = {o["kind"]: o for o in kube.objects.values()}
    assert held["ClusterQueue"]["apiVersion"] == "kueue.x-k8s.io/v1beta1"
    assert "cohort" in held["ClusterQueue"]["spec"] and "cohortName" not in held["ClusterQueue"]["spec"]
    assert held["Cohort"]["apiVersion"] == f"kueue.x-k8s.io/{cohort_version}"
    assert hub_written(kube) == newest
    pool = store.pools["demo"].pool
    assert pool["kueueApi"]["kueue"] == release
    assert pool["kueueApi"]["apiVersions"]["Cohort"] == cohort_version
    applies = kube.applies
    outcome = r.recompute("demo")
    assert (kube.applies, outcome.applied, outcome.changed) == (applies, 0, False)


def test_no_kueue_served_fails_the_recompute_naming_it_and_keeps_the_last_pool(cluster: Any) -> None:
    from idleshare.errors import KueueNotInstalledError

    store, kube, _, r = cluster
    r.recompute("demo")
    before = store.pools["demo"]
    kube.nodes.pop()  # something changed: a recompute that could read would store generation 2
    kube.kueue = KueueNotInstalledError("demo: KueueNotInstalled: no kueue.x-k8s.io", operation="discover Kueue")
    with pytest.raises(KueueNotInstalledError):
        r.recompute("demo")
    after = store.pools["demo"]
    assert (after.generation, after.pool) == (before.generation, before.pool)
    assert after.read_failure.startswith("KueueNotInstalled: ")


@pytest.mark.parametrize("version", kv.KNOWN_VERSIONS)
def test_pool_show_and_the_report_name_the_release_and_the_versions(version: str) -> None:
    from idleshare_cli.pool import show_text
    from idleshare_cli.report_html import render

    api = kv.pinned(version)
    pool = {**pool_document_of(api), "cluster": "demo", "generation": 1}
    line = next(row for row in show_text(pool).splitlines() if row.startswith("Kueue:"))
    assert api.release in line and f"kueue.x-k8s.io/{api.version('ClusterQueue')}" in line
    assert ("Cohort v1alpha1" in line) == (api.version("Cohort") == "v1alpha1")
    page = render(pool)
    assert f'data-field="kueueApi">{api.release}' in page.replace("&#x27;", "'")
    assert re.search(r"^Kueue:\s+-$", show_text({k: v for k, v in pool.items() if k != "kueueApi"}), re.M)
