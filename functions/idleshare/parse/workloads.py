"""DaemonSet and Pod objects -> :class:`idleshare.domain.model.DaemonSet` / :class:`~idleshare.domain.model.Pod`: what
headroom reads of them (docs/spec.md §2, "Headroom"), one schema each.

Accepts what ``kubectl get daemonsets -A -o json`` / ``kubectl get pods -A -o json`` print (``kind: List``), an API
list (``DaemonSetList``, ``PodList``) or a JSON array, as JSON text or decoded (Workloads, for ``all``:
:func:`parse_workloads`); :func:`split_dump` takes the items of one
``kubectl get nodes,daemonsets,pods,workloads -A -o json`` apart. The cluster's objects are read one by one
(:func:`cluster_daemonsets`, :func:`cluster_pods`): one that does not parse is named and left out, never a failure of
the whole read. The pods of Kueue's admitted workloads that no node has taken are read for the usage sample
(:func:`unbound_pods` -> :class:`idleshare.domain.usage.UnboundPod`, a projection of their own); one that does not
read is named (:class:`~idleshare.domain.usage.Unreadable`) and counts for no workload.

Decisions:

- only the fields headroom reads are declared (a pod template's ``nodeSelector``, required node affinity,
  ``tolerations``, each container's ``resources`` and ``restartPolicy``, ``overhead``, a DaemonSet's uid; a pod's
  ``nodeName``, phase, labels, uid and owner references: their ``apiVersion``, ``kind``, ``uid`` and ``controller``);
  unknown members are ignored; an item's ``kind``, when present, must be the one expected;
- quantities are read as a node's allocatable is (:func:`idleshare.parse.nodes.parse_quantity_value`);
- a container's limit stands for its missing request, as the API server defaults a pod's containers (a DaemonSet's
  template is not defaulted until its pods are created).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Annotated, Any, Literal

import msgspec

from idleshare.domain.model import (
    Amount,
    DaemonSet,
    OwnerReference,
    Pod,
    PodRequests,
    Requirement,
    SelectorTerm,
    Toleration,
)
from idleshare.domain.usage import PODSET_LABEL, UnboundPod, Unreadable, WorkloadStatus
from idleshare.parse import kueue_status, schema
from idleshare.parse.errors import FieldError, InputError, capped
from idleshare.parse.nodes import parse_quantity_value
from idleshare.parse.schema import show


class _Resources(msgspec.Struct):
    requests: dict[str, Any] | None = None
    limits: dict[str, Any] | None = None


class _Container(msgspec.Struct):
    name: str | None = None
    resources: _Resources | None = None
    restartPolicy: str | None = None


class _Toleration(msgspec.Struct):
    key: str | None = None
    operator: Literal["Equal", "Exists", ""] | None = None
    value: str | None = None
    effect: str | None = None


class _Requirement(msgspec.Struct):
    key: str
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]
    values: list[str] | None = None


class _Term(msgspec.Struct):
    matchExpressions: list[_Requirement] | None = None
    matchFields: list[_Requirement] | None = None


class _NodeSelector(msgspec.Struct):
    nodeSelectorTerms: list[_Term]


class _NodeAffinity(msgspec.Struct):
    requiredDuringSchedulingIgnoredDuringExecution: _NodeSelector | None = None


class _Affinity(msgspec.Struct):
    nodeAffinity: _NodeAffinity | None = None


class _PodSpec(msgspec.Struct):
    nodeName: str | None = None
    nodeSelector: dict[str, str] | None = None
    affinity: _Affinity | None = None
    tolerations: list[_Toleration] | None = None
    containers: list[_Container] | None = None
    initContainers: list[_Container] | None = None
    overhead: dict[str, Any] | None = None


class _Owner(msgspec.Struct):
    kind: str
    apiVersion: str = ""
    uid: str = ""
    controller: bool | None = None


class _Metadata(msgspec.Struct):
    name: Annotated[str, msgspec.Meta(min_length=1)]
    namespace: str | None = None
    uid: str | None = None
    labels: dict[str, str] | None = None
    ownerReferences: list[_Owner] | None = None


class _Template(msgspec.Struct):
    spec: _PodSpec | None = None


class _DaemonSetSpec(msgspec.Struct):
    template: _Template


class _DaemonSet(msgspec.Struct):
    metadata: _Metadata
    spec: _DaemonSetSpec
    kind: Literal["DaemonSet"] | None = None


class _PodStatus(msgspec.Struct):
    phase: str | None = None


class _Pod(msgspec.Struct):
    metadata: _Metadata
    kind: Literal["Pod"] | None = None
    spec: _PodSpec | None = None
    status: _PodStatus | None = None


# -- to the domain ----------------------------------------------------------------------------------------------
def _amounts(values: dict[str, Any] | None, where: str, errors: list[FieldError]) -> dict[str, Amount]:
    out: dict[str, Amount] = {}
    for resource, value in (values or {}).items():
        try:
            out[resource] = parse_quantity_value(value)
        except ValueError as exc:
            errors.append(FieldError(f"{where}[{json.dumps(resource)}]", str(exc)))
    return out


def _container(c: _Container, where: str, errors: list[FieldError]) -> dict[str, Amount]:
    if c.resources is None:
        return {}
    requests = _amounts(c.resources.requests, f"{where}.resources.requests", errors)
    limits = _amounts(c.resources.limits, f"{where}.resources.limits", errors)
    return {**limits, **requests}  # a limit stands for a missing request (the API server's defaulting)


def _requests(spec: _PodSpec | None, where: str, errors: list[FieldError]) -> PodRequests:
    if spec is None:
        return PodRequests()
    containers = tuple(_container(c, f"{where}.containers[{i}]", errors) for i, c in enumerate(spec.containers or ()))
    inits = tuple(
        (_container(c, f"{where}.initContainers[{i}]", errors), c.restartPolicy == "Always")
        for i, c in enumerate(spec.initContainers or ())
    )
    return PodRequests(containers, inits, _amounts(spec.overhead, f"{where}.overhead", errors))


def _requirements(found: list[_Requirement] | None) -> tuple[Requirement, ...]:
    return tuple(Requirement(r.key, r.operator, tuple(r.values or ())) for r in found or ())


def _to_daemonset(raw: _DaemonSet, where: str, errors: list[FieldError]) -> DaemonSet | None:
    before = len(errors)
    spec = raw.spec.template.spec
    requests = _requests(spec, f"{where}.spec.template.spec", errors)
    if len(errors) > before:
        return None
    terms: tuple[SelectorTerm, ...] | None = None
    affinity = spec.affinity.nodeAffinity if spec is not None and spec.affinity is not None else None
    required = affinity.requiredDuringSchedulingIgnoredDuringExecution if affinity is not None else None
    if required is not None:
        terms = tuple(
            SelectorTerm(_requirements(t.matchExpressions), _requirements(t.matchFields))
            for t in required.nodeSelectorTerms
        )
    tolerations = tuple(
        Toleration(t.key or None, t.operator or "Equal", t.value, t.effect or None)
        for t in (spec.tolerations if spec is not None else None) or ()
    )
    return DaemonSet(
        namespace=raw.metadata.namespace or "",
        name=raw.metadata.name,
        requests=requests,
        node_selector=dict((spec.nodeSelector if spec is not None else None) or {}),
        affinity_terms=terms,
        tolerations=tolerations,
        uid=raw.metadata.uid or "",
    )


def _to_pod(raw: _Pod, where: str, errors: list[FieldError]) -> Pod | None:
    before = len(errors)
    requests = _requests(raw.spec, f"{where}.spec", errors)
    if len(errors) > before:
        return None
    meta = raw.metadata
    return Pod(
        namespace=meta.namespace or "",
        name=meta.name,
        node_name=(raw.spec.nodeName if raw.spec is not None else None) or "",
        requests=requests,
        phase=raw.status.phase if raw.status is not None else None,
        labels=dict(meta.labels or {}),
        owners=tuple(
            OwnerReference(o.apiVersion, o.kind, o.uid, o.controller is True) for o in meta.ownerReferences or ()
        ),
        uid=meta.uid or "",
    )


# -- reading ----------------------------------------------------------------------------------------------------
def _where(index: int | None, item: object, prefix: str = "items") -> str:
    meta = item.get("metadata") if isinstance(item, dict) else None
    name = meta.get("name") if isinstance(meta, dict) else None
    namespace = meta.get("namespace") if isinstance(meta, dict) else None
    at = prefix if index is None else f"{prefix}[{index}]"
    if isinstance(name, str) and name:
        return f"{at} ({namespace}/{name})" if isinstance(namespace, str) and namespace else f"{at} ({name})"
    return at


def _one(item: object, kind: type[Any], to: Any, where: str, errors: list[FieldError]) -> Any:
    try:
        raw = msgspec.convert(item, kind)
    except msgspec.ValidationError:
        try:
            raw = schema.convert(item, kind, where)
        except InputError as exc:
            errors.extend(FieldError(where + ("" if not e.loc else f".{e.loc}"), e.message) for e in exc.errors)
            return None
    return to(raw, where, errors)


def _items(raw: bytes | str | list[Any] | dict[str, Any], source: str, kinds: tuple[str, ...]) -> list[Any]:
    document: Any = raw
    if isinstance(raw, (bytes, bytearray, memoryview, str)):
        try:
            document = msgspec.json.decode(bytes(raw) if not isinstance(raw, str) else raw)
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError) as exc:
            raise InputError(source, [FieldError("", f"invalid JSON: {exc}")]) from None
    if isinstance(document, list):
        return document
    hint = f"expected a List or {kinds[0]}List (`kubectl get {kinds[1]} -A -o json`) or a JSON array"
    if not isinstance(document, dict):
        raise InputError(source, [FieldError("", f"{hint}, got {show(document)}")])
    if document.get("kind") not in (None, "List", f"{kinds[0]}List"):
        raise InputError(source, [FieldError("kind", f"{hint}, got {show(document.get('kind'))}")])
    items = document.get("items")
    if not isinstance(items, list):
        raise InputError(source, [FieldError("items", f"required field missing: {hint}")])
    return items


def _parse(items: Sequence[Any], kind: type[Any], to: Any, source: str) -> tuple[Any, ...]:
    errors: list[FieldError] = []
    found = [_one(item, kind, to, _where(i, item), errors) for i, item in enumerate(items)]
    if errors:
        raise InputError(source, capped(errors))
    return tuple(f for f in found if f is not None)


def parse_daemonsets(
    raw: bytes | str | list[Any] | dict[str, Any], source: str = "daemonsets"
) -> tuple[DaemonSet, ...]:
    """DaemonSets from ``kubectl get daemonsets -A -o json``, an API DaemonSetList or a JSON array; raises
    :class:`InputError` naming every bad object and field."""
    return _parse(_items(raw, source, ("DaemonSet", "daemonsets")), _DaemonSet, _to_daemonset, source)


def parse_pods(raw: bytes | str | list[Any] | dict[str, Any], source: str = "pods") -> tuple[Pod, ...]:
    """Pods from ``kubectl get pods -A -o json``, an API PodList or a JSON array; raises :class:`InputError`."""
    return _parse(_items(raw, source, ("Pod", "pods")), _Pod, _to_pod, source)


HEADROOM_KINDS = ("DaemonSet", "Pod", "Workload")
"""The kinds of a dump's items that headroom reads (the rest are the nodes')."""


def split_dump(document: Any) -> tuple[Any, list[Any], list[Any], list[Any]] | None:
    """The items of one ``kubectl get nodes,daemonsets,pods,workloads -A -o json`` List taken apart: (the document
    with only its other items, for the node parser; the DaemonSets; the pods; the Workloads). None when it holds
    none of those three kinds."""
    items = document.get("items") if isinstance(document, dict) else document if isinstance(document, list) else None
    if not isinstance(items, list):
        return None
    kinds = [i.get("kind") if isinstance(i, dict) else None for i in items]
    if not any(k in kinds for k in HEADROOM_KINDS):
        return None
    rest = [i for i, k in zip(items, kinds, strict=True) if k not in HEADROOM_KINDS]
    daemonsets, pods, workloads = (
        [i for i, k in zip(items, kinds, strict=True) if k == kind] for kind in HEADROOM_KINDS
    )
    return ({**document, "items": rest} if isinstance(document, dict) else rest), daemonsets, pods, workloads


def parse_workloads(
    raw: bytes | str | list[Any] | dict[str, Any], source: str = "workloads"
) -> tuple[WorkloadStatus, ...]:
    """Kueue Workloads from ``kubectl get workloads -A -o json``, an API WorkloadList or a JSON array, as headroom
    reads them (who owns each, is it admitted: :func:`idleshare.parse.kueue_status.workload`); raises
    :class:`InputError` naming every Workload whose shape does not read (it would own no pod)."""
    found = kueue_status.workloads(_items(raw, source, ("Workload", "workloads")))
    errors = [
        FieldError(f"items[{i}] ({u.object.removeprefix('Workload/')}){'.' + u.field if u.field else ''}", u.problem)
        for i, wl in enumerate(found)
        if not wl.readable
        for u in wl.unreadable
    ]
    if errors:
        raise InputError(source, capped(errors))
    return tuple(found)


def _cluster(objects: Iterable[object], kind: type[Any], to: Any, label: str) -> tuple[list[Any], list[InputError]]:
    """Each object parsed, or its error: the error's source names it (``namespace/name``, else ``label #position``),
    its locations are inside it (``spec.template.spec.containers[0]...``)."""
    found: list[Any] = []
    problems: list[InputError] = []
    for position, obj in enumerate(objects):
        errors: list[FieldError] = []
        named = _where(None, obj, prefix="")
        source = named.strip(" ()") or f"{label} #{position}"
        if not isinstance(obj, dict):
            problems.append(InputError(source, [FieldError("", f"must be an object (got {show(obj)})")]))
            continue
        parsed = _one(obj, kind, to, "", errors)
        if errors or parsed is None:
            problems.append(InputError(source, [FieldError(e.loc.lstrip("."), e.message) for e in errors]))
        else:
            found.append(parsed)
    return found, problems


def cluster_daemonsets(objects: Iterable[object]) -> tuple[list[DaemonSet], list[InputError]]:
    """The cluster's DaemonSets; each one that does not parse is left out, its error returned (a named issue)."""
    return _cluster(objects, _DaemonSet, _to_daemonset, "daemonset")


def cluster_pods(objects: Iterable[object]) -> tuple[list[Pod], list[InputError]]:
    """The cluster's bound pods; each one that does not parse is left out, its error returned (a named issue)."""
    return _cluster(objects, _Pod, _to_pod, "pod")


# -- the pods Kueue admitted that no node has taken: what the usage sample reads -------------------------------
# A projection of its own (not the headroom Pod's schema): these pods come from ``list_unbound_pods``, projected by
# the adapter to metadata and the PodScheduled condition (no spec; owners without their kind, which headroom's
# schema requires), and usage reads their uids, where headroom reads requests and owners' kinds.


class _UnboundOwner(msgspec.Struct):
    uid: str = ""


class _UnboundMetadata(msgspec.Struct):
    name: str = ""
    namespace: str = ""
    uid: str = ""
    labels: dict[str, str] | None = None
    ownerReferences: list[_UnboundOwner] | None = None


class _PodCondition(msgspec.Struct):
    type: str = ""
    status: str = ""
    reason: str = ""
    message: str = ""


class _UnboundStatus(msgspec.Struct):
    conditions: list[_PodCondition] | None = None


class _UnboundPod(msgspec.Struct):
    metadata: _UnboundMetadata | None = None
    kind: Literal["Pod"] | None = None
    status: _UnboundStatus | None = None


def unbound_pod(obj: object, what: str) -> UnboundPod:
    """One pod as the usage sample reads it (:class:`~idleshare.domain.usage.UnboundPod`); one that does not read
    is named field by field (``what``: ``Pod/namespace/name``) and has no uids, so it counts for no workload."""
    try:
        raw = msgspec.convert(obj, _UnboundPod)
    except msgspec.ValidationError:
        try:
            schema.convert(obj, _UnboundPod, what)
            problems = [Unreadable(what, "", "does not read")]  # pragma: no cover - msgspec and the walk agree
        except InputError as exc:
            problems = [Unreadable(what, e.loc, e.message) for e in exc.errors]
        meta = obj.get("metadata") if isinstance(obj, dict) else None
        name = meta.get("name") if isinstance(meta, dict) else None
        return UnboundPod(name if isinstance(name, str) else "", unreadable=tuple(problems))
    meta = raw.metadata or _UnboundMetadata()
    why = next(
        (c.message or c.reason for c in (raw.status.conditions if raw.status else None) or ()
         if c.type == "PodScheduled" and c.status == "False"),
        "",
    )  # fmt: skip
    return UnboundPod(
        name=meta.name,
        namespace=meta.namespace,
        uids=tuple(u for u in (meta.uid, *(o.uid for o in meta.ownerReferences or ())) if u),
        pod_set=(meta.labels or {}).get(PODSET_LABEL, ""),
        unschedulable=why,
    )


def unbound_pods(objects: Iterable[object]) -> list[UnboundPod]:
    """The pods of ``list_unbound_pods``, each read (:func:`unbound_pod`; named ``Pod/namespace/name``, else by its
    position): one that does not read is named in its ``unreadable`` and left out of every count."""
    return [
        unbound_pod(obj, "Pod/" + (_where(None, obj, prefix="").strip(" ()") or f"#{i}"))
        for i, obj in enumerate(objects)
    ]
