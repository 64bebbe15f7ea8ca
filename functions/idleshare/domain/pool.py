"""The lendable pool: capacity, quotas, and what each team may borrow (docs/spec.md §2).

``compute(snapshot)`` is a pure function over one snapshot of the cluster and its policies.
Everything it returns is sorted, so equal inputs in any order give equal results.
"""

from __future__ import annotations

import enum
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction

from idleshare.domain import catalog
from idleshare.domain.eligibility import exclusion_reason
from idleshare.domain.headroom import reserve
from idleshare.domain.kueue_versions import KueueApi
from idleshare.domain.model import (
    CPU,
    DEVICE_RESOURCES,
    EFA,
    GIB,
    MEMORY,
    MIG_PREFIX,
    NEURON,
    NEURON_CORE,
    NEURON_DEVICE,
    NVIDIA_GPU,
    Amount,
    BorrowLimitBasis,
    ExclusionReason,
    Headroom,
    Node,
    Quota,
    ResourceConfig,
    Settings,
    Snapshot,
    Strategy,
)
from idleshare.domain.naming import flavor_name_problem, show, team_name_problem
from idleshare.domain.quantity import exact, format_quantity, percent_of, round_down

Table = dict[str, dict[str, Amount]]
"""flavor -> resource -> amount, sorted by flavor then resource."""

BASE_RESOURCES = frozenset({CPU, MEMORY, *DEVICE_RESOURCES, NEURON_CORE, EFA})


class Bound(enum.StrEnum):
    """Which rule set a borrowing limit (docs/spec.md §2, "Borrow limit")."""

    PERCENTAGE_OF_QUOTA = "percentage of quota"  # Quota basis: BorrowLimit% x the team's nominal
    NOT_IN_QUOTA = "not in quota"  # Quota basis: an instance type outside the team's quota, no absolute limit
    PERCENTAGE = "percentage"  # Pool basis: BorrowLimit% x the pool the team sees was the least
    ABSOLUTE = "absolute"  # an AbsoluteBorrowLimits entry (Quota basis: it replaces the percentage)
    POOL = "pool"  # Pool basis: the pool itself was the least
    STRATEGY = "strategy"  # Lend / DontLend: no borrowing at all
    DISABLED = "disabled"  # ActivationState Disabled


BOUND_MEANING: dict[str, str] = {
    Bound.PERCENTAGE_OF_QUOTA: "BorrowLimit % of the team's own quota",
    Bound.NOT_IN_QUOTA: "the instance type is not in the team's quota",
    Bound.PERCENTAGE: "BorrowLimit % of the pool",
    Bound.ABSOLUTE: "the AbsoluteBorrowLimits cap",
    Bound.POOL: "the whole pool (the % cap was larger)",
    Bound.STRATEGY: "the strategy does not borrow",
    Bound.DISABLED: "the quota is Disabled",
}
"""What each bound means, in a few words: the CLI's legend and the report's."""

BASIS_RULE: dict[str, str] = {
    BorrowLimitBasis.QUOTA: "borrowing limit = BorrowLimit% x the team's quota of that instance type and resource "
    "(an absolute limit replaces it; 0 outside the quota)",
    BorrowLimitBasis.POOL: "borrowing limit = min(BorrowLimit% x pool seen, absolute cap, pool seen)",
}
"""Each basis's rule in one line (docs/spec.md §2)."""


@dataclass(frozen=True, slots=True)
class Derivation:
    """How one borrowing limit was reached: the basis, what the percentage applied to, each cap, the rule that won.

    ``pool`` is the lendable pool the team sees (on the Quota basis for information: it caps nothing);
    ``nominal`` the team's own quota of the resource (what the percentage applies to on the Quota basis)."""

    basis: BorrowLimitBasis
    pool: Amount
    nominal: Amount
    percent: int
    percent_cap: Amount
    absolute_cap: Amount | None
    limit: Amount
    bound: Bound

    @property
    def matters(self) -> bool:
        """Whether there is anything to explain: a pool, a quota, a cap or a limit (else all zero, and no rule)."""
        return bool(self.pool or self.nominal or self.limit or self.absolute_cap is not None)


@dataclass(frozen=True, slots=True)
class Issue:
    """A misconfiguration or an oddity, named so it can reach logs, metrics, the API and the CLI."""

    severity: str  # "error" | "warning"
    code: str
    subject: str
    message: str


@dataclass(frozen=True, slots=True)
class TeamGrant:
    team: str
    quota_name: str
    strategy: Strategy
    enabled: bool
    preempt_team_tasks: str
    fair_share_weight: int | None
    nominal: Table
    borrowing_limit: Table
    lending_limit: Table
    why: dict[str, dict[str, Derivation]]

    def bounds(self) -> dict[str, str]:
        """flavor -> the bound that set its accelerator (or first non-zero) limit: a one-word summary."""
        out: dict[str, str] = {}
        for flavor, per_resource in self.why.items():
            devices = [d for r, d in per_resource.items() if r in DEVICE_RESOURCES]
            chosen = next((d for d in devices if d.matters), devices[0] if devices else None)
            if chosen is None or not chosen.matters:
                chosen = next((d for d in per_resource.values() if d.matters), chosen)
            if chosen is not None:
                out[flavor] = str(chosen.bound)
        return out


@dataclass(frozen=True, slots=True)
class PoolResult:
    flavors: tuple[str, ...]
    resources: tuple[str, ...]
    capacity: Table
    allocated: Table
    unallocated: Table
    shortfall: Table
    teams: dict[str, TeamGrant]
    excluded_nodes: dict[str, ExclusionReason]
    node_counts: dict[str, tuple[int, int]]  # flavor -> (eligible, total)
    issues: tuple[Issue, ...]
    idle_resource_sharing: bool
    fair_share: bool
    shapes: dict[str, dict[str, Amount]] = field(default_factory=dict)
    headroom_mode: Headroom = Headroom.OFF
    headroom: dict[str, dict[str, Amount]] = field(default_factory=dict)
    """node -> resource -> what headroom took from its allocatable (docs/spec.md §2), eligible nodes only, tracked
    resources above 0 only, sorted by node."""
    headroom_by_flavor: Table = field(default_factory=dict)
    """flavor -> resource -> the sum of :attr:`headroom` over the flavor's eligible nodes: what capacity lost."""
    kueue_api: KueueApi | None = None
    """The Kueue API versions the cluster's objects are written in (``kueue_fit.with_kueue_api``); None when
    no cluster was asked (``idleshare plan``)."""
    ungoverned_flavors: tuple[str, ...] = ()
    """Flavors of the cluster left out of every Kueue object: more than Kueue's schema holds in the one resource
    group idleshare writes (``kueue.govern``, docs/spec.md §3), sorted; named in an issue."""
    ungoverned_resources: tuple[str, ...] = ()
    """Resources left out the same way, sorted."""

    def with_issues(self, extra: Iterable[Issue]) -> PoolResult:
        """This result with ``extra`` among its issues, sorted as :func:`compute` sorts them (itself if none)."""
        extra = tuple(extra)
        if not extra:
            return self
        return replace(self, issues=_sorted_issues((*self.issues, *extra)))

    def summary(self) -> str:
        """One human line: "ml.p5.48xlarge: 10 nodes (9 eligible); excluded: NotReady=1"."""
        parts = [f"{f}: {total} nodes ({ok} eligible)" for f, (ok, total) in self.node_counts.items()]
        reasons = Counter(str(r) for r in self.excluded_nodes.values())
        text = "; ".join(parts) or "no nodes"
        if reasons:
            text += "; excluded: " + ", ".join(f"{r}={n}" for r, n in sorted(reasons.items()))
        return text


def _sorted_issues(issues: Iterable[Issue]) -> tuple[Issue, ...]:
    return tuple(sorted(set(issues), key=lambda i: (i.severity, i.code, i.subject)))


def is_tracked(resource: str, settings: Settings) -> bool:
    return resource in BASE_RESOURCES or resource.startswith(MIG_PREFIX) or resource in settings.extra_resources


# -- capacity -----------------------------------------------------------------------------------


Shape = tuple[tuple[str, Amount], ...]
"""One node's tracked allocatable, sorted by resource: what nodes vote with for their flavor's shape."""


def _observe_nodes(
    nodes: Sequence[Node], reported: Sequence[Node], settings: Settings
) -> tuple[Table, dict[str, ExclusionReason], dict[str, tuple[int, int]], dict[str, Counter[Shape]]]:
    """Capacity, exclusions, counts and shape votes of ``nodes`` (allocatable', after headroom), each node's
    exclusion read from ``reported`` (the same nodes, as read): ``AcceleratorsNotReady`` is what the device plugin
    reports, not what headroom left (accelerators in use are not missing)."""
    capacity: dict[str, dict[str, Amount]] = defaultdict(dict)
    excluded: dict[str, ExclusionReason] = {}
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    shape_votes: dict[str, Counter[Shape]] = defaultdict(Counter)
    tolerated = settings.tolerated_taint_keys
    for node, as_reported in zip(nodes, reported, strict=True):
        reason = exclusion_reason(as_reported, tolerated)
        # An eligible node whose MIG manager has not applied its layout lends none of its MIG profiles (they may
        # be stale); its other resources count, so it stays eligible in ``counts`` and is named MigNotReady.
        mig_withheld = reason is None and not node.mig_ready
        flavor = node.instance_type if reason is not ExclusionReason.INVALID_INSTANCE_TYPE else None
        if flavor:
            tracked = tuple(sorted((r, q) for r, q in node.allocatable.items() if is_tracked(r, settings)))
            if reason is not ExclusionReason.ACCELERATORS_NOT_READY:  # its allocatable is not the instance's shape
                shape_votes[flavor][tracked] += 1
            counts[flavor][1] += 1
            per_flavor = capacity[flavor]
            if reason is None:
                counts[flavor][0] += 1
            for r, q in tracked:
                if reason is None and not (mig_withheld and r.startswith(MIG_PREFIX)):
                    per_flavor[r] = per_flavor.get(r, 0) + q
                else:
                    per_flavor.setdefault(r, 0)
        if reason is not None:
            excluded[node.name] = reason
        elif mig_withheld:
            excluded[node.name] = ExclusionReason.MIG_NOT_READY
    return (
        {f: capacity[f] for f in sorted(capacity)},
        dict(sorted(excluded.items())),
        {f: (ok, total) for f, (ok, total) in sorted(counts.items())},
        dict(shape_votes),
    )


def most_common_shape(votes: Mapping[Shape, int], spec: catalog.InstanceSpec | None = None) -> dict[str, Amount]:
    """``S(f)`` from the nodes' votes (docs/spec.md §2, "Instance shape"): the *layout* (every tracked resource but cpu
    and memory: GPUs, MIG profiles, Neuron devices, EFA, ...) most nodes report — a tie goes to the one whose device
    count is the catalog's (``spec``), else to the greatest layout (by resource, then amount) —, and cpu and memory
    each the value most of that layout's nodes report (a tie: the greatest). One outlier never sets it when a
    majority exists (a node reporting 1e3 GPUs beside real ones, memory a few KiB apart), and the choice never
    depends on the order of the nodes."""
    layouts: Counter[Shape] = Counter()
    for shape, n in votes.items():
        layouts[_layout(shape)] += n
    top = max(layouts.values())
    tied = [layout for layout, n in layouts.items() if n == top]
    if len(tied) > 1 and spec is not None and spec.accelerators:
        tied = [layout for layout in tied if _devices(layout) == spec.accelerators] or tied
    chosen = max(tied, key=_shape_key)
    out: dict[str, Amount] = dict(chosen)
    for resource in (CPU, MEMORY):
        values: Counter[Amount] = Counter()
        for shape, n in votes.items():
            if _layout(shape) == chosen:
                values.update({q: n for r, q in shape if r == resource})
        if values:
            out[resource] = max(values.items(), key=lambda kv: (kv[1], Fraction(kv[0])))[0]
    return dict(sorted(out.items()))


def _layout(shape: Shape) -> Shape:
    return tuple((r, q) for r, q in shape if r not in (CPU, MEMORY))


def _devices(layout: Shape) -> Amount | None:
    """The count of the first device resource a layout has above 0 (what ``Accelerators`` would count)."""
    held = {r: q for r, q in layout if q > 0}
    return next((held[r] for r in DEVICE_RESOURCES if r in held), None)


def _shape_key(shape: Shape) -> tuple[tuple[str, Fraction], ...]:
    return tuple((r, Fraction(q)) for r, q in shape)


# -- quotas -------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Context:
    settings: Settings
    node_flavors: frozenset[str]
    votes: dict[str, Counter[Shape]]
    issues: list[Issue]
    naming: catalog.FlavorNaming
    shapes: dict[str, dict[str, Amount]] = field(default_factory=dict)
    _exposing: dict[tuple[str, str], dict[str, Amount] | None] = field(default_factory=dict)
    _accelerators: dict[str, str] = field(default_factory=dict)

    def flavor_of(self, instance_type: str) -> str:
        """The flavor a quota's ``ml.X`` or ``X`` governs, one per cluster (:class:`catalog.FlavorNaming`)."""
        return self.naming.flavor(instance_type)

    def _catalog_shape(self, flavor: str) -> dict[str, Amount] | None:
        spec = catalog.lookup(flavor)
        if spec is None:
            return None
        return {r: q for r, q in spec.allocatable().items() if is_tracked(r, self.settings)}

    def shape(self, flavor: str) -> dict[str, Amount] | None:
        """``S(f)``: the most common allocatable among the flavor's nodes, else the catalog's."""
        if flavor not in self.shapes:
            votes = self.votes.get(flavor)
            found = most_common_shape(votes, catalog.lookup(flavor)) if votes else self._catalog_shape(flavor)
            if found is None:
                return None
            self.shapes[flavor] = found
        return self.shapes[flavor]

    def shape_exposing(self, flavor: str, resource: str) -> dict[str, Amount] | None:
        """``S(f, r)``: the most common allocatable among the flavor's nodes that expose ``resource``
        (allocatable > 0), else the catalog's when it lists ``resource``; None when neither does."""
        key = (flavor, resource)
        if key not in self._exposing:
            votes: Mapping[Shape, int] = self.votes.get(flavor, {})
            exposing = {s: n for s, n in votes.items() if any(r == resource and q > 0 for r, q in s)}
            found = most_common_shape(exposing, catalog.lookup(flavor)) if exposing else self._catalog_shape(flavor)
            self._exposing[key] = found if found is not None and found.get(resource, 0) > 0 else None
        return self._exposing[key]

    def accelerator(self, flavor: str) -> str:
        """What ``Accelerators`` counts on the flavor (docs/spec.md §2): the first of ``DEVICE_RESOURCES`` its nodes
        expose, else the first configured extra resource they expose, else the catalog's accelerator, else GPUs."""
        if flavor not in self._accelerators:
            exposed = {r for shape in self.votes.get(flavor, {}) for r, q in shape if q > 0}
            extra = sorted(exposed & self.settings.extra_resources)
            found = next((r for r in DEVICE_RESOURCES if r in exposed), extra[0] if extra else None)
            spec = catalog.lookup(flavor)
            self._accelerators[flavor] = found or (spec.accelerator if spec is not None else None) or NVIDIA_GPU
        return self._accelerators[flavor]


def resolve(entry: ResourceConfig, ctx: _Context, flavor: str) -> tuple[dict[str, Amount], str | None]:
    """Amounts one ``ComputeQuotaResourceConfig`` stands for on its flavor, or the reason it cannot.

    - ``Count`` n > 0: n x ``S(f)`` for every resource; ``Accelerators``, ``VCpu``, ``MemoryInGiB``,
      ``AcceleratorPartition`` given beside it override their own resource.
    - else ``Accelerators`` a: the accelerator = a; a / ``S(f, accelerator)`` scales cpu and memory.
    - else ``AcceleratorPartition`` (p, c): ``nvidia.com/<p>`` = c; c / ``S(f, p)`` scales cpu and memory.
    - else ``VCpu`` and/or ``MemoryInGiB`` as given, a missing one scaled by the other's ratio to ``S(f)``.
    ``VCpu`` / ``MemoryInGiB`` given always win over scaling. Scaled amounts are rounded down.
    """
    vcpu = exact(entry.vcpu) if entry.vcpu is not None else None
    mem = exact(entry.memory_gib * GIB) if entry.memory_gib is not None else None
    part = entry.accelerator_partition
    shape = ctx.shape(flavor)

    out: dict[str, Amount]
    ratio: Fraction | None = None
    source: Mapping[str, Amount] | None = None  # the shape whose cpu and memory a ratio scales
    if entry.count:
        if shape is None:
            return {}, "NoInstanceShape"
        out = {r: q * entry.count for r, q in shape.items()}
        out.update(_named(entry, ctx, flavor))
        return out, None
    if entry.accelerators is not None:
        resource, amount = ctx.accelerator(flavor), entry.accelerators
    elif part is not None:
        resource, amount = f"nvidia.com/{part.type}", part.count
    elif vcpu is not None or mem is not None:
        resource, amount = "", 0
    else:
        return {}, None

    if resource:
        out = {resource: amount}
        if vcpu is None or mem is None:
            if shape is None:
                return {}, "NoInstanceShape"
            source = ctx.shape_exposing(flavor, resource)
            if source is None:
                return {}, "NoAcceleratorOnFlavor" if entry.accelerators is not None else "NoPartitionOnFlavor"
            ratio = Fraction(amount) / Fraction(source[resource])
    else:
        out, source = {}, shape
        if vcpu is None or mem is None:
            given, base = (vcpu, CPU) if vcpu is not None else (mem, MEMORY)
            per_node = shape.get(base, 0) if shape is not None else 0
            if given is None or per_node <= 0:
                return {}, "NoInstanceShape"
            ratio = Fraction(given) / Fraction(per_node)

    out.update(_cpu_and_memory(vcpu, mem, ratio, source))
    if entry.accelerators is not None and (device := ctx.accelerator(flavor)) in NEURON_DEVICES:
        out.update(_cores_of(ctx.shape_exposing(flavor, device), device, entry.accelerators))
    return out, None


def _cpu_and_memory(
    vcpu: Amount | None, mem: Amount | None, ratio: Fraction | None, source: Mapping[str, Amount] | None
) -> dict[str, Amount]:
    """``VCpu`` and ``MemoryInGiB`` as given, else ``ratio`` x the source shape's (rounded down); none without one."""
    out: dict[str, Amount] = {}
    for resource, given in ((CPU, vcpu), (MEMORY, mem)):
        if given is not None:
            out[resource] = given
        elif ratio is not None and source is not None:
            out[resource] = round_down(resource, ratio * source.get(resource, 0))
    return out


NEURON_DEVICES = frozenset({NEURON, NEURON_DEVICE})


def _cores_of(shape: Mapping[str, Amount] | None, device: str, devices: int) -> dict[str, Amount]:
    """What ``devices`` Neuron devices are under the shape's other names: its cores (by its cores per device) and,
    where the plugin advertises both, the devices under the other device name (``neuron`` / ``neurondevice``)."""
    if shape is None or not shape.get(device):
        return {}
    ratio = Fraction(devices) / Fraction(shape[device])
    return {
        r: round_down(r, ratio * shape[r]) for r in (*sorted(NEURON_DEVICES - {device}), NEURON_CORE) if shape.get(r)
    }


def _named(entry: ResourceConfig, ctx: _Context, flavor: str) -> dict[str, Amount]:
    """The resources an entry's fields name, with exactly the amounts written (no ``Count``, no scaling)."""
    out: dict[str, Amount] = {}
    if entry.accelerators is not None:
        device = ctx.accelerator(flavor)
        out[device] = entry.accelerators
        if device in NEURON_DEVICES:  # the same devices under the plugin's other name, where it advertises both
            shape = ctx.shape_exposing(flavor, device) or {}
            out.update({r: entry.accelerators for r in NEURON_DEVICES - {device} if shape.get(r) == shape.get(device)})
    if entry.accelerator_partition is not None:
        out[f"nvidia.com/{entry.accelerator_partition.type}"] = entry.accelerator_partition.count
    if entry.vcpu is not None:
        out[CPU] = exact(entry.vcpu)
    if entry.memory_gib is not None:
        out[MEMORY] = exact(entry.memory_gib * GIB)
    return out


def _team_nominal(quota: Quota, ctx: _Context) -> Table:
    nominal: dict[str, dict[str, Amount]] = defaultdict(dict)
    for entry in quota.resources:
        flavor = ctx.flavor_of(entry.instance_type)
        amounts, problem = resolve(entry, ctx, flavor) if flavor_name_problem(flavor) is None else ({}, INVALID)
        if problem is not None:
            ctx.issues.append(_entry_issue(quota, entry, flavor, problem, "ComputeQuotaResources", ctx))
            continue
        per_flavor = nominal[flavor]
        for r, q in amounts.items():
            per_flavor[r] = per_flavor.get(r, 0) + q
    return {f: dict(nominal[f]) for f in sorted(nominal)}


@dataclass(frozen=True, slots=True)
class Cap:
    """One ``AbsoluteBorrowLimits`` entry on its flavor (docs/spec.md §2).

    ``every``: with ``Count`` n, n x ``S(f)[r]`` for every resource r (0 where ``S(f)`` has none);
    None without ``Count``. ``named``: what ``Accelerators``, ``VCpu``, ``MemoryInGiB`` and
    ``AcceleratorPartition`` name, exactly as written, overriding ``every`` on their own resource.
    """

    every: Mapping[str, Amount] | None
    named: Mapping[str, Amount]

    def of(self, resource: str) -> Amount | None:
        """The cap on ``resource``, or None when this entry caps nothing of it."""
        if resource in self.named:
            return self.named[resource]
        if self.every is not None:
            return self.every.get(resource, 0)
        return None


def cap_of(caps: Iterable[Cap], resource: str) -> Amount | None:
    """The least of the caps an entry sets on ``resource``; None when none sets one."""
    found = [c for c in (cap.of(resource) for cap in caps) if c is not None]
    return min(found) if found else None


def _team_absolute(quota: Quota, ctx: _Context) -> dict[str, list[Cap]]:
    caps: dict[str, list[Cap]] = {}
    for entry in quota.absolute_borrow_limits:
        flavor = ctx.flavor_of(entry.instance_type)
        if flavor_name_problem(flavor) is not None:  # no flavor of that name can exist: nothing to cap
            ctx.issues.append(_entry_issue(quota, entry, flavor, INVALID, "AbsoluteBorrowLimits", ctx))
            continue
        if flavor not in ctx.node_flavors:
            ctx.issues.append(
                Issue(
                    "warning",
                    "AbsoluteLimitOnUnknownFlavor",
                    f"{quota.name}/{entry.instance_type}",
                    f"quota {quota.name!r} (team {quota.team}) sets an absolute borrow limit on "
                    f"{entry.instance_type}, which no node of the cluster carries",
                )
            )
        every: dict[str, Amount] | None = None
        if entry.count is not None:
            shape = ctx.shape(flavor)
            if entry.count and shape is None:
                # n x an unknown size: a cap that cannot be sized caps everything at zero, never "no cap".
                ctx.issues.append(_entry_issue(quota, entry, flavor, "NoInstanceShape", "AbsoluteBorrowLimits", ctx))
            every = {r: q * entry.count for r, q in (shape or {}).items()}
        caps.setdefault(flavor, []).append(Cap(every, _named(entry, ctx, flavor)))
    return caps


def _entry_issue(quota: Quota, entry: ResourceConfig, flavor: str, problem: str, where: str, ctx: _Context) -> Issue:
    partition = entry.accelerator_partition.type if entry.accelerator_partition else "?"
    messages = {
        INVALID: f"{show(entry.instance_type)} cannot name a ResourceFlavor: {flavor_name_problem(flavor)}",
        "NoInstanceShape": f"no node of flavor {flavor} and no catalog entry for {entry.instance_type}: "
        "its size is unknown",
        "NoAcceleratorOnFlavor": f"no node of {flavor} has {ctx.accelerator(flavor)} and the catalog lists none "
        f"for {entry.instance_type}: nothing to scale Accelerators by",
        "NoPartitionOnFlavor": f"no node of {flavor} exposes the MIG profile {partition} (nvidia.com/{partition}) "
        "and the catalog lists no MIG layouts: nothing to scale AcceleratorPartition by",
    }
    hint = _closest(entry.instance_type, ctx) if problem == "NoInstanceShape" else None
    return Issue(
        "error",
        problem,
        f"{quota.name}/{entry.instance_type[:SUBJECT_MAX]}",
        f"quota {quota.name!r} (team {quota.team}) {where}: {messages[problem]}"
        + (f"; did you mean {hint}?" if hint else ""),
    )


def _closest(instance_type: str, ctx: _Context) -> str | None:
    """The name closest to ``instance_type`` among the cluster's flavors and the catalog's types (both names), if any
    is close: the suggestion the parser cannot make for a name outside SageMaker's enum."""
    import difflib

    known = sorted(ctx.node_flavors | catalog.CATALOG.keys() | {s.ec2_name for s in catalog.CATALOG.values()})
    found = difflib.get_close_matches(instance_type, known, n=1, cutoff=0.8) if len(instance_type) <= 100 else []
    return found[0] if found else None


# -- the pool -----------------------------------------------------------------------------------


def compute(snapshot: Snapshot) -> PoolResult:
    """Capacity, allocation, the pool each team sees and every grant, with its derivation."""
    settings = snapshot.settings
    nodes, taken = reserve(snapshot.nodes, snapshot.daemonsets, snapshot.pods, settings.headroom, snapshot.kueue_owners)
    capacity, excluded, node_counts, votes = _observe_nodes(nodes, snapshot.nodes, settings)
    shown_headroom = _shown_headroom(taken, excluded, settings)
    issues: list[Issue] = []
    naming = catalog.FlavorNaming.of(node_counts)
    ctx = _Context(settings, frozenset(node_counts), votes, issues, naming)
    issues.extend(_two_names(naming))
    for flavor in node_counts:
        ctx.shape(flavor)  # S(f) of every flavor with nodes, reported in the result

    if ExclusionReason.INVALID_INSTANCE_TYPE in excluded.values():
        issues.extend(_invalid_instance_types(nodes, excluded))
    quotas = _unique_teams(snapshot.quotas, issues, settings)
    nominals = {q.team: _team_nominal(q, ctx) for q in quotas}
    absolutes = {q.team: _team_absolute(q, ctx) for q in quotas}

    flavors, resources = _axes(capacity, nominals, absolutes)
    ledger = _Ledger.of(capacity, quotas, nominals, flavors, resources)

    sharing = snapshot.scheduler_config.idle_resource_sharing
    basis = settings.borrow_limit_basis
    if basis is BorrowLimitBasis.QUOTA:
        _absolute_outside_quota(quotas, nominals, absolutes, ctx)
    offered = ledger.offered(sharing)
    teams = {
        q.team: _team_grant(q, nominals[q.team], absolutes[q.team], offered, basis, settings, flavors, resources)
        for q in quotas
    }
    cap, allocated, unallocated, shortfall = ledger.cap, ledger.allocated, ledger.unallocated, ledger.shortfall
    issues.extend(
        _out_of_range(ledger, teams, nodes, excluded)
    )  # before Shortfall: a zeroed amount falls short of none
    issues.extend(_shortfall_issues(ledger.shortfall, resources))

    return PoolResult(
        flavors=tuple(flavors),
        resources=tuple(resources),
        capacity=cap,
        allocated=allocated,
        unallocated=unallocated,
        shortfall=shortfall,
        teams=dict(sorted(teams.items())),
        excluded_nodes=excluded,
        node_counts=node_counts,
        issues=_sorted_issues(issues),
        idle_resource_sharing=sharing,
        fair_share=snapshot.scheduler_config.fair_share,
        shapes={f: ctx.shapes[f] for f in sorted(ctx.shapes)},
        headroom_mode=settings.headroom,
        headroom=shown_headroom,
        headroom_by_flavor=_by_flavor(shown_headroom, nodes),
    )


def _axes(
    capacity: Mapping[str, Mapping[str, Amount]],
    nominals: Mapping[str, Table],
    absolutes: Mapping[str, Mapping[str, list[Cap]]],
) -> tuple[list[str], list[str]]:
    """The result's flavors and resources, sorted: every one with capacity, in a quota or under an absolute cap."""
    flavors = sorted(set(capacity) | {f for n in nominals.values() for f in n})
    resources = sorted(
        {r for f in capacity.values() for r in f}
        | {r for n in nominals.values() for f in n.values() for r in f}
        | {r for a in absolutes.values() for caps in a.values() for cap in caps for r in cap.named}
    )
    return flavors, resources


def _zeros(flavors: Iterable[str], resources: list[str]) -> Table:
    return {f: dict.fromkeys(resources, 0) for f in flavors}


@dataclass(frozen=True)
class _Ledger:
    """Per flavor and resource: eligible capacity, what the enabled quotas hold (``allocated``) and lend
    (``lent``), and the capacity beyond them (``unallocated``) or missing (``shortfall``)."""

    cap: Table
    allocated: Table
    lent: Table
    unallocated: Table
    shortfall: Table

    @classmethod
    def of(
        cls,
        capacity: Mapping[str, Mapping[str, Amount]],
        quotas: Iterable[Quota],
        nominals: Mapping[str, Table],
        flavors: list[str],
        resources: list[str],
    ) -> _Ledger:
        cap = _zeros(flavors, resources)
        for f, per in capacity.items():
            cap[f].update(per)
        allocated, lent = _zeros(flavors, resources), _zeros(flavors, resources)
        for q in quotas:
            if not q.enabled:
                continue
            for f, per in nominals[q.team].items():
                for r, amount in per.items():
                    allocated[f][r] += amount
                    if q.strategy is not Strategy.DONT_LEND:
                        lent[f][r] += amount
        unallocated, shortfall = _zeros(flavors, resources), _zeros(flavors, resources)
        for f in flavors:
            for r in resources:
                diff = cap[f][r] - allocated[f][r]
                unallocated[f][r] = exact(max(diff, 0))
                shortfall[f][r] = exact(max(-diff, 0))
        return cls(cap, allocated, lent, unallocated, shortfall)

    def offered(self, sharing: bool) -> Table:
        """What every lending team puts in the pool, with the unallocated capacity when idle resources are shared."""
        return {
            f: {r: (per[r] if sharing else 0) + self.lent[f][r] for r in per} for f, per in self.unallocated.items()
        }


INT64_MAX = 2**63 - 1
"""Kueue keeps every quantity as an int64: cpu in millicores, every other resource in its unit (bytes, devices)."""


def kueue_units(resource: str, amount: Amount) -> Amount:
    """``amount`` of ``resource`` in the unit Kueue counts it in (its int64): millicores for cpu."""
    return amount * 1000 if resource == CPU else amount


def _out_of_range(
    ledger: _Ledger, teams: Mapping[str, TeamGrant], nodes: Iterable[Node], excluded: Mapping[str, ExclusionReason]
) -> list[Issue]:
    """Every (flavor, resource) where an amount the pool computed, or a sum Kueue forms of them (the Cohort's quota
    and what the teams lend; a team's nominal and borrowing limit), passes Kueue's int64: one named error each, and
    every amount of it set to 0 (in place), so nothing past the range is written (docs/spec.md §2, "Range")."""
    issues: list[Issue] = []
    if _surely_in_range(ledger, teams):
        return issues
    for f, per in ledger.cap.items():
        for r in per:
            lent = sum(t.lending_limit[f][r] for t in teams.values())
            nominals = sum(t.nominal[f][r] for t in teams.values())
            most = max(
                per[r],
                ledger.allocated[f][r],
                ledger.unallocated[f][r] + lent,
                ledger.unallocated[f][r] + nominals,
                *(t.nominal[f][r] + t.borrowing_limit[f][r] for t in teams.values()),
            )
            if kueue_units(r, most) <= INT64_MAX:
                continue
            issues.append(_range_issue(f, r, per[r], ledger.allocated[f][r], nodes, excluded))
            for table in (ledger.cap, ledger.allocated, ledger.lent, ledger.unallocated, ledger.shortfall):
                table[f][r] = 0
            for t in teams.values():
                t.nominal[f][r] = t.borrowing_limit[f][r] = t.lending_limit[f][r] = 0
                d = t.why[f][r]  # its rule stays; the amounts are the 0 written (the issue says why)
                t.why[f][r] = replace(d, pool=0, nominal=0, percent_cap=0, absolute_cap=d.absolute_cap and 0, limit=0)
    return issues


def _surely_in_range(ledger: _Ledger, teams: Mapping[str, TeamGrant]) -> bool:
    """A bound of every sum :func:`_out_of_range` checks, from each table's largest amount in Kueue's units: within
    int64, nothing can pass it and the per-pair check is skipped."""

    def most(table: Table) -> Amount:
        return max((max(max(per.values(), default=0), per.get(CPU, 0) * 1000) for per in table.values()), default=0)

    nominal = max((most(t.nominal) for t in teams.values()), default=0)
    borrowing = max((most(t.borrowing_limit) for t in teams.values()), default=0)
    return most(ledger.cap) + most(ledger.allocated) + (len(teams) + 1) * nominal + borrowing <= INT64_MAX


def _range_issue(
    f: str, r: str, capacity: Amount, allocated: Amount, nodes: Iterable[Node], excluded: Mapping[str, ExclusionReason]
) -> Issue:
    largest = sorted(
        (
            (q, n.name)
            for n in nodes
            if n.instance_type == f and n.name not in excluded
            for q in [n.allocatable.get(r, 0)]
        ),
        key=lambda qn: (-qn[0], qn[1]),
    )[:3]
    named = ", ".join(f"{name} reports {format_quantity(q, r)}" for q, name in largest if q > 0) or "no node reports it"
    return Issue(
        "error",
        "QuantityOutOfRange",
        f"{f}/{r}"[:SUBJECT_MAX],
        f"{f}: {r} passes Kueue's int64 range (at most {INT64_MAX} {'millicores' if r == CPU else 'units'}): "
        f"capacity {format_quantity(capacity, r)} ({named}), quotas hold {format_quantity(allocated, r)}; nothing of {r} "
        f"on {f} is "
        "written (capacity, quotas and limits are 0 there) until it is back in range",
    )


def _shortfall_issues(shortfall: Table, resources: list[str]) -> list[Issue]:
    issues: list[Issue] = []
    for f, per in shortfall.items():
        short = [r for r in resources if per[r] > 0]
        if short:
            issues.append(
                Issue("warning", "Shortfall", f, f"{f}: quotas exceed eligible capacity for {', '.join(short)}")
            )
    return issues


def _team_grant(
    q: Quota,
    in_quota: Table,
    absolute: Mapping[str, list[Cap]],
    offered: Table,
    basis: BorrowLimitBasis,
    settings: Settings,
    flavors: list[str],
    resources: list[str],
) -> TeamGrant:
    """One team's grant: its nominal quota, what it lends, and each borrowing limit with its derivation. The
    pool it may borrow from is what the others offer (``offered`` less its own lending)."""
    nominal = _zeros(flavors, resources)
    for f, per in in_quota.items():
        nominal[f].update({r: exact(a) for r, a in per.items()})
    lends = q.enabled and q.strategy is not Strategy.DONT_LEND
    lending = {f: {r: (nominal[f][r] if lends else 0) for r in resources} for f in flavors}
    borrowing, why = _zeros(flavors, resources), {f: dict[str, Derivation]() for f in flavors}
    percent = q.borrow_limit if q.borrow_limit is not None else settings.default_borrow_limit
    for f in flavors:
        for r in resources:
            pool = exact(offered[f][r] - lending[f][r])
            derivation = _borrow(
                q, basis, pool, nominal[f][r], f in in_quota, percent, cap_of(absolute.get(f, ()), r), r
            )
            borrowing[f][r] = derivation.limit
            why[f][r] = derivation
    return TeamGrant(
        team=q.team,
        quota_name=q.name,
        strategy=q.strategy,
        enabled=q.enabled,
        preempt_team_tasks=q.preempt_team_tasks,
        fair_share_weight=q.fair_share_weight,
        nominal=nominal,
        borrowing_limit=borrowing,
        lending_limit=lending,
        why=why,
    )


def _by_flavor(headroom: Mapping[str, Mapping[str, Amount]], nodes: Iterable[Node]) -> Table:
    totals: dict[str, dict[str, Amount]] = defaultdict(dict)
    for node in nodes:
        by = headroom.get(node.name)
        if by and node.instance_type:
            per = totals[node.instance_type]
            for r, q in by.items():
                per[r] = exact(per.get(r, 0) + q)
    return {f: dict(sorted(totals[f].items())) for f in sorted(totals)}


def _shown_headroom(
    taken: Mapping[str, Mapping[str, Amount]], excluded: Mapping[str, ExclusionReason], settings: Settings
) -> dict[str, dict[str, Amount]]:
    """What headroom took from each eligible node (a MigNotReady node is eligible), of the tracked resources."""
    out: dict[str, dict[str, Amount]] = {}
    for name, by in taken.items():
        if excluded.get(name, ExclusionReason.MIG_NOT_READY) is not ExclusionReason.MIG_NOT_READY:
            continue
        shown = {r: q for r, q in by.items() if is_tracked(r, settings)}
        if shown:
            out[name] = shown
    return out


def _two_names(naming: catalog.FlavorNaming) -> list[Issue]:
    """A warning per instance type whose nodes carry both its ``ml.`` and its EC2 name: which one quotas govern."""
    issues = []
    for chosen, other in naming.both_named():
        (ok, total), (other_ok, other_total) = naming.counts[chosen], naming.counts[other]
        issues.append(
            Issue(
                "warning",
                "TwoNamesForOneInstanceType",
                other[:SUBJECT_MAX],
                f"{total} node(s) ({ok} eligible) are labelled {chosen} and {other_total} ({other_ok} eligible) "
                f"{other}: a quota naming either governs {chosen}, the name more of them carry; the {other} nodes "
                "are in the pool as unallocated capacity, in no team's quota",
            )
        )
    return issues


INVALID = str(ExclusionReason.INVALID_INSTANCE_TYPE)
"""The issue of an instance type that cannot name a ResourceFlavor (a node's label, a quota entry's), named as
the nodes' exclusion reason."""
SUBJECT_MAX = 100  # an issue's subject: a longer instance type is cut there (the message says how long)
NAMED_MAX = 10  # the instance types (and nodes of each) an issue names; the rest are counted


def _invalid_instance_types(nodes: Iterable[Node], excluded: Mapping[str, ExclusionReason]) -> list[Issue]:
    """One ``InvalidInstanceType`` error per label value that cannot name a flavor, naming its nodes (excluded, no
    ResourceFlavor written for them); bounded however many nodes and values there are."""
    by_type: dict[str, list[str]] = defaultdict(list)
    for node in nodes:
        if node.instance_type and excluded.get(node.name) is ExclusionReason.INVALID_INSTANCE_TYPE:
            by_type[node.instance_type].append(node.name)
    issues = []
    for value in sorted(by_type)[:NAMED_MAX]:
        names = sorted(by_type[value])
        shown = ", ".join(names[:NAMED_MAX]) + (f" and {len(names) - NAMED_MAX} more" if len(names) > NAMED_MAX else "")
        issues.append(
            Issue(
                "error",
                INVALID,
                value[:SUBJECT_MAX],
                f"{len(names)} node(s) labelled node.kubernetes.io/instance-type={show(value)} ({shown}) are "
                f"excluded: the value {flavor_name_problem(value)}; no ResourceFlavor is written for it",
            )
        )
    if len(by_type) > NAMED_MAX:
        rest = sorted(by_type)[NAMED_MAX:]
        issues.append(
            Issue(
                "error",
                INVALID,
                f"({len(rest)} more instance types)",
                f"{sum(len(by_type[v]) for v in rest)} more node(s) carry {len(rest)} more instance types that "
                "cannot name a ResourceFlavor (GET /clusters/<c>/excluded-nodes lists every node)",
            )
        )
    return issues


def _borrow(
    quota: Quota,
    basis: BorrowLimitBasis,
    pool: Amount,
    nominal: Amount,
    in_quota: bool,
    percent: int,
    absolute: Amount | None,
    resource: str,
) -> Derivation:
    """One borrowing limit on ``basis``, rounded down; 0 unless the quota is enabled and LendAndBorrow.

    - Quota (HyperPod's): ``BorrowLimit% x nominal`` per instance type in the team's quota; an
      ``AbsoluteBorrowLimits`` cap on the resource replaces it; outside the quota: 0 (or its absolute limit, an
      extension). Never capped at the pool: Kueue admits only what is free.
    - Pool: ``min(BorrowLimit% x pool, absolute cap, pool)``.
    """
    quota_basis = basis is BorrowLimitBasis.QUOTA
    percent_cap = percent_of(resource, percent, nominal if quota_basis else pool)
    d = Derivation(basis, pool, nominal, percent, percent_cap, absolute, 0, Bound.DISABLED)
    if not quota.enabled:
        return d
    if quota.strategy is not Strategy.LEND_AND_BORROW:
        return replace(d, bound=Bound.STRATEGY)
    if quota_basis:
        if absolute is not None:
            return replace(d, limit=exact(round_down(resource, absolute)), bound=Bound.ABSOLUTE)
        if not in_quota:
            return replace(d, bound=Bound.NOT_IN_QUOTA)
        return replace(d, limit=exact(percent_cap), bound=Bound.PERCENTAGE_OF_QUOTA)
    limit: Amount = min(percent_cap, round_down(resource, pool))
    bound = Bound.PERCENTAGE if percent_cap < pool else Bound.POOL
    if absolute is not None:
        capped = round_down(resource, absolute)
        if capped <= limit:
            limit, bound = capped, Bound.ABSOLUTE
    return replace(d, limit=exact(limit), bound=bound)


def _absolute_outside_quota(
    quotas: Iterable[Quota],
    nominals: Mapping[str, Table],
    absolutes: Mapping[str, Mapping[str, list[Cap]]],
    ctx: _Context,
) -> None:
    """On the Quota basis an absolute limit on an instance type outside the team's quota is honoured (HyperPod's
    guide sets absolute limits on instance types "in your team's quota"): named, so the operator knows."""
    for q in quotas:
        for flavor in sorted(set(absolutes[q.team]) - set(nominals[q.team])):
            ctx.issues.append(
                Issue(
                    "warning",
                    "AbsoluteLimitOutsideQuota",
                    f"{q.name}/{flavor}",
                    f"quota {q.name!r} (team {q.team}) sets an absolute borrow limit on {flavor}, which is not in its "
                    "ComputeQuotaResources: idleshare lets the team borrow up to it there (HyperPod applies absolute "
                    "limits to instance types in the team's quota only)",
                )
            )


def _unique_teams(quotas: Iterable[Quota], issues: list[Issue], settings: Settings) -> list[Quota]:
    """One quota per team: the quota parser (``idleshare.parse.quotas``) rejects duplicates; here the first by name wins, reported. A team
    whose namespace or queues cannot be named in this cluster (the admin API refuses it; a quota stored
    otherwise can still have it) is left out, reported: it holds no quota it could never use."""
    chosen: dict[str, Quota] = {}
    for q in sorted(quotas, key=lambda q: (q.team, q.name)):
        problem = team_name_problem(q.team, settings)
        if problem is not None:
            issues.append(Issue("error", "InvalidTeamName", q.team, f"team {q.team} (quota {q.name}): {problem}"))
            continue
        if q.team in chosen:
            issues.append(
                Issue(
                    "error",
                    "DuplicateTeam",
                    q.team,
                    f"team {q.team} has two quotas ({chosen[q.team].name}, {q.name}); {q.name} is ignored",
                )
            )
            continue
        chosen[q.team] = q
    return list(chosen.values())
