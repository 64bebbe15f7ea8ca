"""Kueue's schema limits (domain/kueue_versions.KueueLimits) held to Kueue's own files: the CRDs of every release the
stack runs (each one's pinned module), the reference CRDs in ../shared/kueue/crds, the webhook's messages, and
CHANGELOG-0.14 (what v0.13, which no module here pins, had). Every ``maxItems`` / ``maxLength`` / ``maxProperties``
on a field idleshare writes must be one the table names, with its number."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from devkit.kube import kueue_versions as stack_versions
from idleshare.domain import kueue_versions as kv
from idleshare.domain.naming import SUBDOMAIN_MAX
from tests.builders import CLUSTER, QUOTAS, objects

REFERENCE = Path(__file__).resolve().parents[3] / "shared" / "kueue" / "crds"
"""The reference CRDs (Kueue v0.19.2, copied verbatim: ../shared/kueue/README.md)."""
REFERENCE_RELEASE = "v0.19.2"
PLURAL = {
    "ClusterQueue": "clusterqueues",
    "Cohort": "cohorts",
    "LocalQueue": "localqueues",
    "ResourceFlavor": "resourceflavors",
    "WorkloadPriorityClass": "workloadpriorityclasses",
}
RELEASES = list(stack_versions.VERSIONS)

BOUND_OF: dict[tuple[str, str, str], str] = {
    # (kind, path in the hub object, schema keyword) -> the KueueLimits field that bounds it
    ("ClusterQueue", ".spec.resourceGroups", "maxItems"): "resource_groups",
    ("ClusterQueue", ".spec.resourceGroups[].flavors", "maxItems"): "flavors_per_group",
    ("ClusterQueue", ".spec.resourceGroups[].coveredResources", "maxItems"): "covered_resources",
    ("ClusterQueue", ".spec.resourceGroups[].flavors[].resources", "maxItems"): "resources_per_flavor",
    ("ClusterQueue", ".spec.resourceGroups[].flavors[].name", "maxLength"): "name_length",
    ("ClusterQueue", ".spec.cohortName", "maxLength"): "name_length",
    ("Cohort", ".spec.resourceGroups", "maxItems"): "resource_groups",
    ("Cohort", ".spec.resourceGroups[].flavors", "maxItems"): "flavors_per_group",
    ("Cohort", ".spec.resourceGroups[].coveredResources", "maxItems"): "covered_resources",
    ("Cohort", ".spec.resourceGroups[].flavors[].resources", "maxItems"): "resources_per_flavor",
    ("Cohort", ".spec.resourceGroups[].flavors[].name", "maxLength"): "name_length",
    ("Cohort", ".spec.parentName", "maxLength"): "name_length",
    ("LocalQueue", ".spec.clusterQueue", "maxLength"): "name_length",
    ("ResourceFlavor", ".spec.nodeLabels", "maxProperties"): "node_labels",
    ("WorkloadPriorityClass", ".description", "maxLength"): "description_length",
}
BOUNDS = ("maxItems", "maxLength", "maxProperties")


@cache
def crd(directory: Path, kind: str) -> dict[str, Any]:
    found: dict[str, Any] = yaml.safe_load((directory / f"kueue.x-k8s.io_{PLURAL[kind]}.yaml").read_text())
    assert found["spec"]["names"]["kind"] == kind
    return found


def schema(directory: Path, kind: str, version: str) -> dict[str, Any]:
    (found,) = [v for v in crd(directory, kind)["spec"]["versions"] if v["name"] == version]
    result: dict[str, Any] = found["schema"]["openAPIV3Schema"]
    return result


def bounds_reached(value: Any, s: Mapping[str, Any], path: str = "") -> Iterator[tuple[str, str, int]]:
    """``(path, keyword, bound)`` of every bound the schema ``s`` sets on a field ``value`` fills."""
    for keyword in BOUNDS:
        if keyword in s:
            yield path, keyword, s[keyword]
    if isinstance(value, list):
        for item in value:
            yield from bounds_reached(item, s.get("items", {}), f"{path}[]")
    elif isinstance(value, Mapping) and path != ".metadata":
        props = s.get("properties") or {}
        for k, v in value.items():
            if k in props:
                yield from bounds_reached(v, props[k], f"{path}.{k}")


def every_written() -> list[dict[str, Any]]:
    """Every Kueue object idleshare writes, every field it fills (a Cohort with a parent besides)."""
    _, found = objects(CLUSTER, QUOTAS)
    found = [o for o in found if o["kind"] in PLURAL]
    cohort = next(o for o in found if o["kind"] == "Cohort")
    found.append({**cohort, "spec": {**cohort["spec"], "parentName": "root"}})
    return found


def hub_path(kind: str, version: str, path: str) -> str:
    """A path of ``version``'s object under the hub's name (``.spec.cohort`` is ``.spec.cohortName``)."""
    for hub, other in kv.RENAMED.get((kind, version), ()):
        if path.startswith(f".{other}"):
            return f".{hub}" + path[len(other) + 1 :]
    return path


def check(directory: Path, api: kv.KueueApi, limits: kv.KueueLimits) -> set[tuple[str, str, str]]:
    """Every bound the CRDs in ``directory`` set on what idleshare writes in ``api``'s versions equals the table's;
    the ``(kind, path, keyword)`` found."""
    seen: set[tuple[str, str, str]] = set()
    for obj in every_written():
        kind = obj["kind"]
        version = api.version(kind)
        for path, keyword, bound in bounds_reached(kv.down(obj, api), schema(directory, kind, version)):
            key = (kind, hub_path(kind, version, path), keyword)
            assert key in BOUND_OF, f"{kind} {version} {path}: {keyword} {bound} is not in KueueLimits"
            assert getattr(limits, BOUND_OF[key]) == bound, (key, bound)
            seen.add(key)
    return seen


@pytest.mark.parametrize("release", RELEASES)
def test_the_limits_of_each_release_are_its_crds(release: str) -> None:
    """Each release's CRDs, in the versions idleshare writes there: every bound on a field it fills is the
    table's number (a new bound, or a changed one, fails here)."""
    facts = stack_versions.get(release)
    api = kv.KueueApi(tuple((kind, (facts.cohort_api if kind == "Cohort" else facts.api,)) for kind in kv.VERSIONS))
    seen = check(stack_versions.crd_dir(release), api, kv.limits_of(release))
    must = {k for k, field in BOUND_OF.items() if field not in ("node_labels", "description_length")}
    assert must <= seen, sorted(must - seen)


def test_the_reference_crds_are_the_newest_row() -> None:
    """../shared/kueue/crds (v0.19.2) in v1beta2: every bound, the WorkloadPriorityClass description and the
    ResourceFlavor's nodeLabels included, is the table's; the newest release range is held to them."""
    seen = check(REFERENCE, kv.HUB_ONLY, kv.limits_of(REFERENCE_RELEASE))
    assert seen == set(BOUND_OF)
    assert kv.HUB_ONLY.limits == kv.limits_of(REFERENCE_RELEASE)
    assert kv.HUB_ONLY.limits.name_length == SUBDOMAIN_MAX  # the names idleshare checks are the CRDs' maxLength


def test_the_webhook_totals_are_the_webhooks() -> None:
    """Kueue's ClusterQueue webhook (v0.14 on) refuses more than 256 flavors or 256 covered resources in all groups
    and 512 flavor-resource pairs in one group: its messages, in every pinned module that has them."""
    checked = 0
    for release in RELEASES:
        source = stack_versions.crd_dir(release).parents[3] / "pkg" / "webhooks" / "clusterqueue_webhook.go"
        text = source.read_text()
        found = {
            "flavors_total": re.search(r"total number of flavors across all resourceGroups must be ≤ (\d+)", text),
            "resources_total": re.search(
                r"total number of covered resources across all resourceGroups must be ≤ (\d+)", text
            ),
            "pairs_per_group": re.search(r"flavor-resource combinations in a resourceGroup must be ≤ (\d+)", text),
        }
        if kv.limits_of(release).flavors_per_group == 16:  # before v0.14: no totals, the CRD's 16 x 16 bound them
            assert set(found.values()) == {None}, release
            assert kv.limits_of(release).flavors_total >= 16 * 16
            continue
        for field, match in found.items():
            assert match is not None, (release, field)
            assert int(match.group(1)) == getattr(kv.limits_of(release), field), (release, field)
        checked += 1
    assert checked >= 3


def test_v0_13_is_held_to_what_changelog_0_14_says_it_had() -> None:
    """No module here pins v0.13; v0.14's release notes say what it raised, from 16 to 64: the served versions
    cannot tell v0.13 from v0.14, so that range is held to v0.13's."""
    notes = (stack_versions.crd_dir(REFERENCE_RELEASE).parents[3] / "CHANGELOG" / "CHANGELOG-0.14.md").read_text()
    flavors = re.search(r"number of Flavors per ResourceGroup is increased from (\d+) to (\d+)", notes)
    resources = re.search(
        r"number of Resources per Flavor, within a ResourceGroup, is increased from (\d+) to (\d+)", notes
    )
    assert flavors is not None and resources is not None
    before, after = kv.limits_of("v0.13"), kv.limits_of("v0.14")
    assert (before.flavors_per_group, after.flavors_per_group) == tuple(map(int, flavors.groups()))
    assert (before.resources_per_flavor, after.resources_per_flavor) == tuple(map(int, resources.groups()))
    assert kv.release_limits("v0.13–v0.14") == before
    assert kv.release_limits("v0.15–v0.19") == after == kv.release_limits("v0.20+")
    assert kv.release_limits(kv.UNKNOWN_RELEASE) == kv.limits_of("v0.12")  # the strictest known


@pytest.mark.parametrize("release", RELEASES)
def test_each_release_range_is_held_to_its_strictest_release(release: str) -> None:
    """The range a cluster's served versions imply never allows more than the release running there."""
    served: dict[str, list[str]] = {}
    for kind in PLURAL:
        for version in crd(stack_versions.crd_dir(release), kind)["spec"]["versions"]:
            if version["served"]:
                served.setdefault(version["name"], []).extend([kind, "Workload"] if kind == "ClusterQueue" else [kind])
    limits, own = kv.kueue_api(served).limits, kv.limits_of(release)
    assert all(a <= b for a, b in zip(kv._limit_values(limits), kv._limit_values(own), strict=True)), release


def test_flavors_one_group_holds() -> None:
    limits = kv.limits_of("v0.19")
    assert limits.flavors(5) == 64  # the CRD's maxItems
    assert limits.flavors(9) == 56  # 512 pairs / 9 resources
    assert limits.resources == 64
    assert kv.limits_of("v0.12").flavors(20) == 16
