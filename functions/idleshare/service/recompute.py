"""One recompute of one cluster, level-triggered: re-read the truth, compute, persist if changed, converge.

1. read nodes (Kubernetes; the cluster's Kueue objects, which step 4 diffs against, are read beside them), the Kueue
   API versions it serves, quotas and scheduler config (DynamoDB) — a failed read, no Kueue served
   (``KueueNotInstalled``), or a stored quota / scheduler config that breaks a bound, keeps the last pool and records
   the failure; a Node object that does not parse is excluded as ``Unreadable``;
2. compute the pool and the desired Kueue objects (in ``kueue.x-k8s.io/v1beta2``; the adapter writes each in the
   version served, and the pool names those versions and any field they lack, ``KueueFieldUnsupported``): one whose
   name the API server would refuse is left out, named in the pool's issues (``InvalidObjectName``), and every other
   object is still written; other quota writers seen in the cluster's Kueue objects (Dynamic Quota Orchestration's
   ``status.effectiveQuotas``, HyperPod's own task governance) are named issues too (:func:`_other_writer_issues`):
   idleshare keeps writing its spec;
3. persist generation N+1 conditionally on N, with a history item — only when something changed;
4. apply only the objects that differ from the cluster's, delete ours that are no longer wanted;
5. publish ``Lendable Pool Recomputed`` once per generation: the event is stored with the generation (the pool
   item's outbox) and cleared once it is on the bus, so a failed apply or publish is published by the retry;
6. for an explicit recalculation request (a ``requestId``), write its receipt — Done or Failed — and only
   then: an event-triggered recompute that changes nothing writes nothing.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import KW_ONLY, dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar

from idleshare import names, timings
from idleshare.adapters.ports import (
    ClusterRecord,
    EventPublisher,
    KubeCluster,
    PoolRecord,
    RecalculationReceipt,
    Store,
)
from idleshare.domain.cluster_settings import FieldOwnership, engine_settings
from idleshare.domain.coexistence import (
    HYPERPOD_MANAGED_NAMESPACE_SELECTOR,
    OTHER_WRITER_ISSUES,
    SAMPLE,
    other_writer_issues,
)
from idleshare.domain.document import digest, pool_document
from idleshare.domain.fights import FIELD_MANAGER_FIGHT, Fight, other_managers, track
from idleshare.domain.headroom import kueue_owners
from idleshare.domain.kueue import MANAGED_BY, MANAGED_BY_LABEL, webhook_violations, writable_objects
from idleshare.domain.kueue_config import KueueConfigReading, with_kueue_config
from idleshare.domain.kueue_diff import diff, object_identity
from idleshare.domain.kueue_fit import with_kueue_api
from idleshare.domain.kueue_versions import KueueApi
from idleshare.domain.model import DaemonSet, Headroom, Node, Pod, Quota, SchedulerConfig, Settings, Snapshot
from idleshare.domain.ownership import describe as ownership_describe
from idleshare.domain.pool import NAMED_MAX, Issue, PoolResult, compute
from idleshare.domain.usage import WorkloadStatus
from idleshare.errors import ClusterReadError, IdleshareError, KueueNotInstalledError, PermanentError
from idleshare.parse import kueue_status
from idleshare.parse.errors import InputError
from idleshare.parse.kueue_config import read_kueue_config
from idleshare.parse.nodes import cluster_node
from idleshare.parse.quotas import parse_quotas, parse_scheduler_config
from idleshare.parse.workloads import cluster_daemonsets, cluster_pods
from idleshare.service import ownership
from idleshare.service.apply import FULL_MESSAGES, describe, refusal_code
from idleshare.service.apply import write as write_objects

R = TypeVar("R")
log = logging.getLogger(__name__)

FOREIGN_FIELD_MANAGER = "ForeignFieldManager"
"""The named issue of an object whose fields another field manager owns (apply status ``Conflict``)."""
WAITING = "WaitingForRefused"
"""Objects not written because an object they need was refused (apply status ``Conflict``)."""
FOREIGN_OBJECT = "ForeignObject"
"""The named issue of an object of a name idleshare wants that idleshare did not create (apply status
``Conflict``): never written, never deleted, whatever the cluster's field ownership."""

PAUSED = "Paused"
"""``Outcome.dropped`` of a recompute of a paused cluster: nothing read from the cluster, nothing written to it, no
generation; only the count of skipped recomputes (docs/spec.md §3, "Pause")."""


@dataclass(frozen=True, slots=True)
class _Truth:
    """What step 1 of a recompute read: the snapshot to compute on, and what it could not read or must name."""

    snapshot: Snapshot
    unreadable: list[str]  # why each Unreadable node could not be read
    unreadable_workloads: list[Issue]
    kueue_api: KueueApi
    kueue_config: KueueConfigReading | None


@dataclass(slots=True)
class Outcome:
    cluster_id: str
    generation: int
    changed: bool
    applied: int = 0
    deleted: int = 0
    namespaces_created: int = 0
    result: PoolResult | None = None
    changes: dict[str, Any] = field(default_factory=dict)
    duration_ms: float = 0.0
    dropped: str = ""  # why nothing was done ("UnknownCluster"): not an error, not retried
    conflicts: list[str] = field(default_factory=list)
    """``ForeignFieldManager`` issues: objects whose fields another field manager owns, left to it."""
    foreign: list[str] = field(default_factory=list)
    """``ForeignObject`` issues: objects (``Kind/name``) idleshare wants that someone else created, left alone."""
    refused: list[tuple[str, str]] = field(default_factory=list)
    """``NamespaceTerminating`` / ``WriteRefused`` issues: ``(code, "Kind/name: why")`` of each write or deletion the
    API server refused for good; every other write still ran."""
    waiting: list[str] = field(default_factory=list)
    """Objects not written because one they need was refused (``Kind/name (needs Kind/name)``)."""
    fights: list[Fight] = field(default_factory=list)
    """``FieldManagerFight`` issues: objects another field manager keeps rewriting, backed off from."""
    rewrites: dict[str, Any] = field(default_factory=dict)
    """The generation's count of rewritten objects (:func:`idleshare.domain.fights.track`), kept with the apply
    status."""
    unreadable: list[str] = field(default_factory=list)
    """Why each ``Unreadable`` node could not be read (the node is excluded, the cluster recomputed)."""
    published: bool = False
    """This run put the generation's ``Lendable Pool Recomputed`` on the bus (its own, or a failed run's)."""
    deleted_objects: list[str] = field(default_factory=list)
    """Each object this run deleted (``Kind/namespace/name``): named in the apply status whether or not the pool
    changed, and logged in the ownership record (docs/spec.md §3, "Ownership")."""


EXCLUDED_SAMPLE = 20
"""How many newly excluded nodes a generation's change summary names (the rest are counted): the summary is
stored on the pool and history items and sent in the event, so it is bounded whatever fails at once."""


def _excluded_changes(old: dict[str, str], new: dict[str, str]) -> dict[str, Any]:
    """How the excluded nodes moved, in counts (bounded at any cluster size) and a sample of the newly excluded
    (``GET /clusters/{c}/excluded-nodes`` lists them all)."""
    added = sorted(n for n in new if n not in old)
    returned = sum(1 for n in old if n not in new)
    reason_changed = sorted(n for n in new if n in old and old[n] != new[n])
    by_reason: dict[str, int] = {}
    for reason in new.values():
        by_reason[reason] = by_reason.get(reason, 0) + 1
    sample = (added + reason_changed)[:EXCLUDED_SAMPLE]
    return {
        "count": len(new),
        "byReason": dict(sorted(by_reason.items())),
        "added": len(added),
        "returned": returned,
        "reasonChanged": len(reason_changed),
        "sample": {n: new[n] for n in sample},
    }


def _changes(old: dict[str, Any] | None, new: dict[str, Any]) -> dict[str, Any]:
    """What moved between two generations, in terms an operator reads: unallocated, the teams whose limits moved,
    the excluded nodes as counts (:func:`_excluded_changes`)."""
    if old is None:
        return {"first": True}
    out: dict[str, Any] = {}
    if old.get("unallocated") != new.get("unallocated"):
        out["unallocated"] = new.get("unallocated")
    old_teams, new_teams = old.get("teams", {}), new.get("teams", {})
    teams = sorted(
        t
        for t in set(old_teams) | set(new_teams)
        if old_teams.get(t, {}).get("borrowingLimit") != new_teams.get(t, {}).get("borrowingLimit")
        or old_teams.get(t, {}).get("nominal") != new_teams.get(t, {}).get("nominal")
    )
    if teams:
        out["teams"] = teams
    old_excluded, new_excluded = old.get("excludedNodes") or {}, new.get("excludedNodes") or {}
    if old_excluded != new_excluded:
        out["excludedNodes"] = _excluded_changes(old_excluded, new_excluded)
    return out


@dataclass
class Recomputer:
    """Recomputes a cluster's pool from its nodes and policies and writes it to the store, the cluster (through
    ``kube_for``) and the bus (``publisher`` None: no event); ``tolerated_taint_keys`` None: the defaults."""

    store: Store
    kube_for: Callable[[ClusterRecord], KubeCluster]
    publisher: EventPublisher | None
    _: KW_ONLY
    tolerated_taint_keys: frozenset[str] | None = None
    clock: Callable[[], datetime] = lambda: datetime.now(UTC)

    def settings_for(self, cluster: ClusterRecord) -> Settings:
        base = engine_settings(cluster.settings)
        tolerated = self.tolerated_taint_keys
        return base if tolerated is None else replace(base, tolerated_taint_keys=tolerated)

    def recompute(self, cluster_id: str, *, request_id: str | None = None) -> Outcome:
        """One recompute; with ``request_id`` (an explicit recalculation request) also its receipt:
        Done with the generation, or Failed with the error (then the error is raised again)."""
        try:
            with _cyclic_gc_paused():
                outcome = self._recompute(cluster_id)
        except Exception as exc:
            if request_id:
                self.acknowledge_failed(cluster_id, request_id, exc)
            raise
        if request_id:
            self.acknowledge(request_id, outcome)
        return outcome

    def acknowledge(self, request_id: str, outcome: Outcome) -> None:
        """The Done receipt of ``request_id``, answered by ``outcome`` (also when a burst coalesced it)."""
        summary = outcome.result.summary() if outcome.result is not None else ""
        if outcome.dropped == PAUSED:
            summary = f"skipped: cluster {outcome.cluster_id} is paused (POST /clusters/{outcome.cluster_id}/resume)"
        self.store.put_receipt(
            RecalculationReceipt(
                cluster_id=outcome.cluster_id,
                request_id=request_id,
                status="Done",
                generation=outcome.generation,
                changed=outcome.changed,
                message=summary,
                completed_at=self.clock().isoformat(),
            )
        )

    def acknowledge_failed(self, cluster_id: str, request_id: str, exc: Exception) -> None:
        """The Failed receipt of ``request_id``, answered by ``exc`` at the cluster's stored generation (also when an
        earlier recompute of the batch failed for good). Never raises: the recompute's own error is what matters."""
        with contextlib.suppress(Exception):  # the recompute's own error is what matters (SQS retries)
            previous = self.store.get_pool(cluster_id)
            self.store.put_receipt(
                RecalculationReceipt(
                    cluster_id=cluster_id,
                    request_id=request_id,
                    status="Failed",
                    generation=previous.generation if previous else 0,
                    changed=False,
                    message=f"{type(exc).__name__}: {exc}",
                    completed_at=self.clock().isoformat(),
                )
            )

    def _recompute(self, cluster_id: str) -> Outcome:
        started = time.perf_counter()
        cluster = self.store.get_cluster(cluster_id)
        if cluster is None:  # removed since the event was routed: retrying cannot help, nothing to write
            return Outcome(cluster_id, 0, False, dropped="UnknownCluster")
        pause = self.store.get_pause(cluster_id)
        if pause is not None and pause.paused:  # nothing read from the cluster, nothing written but the count
            self.store.record_paused_skip(cluster_id, self.clock().isoformat())
            previous = self.store.get_pool(cluster_id)
            log.info("recompute skipped: cluster %s is paused (since %s by %s)", cluster_id, pause.since, pause.by)
            return Outcome(cluster_id, previous.generation if previous else 0, False, dropped=PAUSED)
        kube = self.kube_for(cluster)
        # The cluster's Kueue objects, read on a thread of their own while the nodes are (both wait mostly on the
        # API server), from the first page of nodes on (it proved the token: an expired one is renewed once, by the
        # node list): what step 4 diffs against. Its failure is step 4's; the read never outlives this run.
        current = _Background(kube.list_managed)
        try:
            return self._recompute_with(cluster, kube, current, started)
        finally:
            current.wait()

    def _recompute_with(
        self, cluster: ClusterRecord, kube: KubeCluster, current: _Background[list[dict[str, Any]]], started: float
    ) -> Outcome:
        cluster_id = cluster.cluster_id
        previous = self.store.get_pool(cluster_id)
        generation = previous.generation if previous else 0
        truth = self._read_truth(cluster, kube, current, generation)  # 1
        result, manifests = self._desired(cluster_id, truth, kube, current, previous, generation)  # 2
        outcome, outbox = self._persist(cluster_id, previous, result, manifests, truth.unreadable)  # 3
        self._converge(cluster, kube, manifests, current, outcome, previous)  # 4
        self._publish(outcome, outbox)  # 5
        outcome.duration_ms = (time.perf_counter() - started) * 1000
        return outcome

    def _read_truth(
        self, cluster: ClusterRecord, kube: KubeCluster, current: _Background[list[dict[str, Any]]], generation: int
    ) -> _Truth:
        """Step 1, read the truth: a failure is recorded against the generation this run started from (a late run
        never reinstates a failure that a newer generation cleared)."""
        cluster_id = cluster.cluster_id
        unreadable: list[str] = []
        try:
            nodes = tuple(self._nodes(_starting(current, kube.list_nodes()), unreadable))
        except IdleshareError as exc:
            raise self._read_failed(cluster_id, generation, exc, "the nodes") from exc
        try:  # the versions to write in (discovery, kept by the adapter): none served is no cluster to write to
            kueue_api = kube.kueue_api()
        except KueueNotInstalledError as exc:  # permanent until someone installs Kueue: recorded, not retried
            self.store.record_read_failure(cluster_id, f"{exc.code}: {exc}", generation=generation)
            raise
        except IdleshareError as exc:
            raise self._read_failed(cluster_id, generation, exc, "the Kueue API versions") from exc
        kueue_config = read_kueue_config(kube.get_config_map)  # unreadable: a warning in the pool, never a failure
        quotas, scheduler = self._read_policies(cluster_id, generation)
        settings = self.settings_for(cluster)
        try:  # what headroom reads (docs/spec.md §2): a failed read is no headroom of zero, it keeps the last pool
            daemonsets, pods, kueue, unreadable_workloads = _headroom_inputs(kube, settings.headroom)
        except IdleshareError as exc:
            raise self._read_failed(cluster_id, generation, exc, "the DaemonSets, pods or Workloads") from exc
        snapshot = Snapshot(nodes, quotas, scheduler, settings, daemonsets, pods, kueue)
        return _Truth(snapshot, unreadable, unreadable_workloads, kueue_api, kueue_config)

    def _read_failed(self, cluster_id: str, generation: int, exc: IdleshareError, what: str) -> ClusterReadError:
        """A failed read, recorded against ``generation``: the error to raise."""
        self.store.record_read_failure(cluster_id, f"{type(exc).__name__}: {exc}", generation=generation)
        return ClusterReadError(f"cannot read {what} of {cluster_id}: {exc}")

    def _desired(
        self,
        cluster_id: str,
        truth: _Truth,
        kube: KubeCluster,
        current: _Background[list[dict[str, Any]]],
        previous: PoolRecord | None,
        generation: int,
    ) -> tuple[PoolResult, list[dict[str, Any]]]:
        """Step 2, compute: the pool and the desired Kueue objects, with every issue named."""
        scheduler, settings = truth.snapshot.scheduler_config, truth.snapshot.settings
        result = compute(truth.snapshot).with_issues(truth.unreadable_workloads)
        result = with_kueue_config(result, truth.kueue_config, scheduler)  # what this Kueue will not do, as issues
        # past Kueue's limits or a bad name: an issue, not a write
        result, manifests = writable_objects(result, scheduler, settings, truth.kueue_api)
        result = with_kueue_api(result, manifests, truth.kueue_api)  # the versions written in, a field they lack
        refused = [e for m in manifests for e in webhook_violations(m, truth.kueue_api.limits)]
        if refused:  # recorded like an unreadable policy: the last pool and the cluster's objects stay
            message = f"Kueue would refuse the desired objects of cluster {cluster_id!r}: " + "; ".join(refused[:5])
            self.store.record_read_failure(cluster_id, message, generation=generation)
            raise PermanentError(message, operation="validate desired objects")
        result = result.with_issues(_other_writer_issues(kube, current, previous))  # DQO, HyperPod's governance
        return result, manifests

    def _persist(
        self,
        cluster_id: str,
        previous: PoolRecord | None,
        result: PoolResult,
        manifests: list[dict[str, Any]],
        unreadable: list[str],
    ) -> tuple[Outcome, dict[str, Any] | None]:
        """Step 3, persist if changed (the pool and the manifests, digested together: a new generation iff either
        moved), with the generation's event in the pool item's outbox (published in step 5)."""
        generation = previous.generation if previous else 0
        pool = pool_document(result)
        new_digest = digest(pool, manifests)
        changed = previous is None or previous.digest != new_digest
        changes: dict[str, Any] = {}
        outbox = previous.outbox if previous is not None else None
        if changed:
            changes = _changes(previous.pool if previous else None, pool)
            outbox = {
                "cluster": cluster_id,
                "generation": generation + 1,
                "changes": changes,
                "summary": result.summary(),
            }
            record = PoolRecord(
                cluster_id=cluster_id,
                generation=generation + 1,
                digest=new_digest,
                pool=pool,
                computed_at=self.clock().isoformat(),
                extra={"summary": result.summary(), "changes": changes},
                outbox=outbox,
            )
            self.store.put_pool(record, expected_generation=generation)
            generation += 1
        elif previous is not None and previous.read_failure:
            self.store.record_read_failure(cluster_id, "", generation=generation)
        return Outcome(cluster_id, generation, changed, result=result, changes=changes, unreadable=unreadable), outbox

    def _converge(
        self,
        cluster: ClusterRecord,
        kube: KubeCluster,
        manifests: list[dict[str, Any]],
        current: _Background[list[dict[str, Any]]],
        outcome: Outcome,
        previous: PoolRecord | None,
    ) -> None:
        """Step 4, converge the cluster, and record how it went."""
        cluster_id, generation = cluster.cluster_id, outcome.generation
        force = cluster.settings.field_ownership is FieldOwnership.TAKE
        try:
            self._apply(cluster, kube, manifests, current.result, outcome, force=force, previous=previous)
        except IdleshareError as exc:
            self.store.record_apply(
                cluster_id, generation, "Failed", f"{type(exc).__name__}: {exc}" + _deletions(outcome)
            )
            raise
        rewrites = outcome.rewrites
        if outcome.conflicts or outcome.foreign or outcome.refused or outcome.waiting or outcome.fights:  # reported
            # every time (level-triggered): the alarm stays on while it lasts
            self.store.record_apply(
                cluster_id, generation, "Conflict", _conflict_message(outcome) + _deletions(outcome), rewrites=rewrites
            )
        elif (
            outcome.changed
            or previous is None
            or previous.apply_status != "Applied"
            or previous.rewrites != rewrites  # a fight being counted
            or outcome.deleted_objects
        ):
            self.store.record_apply(
                cluster_id,
                generation,
                "Applied",
                f"{outcome.applied} applied, {outcome.deleted} deleted" + _deletions(outcome, lead=": "),
                rewrites=rewrites,
            )

    def _publish(self, outcome: Outcome, outbox: dict[str, Any] | None) -> None:
        """Step 5, tell the world, once per generation: the outbox is cleared only once the event is on the bus,
        so a failed apply or publish after step 3 publishes on the retry (which finds the digest unchanged)."""
        if outbox is not None and self.publisher is not None:
            self.publisher.publish(names.DT_POOL_RECOMPUTED, outbox)
            self.store.clear_outbox(outcome.cluster_id, int(outbox.get("generation", outcome.generation)))
            outcome.published = True

    @staticmethod
    def _nodes(objects: Iterable[object], unreadable: list[str]) -> Iterator[Node]:
        """The cluster's nodes; one that does not parse is an ``Unreadable`` excluded node, its error kept in
        ``unreadable`` (reported), never a failure of the whole cluster."""
        for position, obj in enumerate(objects):
            node, error = cluster_node(obj, position)
            if error is not None:
                unreadable.append(str(error))
            yield node

    def _read_policies(self, cluster_id: str, generation: int) -> tuple[tuple[Quota, ...], SchedulerConfig]:
        """The stored quotas and scheduler config, parsed. One that breaks a bound (stored before the store
        validated, or written by hand into the table) is a failure to read, not "no quota": the last pool
        and the cluster's Kueue objects stay as they are, the failure is recorded (naming the quota and the
        field) and :class:`PermanentError` is raised — retrying cannot help until someone fixes it."""
        stored_quotas = self.store.list_quotas(cluster_id)
        stored_sc = self.store.get_scheduler_config(cluster_id)
        problems: list[str] = []
        quotas: tuple[Quota, ...] = ()
        try:
            quotas = parse_quotas([q.body for q in stored_quotas], source="stored compute quotas")
        except InputError as exc:
            for stored in stored_quotas:  # again one by one, so that each problem names its quota
                try:
                    parse_quotas(stored.body, source=f"stored compute quota {stored.name!r}")
                except InputError as own:
                    problems.append(str(own))
            if not problems:  # each is valid alone: what only the set breaks (two quotas for one team, ...)
                problems.append(str(exc))
        scheduler = SchedulerConfig()
        if stored_sc is not None:
            try:
                scheduler = parse_scheduler_config(stored_sc.body, source="stored scheduler config")
            except InputError as exc:
                problems.append(str(exc))
        if problems:
            message = f"invalid stored policies of cluster {cluster_id!r}: " + "; ".join(problems)
            self.store.record_read_failure(cluster_id, message, generation=generation)
            raise PermanentError(message, operation="read stored policies")
        return quotas, scheduler

    def _apply(
        self,
        cluster: ClusterRecord,
        kube: KubeCluster,
        manifests: list[dict[str, Any]],
        current: Callable[[], list[dict[str, Any]]],
        outcome: Outcome,
        *,
        force: bool,
        previous: PoolRecord | None = None,
    ) -> None:
        """Apply what differs from ``current()`` (the managed objects as listed), delete what is idleshare's and no
        longer wanted: idleshare's by the ownership record (:mod:`idleshare.service.ownership`), never by a label or
        an annotation a copy also carries. An object whose fields another field manager owns is not fought over
        (unless ``force``): it is skipped and named in ``outcome.conflicts``; every other object is still applied.
        With ``force``, one that another manager keeps rewriting is counted and, after ``timings.FIGHT_REWRITES``
        recomputes in a row of one desired state, named and backed off from (:mod:`idleshare.domain.fights`)."""
        cluster_id = cluster.cluster_id
        reading = ownership.read(self.store, kube, cluster_id, current(), self.settings_for(cluster))
        ours = reading.ownership.ours
        to_apply, to_delete = diff(manifests, reading.current, ours)
        # labelled as idleshare's but not recorded (a copy, an older writer's): never written, never deleted, named
        outcome.foreign.extend(describe(obj) for obj in reading.ownership.foreign)
        to_apply = self._fights(to_apply, reading.current, set(ours), outcome, previous, force=force)
        pending = reading.pending  # an earlier run's creates whose answers were lost: adopted if found marked
        creating = [
            object_identity(o) for o in to_apply if o.get("kind") != "Namespace" and object_identity(o) not in ours
        ]
        ownership.before_creates(self.store, cluster_id, reading, creating)
        # in dependency waves, several writes at once; every failure named, the counts exact (service/apply.py);
        # what is not idleshare's is created (a create cannot adopt: one that exists is named ForeignObject)
        written = write_objects(
            kube, to_apply, to_delete, force=force, existing=set(ours), owned=ours, adoptable=pending
        )
        outcome.applied += written.applied
        outcome.deleted += written.deleted
        outcome.namespaces_created += written.namespaces_created
        outcome.conflicts.extend(written.conflicts)
        outcome.foreign.extend(f for f in written.foreign if f not in outcome.foreign)
        outcome.foreign.extend(ownership_describe(i) for i in written.lost)
        outcome.deleted_objects.extend(ownership_describe(i) for i in written.deleted_objects)
        outcome.refused.extend((refusal_code(exc), f"{what}: {exc}") for what, exc in written.refused)
        for what, _ in written.refused:  # refused, not fought over: not counted as rewritten
            outcome.rewrites.pop(what, None)
        outcome.waiting.extend(f"{what} (needs {', '.join(waits)})" for what, waits in written.waiting)
        ownership.after_writes(
            self.store,
            cluster_id,
            reading,
            created=written.created,
            deleted=written.deleted_objects,
            lost=written.lost,
            refused=written.foreign_ids,
            generation=outcome.generation,
            at=self.clock().isoformat(),
        )
        written.raise_failures()

    def _fights(
        self,
        to_apply: list[dict[str, Any]],
        listed: list[dict[str, Any]],
        ours: set[tuple[str, str, str]],
        outcome: Outcome,
        previous: PoolRecord | None,
        *,
        force: bool,
    ) -> list[dict[str, Any]]:
        """``to_apply`` less the objects idleshare backs off from: an object it created that differs again within
        one desired state (this run's generation is the previous run's) was rewritten by someone else since its last
        write; only a forced apply (``Take``) can fight (without, the other manager's fields are a conflict)."""
        if not force:
            return to_apply
        seen = {object_identity(o): o for o in listed}
        rewritten = {
            describe(obj): other_managers(seen[object_identity(obj)], names.FIELD_MANAGER)
            for obj in to_apply
            if obj.get("kind") != "Namespace" and object_identity(obj) in ours
        }
        same = previous is not None and not outcome.changed and previous.generation == outcome.generation
        tracked = track(
            previous.rewrites if previous is not None else {},
            rewritten,
            same_desired=same,
            now=self.clock().timestamp(),
            threshold=timings.FIGHT_REWRITES,
            retry_seconds=timings.FIGHT_RETRY_SECONDS,
        )
        outcome.rewrites = tracked.state
        outcome.fights.extend(tracked.fights)
        return [obj for obj in to_apply if describe(obj) not in tracked.skip]


UNREADABLE_KINDS = {"DaemonSet": "UnreadableDaemonSet", "Pod": "UnreadablePod"}
"""The named issue of a DaemonSet or pod that does not parse (left out of headroom)."""
UNREADABLE_WORKLOAD = "UnreadableWorkload"
"""The named issue of a Workload whose shape does not read on ``all``: it owns no pod, its pods are charged."""


def _headroom_inputs(
    kube: KubeCluster, mode: Headroom
) -> tuple[tuple[DaemonSet, ...], tuple[Pod, ...], frozenset[tuple[str, str]], list[Issue]]:
    """The DaemonSets (unless ``off``), and on ``all`` the bound pods and the owners of the admitted Workloads
    (:func:`~idleshare.domain.headroom.kueue_owners`; listed after the pods, so that a pod bound by then finds the
    Workload that admitted it) headroom reads; each object that does not parse is an issue naming it and its field
    (at most ``NAMED_MAX`` per kind, the rest counted), never a failure."""
    daemonsets: list[DaemonSet] = []
    pods: list[Pod] = []
    issues: list[Issue] = []
    kueue: frozenset[tuple[str, str]] = frozenset()
    if mode is Headroom.OFF:
        return (), (), kueue, issues
    problems: list[tuple[str, InputError]] = []
    found, bad = cluster_daemonsets(kube.list_daemonsets())
    daemonsets.extend(found)
    problems += [("DaemonSet", e) for e in bad]
    if mode is Headroom.ALL:
        found_pods, bad = cluster_pods(kube.list_bound_pods())
        pods.extend(found_pods)
        problems += [("Pod", e) for e in bad]
        workloads = kueue_status.workloads(kube.list_workloads())
        kueue = kueue_owners(workloads)
        issues += _unreadable_workloads([w for w in workloads if not w.readable])
    for kind, code in UNREADABLE_KINDS.items():
        errors = [e for k, e in problems if k == kind]
        for error in errors[:NAMED_MAX]:
            issues.append(Issue("warning", code, error.source, f"left out of headroom: {error}"))
        if len(errors) > NAMED_MAX:
            issues.append(Issue("warning", code, f"({len(errors) - NAMED_MAX} more)", "left out of headroom"))
    return tuple(daemonsets), tuple(pods), kueue, issues


def _unreadable_workloads(unread: list[WorkloadStatus]) -> list[Issue]:
    """``UnreadableWorkload`` per Workload whose shape did not read (at most ``NAMED_MAX``, the rest counted)."""
    out: list[Issue] = []
    for wl in unread[:NAMED_MAX]:
        what = wl.unreadable[0].object if wl.unreadable else f"Workload/{wl.name}"
        fields = "; ".join(f"{u.field or '(object)'}: {u.problem}" for u in wl.unreadable[:3])
        message = f"owns no pod in headroom, its pods are charged: {fields}"
        out.append(Issue("warning", UNREADABLE_WORKLOAD, what.removeprefix("Workload/"), message))
    if len(unread) > NAMED_MAX:
        out.append(Issue("warning", UNREADABLE_WORKLOAD, f"({len(unread) - NAMED_MAX} more)", "its pods are charged"))
    return out


def _other_writer_issues(
    kube: KubeCluster, current: _Background[list[dict[str, Any]]], previous: PoolRecord | None
) -> list[Issue]:
    """The issues of other quota writers (:mod:`idleshare.domain.coexistence`): from the managed objects step 4
    diffs against (their ``status.effectiveQuotas``, their field managers), and two small reads — at most
    ``SAMPLE`` namespaces HyperPod labelled (one request), the names of the ClusterQueues idleshare did not label
    (a Table without the objects, ~100 bytes a queue).

    Not observed (a read failed): the previous generation's issues of these codes stand, as a failure to observe
    is not an observation of absence (and a flapping read would otherwise make a new generation each time); the
    managed list's own failure is step 4's, raised there."""
    try:
        listed = current.result()
        namespaces = kube.list_namespace_names(HYPERPOD_MANAGED_NAMESPACE_SELECTOR, SAMPLE)
        queues = kube.list_cluster_queue_names(f"{MANAGED_BY_LABEL}!={MANAGED_BY}")
    except Exception as exc:  # any failure: step 4 raises the managed list's again; this one is only logged
        log.warning("cannot check for other quota writers: the last generation's findings stand (%s)", exc)
        issues = (previous.pool.get("issues") or ()) if previous is not None else ()
        return [Issue(**i) for i in issues if isinstance(i, dict) and i.get("code") in OTHER_WRITER_ISSUES]
    return other_writer_issues(listed, namespaces, queues)


def _deletions(outcome: Outcome, lead: str = "; deleted: ") -> str:
    """The objects this run deleted, for the apply status (``""`` when none)."""
    return lead + ", ".join(outcome.deleted_objects) if outcome.deleted_objects else ""


def _conflict_message(outcome: Outcome) -> str:
    """The apply status ``Conflict``'s message: each named issue with its objects and what to do."""
    parts = []
    if outcome.foreign:
        parts.append(
            f"{FOREIGN_OBJECT}: "
            + ", ".join(outcome.foreign)
            + " (exist and idleshare did not record creating them — copies of its objects carry its label and marker"
            " but not its uid: never written nor deleted by idleshare, whatever the cluster's field_ownership;"
            " remove or rename them: docs/operations.md)"
        )
    if outcome.conflicts:
        parts.append(
            f"{FOREIGN_FIELD_MANAGER}: "
            + "; ".join(outcome.conflicts)
            + " (left to them; set the cluster's field_ownership to Take to have idleshare own these fields)"
        )
    for code in sorted({code for code, _ in outcome.refused}):
        refused = [text for c, text in outcome.refused if c == code]
        shown = "; ".join(refused[:FULL_MESSAGES])
        if len(refused) > FULL_MESSAGES:
            shown += f"; and {len(refused) - FULL_MESSAGES} more"
        parts.append(f"{code}: {shown} (refused by the API server: everything else was written and deleted)")
    if outcome.fights:
        shown = "; ".join(
            f.describe() + (" (written again now)" if f.written else f" (written again at {_at(f.retry_at)})")
            for f in outcome.fights
        )
        parts.append(
            f"{FIELD_MANAGER_FIGHT}: {shown}; idleshare no longer writes it every recompute: it writes it again at"
            " that time, or at once when its desired state changes; have one of the two controllers stop managing it"
        )
    if outcome.waiting:
        waiting = outcome.waiting[:FULL_MESSAGES] + (
            [f"and {len(outcome.waiting) - FULL_MESSAGES} more"] if len(outcome.waiting) > FULL_MESSAGES else []
        )
        parts.append(f"{WAITING}: " + "; ".join(waiting) + " (not written until what it needs is written)")
    return "; ".join(parts)


def _at(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="seconds")


class _Background(Generic[R]):
    """``call()``, run on a thread of its own once :meth:`start` is called. :meth:`result` waits for it (starting
    it first if nobody did) and returns its value or raises its exception, in the caller's thread; :meth:`wait`
    only waits, if it was started."""

    def __init__(self, call: Callable[[], R]) -> None:
        self._call = call
        self._value: R | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="kube-read", daemon=True)

    def start(self) -> None:
        if self._thread.ident is None:
            self._thread.start()

    def _run(self) -> None:
        try:
            self._value = self._call()
        except BaseException as exc:  # raised again by result(), in the caller's thread
            self._error = exc

    def wait(self) -> None:
        if self._thread.ident is not None:
            self._thread.join()

    def result(self) -> R:
        self.start()
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]


def _starting(background: _Background[Any], items: Iterable[R]) -> Iterator[R]:
    """``items``, ``background`` started as the first one comes (or as they end, if there are none)."""
    for item in items:
        background.start()
        yield item
    background.start()


@contextlib.contextmanager
def _cyclic_gc_paused() -> Iterator[None]:
    """Python's cyclic garbage collector paused for one recompute (reference counting still frees everything
    acyclic at once).

    A recompute at 5,000 nodes and 200 teams builds some 10^5 containers that live until it ends (node dicts, domain
    nodes, manifests, the objects listed): enough to trigger two or three full collections, each rescanning the whole
    heap (the SDKs' models too): 0.25-0.4 CPU s of a ~1.3 s recompute, measured with ``gc.callbacks``. The little
    cyclic garbage a recompute makes (a caught exception's traceback) is collected after it, as usual."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
