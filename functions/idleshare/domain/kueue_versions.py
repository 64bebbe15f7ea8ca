"""Which ``kueue.x-k8s.io`` version each Kueue kind is written in, and the one model carried there and back
(docs/spec.md §3).

idleshare builds every Kueue object once, in the hub version :data:`HUB` (``v1beta2``, :mod:`idleshare.domain.kueue`),
and writes it in the newest version of its kind the cluster serves (:class:`KueueApi`, from the API server's
discovery: ``adapters/kube.py``). :func:`down` is the object under that version's field names; :func:`up` reads what
the cluster returns back into the hub version, before :mod:`idleshare.domain.kueue_diff` compares it or
:mod:`idleshare.domain.usage` counts it, so no rule is written twice. Pure, stdlib only.

Every version fact is in the tables below, checked field by field (recursively: names, types, enums) against each
Kueue release's CRD schemas, as its module pinned in ``devkit/kube`` ships them, by
``tests/unit/test_kueue_versions.py``:

==================  ==========================  =============================================================
Kueue               served (newest first)       what idleshare's objects lose or rename there
==================  ==========================  =============================================================
v0.12               v1beta1; Cohort v1alpha1    ClusterQueue ``cohortName`` is ``cohort``; Cohort
                                                ``parentName`` is ``parent`` (idleshare sets no parent)
v0.13–v0.14         v1beta1                     ClusterQueue ``cohortName`` is ``cohort``
v0.15–v0.19         v1beta2, v1beta1            nothing (v1beta2 written)
v0.20+              v1beta2                     nothing
==================  ==========================  =============================================================

No field idleshare writes (Cohort quota, ``fairSharing.weight``, ``preemption``, ``stopPolicy``, the quotas and
limits, ``namespaceSelector``, LocalQueue ``clusterQueue``, ResourceFlavor ``nodeLabels``, WorkloadPriorityClass
``value``/``description``) is missing from any of them: :data:`LACKING` is empty, and a field added to it is left out
of what is written and named in the pool (:data:`KUEUE_FIELD_UNSUPPORTED`), never sent to be refused. What idleshare
reads is the same in every version: a ClusterQueue's ``status.flavorsUsage``/``flavorsReservation`` (flavor, resource,
``total``, ``borrowed``) and workload counts, a Workload's ``spec.active``, ``podSets`` and ``status.conditions``
(v1beta2 renames only a Workload's priority class fields, which idleshare does not read).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

GROUP = "kueue.x-k8s.io"
HUB = "v1beta2"
HUB_API = f"{GROUP}/{HUB}"

VERSIONS: dict[str, tuple[str, ...]] = {
    "ResourceFlavor": ("v1beta2", "v1beta1"),
    "WorkloadPriorityClass": ("v1beta2", "v1beta1"),
    "Cohort": ("v1beta2", "v1beta1", "v1alpha1"),
    "ClusterQueue": ("v1beta2", "v1beta1"),
    "LocalQueue": ("v1beta2", "v1beta1"),
    "Workload": ("v1beta2", "v1beta1"),
}
"""Kind -> the versions idleshare writes or reads it in, newest (preferred) first. Workload is only read."""

KNOWN_VERSIONS: tuple[str, ...] = tuple(dict.fromkeys(v for versions in VERSIONS.values() for v in versions))
"""Every version of the group idleshare asks the API server about (discovery reads no other)."""

RENAMED: dict[tuple[str, str], tuple[tuple[str, str], ...]] = {
    ("ClusterQueue", "v1beta1"): (("spec.cohortName", "spec.cohort"),),
    ("Cohort", "v1alpha1"): (("spec.parentName", "spec.parent"),),
}
"""``(kind, version)`` -> ``(hub path, that version's path)``: the same field under another name (map keys only)."""

LACKING: dict[tuple[str, str], tuple[tuple[str, str], ...]] = {}
"""``(kind, version)`` -> ``(hub path, what Kueue does without it)``: a field idleshare writes that the version has
not, left out of what is written there and named in the pool. Empty for Kueue v0.12–v0.19 (the module's table)."""

RELEASES: tuple[tuple[str, Mapping[str, tuple[str, ...]]], ...] = (
    ("v0.12", {"ClusterQueue": ("v1beta1",), "Cohort": ("v1alpha1",)}),
    ("v0.13–v0.14", {"ClusterQueue": ("v1beta1",), "Cohort": ("v1beta1",)}),
    ("v0.15–v0.19", {"ClusterQueue": ("v1beta2", "v1beta1"), "Cohort": ("v1beta2", "v1beta1")}),
    ("v0.20+", {"ClusterQueue": ("v1beta2",), "Cohort": ("v1beta2",)}),
)
"""The Kueue releases a cluster's served versions imply: which versions of ClusterQueue and Cohort each serves
(Kueue's CHANGELOG-0.13 … 0.20). Served versions matching none: :data:`UNKNOWN_RELEASE`."""
UNKNOWN_RELEASE = "unknown"


@dataclass(frozen=True, slots=True)
class KueueLimits:
    """The bounds Kueue sets on what idleshare writes: its CRDs' ``maxItems`` / ``maxLength`` / ``maxProperties``
    on the fields idleshare fills, and the three its ClusterQueue webhook adds (``pkg/webhooks``, from v0.14).

    Every number is read from the Kueue releases' own files by ``tests/unit/test_kueue_limits.py``: the CRDs of each
    release the stack runs (its pinned module's ``config/components/crd/bases``), the reference CRDs in
    ``../shared/kueue/crds`` (v0.19.2), the webhook's messages and CHANGELOG-0.14 (16 -> 64: what v0.13 had)."""

    resource_groups: int
    """ClusterQueue / Cohort ``spec.resourceGroups``: maxItems."""
    flavors_per_group: int
    """``spec.resourceGroups[].flavors``: maxItems (a flavor is in one group only: the webhook)."""
    covered_resources: int
    """``spec.resourceGroups[].coveredResources``: maxItems (a resource is in one group only: the webhook)."""
    resources_per_flavor: int
    """``spec.resourceGroups[].flavors[].resources``: maxItems (a CEL rule: as many as ``coveredResources``)."""
    flavors_total: int
    """The ClusterQueue webhook: flavors in all groups together."""
    resources_total: int
    """The ClusterQueue webhook: covered resources in all groups together."""
    pairs_per_group: int
    """The ClusterQueue webhook: flavor-resource pairs (each flavor's ``resources``) in one group."""
    name_length: int = 253
    """``flavors[].name``, ``cohortName`` / ``parentName``, a LocalQueue's ``clusterQueue``: maxLength."""
    node_labels: int = 8
    """ResourceFlavor ``spec.nodeLabels``: maxProperties."""
    description_length: int = 2048
    """WorkloadPriorityClass ``description``: maxLength (v1beta2; v1beta1 states none)."""

    @property
    def resources(self) -> int:
        """The most resources the one resource group idleshare writes can cover."""
        return min(self.covered_resources, self.resources_per_flavor, self.resources_total)

    def flavors(self, resources: int) -> int:
        """The most flavors that one group can hold beside ``resources`` covered resources."""
        return min(self.flavors_per_group, self.flavors_total, self.pairs_per_group // max(resources, 1))

    def strictest(self, other: KueueLimits) -> KueueLimits:
        """Field by field, the smaller bound of the two."""
        return KueueLimits(*(min(a, b) for a, b in zip(_limit_values(self), _limit_values(other), strict=True)))


def _limit_values(limits: KueueLimits) -> tuple[int, ...]:
    return tuple(getattr(limits, name) for name in KueueLimits.__slots__)


LIMITS_SINCE: tuple[tuple[str, KueueLimits], ...] = (
    ("v0.12", KueueLimits(16, 16, 16, 16, 256, 256, 512)),
    ("v0.14", KueueLimits(16, 64, 64, 64, 256, 256, 512)),
)
"""``(first release, its limits)``, oldest first: each release has the limits of the last row at or before it.
Kueue v0.14 raised flavors per group and resources per flavor from 16 to 64 and added the webhook's totals
(CHANGELOG-0.14; before it the CRD's 16 x 16 bound the totals below them)."""


def _minor(release: str) -> int:
    return int(release.removeprefix("v").split(".")[1])


def limits_of(release: str) -> KueueLimits:
    """The limits of one Kueue release (``v0.16.1`` or ``v0.16``): the last row of :data:`LIMITS_SINCE` at or
    before it (a release older than the first row: the first row's)."""
    found = LIMITS_SINCE[0][1]
    for since, limits in LIMITS_SINCE:
        if _minor(since) <= _minor(release):
            found = limits
    return found


def release_limits(label: str) -> KueueLimits:
    """The limits a release range of :data:`RELEASES` (``v0.13–v0.14``, ``v0.20+``) can be held to: the strictest
    of its releases (the served versions cannot tell them apart). :data:`UNKNOWN_RELEASE`: the strictest known."""
    if label == UNKNOWN_RELEASE:
        rows = [limits for _, limits in LIMITS_SINCE]
    else:
        first, _, last = label.removesuffix("+").partition("\u2013")
        rows = [limits_of(f"v0.{m}") for m in range(_minor(first), _minor(last or first) + 1)]
    out = rows[0]
    for limits in rows[1:]:
        out = out.strictest(limits)
    return out


KUEUE_NOT_INSTALLED = "KueueNotInstalled"
"""The API server serves no ``kueue.x-k8s.io`` version idleshare writes a kind in: the recompute fails, naming it."""
KUEUE_FIELD_UNSUPPORTED = "KueueFieldUnsupported"
"""The pool issue of a field the cluster's Kueue version lacks (:data:`LACKING`): left out, what Kueue does
instead said."""

Manifest = dict[str, Any]


class KueueApiError(ValueError):
    """The served versions cannot carry idleshare's objects; ``code`` is :data:`KUEUE_NOT_INSTALLED`."""

    code = KUEUE_NOT_INSTALLED


@dataclass(frozen=True, slots=True)
class KueueApi:
    """The versions of :data:`GROUP` a cluster serves, per kind (those of :data:`VERSIONS`, newest first)."""

    served: tuple[tuple[str, tuple[str, ...]], ...]

    def version(self, kind: str) -> str:
        """The version ``kind`` is written and read in: the newest served."""
        for k, versions in self.served:
            if k == kind:
                return versions[0]
        raise KueueApiError(f"{kind}: not a Kueue kind idleshare writes or reads")

    def api_version(self, kind: str) -> str:
        return f"{GROUP}/{self.version(kind)}"

    @property
    def release(self) -> str:
        """The Kueue release range these versions imply (:data:`RELEASES`), or :data:`UNKNOWN_RELEASE`."""
        served = dict(self.served)
        for label, row in RELEASES:
            if all(served.get(kind) == versions for kind, versions in row.items()):
                return label
        return UNKNOWN_RELEASE

    @property
    def limits(self) -> KueueLimits:
        """The schema limits of the Kueue these versions imply (:func:`release_limits`)."""
        return release_limits(self.release)

    def document(self) -> dict[str, Any]:
        """As the pool shows it: ``{"apiVersions": {kind: version}, "kueue": release}``."""
        return {"apiVersions": {kind: versions[0] for kind, versions in self.served}, "kueue": self.release}


def kueue_api(resources: Mapping[str, Iterable[str]]) -> KueueApi:
    """The :class:`KueueApi` of a discovery answer: served version -> the kinds it lists. A kind served in none of
    its :data:`VERSIONS` (no Kueue, or one newer than idleshare knows): :class:`KueueApiError` naming what is served."""
    kinds_of = {version: set(kinds) for version, kinds in resources.items()}
    served: list[tuple[str, tuple[str, ...]]] = []
    missing: list[str] = []
    for kind, versions in VERSIONS.items():
        found = tuple(v for v in versions if kind in kinds_of.get(v, ()))
        if found:
            served.append((kind, found))
        else:
            missing.append(kind)
    if missing:
        offered = ", ".join(sorted(v for v, kinds in kinds_of.items() if kinds))
        serves = f"serves {GROUP} {offered}, but no version of" if offered else f"serves no version of {GROUP}: none of"
        raise KueueApiError(
            f"{KUEUE_NOT_INSTALLED}: the API server {serves} {', '.join(missing)} idleshare writes "
            f"({', '.join(sorted(KNOWN_VERSIONS))}): is Kueue v0.12 or newer installed and its CRDs established?"
        )
    return KueueApi(tuple(served))


def pinned(version: str) -> KueueApi:
    """Every kind in ``version``, or the newest older one it has (a Cohort at ``v1beta1``'s floor is ``v1beta1``):
    what ``idleshare plan --kueue-api`` writes for, without a cluster. An unknown ``version``: :class:`ValueError`."""
    if version not in KNOWN_VERSIONS:
        raise ValueError(f"--kueue-api: {version!r} is not one of {', '.join(KNOWN_VERSIONS)}")
    served = []
    for kind, versions in VERSIONS.items():
        older = versions[versions.index(version) :] if version in versions else versions[-1:]
        served.append((kind, older[:1]))
    return KueueApi(tuple(served))


HUB_ONLY = KueueApi(tuple((kind, (HUB,)) for kind in VERSIONS))
"""Every kind at the hub version: a cluster on v0.20+, and what ``idleshare plan`` writes by default."""


# -- the object, down and up ----------------------------------------------------------------------


def _split(path: str) -> tuple[str, ...]:
    return tuple(path.split("."))


def _without(obj: Mapping[str, Any], path: Sequence[str]) -> tuple[Manifest, Any]:
    """``obj`` without the value at ``path`` (copied along the path only), and that value (``_ABSENT`` if none)."""
    head, *rest = path
    if head not in obj:
        return dict(obj), _ABSENT
    if not rest:
        out = dict(obj)
        return out, out.pop(head)
    inner = obj[head]
    if not isinstance(inner, Mapping):
        return dict(obj), _ABSENT
    changed, value = _without(inner, rest)
    return {**obj, head: changed}, value


def _with(obj: Mapping[str, Any], path: Sequence[str], value: Any) -> Manifest:
    head, *rest = path
    if not rest:
        return {**obj, head: value}
    inner = obj.get(head)
    return {**obj, head: _with(inner if isinstance(inner, Mapping) else {}, rest, value)}


_ABSENT: Any = object()


def _moved(obj: Mapping[str, Any], renames: Iterable[tuple[str, str]], *, reverse: bool) -> Manifest:
    out = dict(obj)
    for hub_path, other_path in renames:
        src, dst = (other_path, hub_path) if reverse else (hub_path, other_path)
        out, value = _without(out, _split(src))
        if value is not _ABSENT:
            out = _with(out, _split(dst), value)
    return out


def kind_version(obj: Mapping[str, Any]) -> tuple[str, str]:
    kind = str(obj.get("kind", ""))
    group, _, version = str(obj.get("apiVersion", "")).rpartition("/")
    if group != GROUP:
        return kind, ""
    if kind in VERSIONS and version not in VERSIONS[kind]:
        name = (obj.get("metadata") or {}).get("name", "?")
        raise ValueError(
            f"{kind}/{name}: apiVersion {obj.get('apiVersion')!r}: idleshare reads {kind} only as "
            + ", ".join(f"{GROUP}/{v}" for v in VERSIONS[kind])
        )
    return kind, version


def lacking(obj: Mapping[str, Any], version: str) -> list[tuple[str, str]]:
    """The ``(hub path, what Kueue does instead)`` of :data:`LACKING` that ``obj`` (hub) sets and ``version`` has not."""
    out = []
    for path, instead in LACKING.get((str(obj.get("kind", "")), version), ()):
        _, value = _without(obj, _split(path))
        if value is not _ABSENT:
            out.append((path, instead))
    return out


def down(obj: Mapping[str, Any], api: KueueApi) -> Manifest:
    """``obj`` (a hub manifest) as its kind is written in ``api``: its apiVersion, the fields that version names
    otherwise moved to its names (:data:`RENAMED`), those it lacks left out (:data:`LACKING`). Anything not of
    :data:`GROUP` (a Namespace) is returned as it is. A hub object that carries a field under the older name
    (``spec.cohort``: no v1beta2 field): :class:`ValueError` naming it."""
    kind, version = kind_version(obj)
    if not version:
        return dict(obj)
    if version != HUB:
        raise ValueError(f"{kind}: apiVersion {obj.get('apiVersion')!r}: only a {HUB_API} object is written down")
    target = api.version(kind)
    for _, other_path in RENAMED.get((kind, target), ()):
        if _without(obj, _split(other_path))[1] is not _ABSENT:  # would be overwritten, or read back as the hub's
            name = (obj.get("metadata") or {}).get("name", "?")
            raise ValueError(f"{kind}/{name}: {other_path}: not a field of {HUB_API} {kind}")
    out = dict(obj)
    for path, _ in LACKING.get((kind, target), ()):
        out, _ = _without(out, _split(path))
    out = _moved(out, RENAMED.get((kind, target), ()), reverse=False)
    out["apiVersion"] = f"{GROUP}/{target}"
    return out


def up(obj: Mapping[str, Any]) -> Manifest:
    """``obj`` as the cluster returned it, in the hub version: its fields under the hub's names, and so are the
    ``fieldsV1`` of its ``managedFields`` entries written in that version (what :func:`kueue_diff.diff` reads of
    idleshare's own). A hub object, or one not of :data:`GROUP`, is returned as it is; an apiVersion of
    :data:`GROUP` idleshare does not read for its kind: :class:`ValueError` naming it."""
    kind, version = kind_version(obj)
    if not version or version == HUB:
        return dict(obj)
    renames = RENAMED.get((kind, version), ())
    out = _moved(obj, renames, reverse=True)
    out["apiVersion"] = HUB_API
    meta = out.get("metadata")
    if isinstance(meta, Mapping) and meta.get("managedFields"):
        entries = []
        for entry in meta["managedFields"] or ():
            if isinstance(entry, Mapping) and entry.get("apiVersion") == f"{GROUP}/{version}":
                fields = entry.get("fieldsV1")
                if isinstance(fields, Mapping):
                    entry = {**entry, "fieldsV1": _fields_up(fields, renames)}
                entry = {**entry, "apiVersion": HUB_API}
            entries.append(entry)
        out["metadata"] = {**meta, "managedFields": entries}
    return out


def _fields_up(fields: Mapping[str, Any], renames: Iterable[tuple[str, str]]) -> Manifest:
    """A fieldsV1 set with each renamed field's ``f:`` path moved to its hub name."""
    out = dict(fields)
    for hub_path, other_path in renames:
        out, value = _without(out, tuple(f"f:{p}" for p in _split(other_path)))
        if value is not _ABSENT:
            out = _with(out, tuple(f"f:{p}" for p in _split(hub_path)), value)
    return out
