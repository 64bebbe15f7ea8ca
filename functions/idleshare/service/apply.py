"""Writing a recompute's Kueue objects to its cluster: in dependency waves, each wave's writes in parallel.

:func:`write` applies what :func:`idleshare.domain.kueue_diff.diff` says differs and deletes what is ours and no
longer wanted, with at most ``concurrency`` writes in flight (the cluster adapter's ``write_concurrency``, default
:data:`idleshare.timings.KUBE_WRITE_CONCURRENCY`; an adapter without it, a test fake, is written one object at a
time). The order that matters is kept by waves, each finished before the next starts (:data:`APPLY_WAVES`):

1. namespaces, ResourceFlavors, WorkloadPriorityClasses and the Cohort (nothing of ours refers to another of them);
2. the ClusterQueues (they name the Cohort and the flavors: Kueue's webhooks accept a missing one, but the queue
   would be inactive until it exists, and Kueue would reconcile it twice);
3. the LocalQueues (a namespaced object needs its namespace; each names its ClusterQueue);
4. then the deletions, the other way round (LocalQueues, ClusterQueues, the rest).

Creating and updating: an object the caller knows is idleshare's (``existing``: recorded, docs/spec.md §3
"Ownership") is server-side applied; any other is created (``KubeCluster.create``: a POST carrying the marker, which
cannot land on an existing object), and the uid its answer carries is kept (:attr:`Written.created`) for the record.
One that exists is foreign (:class:`ForeignObjectError`): named in :attr:`Written.foreign`, never written, in either
field-ownership mode — unless it carries the marker at an identity an earlier run was creating (``adoptable``);
the rest is written. A delete carries the recorded uid as a precondition: another object of that name is not
deleted (:attr:`Written.lost`).

Failures: a write that another field manager refuses (:class:`FieldOwnershipError`) is not fought over: it is
named in :attr:`Written.conflicts`, the rest is written. **One object's refusal is that object's** (docs/spec.md §3):
a write the API server refuses for good (:class:`PermanentError`: a 403 of a namespace being deleted,
:class:`NamespaceTerminatingError`, an admission policy, a ResourceQuota, a webhook's 4xx) is named in
:attr:`Written.refused`, and holds back only what needs it (:func:`needs`): an object that names a refused one that
is not in the cluster (its create was refused; an existing object whose update was refused still stands, and what
names it still works) is not written this run, named in :attr:`Written.waiting`. Every other write runs, and so do
the deletions, whatever was refused: a deletion never waits for a write (a removed team's ClusterQueue that stayed
would keep its quota in the cohort), nor for another deletion (Kueue's own finalizers hold a flavor or a queue still
in use). A failure that retrying may cure (timeouts, 5xx, an outage) still stops every write not yet started,
deletions included (the retry makes them), so an unreachable server costs one timeout per write in flight, not one
per object; :meth:`Written.raise_failures` then raises a single failure as it came, or, for several, a
:class:`RetryableWritesFailed` naming them all (refusals among them). Refusals alone raise nothing: the caller names
them.

What a write costs (measured on the real stack: 200 ClusterQueues of 8 KB, each write changing one
``borrowingLimit``, kube-apiserver CPU per write with Kueue's webhooks): server-side apply of the whole object as
idleshare sends it 141-149 ms; the same with ``fieldValidation=Ignore`` 142 ms; GET + PUT 158 ms; a JSON merge
patch of ``spec.resourceGroups`` 175 ms; a JSON patch of the one field 138 ms (``application/apply-patch+cbor``:
415, not served). The cost is the object's admission, validation and storage, not the patch format, and only
apply detects a foreign field owner: so idleshare keeps server-side apply of exactly its manifest (the body is the
desired object as :mod:`idleshare.domain.kueue` builds it: no status, managedFields or resourceVersion), sends only
the objects that differ (:func:`~idleshare.domain.kueue_diff.diff`), and sends them at once.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from idleshare.adapters.ports import KubeCluster
from idleshare.domain.kueue_diff import object_identity
from idleshare.errors import (
    ConflictError,
    FieldOwnershipError,
    ForeignObjectError,
    IdleshareError,
    NamespaceTerminatingError,
    PermanentError,
    RetryableError,
)

Manifest = dict[str, Any]
Identity = tuple[str, str, str]

APPLY_WAVES: tuple[frozenset[str], ...] = (
    frozenset({"Namespace", "ResourceFlavor", "WorkloadPriorityClass", "Cohort"}),
    frozenset({"ClusterQueue"}),
    frozenset({"LocalQueue", "ValidatingAdmissionPolicy"}),
    frozenset({"ValidatingAdmissionPolicyBinding"}),
)
"""The kinds of each apply wave, in order (a kind in none of them is applied after the last)."""
DELETE_WAVES: tuple[frozenset[str], ...] = tuple(reversed(APPLY_WAVES))
FULL_MESSAGES = 5
"""How many failures :class:`WritesFailed` (and a refusal's issue) quotes in full; the others are named by their
object."""
NAMESPACE_TERMINATING = "NamespaceTerminating"
"""The named issue of an object refused because its namespace is being deleted (it cannot be created there until the
namespace is gone)."""
WRITE_REFUSED = "WriteRefused"
"""The named issue of any other write (or deletion) the API server refused for good, with its status and message."""


def describe(obj: Manifest) -> str:
    kind, namespace, name = object_identity(obj)
    return f"{kind}/{namespace}/{name}" if namespace else f"{kind}/{name}"


def _identity_text(identity: Identity) -> str:
    kind, namespace, name = identity
    return f"{kind}/{namespace}/{name}" if namespace else f"{kind}/{name}"


def needs(obj: Manifest) -> list[Identity]:
    """The objects ``obj`` cannot be written without (their identities): a LocalQueue its namespace (the API server
    creates nothing in a missing one) and its ClusterQueue (Kueue keeps it inactive without), a ClusterQueue its
    ResourceFlavors (Kueue makes a queue naming a missing flavor inactive: its team could admit nothing). Not a
    ClusterQueue its Cohort (Kueue forms the cohort from the name alone: the teams still lend to each other), nor the
    Cohort its flavors (a quota of a missing flavor lends nothing), nor anything a WorkloadPriorityClass (a Job
    names it, no object of ours does)."""
    kind, namespace, _ = object_identity(obj)
    spec = obj.get("spec") or {}
    out: list[Identity] = []
    if kind == "LocalQueue":
        out.append(("Namespace", "", namespace))
        if spec.get("clusterQueue"):
            out.append(("ClusterQueue", "", str(spec["clusterQueue"])))
    elif kind == "ClusterQueue":
        for group in spec.get("resourceGroups") or ():
            out.extend(("ResourceFlavor", "", str(f.get("name", ""))) for f in group.get("flavors") or ())
    return out


def refusal_code(exc: PermanentError) -> str:
    """The named issue of a refused write: :data:`NAMESPACE_TERMINATING` or :data:`WRITE_REFUSED`."""
    return NAMESPACE_TERMINATING if isinstance(exc, NamespaceTerminatingError) else WRITE_REFUSED


class WritesFailed(IdleshareError):
    """Several writes failed: :attr:`failures` holds each ``(object, error)``, in apply order."""

    def __init__(self, failures: Sequence[tuple[str, IdleshareError]], *, attempted: int, not_started: int) -> None:
        self.failures = tuple(failures)
        shown = [f"{what}: {exc}" for what, exc in self.failures[:FULL_MESSAGES]]
        rest = [what for what, _ in self.failures[FULL_MESSAGES:]]
        message = f"{len(self.failures)} of {attempted} Kubernetes writes failed: " + "; ".join(shown)
        if rest:
            message += f"; and {', '.join(rest)}"
        if not_started:
            message += f" ({not_started} not started after a retryable failure)"
        super().__init__(message, operation="write Kueue objects")


class RetryableWritesFailed(WritesFailed, RetryableError):
    """Several writes failed, at least one of them for a reason retrying may cure."""


@dataclass(slots=True)
class Written:
    """What :func:`write` did: exact counts of the writes that succeeded, the conflicts, the failures."""

    applied: int = 0
    deleted: int = 0
    namespaces_created: int = 0
    conflicts: list[str] = field(default_factory=list)
    foreign: list[str] = field(default_factory=list)
    """Objects of a name idleshare wants that someone else created (``Kind/name``): left as they are."""
    failures: list[tuple[str, IdleshareError]] = field(default_factory=list)
    """Failures that retrying may cure (each ``(object, error)``): :meth:`raise_failures` raises them."""
    refused: list[tuple[str, PermanentError]] = field(default_factory=list)
    """Writes and deletions the API server refused for good (``(object, error)``, in order): the rest still ran."""
    waiting: list[tuple[str, list[str]]] = field(default_factory=list)
    """Objects not written because an object they need (:func:`needs`) was refused and is not in the cluster:
    ``(object, [what it waits for])``."""
    errors: list[Exception] = field(default_factory=list)
    """Failures that are not idleshare errors (a bug, an object of a kind idleshare does not write): raised as is."""
    attempted: int = 0
    not_started: int = 0
    created: dict[Identity, str] = field(default_factory=dict)
    """The uid of each object this write created (from the create's answer), or adopted (a pending create of an
    earlier run): what the ownership record gains."""
    deleted_objects: list[Identity] = field(default_factory=list)
    """Each object deleted, in the order deleted: what the record loses, and what the apply status names."""
    foreign_ids: list[Identity] = field(default_factory=list)
    """The objects of :attr:`foreign`, by identity."""
    lost: list[Identity] = field(default_factory=list)
    """Recorded objects whose delete found another object of their name (the uid precondition failed): no longer
    idleshare's, not deleted."""

    def raise_failures(self) -> None:
        """Raise what failed and retrying may cure, if anything (refusals alone raise nothing: the caller names
        them): see the module's docstring."""
        if self.errors:
            raise self.errors[0]
        if not self.failures:
            return
        if len(self.failures) == 1 and not self.refused:  # as it came (the writes it stopped are made by the retry)
            raise self.failures[0][1]
        every = [*self.failures, *self.refused]
        raise RetryableWritesFailed(every, attempted=self.attempted, not_started=self.not_started) from every[0][1]


def write(
    kube: KubeCluster,
    to_apply: Sequence[Manifest],
    to_delete: Sequence[Manifest],
    *,
    force: bool,
    concurrency: int | None = None,
    existing: Collection[tuple[str, str, str]] | None = None,
    owned: Mapping[Identity, str] | None = None,
    adoptable: Collection[Identity] = (),
) -> Written:
    """Apply ``to_apply`` and delete ``to_delete`` (both as :func:`~idleshare.domain.kueue_diff.diff` orders
    them), in waves, ``concurrency`` writes at a time (default: ``kube.write_concurrency`` if it has one, else 1).
    ``existing``: the identities (:func:`~idleshare.domain.kueue_diff.object_identity`) of the objects seen in the
    cluster with idleshare's creation marker, applied; every other object is created (None: all of them).
    ``owned``: the recorded uid of each object idleshare created (every delete is sent with its uid as a
    precondition; an object to delete without one, or without a uid of its own, is refused). ``adoptable``: the
    identities an earlier run was creating when it stopped: a create that finds one there with idleshare's marker
    adopts it (the lost answer of that create) instead of naming it foreign.
    Never raises for a failed write: :meth:`Written.raise_failures` does. A refused object holds back only what
    needs it (:func:`needs`); the deletions run unless a retryable failure stopped the run."""
    if concurrency is None:
        concurrency = int(getattr(kube, "write_concurrency", 1))
    done = Written()
    stop = threading.Event()  # set by a retryable failure: nothing more is started
    there = set(existing or ())
    missing: set[Identity] = set()  # refused, or held back, and not in the cluster: what needs it waits
    with _Runner(max(1, concurrency)) as run:
        for wave in _waves(to_apply, APPLY_WAVES):
            ready: list[Manifest] = []
            for obj in wave:
                waits = [_identity_text(n) for n in needs(obj) if n in missing]
                if waits:
                    done.waiting.append((describe(obj), waits))
                    if object_identity(obj) not in there:
                        missing.add(object_identity(obj))
                else:
                    ready.append(obj)
            refused = run(
                ready,
                lambda obj: _apply_one(kube, obj, force=force, done=done, existing=existing, adoptable=adoptable),
                done,
                stop,
            )
            # a namespace is never in ``existing`` (idleshare lists its Kueue objects): one refused is not there
            missing.update(i for i in map(object_identity, refused) if i[0] == "Namespace" or i not in there)
        if not stop.is_set():
            for wave in _waves(to_delete, DELETE_WAVES):
                run(wave, lambda obj: _delete_one(kube, obj, done=done, owned=owned), done, stop)
    return done


def _waves(objects: Sequence[Manifest], waves: Sequence[frozenset[str]]) -> list[list[Manifest]]:
    """``objects`` split into ``waves`` by kind, each in the given order (other kinds: a last wave)."""
    out: list[list[Manifest]] = [[] for _ in range(len(waves) + 1)]
    for obj in objects:
        kind = obj.get("kind", "")
        out[next((i for i, kinds in enumerate(waves) if kind in kinds), len(waves))].append(obj)
    return [wave for wave in out if wave]


def _apply_one(
    kube: KubeCluster,
    obj: Manifest,
    *,
    force: bool,
    done: Written,
    existing: Collection[tuple[str, str, str]] | None,
    adoptable: Collection[Identity] = (),
) -> Callable[[], None]:
    """Write ``obj``; what to record in ``done`` (called in order, on the caller's thread)."""
    if obj.get("kind") == "Namespace":
        created = kube.ensure_namespace(obj)

        def namespace() -> None:
            done.namespaces_created += int(created)

        return namespace
    identity = object_identity(obj)
    uid = ""
    try:
        if existing is not None and identity in existing:
            kube.apply(obj, force=force)
        else:
            try:
                uid = kube.create(obj, force=force)
            except ForeignObjectError as exc:
                if not (exc.marked and exc.uid and identity in adoptable):
                    raise
                uid = exc.uid  # an earlier run's create, its answer lost: idleshare's, applied now
                kube.apply(obj, force=force)
    except ForeignObjectError:
        what = describe(obj)

        def refused() -> None:
            done.foreign.append(what)
            done.foreign_ids.append(identity)

        return refused
    except FieldOwnershipError as exc:
        name = (obj.get("metadata") or {}).get("name")
        conflict = f"{obj['kind']}/{name}: {', '.join(exc.fields)} owned by {', '.join(exc.managers)}"
        if uid:  # adopted, then refused a field: idleshare's all the same
            created_uid = uid

            def adopted_conflict() -> None:
                done.created[identity] = created_uid
                done.conflicts.append(conflict)

            return adopted_conflict
        return lambda: done.conflicts.append(conflict)

    def applied() -> None:
        done.applied += 1
        if uid:
            done.created[identity] = uid

    return applied


def _delete_one(
    kube: KubeCluster, obj: Manifest, *, done: Written, owned: Mapping[Identity, str] | None = None
) -> Callable[[], None]:
    """Delete ``obj`` with its recorded uid as the precondition; another object of its name (the precondition
    failed) is recorded as lost, never deleted."""
    identity = object_identity(obj)
    uid = (owned or {}).get(identity) or str((obj.get("metadata") or {}).get("uid") or "")
    if not uid:
        raise PermanentError(f"delete {describe(obj)}: no recorded uid: not deleted", operation="delete")
    try:
        kube.delete(obj, uid=uid)
    except ConflictError:
        return lambda: done.lost.append(identity)

    def deleted() -> None:
        done.deleted += 1
        done.deleted_objects.append(identity)

    return deleted


class _Runner:
    """Runs one wave of writes, ``concurrency`` at a time, and records their results in order."""

    def __init__(self, concurrency: int) -> None:
        from concurrent.futures import ThreadPoolExecutor  # on first use: not in the handler's cold start

        self._pool = ThreadPoolExecutor(concurrency, thread_name_prefix="kube-write") if concurrency > 1 else None

    def __enter__(self) -> _Runner:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)

    def __call__(
        self,
        wave: list[Manifest],
        one: Callable[[Manifest], Callable[[], None]],
        done: Written,
        stop: threading.Event,
    ) -> list[Manifest]:
        """Run ``one`` over ``wave``; the objects refused for good (also recorded in ``done.refused``)."""

        def attempt(obj: Manifest) -> Callable[[], None] | Exception | None:
            if stop.is_set():
                return None  # not started
            try:
                return one(obj)
            except IdleshareError as exc:
                if not isinstance(exc, PermanentError):
                    stop.set()
                return exc
            except Exception as exc:  # handed to the caller's thread, raised there
                stop.set()
                return exc

        if self._pool is None:
            results = [attempt(obj) for obj in wave]
        else:
            results = [future.result() for future in [self._pool.submit(attempt, obj) for obj in wave]]
        refused: list[Manifest] = []
        for obj, result in zip(wave, results, strict=True):
            if result is None:
                done.not_started += 1
                continue
            done.attempted += 1
            if isinstance(result, PermanentError):
                done.refused.append((describe(obj), result))
                refused.append(obj)
            elif isinstance(result, IdleshareError):
                done.failures.append((describe(obj), result))
            elif isinstance(result, Exception):
                done.errors.append(result)
            else:
                result()
        return refused
