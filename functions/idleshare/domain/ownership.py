"""Which of a cluster's objects are idleshare's: recorded, not inferred (docs/spec.md §3, "Ownership").

idleshare keeps, per cluster, the uid of every Kueue object it created, taken from the answer of the create that made
it (the record, :class:`Record`). An object is idleshare's exactly when the cluster holds, at the recorded identity
``(kind, namespace, name)``, an object of the recorded uid. A copy (``kubectl get -o yaml``, renamed, ``kubectl
create``) carries idleshare's label and creation marker but has a uid of its own: it is foreign, never written nor
deleted, and named. An object whose label or marker someone removed keeps its uid: it is still idleshare's, updated
while wanted, deleted when not.

Two rules bring objects into the record without a create's answer, each stated in docs/spec.md §3:

- **adoption, once** (:func:`adoptable`): a cluster with no record yet (idleshare before this record existed) adopts,
  on its first recompute, each object that carries idleshare's label and creation marker *and whose identity is the
  one idleshare gives, under the cluster's settings, to an object of its kind for what the object itself says it is
  for*: a ResourceFlavor named as the instance type its ``nodeLabels`` select; a WorkloadPriorityClass named
  ``<name>-priority`` for the priority class its description names, of that weight; the Cohort of the cluster's
  cohort name; a ClusterQueue named for the team of its ``idleshare.io/team`` label, selecting that team's namespace;
  a LocalQueue of that name in that team's namespace, pointing at that team's ClusterQueue; the admission policy and
  its binding by their one name (``domain.admission.POLICY_NAME``). A copy renamed or moved
  to another namespace no longer agrees with itself, and is not adopted.
- **a create whose answer was lost** (:attr:`Record.pending`): before creating, the recompute records the identities
  it is about to create; an object found at a pending identity with idleshare's marker is that create's (the run
  ended before its answer was recorded) and is adopted; a later record clears the pending identities.

Pure: stdlib and the domain only.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from idleshare.domain.admission import POLICY_NAME
from idleshare.domain.kueue import KIND_ORDER, MANAGED_BY, MANAGED_BY_LABEL, NAMESPACE_NAME_LABEL, TEAM_LABEL
from idleshare.domain.kueue_diff import created_by_idleshare, is_terminating, object_identity
from idleshare.domain.model import INSTANCE_TYPE_LABEL, Settings
from idleshare.domain.naming import cluster_queue_name, local_queue_name, namespace_name, priority_class_name

Identity = tuple[str, str, str]
"""``(kind, namespace, name)`` ("" for no namespace): :func:`~idleshare.domain.kueue_diff.object_identity`."""
Manifest = dict[str, Any]

OWNED_KINDS = tuple(kind for kind in KIND_ORDER if kind != "Namespace")
"""The kinds whose objects idleshare records (a namespace is only ever created, never written nor deleted)."""
REMOVED_LOG_MAX = 50
"""How many of the last deletions the record keeps (:attr:`Record.removed`): the cluster's history of deletions."""

_PRIORITY_DESCRIPTION = re.compile(r"^SageMaker HyperPod priority class (?P<name>\S+) \(weight (?P<weight>-?\d+)\)$")


@dataclass(frozen=True, slots=True)
class Record:
    """What idleshare created in one cluster: ``objects`` (identity -> uid), the identities whose create was started
    and not yet recorded (``pending``), the last deletions (``removed``: ``{"object", "uid", "generation", "at"}``,
    newest last) and the stored version (0: no record stored yet, so :func:`adoptable` applies once)."""

    objects: Mapping[Identity, str] = field(default_factory=dict)
    pending: frozenset[Identity] = frozenset()
    removed: tuple[Mapping[str, Any], ...] = ()
    version: int = 0


@dataclass(slots=True)
class Ownership:
    """The cluster's objects sorted by the record (:func:`resolve`)."""

    ours: dict[Identity, str] = field(default_factory=dict)
    """Identity -> uid of every object of the cluster that is idleshare's (recorded, adopted or pending)."""
    foreign: list[Manifest] = field(default_factory=list)
    """Objects labelled as idleshare's that it did not create (copies, an older writer's): never written nor
    deleted, named."""
    adopted: list[Identity] = field(default_factory=list)
    """Of ``ours``, those that were not recorded before (the once-only adoption, a pending create)."""
    gone: list[Identity] = field(default_factory=list)
    """Recorded identities the cluster no longer holds with the recorded uid (deleted by someone, or replaced by
    another object of that name): dropped from the record, never deleted."""


def describe(identity: Identity) -> str:
    """``Kind/namespace/name`` (``Kind/name`` without a namespace): how an object is named in statuses."""
    kind, namespace, name = identity
    return f"{kind}/{namespace}/{name}" if namespace else f"{kind}/{name}"


def key_text(identity: Identity) -> str:
    """The stored form of an identity: ``Kind/namespace/name`` (the namespace empty for a cluster-scoped object);
    no Kubernetes name holds a ``/``, so :func:`parse_key` reads it back."""
    return "/".join(identity)


def parse_key(text: str) -> Identity:
    """The identity :func:`key_text` wrote; ValueError for anything else."""
    parts = text.split("/")
    if len(parts) != 3 or parts[0] not in OWNED_KINDS or not parts[2]:
        raise ValueError(f"not an object identity: {text!r}")
    return parts[0], parts[1], parts[2]


def uid_of(obj: Mapping[str, Any]) -> str:
    """The object's ``metadata.uid`` ("" when absent)."""
    uid = (obj.get("metadata") or {}).get("uid")
    return uid if isinstance(uid, str) else ""


def _labels(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    labels = (obj.get("metadata") or {}).get("labels")
    return labels if isinstance(labels, Mapping) else {}


def is_labelled(obj: Mapping[str, Any]) -> bool:
    """Whether ``obj`` carries ``app.kubernetes.io/managed-by: idleshare`` (which says nothing of who made it)."""
    return _labels(obj).get(MANAGED_BY_LABEL) == MANAGED_BY


def adoptable(obj: Mapping[str, Any], settings: Settings) -> bool:
    """The once-only adoption rule (this module's docstring): ``obj`` carries idleshare's label and creation marker,
    and its identity is the one idleshare gives an object of its kind for what the object says it is for."""
    if not (is_labelled(obj) and created_by_idleshare(obj)):
        return False
    kind, namespace, name = object_identity(obj)
    spec = obj.get("spec") if isinstance(obj.get("spec"), Mapping) else {}
    assert isinstance(spec, Mapping)
    if kind == "ResourceFlavor":
        node_labels = spec.get("nodeLabels")
        return not namespace and isinstance(node_labels, Mapping) and node_labels.get(INSTANCE_TYPE_LABEL) == name
    if kind == "WorkloadPriorityClass":
        match = _PRIORITY_DESCRIPTION.match(str(obj.get("description") or ""))
        return (
            not namespace
            and match is not None
            and name == priority_class_name(match["name"])
            and str(obj.get("value")) == match["weight"]
        )
    if kind == "Cohort":
        return not namespace and name == settings.cohort_name
    if kind in ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"):
        return not namespace and name == POLICY_NAME
    team = _labels(obj).get(TEAM_LABEL)
    if not isinstance(team, str) or not team:
        return False
    if kind == "ClusterQueue":
        selector = spec.get("namespaceSelector")
        match_labels = selector.get("matchLabels") if isinstance(selector, Mapping) else None
        return (
            not namespace
            and name == cluster_queue_name(team, settings)
            and isinstance(match_labels, Mapping)
            and match_labels.get(NAMESPACE_NAME_LABEL) == namespace_name(team, settings)
        )
    if kind == "LocalQueue":
        return (
            namespace == namespace_name(team, settings)
            and name == local_queue_name(team, settings)
            and spec.get("clusterQueue") == cluster_queue_name(team, settings)
        )
    return False


def missing(record: Record | None, listed: Iterable[Mapping[str, Any]]) -> list[Identity]:
    """The recorded identities the labelled list does not show (their label removed, or gone): to be read one by
    one, so that an object whose label someone removed is still found."""
    if record is None:
        return []
    seen = {object_identity(obj) for obj in listed}
    return sorted(identity for identity in record.objects if identity not in seen)


def resolve(record: Record | None, current: Iterable[Mapping[str, Any]], settings: Settings) -> Ownership:
    """Sort ``current`` (the labelled objects listed, plus the recorded ones read by identity) by ``record``: see
    :class:`Ownership`. No record stored yet (``None``, or version 0): :func:`adoptable` decides, once."""
    out = Ownership()
    objects: Mapping[Identity, str] = record.objects if record is not None else {}
    pending = record.pending if record is not None else frozenset()
    first = record is None or record.version == 0
    by_identity: dict[Identity, Mapping[str, Any]] = {}
    for obj in current:
        identity = object_identity(obj)
        if identity[0] not in OWNED_KINDS:
            continue
        by_identity[identity] = obj
        uid = uid_of(obj)
        recorded = objects.get(identity)
        if recorded is not None and recorded == uid:
            out.ours[identity] = uid
        elif uid and ((first and adoptable(obj, settings)) or (identity in pending and created_by_idleshare(obj))):
            out.ours[identity] = uid
            out.adopted.append(identity)
        elif is_labelled(obj) and not is_terminating(obj):
            out.foreign.append(dict(obj))
    out.gone = sorted(identity for identity in objects if identity not in out.ours)
    out.foreign.sort(key=lambda o: (KIND_ORDER.index(str(o.get("kind"))), *object_identity(o)[1:]))
    return out


def updated(
    record: Record | None,
    ownership: Ownership,
    *,
    created: Mapping[Identity, str],
    deleted: Sequence[Identity],
    lost: Sequence[Identity] = (),
    pending: Iterable[Identity] = (),
    generation: int,
    at: str,
) -> Record:
    """The record after a write: what was idleshare's (:func:`resolve`), plus what this run created, minus what it
    deleted or found no longer its own (``lost``: a delete whose uid precondition failed); ``pending``: the creates
    started whose answer did not come (failed, or not started: the next run may find them made); each deletion
    appended to the log (the last :data:`REMOVED_LOG_MAX`)."""
    objects = dict(ownership.ours)
    objects.update(created)
    removed = list(record.removed if record is not None else ())
    for identity in deleted:
        uid = objects.pop(identity, "")
        removed.append({"object": describe(identity), "uid": uid, "generation": generation, "at": at})
    for identity in lost:
        objects.pop(identity, None)
    return Record(
        objects=dict(sorted(objects.items())),
        pending=frozenset(i for i in pending if i not in objects),
        removed=tuple(removed[-REMOVED_LOG_MAX:]),
        version=record.version if record is not None else 0,
    )


def with_pending(record: Record | None, ownership: Ownership, creating: Iterable[Identity]) -> Record:
    """The record to store before creating ``creating``: what is idleshare's now, and those identities pending."""
    return Record(
        objects=dict(sorted(ownership.ours.items())),
        pending=frozenset(creating),
        removed=record.removed if record is not None else (),
        version=record.version if record is not None else 0,
    )


def same(a: Record | None, b: Record) -> bool:
    """Whether storing ``b`` over ``a`` would change anything."""
    if a is None:
        return False
    return dict(a.objects) == dict(b.objects) and a.pending == b.pending and tuple(a.removed) == tuple(b.removed)
