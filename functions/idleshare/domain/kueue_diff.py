"""Which Kueue objects to send so that a cluster holds the desired ones (docs/spec.md §3): a pure function
over manifests, beside the objects :mod:`idleshare.domain.kueue` builds.

:func:`diff` decides which desired objects to apply and which managed objects to delete;
:func:`first_difference` says where a stored object does not hold a desired one. Quantities compare
as numbers with :func:`idleshare.domain.quantity.parse_quantity`, which reads what lightkube's parser
reads, to the same value (checked in tests/unit/test_fast_parsers.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from idleshare.domain.kueue import KIND_ORDER, MANAGED_BY, MANAGED_BY_LABEL, Manifest
from idleshare.domain.quantity import parse_quantity
from idleshare.names import FIELD_MANAGER

CREATED_BY_ANNOTATION = "idleshare.io/created-by"
"""idleshare's creation marker: set (to :data:`~idleshare.domain.kueue.MANAGED_BY`) only in the body of the create
(POST) that made the object, never in what idleshare applies, so neither a server-side apply nor ``Take``'s forced
one can put it on an object someone else created. It is not what makes an object idleshare's: a copy of one of its
objects carries it too. The recompute decides by the uids it recorded (:mod:`idleshare.domain.ownership`, the
``owned`` argument of :func:`diff`); the marker serves the once-only adoption of objects made before the record and
the adoption of a create whose answer was lost, and, without a record (``owned`` None), :func:`diff`'s old rule."""

_NOT_COMPARED = frozenset({"apiVersion", "kind", "metadata", "status"})
_COMPARED_METADATA = ("labels", "annotations")
_QUANTITY_KEYS = frozenset({"nominalQuota", "borrowingLimit", "lendingLimit", "weight"})
_MISSING = object()


def object_identity(obj: Mapping[str, Any]) -> tuple[str, str, str]:
    """``(kind, namespace, name)``: which object in the cluster a manifest is ("" for no namespace)."""
    meta = obj.get("metadata") or {}
    return (str(obj.get("kind", "")), str(meta.get("namespace") or ""), str(meta.get("name", "")))


def created_by_idleshare(obj: Mapping[str, Any]) -> bool:
    """Whether ``obj`` carries idleshare's creation marker (:data:`CREATED_BY_ANNOTATION`)."""
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    return isinstance(annotations, Mapping) and annotations.get(CREATED_BY_ANNOTATION) == MANAGED_BY


def _is_labelled(obj: Mapping[str, Any]) -> bool:
    return ((obj.get("metadata") or {}).get("labels") or {}).get(MANAGED_BY_LABEL) == MANAGED_BY


def _is_foreign(obj: Mapping[str, Any]) -> bool:
    """An object of a kind idleshare writes (never a Namespace: one is only ever created if missing, never
    patched nor deleted, so a team's existing namespace is simply used) that idleshare did not create."""
    return obj.get("kind") != "Namespace" and not created_by_idleshare(obj)


def foreign(desired: Sequence[Manifest], current: Iterable[Manifest]) -> list[Manifest]:
    """The objects of ``current`` that have the identity of a desired one but not idleshare's creation marker
    (in the order of ``desired``): someone else's object that merely carries the managed-by label (an older
    idleshare's, created before the marker existed, or a foreign one an older ``Take`` labelled). :func:`diff`
    neither applies nor deletes them; the caller names them (issue ``ForeignObject``). A desired object the list
    does not show at all is created, and the create finds out whether a foreign one holds its name."""
    by_key = {object_identity(obj): obj for obj in current}
    found = (by_key.get(object_identity(obj)) for obj in desired)
    return [have for have in found if have is not None and _is_foreign(have) and not is_terminating(have)]


def with_creation_marker(obj: Mapping[str, Any]) -> Manifest:
    """``obj`` with idleshare's creation marker among its annotations: the body of the create that makes it."""
    meta = dict(obj.get("metadata") or {})
    meta["annotations"] = {**(meta.get("annotations") or {}), CREATED_BY_ANNOTATION: MANAGED_BY}
    return {**obj, "metadata": meta}


def diff(
    desired: Sequence[Manifest],
    current: Iterable[Manifest],
    owned: Mapping[tuple[str, str, str], str] | None = None,
) -> tuple[list[Manifest], list[Manifest]]:
    """``(to_apply, to_delete)``: what to send so that the cluster holds ``desired``.

    ``owned``: identity -> uid of the objects idleshare recorded creating (:mod:`idleshare.domain.ownership`): then
    an object is idleshare's exactly when its uid is the recorded one, whatever its label and marker say — a
    labelled copy is foreign, an object whose marker was removed is still idleshare's (updated, deleted when no
    longer wanted). ``None`` (a caller without a record: the devkit's and the adapter tests' loops) falls back to
    the creation marker, as described below.

    *To apply*, in the given (dependency) order: each desired object the cluster does not hold in
    that state. "Holds" means desired is a *semantic subset* of current: every label, annotation
    and field idleshare sets (``spec``, WorkloadPriorityClass ``value``/``description``, ...) is
    present and equal in current, where quantities (``nominalQuota``, ``borrowingLimit``,
    ``lendingLimit``, ``fairSharing.weight``) compare as numbers ("1000" == "1k", "2048Mi" ==
    "2Gi"), and anything else current carries (apiserver defaults such as ``queueingStrategy``,
    ``flavorFungibility``, ``preemption.borrowWithinCohort``, fields of other managers, status)
    is ignored. Lists compare element by element and must have the same length, so a flavor that
    disappeared from the desired ClusterQueue is noticed. A field idleshare still owns in the
    cluster (its ``managedFields`` Apply entry) that desired no longer sets, e.g. ``fairSharing``
    after fair sharing was turned off, also makes the object differ: applying it removes that
    field. A desired Namespace is listed only when no managed namespace of that name exists; the
    caller ensures it (create if missing), never patches it.

    An object of ``current`` with a desired identity but without idleshare's creation marker
    (:func:`foreign`) is not listed: idleshare never writes what it did not create.

    *To delete*, in reverse dependency order (LocalQueue, ClusterQueue, Cohort,
    WorkloadPriorityClass, ResourceFlavor): every object of ``current`` that carries
    ``app.kubernetes.io/managed-by: idleshare`` **and idleshare's creation marker**
    (:data:`CREATED_BY_ANNOTATION`) and is not desired: the objects of a team that no
    longer has a quota (by ``idleshare.io/team``), and shared cluster-scoped objects (the
    ResourceFlavor of a flavor no longer present, a WorkloadPriorityClass no longer configured).
    Never an object without both, never a kind idleshare does not write, and **never a
    Namespace**: deleting a namespace deletes every workload in it, and a team whose quota was
    removed (or briefly missing) must not lose its jobs; namespaces are only ever created.

    *Terminating* objects (``metadata.deletionTimestamp`` set: deleted, held by a finalizer such as
    Kueue's ``resource-in-use`` until its workloads are gone) are neither deleted again — the
    deletion is already under way; sending it on every recompute changes nothing — nor applied when
    desired again: an apply to a terminating object cannot bring it back (it lands on the object
    that is going away, or is refused), so it is left alone, and a recompute after it is gone creates
    it anew (:func:`terminating` lists them, so the caller can say what it waits for). A terminating
    Namespace that is desired is not listed either (``ensure_namespace`` would find it, then lose it).

    The caller must not pass an empty ``desired`` because it failed to read quotas: a failure to
    observe is not an observation of "no teams" (docs/spec.md §5).
    """
    by_key = {object_identity(obj): obj for obj in current}

    def ours(key: tuple[str, str, str], obj: Mapping[str, Any]) -> bool:
        if owned is None:
            return _is_labelled(obj) and created_by_idleshare(obj)
        uid = (obj.get("metadata") or {}).get("uid")
        return bool(uid) and owned.get(key) == uid

    def written_by_us(key: tuple[str, str, str], obj: Mapping[str, Any]) -> bool:
        return ours(key, obj) if owned is not None else created_by_idleshare(obj)

    to_apply: list[Manifest] = []
    desired_keys = set()
    for obj in desired:
        key = object_identity(obj)
        desired_keys.add(key)
        have = by_key.get(key)
        if have is not None and is_terminating(have):
            continue  # wanted again while it goes away: created by a recompute after it is gone
        if have is not None and have.get("kind") != "Namespace" and not written_by_us(key, have):
            continue  # not ours: never written (foreign() names it)
        if obj.get("kind") == "Namespace":
            if have is None:
                to_apply.append(obj)
        elif have is None or first_difference(obj, have) is not None:
            to_apply.append(obj)
    to_delete = [
        obj
        for key, obj in by_key.items()
        if key not in desired_keys
        and not is_terminating(obj)
        and key[0] in KIND_ORDER
        and key[0] != "Namespace"
        and ours(key, obj)
    ]
    to_delete.sort(key=lambda o: (-KIND_ORDER.index(o["kind"]), *object_identity(o)[1:]))
    return to_apply, to_delete


def is_terminating(obj: Mapping[str, Any]) -> bool:
    """Whether ``obj`` is being deleted (``metadata.deletionTimestamp`` set, its finalizers still running)."""
    return bool((obj.get("metadata") or {}).get("deletionTimestamp"))


def terminating(desired: Sequence[Manifest], current: Iterable[Manifest]) -> list[Manifest]:
    """The desired objects :func:`diff` leaves alone because the cluster's one is still terminating (in the
    given order): what the cluster will lack until a recompute after they are gone creates them."""
    held = {object_identity(obj) for obj in current if is_terminating(obj)}
    return [obj for obj in desired if object_identity(obj) in held]


def first_difference(desired: Mapping[str, Any], current: Mapping[str, Any]) -> str | None:
    """Where ``current`` does not hold ``desired`` (a path and both values), or None if it does."""
    want_meta, have_meta = desired.get("metadata") or {}, dict(current.get("metadata") or {})
    annotations = have_meta.get("annotations")
    if isinstance(annotations, Mapping) and CREATED_BY_ANNOTATION in annotations:  # set at creation, never applied
        have_meta["annotations"] = {k: v for k, v in annotations.items() if k != CREATED_BY_ANNOTATION}
    for field in _COMPARED_METADATA:
        where = _uncovered(want_meta.get(field, _MISSING), have_meta.get(field, _MISSING), f"metadata.{field}", "")
        if where is not None:
            return where
    for field, want in desired.items():
        if field not in _NOT_COMPARED:
            where = _uncovered(want, current.get(field, _MISSING), field, field)
            if where is not None:
                return where
    owned = _owned_fields(current)
    if owned is not None:
        stale = _owned_not_desired(owned, desired, "")
        if stale is not None:
            return f"{stale}: owned by {FIELD_MANAGER} but no longer desired"
    return None


def fields_applied(fields: Mapping[str, Any], want: Any) -> dict[str, Any]:
    """The part of a fieldsV1 set (what a create recorded for idleshare) that server-side applying ``want`` would
    own: each ``f:`` field ``want`` sets, with what the apiserver recorded inside it; ``k:``/``v:``/``i:`` entries
    of a list ``want`` sets as recorded. Fields the apiserver defaulted (``queueingStrategy``, ...) and the creation
    marker (never applied) are left out, so that an apply of ``want`` owns exactly what it sends."""
    out: dict[str, Any] = {}
    for key, sub in fields.items():
        prefix, _, rest = key.partition(":")
        if prefix == "f":
            if not isinstance(want, Mapping) or want.get(rest) is None:
                continue
            out[key] = fields_applied(sub, want[rest]) if isinstance(sub, Mapping) and sub else sub
        else:  # "." (the map itself), or an element of a list want sets
            out[key] = sub
    return out


def _is_empty(value: Any) -> bool:
    return value is _MISSING or value is None or value == {} or value == []


def _uncovered(want: Any, have: Any, path: str, key: str) -> str | None:
    if _is_empty(want):
        return None if _is_empty(have) else f"{path}: {_show(have)} is not desired"
    if have is _MISSING:
        return f"{path}: missing"
    if isinstance(want, Mapping):
        if not isinstance(have, Mapping):
            return f"{path}: {_show(want)} != {_show(have)}"
        for k, v in want.items():
            where = _uncovered(v, have.get(k, _MISSING), f"{path}.{k}", k)
            if where is not None:
                return where
        return None
    if isinstance(want, list):
        if not isinstance(have, list) or len(want) != len(have):
            return f"{path}: {_show(want)} != {_show(have)}"
        for i, (w, h) in enumerate(zip(want, have, strict=True)):
            where = _uncovered(w, h, f"{path}[{i}]", key)
            if where is not None:
                return where
        return None
    if key in _QUANTITY_KEYS and _same_quantity(want, have):
        return None
    if want == have and type(want) is type(have):
        return None
    return f"{path}: {_show(want)} != {_show(have)}"


def _same_quantity(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool) or not isinstance(a, str | int) or not isinstance(b, str | int):
        return False
    try:
        return bool(parse_quantity(str(a)) == parse_quantity(str(b)))
    except (ValueError, ArithmeticError):
        return False


def _show(value: Any) -> str:
    return "absent" if value is _MISSING else json.dumps(value, sort_keys=True, default=str)[:200]


def _owned_fields(current: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The fieldsV1 set idleshare's server-side apply owns in ``current`` (None when unknown)."""
    for entry in (current.get("metadata") or {}).get("managedFields") or ():
        if (
            isinstance(entry, Mapping)
            and entry.get("manager") == FIELD_MANAGER
            and entry.get("operation") == "Apply"
            and isinstance(entry.get("fieldsV1"), Mapping)
        ):
            fields: Mapping[str, Any] = entry["fieldsV1"]
            return fields
    return None


def _owned_not_desired(fields: Mapping[str, Any], want: Any, path: str) -> str | None:
    """The first path in a fieldsV1 set (``f:`` field, ``k:`` map-list key, ``v:`` set value,
    ``i:`` index) that ``want`` does not set: applying ``want`` would remove it."""
    for key, sub in fields.items():
        prefix, _, rest = key.partition(":")
        child: Any
        if prefix == "f":
            where = f"{path}.{rest}" if path else rest
            if not isinstance(want, Mapping) or want.get(rest) is None:
                return where
            child = want[rest]
        elif prefix in ("k", "v"):
            try:
                ident = json.loads(rest)
            except ValueError:
                continue
            where = f"{path}[{rest}]"
            if not isinstance(want, list):
                return where
            if prefix == "v":
                if ident not in want:
                    return where
                continue
            child = next(
                (e for e in want if isinstance(e, Mapping) and all(e.get(k) == v for k, v in ident.items())),
                None,
            )
            if child is None:
                return where
        elif prefix == "i" and rest.isdigit():
            where = f"{path}[{rest}]"
            if not isinstance(want, list) or int(rest) >= len(want):
                return where
            child = want[int(rest)]
        else:  # "." (the object itself) or an unknown prefix
            continue
        if isinstance(sub, Mapping) and sub:
            deeper = _owned_not_desired(sub, child, where)
            if deeper is not None:
                return deeper
    return None
