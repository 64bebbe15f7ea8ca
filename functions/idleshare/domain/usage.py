"""Usage read back from Kueue: who uses, borrows and lends what, exactly (no floats).

Inputs are what the cluster and the store hold: idleshare's ClusterQueues (``spec`` for the quotas and limits,
``status.flavorsUsage`` for what Kueue admitted, the workload counts: :class:`QueueStatus`), the teams' Workloads
(pending ones: what they ask for, Kueue's reason; eviction / preemption conditions: :class:`WorkloadStatus`), both
read by ``idleshare.parse.kueue_status``, and the stored pool document (``capacity``; the cohort's own quota). A value
Kueue's objects hold that does not read is an :class:`Unreadable` in the sample: its flavor/resource is left out of
every table, a count is None — a gap, never zero usage. :func:`derive_usage` turns them into one :class:`UsageSample`; :func:`sample_document` is its JSON
(every amount an exact Kubernetes quantity, as the pool document's).

**How lent is derived.** Kueue reports per ClusterQueue ``total`` and ``borrowed`` (use above its nominal) and
nothing about lending. In a flavor/resource, everything the teams borrow, ``B = Σ borrowed``, comes from the cohort:
first from the cohort's *own* quota ``Q`` (the unallocated pool idleshare writes into the Cohort; it is nobody's),
then from the teams' unused lendable quota. A team's lendable idle quota is ``L = min(lendingLimit (nominal when
unset), nominal − own use)``, own use being ``total − borrowed`` (Kueue charges a queue's nominal first). The
borrowers' draw beyond the cohort's own quota, ``X = max(0, B − Q)``, is what the teams lend; it is split among the
teams with ``L > 0`` in proportion to ``L`` (largest remainders, in whole units — 1m of cpu, one byte, one device —
ties by team name), so ``Σ lent = min(X, Σ L)`` exactly and a lone lender lends exactly ``X``. A team never lends
and borrows in the same flavor/resource (borrowing means its nominal is used up: ``L = 0``).

**Idle** per flavor/resource: ``capacity − in use`` (never below zero). **Idle while pending**: for each team with
a pending workload asking for an accelerator in a flavor (its pod sets' ``instance-type`` node selector, else every
flavor of its ClusterQueue) while that flavor has idle accelerators of that kind: the team, the flavor, the
resource, the idle amount and Kueue's own pending message.

**Admitted but not placed**: the pods of admitted workloads that no node has taken (no ``spec.nodeName``; read
by the label Kueue puts on the pods of every workload it admits, :data:`PODSET_LABEL`), per team and the flavor
Kueue assigned their pod set, with the time the oldest of those workloads was admitted (its ``Admitted``
condition, else ``QuotaReserved``): Kueue counted their quota, the scheduler found no node. A pod is a workload's
when the workload's owner (a Job) is the pod or one of the pod's owners. Whatever the cause — DaemonSets and other
pods holding part of each node, a node gone — it is the signal that the pool overstates what the pods can get.

**Preemptions** of a team: its workloads whose ``Preempted`` condition (or ``Evicted`` with reason ``Preempted``)
turned True in the sample's interval, counted by the whole second of ``lastTransitionTime`` in
``[floor(since), floor(until))``: each second belongs to exactly one sample.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from fractions import Fraction
from typing import Any

from idleshare.domain.model import CPU, Amount, is_accelerator
from idleshare.domain.quantity import QuantityError, format_quantity, parse_quantity
from idleshare.domain.why import Cause, WaitCause, why_waits, worst

PODSET_LABEL = "kueue.x-k8s.io/podset"
"""Kueue's label on the pods of a workload it admitted (every job integration, Kueue 0.12 to 0.19): its pod set."""
ZERO: Amount = 0
MAX_UNREADABLE = 100
"""The unreadable values a sample's document names at most (every page of GET usage carries them)."""

Table = dict[str, dict[str, Amount]]  # flavor -> resource -> amount


@dataclass(frozen=True)
class TeamUsage:
    """One team's ClusterQueue as Kueue accounts it, per flavor and resource."""

    team: str
    namespace: str
    nominal: Table
    borrowing_limit: dict[str, dict[str, Amount | None]]
    lending_limit: dict[str, dict[str, Amount | None]]
    in_use: Table
    borrowed: Table
    lent: Table = field(default_factory=dict)
    pending: int | None = 0
    reserving: int | None = 0
    admitted: int | None = 0
    """The ClusterQueue's workload counts; None: unreadable (named in the sample's ``unreadable``)."""
    preemptions: int = 0


@dataclass(frozen=True)
class FlavorUsage:
    capacity: Amount
    pool: Amount
    in_use: Amount
    borrowed: Amount

    @property
    def idle(self) -> Amount:
        return max(ZERO, self.capacity - self.in_use)


@dataclass(frozen=True)
class IdleWhilePending:
    team: str
    flavor: str
    resource: str
    idle: Amount
    reason: str
    cause: WaitCause | None = None


@dataclass(frozen=True)
class PendingJob:
    """A pending workload, the flavor and resource it waits on, and why (:func:`idleshare.domain.why.why_waits`)."""

    team: str
    job: str
    flavor: str
    resource: str
    request: Amount
    reason: str
    cause: WaitCause


@dataclass(frozen=True)
class AboveLimit:
    """A team borrowing more than its current limit (lowered after Kueue admitted the work; Kueue does not evict)."""

    team: str
    flavor: str
    resource: str
    borrowed: Amount
    limit: Amount


@dataclass(frozen=True)
class Unbound:
    """A team's pods of admitted workloads that no node has taken, in one flavor (module docstring)."""

    team: str
    flavor: str
    pods: int
    workloads: int
    since: datetime
    """When the oldest of those workloads was admitted."""
    reason: str = ""
    """The scheduler's message on one of the pods (``PodScheduled`` False), if it wrote one."""

    def seconds(self, at: datetime) -> int:
        """How long the oldest has been admitted and not placed, at ``at`` (whole seconds, never negative)."""
        return max(0, int((at - self.since).total_seconds()))


@dataclass(frozen=True)
class UsageSample:
    cluster_id: str
    sampled_at: datetime
    flavors: dict[str, dict[str, FlavorUsage]]
    teams: dict[str, TeamUsage]
    idle_while_pending: list[IdleWhilePending]
    pending: list[PendingJob] = field(default_factory=list)
    above_limit: list[AboveLimit] = field(default_factory=list)
    unbound: list[Unbound] | None = field(default_factory=list)
    """None: the pods could not be read (``unbound_error`` says why); the rest of the sample stands."""
    unbound_error: str = ""
    unreadable: list[Unreadable] = field(default_factory=list)
    """What the sample could not read of Kueue's objects (each named)."""
    unknown: list[tuple[str, str]] = field(default_factory=list)
    """The (flavor, resource) pairs left out of every table for it: a gap, not 0."""

    def unbound_pods(self) -> int:
        return sum(u.pods for u in self.unbound or ())

    def oldest_unbound_seconds(self) -> int:
        """Since the oldest admitted workload with an unbound pod was admitted (0: none)."""
        return max((u.seconds(self.sampled_at) for u in self.unbound or ()), default=0)


# -- what usage reads of Kueue's objects (built by idleshare.parse.kueue_status) -----------------------------


@dataclass(frozen=True)
class Unreadable:
    """A value the sample could not read: which object, which field, what is wrong with it, and the flavor and
    resource it leaves unknown ("" when it is not one amount). A gap, never zero usage."""

    object: str
    field: str
    problem: str
    flavor: str = ""
    resource: str = ""


@dataclass(frozen=True)
class QueueStatus:
    """A team's ClusterQueue as usage reads it: its quotas and limits (``spec``), what Kueue admitted
    (``status.flavorsUsage``: ``in_use`` is each ``total``) and its workload counts (None: unreadable). An unreadable
    amount is left out of its table and named in ``unreadable``."""

    name: str
    team: str
    namespace: str
    nominal: Table = field(default_factory=dict)
    borrowing_limit: dict[str, dict[str, Amount | None]] = field(default_factory=dict)
    lending_limit: dict[str, dict[str, Amount | None]] = field(default_factory=dict)
    in_use: Table = field(default_factory=dict)
    borrowed: Table = field(default_factory=dict)
    pending: int | None = 0
    reserving: int | None = 0
    admitted: int | None = 0
    unreadable: tuple[Unreadable, ...] = ()
    readable: bool = True
    """False: the object's shape did not read; nothing of it is known, so no flavor's totals are either."""


@dataclass(frozen=True)
class Condition:
    status: str = ""
    reason: str = ""
    message: str = ""
    since: datetime | None = None
    """``lastTransitionTime``."""


@dataclass(frozen=True)
class WorkloadStatus:
    """A Workload as usage reads it: where it is, who owns it, what it asks for in all (pod sets x count x the
    containers' requests; an unreadable request is left out and named), the flavor its pods pin (the instance-type
    node selector; None: any), its conditions by type and the flavors Kueue assigned each pod set."""

    name: str
    namespace: str
    created: str = ""
    active: bool = True
    job: str = ""
    """The Job that owns it (what the team submitted), else its own name."""
    owner_uids: tuple[str, ...] = ()
    requests: dict[str, Amount] = field(default_factory=dict)
    pinned: str | None = None
    conditions: Mapping[str, Condition] = field(default_factory=dict)
    assigned: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    """pod set -> resource -> flavor (``status.admission.podSetAssignments``)."""
    unreadable: tuple[Unreadable, ...] = ()
    readable: bool = True
    """False: the object's shape did not read; nothing of it is known (no owner, no condition)."""


@dataclass(frozen=True)
class UnboundPod:
    """A pod of a workload Kueue admitted that no node has taken, as usage reads it (built by
    ``idleshare.parse.workloads.unbound_pods``): its own and its owners' uids (a workload's owner is the pod or one of
    its owners), its pod set (:data:`PODSET_LABEL`) and the scheduler's message (``PodScheduled`` False). One that
    does not read has no uids (it matches no workload: left out) and names its problems in ``unreadable``."""

    name: str
    namespace: str = ""
    uids: tuple[str, ...] = ()
    pod_set: str = ""
    unschedulable: str = ""
    unreadable: tuple[Unreadable, ...] = ()


def parse_time(text: Any) -> datetime | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _second(moment: datetime) -> int:
    return int(moment.timestamp() // 1)


def _is_true(workload: WorkloadStatus, kind: str) -> bool:
    cond = workload.conditions.get(kind)
    return cond is not None and cond.status == "True"


def was_preempted(workload: WorkloadStatus, since: datetime, until: datetime) -> bool:
    """Whether the workload was preempted in ``[floor(since), floor(until))`` (whole seconds: module docstring)."""
    hits = []
    if _is_true(workload, "Preempted"):
        hits.append(workload.conditions["Preempted"])
    if _is_true(workload, "Evicted") and workload.conditions["Evicted"].reason == "Preempted":
        hits.append(workload.conditions["Evicted"])
    return any(c.since is not None and _second(since) <= _second(c.since) < _second(until) for c in hits)


def is_pending(workload: WorkloadStatus) -> bool:
    return workload.active and not any(_is_true(workload, k) for k in ("QuotaReserved", "Finished"))


def pending_reason(workload: WorkloadStatus) -> str:
    cond = workload.conditions.get("QuotaReserved") or Condition()
    return cond.message or cond.reason or "Pending"


def _amount(value: Any) -> Amount:
    """An amount of idleshare's own pool document (exact quantities it wrote itself); absent: 0. One that does not
    parse never reaches here: :func:`_unreadable_pool` names it and leaves its flavor/resource unknown."""
    return ZERO if value is None else parse_quantity(str(value))


def _unreadable_pool(pool: Mapping[str, Any] | None) -> list[Unreadable]:
    """Each amount of the pool document's capacity and unallocated tables that is not a quantity: a gap naming it
    (the store's copy was changed, or written by a release that is gone), never an amount of zero."""
    out = []
    for table in ("capacity", "unallocated"):
        by_flavor = (pool or {}).get(table) or {}
        for flavor, per in sorted(by_flavor.items()):
            for resource, value in sorted(per.items() if isinstance(per, Mapping) else ()):
                try:
                    parse_quantity(str(value))
                except QuantityError as exc:
                    field = f"{table}.{flavor}.{resource}"
                    out.append(Unreadable("pool", field, f"{value!r} is not a quantity ({exc})", flavor, resource))
    return out


# -- the derivation ------------------------------------------------------------------------------------------


def _unit(resource: str) -> Fraction:
    return Fraction(1, 1000) if resource == CPU else Fraction(1)


def split_lent(lendable: Mapping[str, Amount], drawn: Amount, resource: str) -> dict[str, Amount]:
    """``drawn`` split among the teams in proportion to their ``lendable`` idle quota, in whole units of the
    resource (largest remainders, ties by team name); each team at most its lendable amount."""
    total = sum(lendable.values(), ZERO)
    if drawn <= 0 or total <= 0:
        return {}
    drawn = min(drawn, total)
    if drawn == total:
        return {t: v for t, v in lendable.items() if v > 0}
    unit = _unit(resource)
    units = int(Fraction(drawn) / unit)  # whole units to hand out; a fraction of a unit stays unattributed
    shares = {t: Fraction(v) * units / Fraction(total) for t, v in lendable.items() if v > 0}
    floors = {t: int(s) for t, s in shares.items()}
    left = units - sum(floors.values())
    for team in sorted(shares, key=lambda t: (-(shares[t] - floors[t]), t))[:left]:
        floors[team] += 1
    return {t: _exact(n * unit) for t, n in floors.items() if n}


def _exact(value: Fraction) -> Amount:
    return int(value) if value.denominator == 1 else value


def derive_usage(
    cluster_id: str,
    cluster_queues: Iterable[QueueStatus],
    workloads: Iterable[WorkloadStatus],
    pool: Mapping[str, Any] | None,
    *,
    since: datetime,
    until: datetime,
    unbound_pods: Iterable[UnboundPod] | None = (),
    unbound_error: str = "",
) -> UsageSample:
    """The sample at ``until``: per team, per flavor, idle while pending, admitted but not placed (module
    docstring). ``unbound_pods``: Kueue's pods no node has taken; None when they could not be read
    (``unbound_error``). A flavor/resource any ClusterQueue leaves unreadable is left out of every team's tables and
    the flavors (lent and idle depend on every team's), and named in ``unreadable``."""
    workloads = list(workloads)
    pods = None if unbound_pods is None else list(unbound_pods)
    queues = sorted(cluster_queues, key=lambda q: q.team)
    unreadable = [u for read in (queues, workloads, pods or ()) for obj in read for u in obj.unreadable]
    unreadable_pool = _unreadable_pool(pool)
    unreadable += unreadable_pool
    unknown = _unknown(queues, pool) | {(u.flavor, u.resource) for u in unreadable_pool}
    pool = pool or {}
    capacity_doc = pool.get("capacity") or {}
    teams = {cq.team: _team_usage(cq, unknown) for cq in queues}
    pairs = sorted(
        {(f, r) for t in teams.values() for f, per in t.nominal.items() for r in per}
        | {(f, r) for f, per in capacity_doc.items() for r in per} - unknown
    )
    flavors, lent, free = _flavors_and_lending(teams, pairs, pool)
    by_namespace = {t.namespace: t.team for t in teams.values() if t.namespace}
    preempted: dict[str, int] = {}
    waiting: dict[tuple[str, str, str], tuple[str, WaitCause | None]] = {}
    pending: list[PendingJob] = []
    for wl in sorted(workloads, key=lambda w: (w.created, w.name)):
        team = by_namespace.get(wl.namespace)
        if team is None:
            continue
        if was_preempted(wl, since, until):
            preempted[team] = preempted.get(team, 0) + 1
        if is_pending(wl):
            _wait(wl, teams[team], (pool.get("teams") or {}).get(team) or {}, flavors, free, unknown, pending, waiting)
    final = {name: replace(t, lent=lent[name], preemptions=preempted.get(name, 0)) for name, t in teams.items()}
    iwp = [
        IdleWhilePending(team, flavor, r, flavors[flavor][r].idle, reason, cause)
        for (team, flavor, r), (reason, cause) in sorted(waiting.items())
    ]
    above = [
        AboveLimit(name, f, r, b, limit)
        for name, t in sorted(final.items())
        for f, per in sorted(t.borrowed.items())
        for r, b in sorted(per.items())
        if (limit := t.borrowing_limit.get(f, {}).get(r)) is not None and b > limit
    ]
    unbound = None if pods is None else unbound_of(by_namespace, workloads, pods)
    return UsageSample(
        cluster_id, until, flavors, final, iwp, pending, above, unbound, unbound_error, unreadable, sorted(unknown)
    )


def _unknown(queues: list[QueueStatus], pool: Mapping[str, Any] | None) -> set[tuple[str, str]]:
    """The flavor/resources some ClusterQueue left unreadable; every one when a queue could not be read at all
    (a queue's use is part of every total: none is known)."""
    unknown = {(u.flavor, u.resource) for q in queues for u in q.unreadable if u.resource}
    if not all(q.readable for q in queues):
        unknown |= {(f, r) for q in queues for t in (q.nominal, q.in_use) for f, per in t.items() for r in per}
        unknown |= {(f, r) for f, per in (pool or {}).get("capacity", {}).items() for r in per}
    return unknown


def _team_usage(cq: QueueStatus, unknown: set[tuple[str, str]]) -> TeamUsage:
    """A team's quota and use as its ClusterQueue reports them, without the unknown flavor/resources."""
    nominal, borrowing, lending = (_known(t, unknown) for t in (cq.nominal, cq.borrowing_limit, cq.lending_limit))
    in_use, borrowed = _known(cq.in_use, unknown), _known(cq.borrowed, unknown)
    for f, per in nominal.items():  # every resource of the spec, zero when Kueue reports none
        for r in per:
            in_use.setdefault(f, {}).setdefault(r, ZERO)
            borrowed.setdefault(f, {}).setdefault(r, ZERO)
    return TeamUsage(
        team=cq.team,
        namespace=cq.namespace,
        nominal=nominal,
        borrowing_limit=borrowing,
        lending_limit=lending,
        in_use=in_use,
        borrowed=borrowed,
        pending=cq.pending,
        reserving=cq.reserving,
        admitted=cq.admitted,
    )


def _flavors_and_lending(
    teams: Mapping[str, TeamUsage], pairs: list[tuple[str, str]], pool: Mapping[str, Any]
) -> tuple[dict[str, dict[str, FlavorUsage]], dict[str, Table], dict[tuple[str, str, str], Amount]]:
    """Per flavor/resource: its use, what each team lends of what is borrowed, and what each team could be given
    now ((team, flavor, resource) -> amount)."""
    sharing = pool.get("idleResourceSharing", "Enabled") != "Disabled"
    capacity_doc = pool.get("capacity") or {}
    unallocated_doc = pool.get("unallocated") or {}
    flavors: dict[str, dict[str, FlavorUsage]] = {}
    lent: dict[str, Table] = {t: {} for t in teams}
    free: dict[tuple[str, str, str], Amount] = {}
    for f, r in pairs:
        own_pool = _amount((unallocated_doc.get(f) or {}).get(r)) if sharing else ZERO
        used = sum((t.in_use.get(f, {}).get(r, ZERO) for t in teams.values()), ZERO)
        drawn = sum((t.borrowed.get(f, {}).get(r, ZERO) for t in teams.values()), ZERO)
        cap = (
            _amount((capacity_doc.get(f) or {}).get(r))
            if f in capacity_doc
            else sum((t.nominal.get(f, {}).get(r, ZERO) for t in teams.values()), own_pool)
        )
        flavors.setdefault(f, {})[r] = FlavorUsage(capacity=cap, pool=own_pool, in_use=used, borrowed=drawn)
        holders = [t for t in teams.values() if r in t.nominal.get(f, {})]
        lendable: dict[str, Amount] = {}
        for t in holders:
            nominal_q = t.nominal[f][r]
            own_use = t.in_use[f][r] - t.borrowed[f][r]
            limit = t.lending_limit.get(f, {}).get(r)
            lendable[t.team] = max(ZERO, min(nominal_q if limit is None else limit, nominal_q - own_use))
        shares = split_lent(lendable, max(ZERO, drawn - own_pool), r)
        supply = own_pool + sum(lendable.values(), ZERO)
        for t in holders:
            lent[t.team].setdefault(f, {})[r] = shares.get(t.team, ZERO)
            own_left = max(ZERO, t.nominal[f][r] - (t.in_use[f][r] - t.borrowed[f][r]))
            # the cohort's unused supply, but for this team's own idle quota (counted as its own) and
            # what others draw from it
            others = supply - lendable.get(t.team, ZERO)
            free[(t.team, f, r)] = own_left + max(ZERO, others - (drawn - shares.get(t.team, ZERO)))
    return flavors, lent, free


def _wait(
    wl: WorkloadStatus,
    team: TeamUsage,
    granted: Mapping[str, Any],
    flavors: Mapping[str, Mapping[str, FlavorUsage]],
    free: Mapping[tuple[str, str, str], Amount],
    unknown: set[tuple[str, str]],
    pending: list[PendingJob],
    waiting: dict[tuple[str, str, str], tuple[str, WaitCause | None]],
) -> None:
    """A pending workload, on each flavor it could run on: why it waits (to ``pending``), and (to ``waiting``) the
    accelerators idle there meanwhile."""
    asks = wl.requests
    candidates = [wl.pinned] if wl.pinned else list(team.nominal)
    reason = pending_reason(wl)
    for flavor in candidates:
        causes = {
            r: _why(team, granted, flavor, r, q, free) for r, q in asks.items() if q > 0 and (flavor, r) not in unknown
        }
        picked = worst([c for r, c in causes.items() if is_accelerator(r)]) or worst(list(causes.values()))
        if picked is not None:
            r = next(r for r, c in causes.items() if c is picked)
            pending.append(PendingJob(team.team, wl.job, flavor, r, asks[r], reason, picked))
        for r, q in asks.items():
            idle = flavors.get(flavor, {}).get(r)
            if q > 0 and is_accelerator(r) and idle is not None and idle.idle > 0:
                waiting.setdefault((team.team, flavor, r), (reason, causes.get(r)))


def _known(table: Mapping[str, Mapping[str, Any]], unknown: set[tuple[str, str]]) -> dict[str, dict[str, Any]]:
    """A copy of a flavor -> resource table without the flavor/resources some ClusterQueue left unreadable."""
    known = {f: {r: v for r, v in per.items() if (f, r) not in unknown} for f, per in table.items()}
    return {f: per for f, per in known.items() if per or not table[f]}  # a flavor left with nothing: left out


def is_admitted(workload: WorkloadStatus) -> bool:
    """Whether Kueue admits the workload now: its ``Admitted`` condition True and not ``Finished``."""
    return _is_true(workload, "Admitted") and not _is_true(workload, "Finished")


def admitted_at(workload: WorkloadStatus) -> datetime | None:
    """When Kueue admitted the workload (its ``Admitted`` condition's transition, else ``QuotaReserved``'s); None
    when it is not admitted now, or finished."""
    if not is_admitted(workload):
        return None
    reserved = workload.conditions.get("QuotaReserved")
    return workload.conditions["Admitted"].since or (reserved.since if reserved else None)


def _pod_set_flavor(workload: WorkloadStatus, pod_set: str) -> str:
    """The flavor Kueue assigned ``pod_set`` (its accelerator's, else the first by name; "" if none)."""
    flavors = workload.assigned.get(pod_set)
    if flavors is None:
        return ""
    accelerated = sorted(f for r, f in flavors.items() if is_accelerator(r))
    return (accelerated or sorted(flavors.values()) or [""])[0]


def unbound_of(
    teams: Mapping[str, str], workloads: Iterable[WorkloadStatus], pods: Iterable[UnboundPod]
) -> list[Unbound]:
    """Per (team, flavor), the ``pods`` (unbound, Kueue's) of admitted workloads in the teams' namespaces
    (``teams``: namespace -> team): module docstring."""
    owners: dict[str, tuple[str, WorkloadStatus, datetime]] = {}  # owner uid -> (team, workload, admitted at)
    for wl in workloads:
        team = teams.get(wl.namespace)
        at = admitted_at(wl)
        if team is None or at is None:
            continue
        for uid in wl.owner_uids:
            owners[uid] = (team, wl, at)
    found: dict[tuple[str, str], tuple[int, set[str], datetime, str]] = {}
    for pod in pods:
        match = next((owners[u] for u in pod.uids if u in owners), None)
        if match is None:
            continue
        team, wl, at = match
        flavor = _pod_set_flavor(wl, pod.pod_set)
        count, names, since, reason = found.get((team, flavor), (0, set(), at, ""))
        names.add(wl.name)
        found[(team, flavor)] = (count + 1, names, min(since, at), reason or pod.unschedulable)
    return [Unbound(t, f, n, len(w), since, why) for (t, f), (n, w, since, why) in sorted(found.items())]


def _why(
    t: TeamUsage,
    grant: Mapping[str, Any],
    flavor: str,
    r: str,
    request: Amount,
    free: Mapping[tuple[str, str, str], Amount],
) -> WaitCause:
    """:func:`why_waits` on what the sample holds: the ClusterQueue's limit and use, the stored grant's rule."""
    derivation = ((grant.get("why") or {}).get(flavor) or {}).get(r) or {}
    in_quota = r in t.nominal.get(flavor, {})
    limit = t.borrowing_limit.get(flavor, {}).get(r) if in_quota else ZERO
    bound = derivation.get("bound")
    if bound is None and grant.get("strategy") in ("Lend", "DontLend"):
        bound = str(Cause.STRATEGY)
    percent = derivation.get("percent")
    return why_waits(
        resource=r,
        request=request,
        nominal=t.nominal.get(flavor, {}).get(r, ZERO),
        in_use=t.in_use.get(flavor, {}).get(r, ZERO),
        borrowed=t.borrowed.get(flavor, {}).get(r, ZERO),
        limit=limit,
        free=free.get((t.team, flavor, r), ZERO),
        bound=None if bound is None else str(bound),
        percent=percent if isinstance(percent, int) else None,
        disabled=grant.get("activationState") == "Disabled",
    )


# -- the document --------------------------------------------------------------------------------------------


def _q(value: Amount, resource: str) -> str:
    return format_quantity(value, resource)


def sample_document(sample: UsageSample) -> dict[str, Any]:
    """``GET /clusters/{c}/usage``'s answer for one sample (every amount an exact quantity string)."""
    return {
        "cluster": sample.cluster_id,
        "sampledAt": sample.sampled_at.astimezone(UTC).isoformat(),
        "flavors": {
            f: {
                r: {
                    "capacity": _q(u.capacity, r),
                    "pool": _q(u.pool, r),
                    "inUse": _q(u.in_use, r),
                    "borrowed": _q(u.borrowed, r),
                    "idle": _q(u.idle, r),
                }
                for r, u in per.items()
            }
            for f, per in sample.flavors.items()
        },
        "teams": {
            name: {
                "flavors": {
                    f: {
                        r: {
                            "nominal": _q(nominal, r),
                            "inUse": _q(t.in_use[f][r], r),
                            "borrowed": _q(t.borrowed[f][r], r),
                            "lent": _q(t.lent.get(f, {}).get(r, ZERO), r),
                        }
                        for r, nominal in per.items()
                    }
                    for f, per in t.nominal.items()
                },
                "workloads": {"pending": t.pending, "reserving": t.reserving, "admitted": t.admitted},
                "preemptions": t.preemptions,
            }
            for name, t in sample.teams.items()
        },
        "idleWhilePending": [
            {"team": i.team, "flavor": i.flavor, "resource": i.resource, "idle": _q(i.idle, i.resource),
             "pendingReason": i.reason, **_cause_fields(i.cause)}
            for i in sample.idle_while_pending
        ],
        "pending": [
            {"team": p.team, "job": p.job, "flavor": p.flavor, "resource": p.resource,
             "request": _q(p.request, p.resource), "pendingReason": p.reason, **_cause_fields(p.cause)}
            for p in sample.pending
        ],
        "aboveLimit": [
            {"team": a.team, "flavor": a.flavor, "resource": a.resource, "borrowed": _q(a.borrowed, a.resource),
             "limit": _q(a.limit, a.resource)}
            for a in sample.above_limit
        ],
        **_unbound_fields(sample),
        "unreadable": [
            {"object": u.object, "field": u.field, "problem": u.problem,
             **({"flavor": u.flavor, "resource": u.resource} if u.resource else {})}
            for u in sample.unreadable[:MAX_UNREADABLE]
        ],
    }  # fmt: skip


def _unbound_fields(sample: UsageSample) -> dict[str, Any]:
    """``unbound`` (per team and flavor: pods, workloads, since, seconds, the scheduler's reason) and its totals
    ``unboundPods`` / ``oldestUnboundSeconds``; or, when the pods could not be read, ``unboundError`` alone."""
    if sample.unbound is None:
        return {"unboundError": sample.unbound_error or "not read"}
    return {
        "unbound": [
            {"team": u.team, "flavor": u.flavor, "pods": u.pods, "workloads": u.workloads,
             "since": u.since.astimezone(UTC).isoformat(), "seconds": u.seconds(sample.sampled_at),
             **({"reason": u.reason} if u.reason else {})}
            for u in sample.unbound
        ],
        "unboundPods": sample.unbound_pods(),
        "oldestUnboundSeconds": sample.oldest_unbound_seconds(),
    }  # fmt: skip


def _cause_fields(cause: WaitCause | None) -> dict[str, str]:
    """``cause`` (its name) and ``why`` (one line): what idleshare knows beside Kueue's message."""
    return {} if cause is None else {"cause": str(cause.cause), "why": cause.text}


def allocations(sample: UsageSample) -> list[tuple[str, str, str, Amount, Amount]]:
    """``(team, flavor, resource, inUse − borrowed, borrowed)`` of every team's flavor/resource in use."""
    out = []
    for name, t in sample.teams.items():
        for f, per in t.in_use.items():
            for r, used in per.items():
                b = t.borrowed.get(f, {}).get(r, ZERO)
                if used or b:
                    out.append((name, f, r, used - b, b))
    return out


# -- amounts over time: exact hours --------------------------------------------------------------------------


def hours_text(amount_seconds: Fraction) -> str:
    """Amount-seconds as hours, a decimal string: exact when the hours are a terminating decimal, else rounded
    half-even to the microhour (the stored amount-seconds stay exact)."""
    hours = amount_seconds / 3600
    denominator = hours.denominator
    for p in (2, 5):
        while denominator % p == 0:
            denominator //= p
    if denominator == 1:
        scale = 0
        while (hours * 10**scale).denominator != 1:
            scale += 1
    else:
        scale = 6
    scaled = hours * 10**scale
    whole = round(scaled)  # Fraction.__round__: half-even
    sign = "-" if whole < 0 else ""
    digits = str(abs(whole)).rjust(scale + 1, "0")
    text = digits if scale == 0 else f"{digits[:-scale]}.{digits[-scale:]}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return sign + text
