"""The lendable pool: capacity, quotas, and what each team may borrow (SPEC §2).

``compute(snapshot)`` is a pure function over one snapshot of the cluster and its policies.
Everything it returns is sorted, so equal inputs in any order give equal results.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction

from idleshare.domain import catalog
from idleshare.domain.eligibility import exclusion_reason
from idleshare.domain.model import (
    CPU,
    EFA,
    GIB,
    MEMORY,
    MIG_PREFIX,
    NEURON_DEVICE,
    NVIDIA_GPU,
    Amount,
    ExclusionReason,
    Node,
    Quota,
    ResourceConfig,
    Settings,
    Snapshot,
    Strategy,
)
from idleshare.domain.naming import team_name_problem
from idleshare.domain.quantity import exact, percent_of, round_down

Table = dict[str, dict[str, Amount]]
"""flavor -> resource -> amount, sorted by flavor then resource."""

BASE_RESOURCES = frozenset({CPU, MEMORY, NVIDIA_GPU, NEURON_DEVICE, EFA})


class Bound:
    """Which bound set a borrowing limit (the least wins)."""

    PERCENTAGE = "percentage"
    ABSOLUTE = "absolute"
    POOL = "pool"
    STRATEGY = "strategy"  # Lend / DontLend: no borrowing at all
    DISABLED = "disabled"  # ActivationState Disabled


@dataclass(frozen=True, slots=True)
class Derivation:
    """How one borrowing limit was reached: the pool the team saw and each cap applied to it."""

    pool: Amount
    percent: int
    percent_cap: Amount
    absolute_cap: Amount | None
    limit: Amount
    bound: str


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
            chosen = next((d for r, d in per_resource.items() if r in (NVIDIA_GPU, NEURON_DEVICE)), None)
            if chosen is None or chosen.pool == 0:
                chosen = next((d for d in per_resource.values() if d.pool > 0), chosen)
            if chosen is not None:
                out[flavor] = chosen.bound
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

    def summary(self) -> str:
        """One human line: "ml.p5.48xlarge: 10 nodes (9 eligible); excluded: NotReady=1"."""
        parts = [f"{f}: {total} nodes ({ok} eligible)" for f, (ok, total) in self.node_counts.items()]
        reasons = Counter(str(r) for r in self.excluded_nodes.values())
        text = "; ".join(parts) or "no nodes"
        if reasons:
            text += "; excluded: " + ", ".join(f"{r}={n}" for r, n in sorted(reasons.items()))
        return text


def is_tracked(resource: str, settings: Settings) -> bool:
    return resource in BASE_RESOURCES or resource.startswith(MIG_PREFIX) or resource in settings.extra_resources


def accelerator_resource(shape: Mapping[str, Amount]) -> str:
    """The flavor's accelerator: Neuron devices on Neuron flavors, else NVIDIA GPUs."""
    return NEURON_DEVICE if shape.get(NEURON_DEVICE, 0) > 0 else NVIDIA_GPU


# -- capacity -----------------------------------------------------------------------------------


def _observe_nodes(
    nodes: Iterable[Node], settings: Settings
) -> tuple[Table, dict[str, ExclusionReason], dict[str, tuple[int, int]], dict[str, dict[str, Amount]]]:
    capacity: dict[str, dict[str, Amount]] = defaultdict(dict)
    excluded: dict[str, ExclusionReason] = {}
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    shape_votes: dict[str, Counter[tuple[tuple[str, Amount], ...]]] = defaultdict(Counter)
    tolerated = settings.tolerated_taint_keys
    for node in nodes:
        reason = exclusion_reason(node, tolerated)
        flavor = node.instance_type
        if flavor:
            tracked = tuple(sorted((r, q) for r, q in node.allocatable.items() if is_tracked(r, settings)))
            shape_votes[flavor][tracked] += 1
            counts[flavor][1] += 1
            per_flavor = capacity[flavor]
            if reason is None:
                counts[flavor][0] += 1
                for r, q in tracked:
                    per_flavor[r] = per_flavor.get(r, 0) + q
            else:
                for r, _ in tracked:
                    per_flavor.setdefault(r, 0)
        if reason is not None:
            excluded[node.name] = reason
    shapes = {
        flavor: dict(max(votes.items(), key=lambda kv: (kv[1], _shape_key(kv[0])))[0])
        for flavor, votes in shape_votes.items()
    }
    return (
        {f: capacity[f] for f in sorted(capacity)},
        dict(sorted(excluded.items())),
        {f: (ok, total) for f, (ok, total) in sorted(counts.items())},
        shapes,
    )


def _shape_key(shape: tuple[tuple[str, Amount], ...]) -> tuple[tuple[str, Fraction], ...]:
    return tuple((r, Fraction(q)) for r, q in shape)


# -- quotas -------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Context:
    settings: Settings
    node_flavors: frozenset[str]
    shapes: dict[str, dict[str, Amount]]
    issues: list[Issue]

    def flavor_of(self, instance_type: str) -> str:
        """A quota names the SageMaker ``ml.*`` type; a plain EKS cluster's nodes carry the EC2 name."""
        if instance_type in self.node_flavors:
            return instance_type
        bare = instance_type.removeprefix("ml.")
        if bare in self.node_flavors:
            return bare
        return instance_type

    def shape(self, flavor: str) -> dict[str, Amount] | None:
        if flavor in self.shapes:
            return self.shapes[flavor]
        spec = catalog.lookup(flavor)
        if spec is None:
            return None
        found: dict[str, Amount] = {r: q for r, q in spec.allocatable().items() if is_tracked(r, self.settings)}
        self.shapes[flavor] = found
        return found


def resolve(entry: ResourceConfig, shape: Mapping[str, Amount] | None) -> tuple[dict[str, Amount], str | None]:
    """Amounts one ``ComputeQuotaResourceConfig`` stands for on its flavor, or the reason it cannot.

    - ``Count`` n > 0: n x the instance shape for every resource; ``Accelerators``, ``VCpu``,
      ``MemoryInGiB``, ``AcceleratorPartition`` given beside it override their own resource.
    - else ``Accelerators`` a: the accelerator = a; a / shape[accelerator] scales cpu and memory.
    - else ``AcceleratorPartition`` (p, c): ``nvidia.com/<p>`` = c; c / shape[p] scales cpu and memory.
    - else ``VCpu`` and/or ``MemoryInGiB`` as given, a missing one scaled by the other's ratio.
    ``VCpu`` / ``MemoryInGiB`` given always win over scaling. Scaled amounts are rounded down.
    """
    out: dict[str, Amount] = {}
    vcpu = exact(entry.vcpu) if entry.vcpu is not None else None
    mem = exact(entry.memory_gib * GIB) if entry.memory_gib is not None else None
    part = entry.accelerator_partition
    part_resource = f"nvidia.com/{part.type}" if part is not None else None

    if entry.count:
        if shape is None:
            return {}, "NoInstanceShape"
        out = {r: q * entry.count for r, q in shape.items()}
        if entry.accelerators is not None:
            out[accelerator_resource(shape)] = entry.accelerators
        if part is not None and part_resource is not None:
            out[part_resource] = part.count
        if vcpu is not None:
            out[CPU] = vcpu
        if mem is not None:
            out[MEMORY] = mem
        return out, None

    ratio: Fraction | None = None
    if entry.accelerators is not None or part is not None:
        if entry.accelerators is not None:
            if shape is None:
                if vcpu is not None and mem is not None:
                    return {NVIDIA_GPU: entry.accelerators, CPU: vcpu, MEMORY: mem}, None
                return {}, "NoInstanceShape"
            resource, amount = accelerator_resource(shape), entry.accelerators
        else:
            assert part is not None and part_resource is not None
            resource, amount = part_resource, part.count
            if shape is None:
                if vcpu is not None and mem is not None:
                    return {resource: amount, CPU: vcpu, MEMORY: mem}, None
                return {}, "NoInstanceShape"
        out[resource] = amount
        per_node = shape.get(resource, 0)
        if vcpu is None or mem is None:
            if per_node <= 0:
                return {}, "NoAcceleratorOnFlavor" if entry.accelerators is not None else "NoPartitionOnFlavor"
            ratio = Fraction(amount) / Fraction(per_node)
    elif vcpu is not None or mem is not None:
        if vcpu is None or mem is None:
            if shape is None:
                return {}, "NoInstanceShape"
            if vcpu is not None:
                base = shape.get(CPU, 0)
                ratio = Fraction(vcpu) / Fraction(base) if base else None
            else:
                assert mem is not None
                base = shape.get(MEMORY, 0)
                ratio = Fraction(mem) / Fraction(base) if base else None
            if ratio is None:
                return {}, "NoInstanceShape"
    else:
        return {}, None

    if vcpu is not None:
        out[CPU] = vcpu
    elif ratio is not None and shape is not None:
        out[CPU] = round_down(CPU, ratio * shape.get(CPU, 0))
    if mem is not None:
        out[MEMORY] = mem
    elif ratio is not None and shape is not None:
        out[MEMORY] = round_down(MEMORY, ratio * shape.get(MEMORY, 0))
    return out, None


def _team_nominal(quota: Quota, ctx: _Context) -> Table:
    nominal: dict[str, dict[str, Amount]] = defaultdict(dict)
    for entry in quota.resources:
        flavor = ctx.flavor_of(entry.instance_type)
        amounts, problem = resolve(entry, ctx.shape(flavor))
        if problem is not None:
            ctx.issues.append(_entry_issue(quota, entry, flavor, problem, "ComputeQuotaResources"))
            continue
        per_flavor = nominal[flavor]
        for r, q in amounts.items():
            per_flavor[r] = per_flavor.get(r, 0) + q
    return {f: dict(nominal[f]) for f in sorted(nominal)}


def _team_absolute(quota: Quota, ctx: _Context) -> dict[str, dict[str, Amount]]:
    caps: dict[str, dict[str, Amount]] = {}
    for entry in quota.absolute_borrow_limits:
        flavor = ctx.flavor_of(entry.instance_type)
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
        amounts, problem = resolve(entry, ctx.shape(flavor))
        if problem is not None:
            # A cap that cannot be computed must not turn into "no cap": nothing may be borrowed there.
            ctx.issues.append(_entry_issue(quota, entry, flavor, problem, "AbsoluteBorrowLimits"))
            amounts = {r: 0 for r in (ctx.shape(flavor) or {CPU: 0, MEMORY: 0, NVIDIA_GPU: 0})}
        per_flavor = caps.setdefault(flavor, {})
        for r, q in amounts.items():
            per_flavor[r] = min(per_flavor[r], q) if r in per_flavor else q
    return caps


def _entry_issue(quota: Quota, entry: ResourceConfig, flavor: str, problem: str, where: str) -> Issue:
    messages = {
        "NoInstanceShape": f"no node of flavor {flavor} and no catalog entry for {entry.instance_type}: "
        "its size is unknown",
        "NoAcceleratorOnFlavor": f"{entry.instance_type} has no accelerators to scale Accelerators by",
        "NoPartitionOnFlavor": f"no node of {entry.instance_type} exposes the MIG profile "
        f"{entry.accelerator_partition.type if entry.accelerator_partition else '?'}",
    }
    return Issue(
        "error",
        problem,
        f"{quota.name}/{entry.instance_type}",
        f"quota {quota.name!r} (team {quota.team}) {where}: {messages[problem]}",
    )


# -- the pool -----------------------------------------------------------------------------------


def compute(snapshot: Snapshot) -> PoolResult:
    """Capacity, allocation, the pool each team sees and every grant, with its derivation."""
    settings = snapshot.settings
    capacity, excluded, node_counts, shapes = _observe_nodes(snapshot.nodes, settings)
    issues: list[Issue] = []
    ctx = _Context(settings, frozenset(node_counts), dict(shapes), issues)

    quotas = _unique_teams(snapshot.quotas, issues, settings)
    nominals = {q.team: _team_nominal(q, ctx) for q in quotas}
    absolutes = {q.team: _team_absolute(q, ctx) for q in quotas}

    flavors = sorted(set(capacity) | {f for n in nominals.values() for f in n})
    resources = sorted(
        {r for f in capacity.values() for r in f}
        | {r for n in nominals.values() for f in n.values() for r in f}
        | {r for a in absolutes.values() for f in a.values() for r in f}
    )

    def table() -> dict[str, dict[str, Amount]]:
        return {f: dict.fromkeys(resources, 0) for f in flavors}

    cap = table()
    for f, per in capacity.items():
        cap[f].update(per)
    allocated, lent = table(), table()
    for q in quotas:
        if not q.enabled:
            continue
        for f, per in nominals[q.team].items():
            for r, amount in per.items():
                allocated[f][r] += amount
                if q.strategy is not Strategy.DONT_LEND:
                    lent[f][r] += amount
    unallocated, shortfall = table(), table()
    for f in flavors:
        for r in resources:
            diff = cap[f][r] - allocated[f][r]
            unallocated[f][r] = exact(max(diff, 0))
            shortfall[f][r] = exact(max(-diff, 0))
    for f in flavors:
        short = [r for r in resources if shortfall[f][r] > 0]
        if short:
            issues.append(
                Issue("warning", "Shortfall", f, f"{f}: quotas exceed eligible capacity for {', '.join(short)}")
            )

    sharing = snapshot.scheduler_config.idle_resource_sharing
    teams: dict[str, TeamGrant] = {}
    for q in quotas:
        nominal = table()
        for f, per in nominals[q.team].items():
            nominal[f].update({r: exact(a) for r, a in per.items()})
        lends = q.enabled and q.strategy is not Strategy.DONT_LEND
        lending = {f: {r: (nominal[f][r] if lends else 0) for r in resources} for f in flavors}
        borrowing, why = table(), {f: dict[str, Derivation]() for f in flavors}
        percent = q.borrow_limit if q.borrow_limit is not None else settings.default_borrow_limit
        absolute = absolutes[q.team]
        for f in flavors:
            for r in resources:
                own_lent = nominal[f][r] if lends else 0
                pool = exact((unallocated[f][r] if sharing else 0) + lent[f][r] - own_lent)
                derivation = _borrow(q, pool, percent, absolute.get(f, {}).get(r), r)
                borrowing[f][r] = derivation.limit
                why[f][r] = derivation
        teams[q.team] = TeamGrant(
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
        issues=tuple(sorted(set(issues), key=lambda i: (i.severity, i.code, i.subject))),
        idle_resource_sharing=sharing,
        fair_share=snapshot.scheduler_config.fair_share,
        shapes={f: ctx.shapes[f] for f in sorted(ctx.shapes)},
    )


def _borrow(quota: Quota, pool: Amount, percent: int, absolute: Amount | None, resource: str) -> Derivation:
    """``min(BorrowLimit% x pool, absolute cap, pool)`` rounded down; 0 unless LendAndBorrow and enabled."""
    percent_cap = percent_of(resource, percent, pool)
    if not quota.enabled:
        return Derivation(pool, percent, percent_cap, absolute, 0, Bound.DISABLED)
    if quota.strategy is not Strategy.LEND_AND_BORROW:
        return Derivation(pool, percent, percent_cap, absolute, 0, Bound.STRATEGY)
    limit: Amount = min(percent_cap, round_down(resource, pool))
    bound = Bound.PERCENTAGE if percent_cap < pool else Bound.POOL
    if absolute is not None:
        capped = round_down(resource, absolute)
        if capped <= limit:
            limit, bound = capped, Bound.ABSOLUTE
    return Derivation(pool, percent, percent_cap, absolute, exact(limit), bound)


def _unique_teams(quotas: Iterable[Quota], issues: list[Issue], settings: Settings) -> list[Quota]:
    """One quota per team: the edge rejects duplicates; here the first by name wins, reported. A team
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
