"""What the recompute and the node watcher report, chosen in one place: their logs, counters and gauges.

The gauges carry exactly the dimensions the dashboard's and the alarms' ``SCHEMA()`` name
(``infra/constructs/observability.py``); ``tests/infra`` ties the two together.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.metrics import MetricUnit

from idleshare import names
from idleshare.domain.coexistence import DYNAMIC_QUOTA_ORCHESTRATOR_ACTIVE
from idleshare.domain.model import is_accelerator
from idleshare.metric_specs import spec
from idleshare.runtime.observability import logger, metrics
from idleshare.service.batch import BatchEvents

if TYPE_CHECKING:
    from idleshare.adapters.ports import RequestAnswer
    from idleshare.domain.pool import PoolResult
    from idleshare.domain.usage import UsageSample
    from idleshare.errors import PermanentError
    from idleshare.service.recompute import Outcome
    from idleshare.service.watcher import WatchReport


class RecomputeReport(BatchEvents):
    """A batch's events as the recompute Lambda logs and counts them."""

    def not_yet(self, cluster_id: str, seconds: int) -> None:
        logger.info(
            "trailing recompute handed back until its window closes", extra={"cluster": cluster_id, "seconds": seconds}
        )
        metrics.add_metric(name=names.METRIC_TRAILING_DEFERRED, unit=MetricUnit.Count, value=1)

    def coalesced(self, cluster_id: str) -> None:
        metrics.add_metric(name=names.METRIC_RECOMPUTES_COALESCED, unit=MetricUnit.Count, value=1)

    def deduplicated(self, cluster_id: str, answer: RequestAnswer) -> None:
        logger.info(
            "recalculation request already answered",
            extra={
                "cluster": cluster_id,
                "requestId": answer.request_id,
                "generation": answer.generation,
                "changed": answer.changed,
            },
        )
        metrics.add_metric(name=names.METRIC_RECALCULATIONS_DEDUPLICATED, unit=MetricUnit.Count, value=1)

    def failed_permanently(self, cluster_id: str, error: PermanentError) -> None:
        logger.error("recompute failed permanently", extra={"cluster": cluster_id, "error": str(error)})
        metrics.add_metric(name=names.METRIC_PERMANENT_FAILURES, unit=MetricUnit.Count, value=1)

    def recomputed(self, outcome: Outcome) -> None:
        emit_recompute(outcome)

    def out_of_time(self, cluster_id: str, remaining_seconds: float) -> None:
        logger.warning(
            "too little time left to recompute: handed back",
            extra={"cluster": cluster_id, "remainingSeconds": round(remaining_seconds, 1)},
        )
        metrics.add_metric(name=names.METRIC_RECOMPUTES_OUT_OF_TIME, unit=MetricUnit.Count, value=1)

    def handed_back(self, delays: dict[str, int], changed: int) -> None:
        extra = {"records": len(delays), "changed": changed, "backoffSeconds": sorted(set(delays.values()))}
        if changed < len(delays):  # those come back after the queue's visibility timeout: late, not lost
            logger.warning("failed records not all handed back with their backoff", extra=extra)
        else:
            logger.info("failed records handed back", extra=extra)
        metrics.add_metric(name=names.METRIC_RECORDS_HANDED_BACK, unit=MetricUnit.Count, value=len(delays))


def emit_recompute(outcome: Outcome) -> None:
    """A recompute's log line, counters and gauges (per flavor and accelerator, excluded nodes, the pool's
    named issues, objects left to another field manager, objects of a wanted name that idleshare did not create,
    objects the API server refused)."""
    result = outcome.result
    logger.info(
        "recomputed",
        extra={
            "cluster": outcome.cluster_id,
            "generation": outcome.generation,
            "changed": outcome.changed,
            "applied": outcome.applied,
            "deleted": outcome.deleted,
            "summary": result.summary() if result else "",
        },
    )
    metrics.add_metric(name=names.METRIC_OBJECTS_APPLIED, unit=MetricUnit.Count, value=outcome.applied)
    metrics.add_metric(name=names.METRIC_RECOMPUTE_DURATION, unit=MetricUnit.Milliseconds, value=outcome.duration_ms)
    if result is None:
        return
    _warn_left_alone(outcome)
    _accelerator_gauges(outcome.cluster_id, result)
    for reason, count in Counter(str(r) for r in result.excluded_nodes.values()).items():
        gauge(outcome.cluster_id, names.METRIC_EXCLUDED_NODES, float(count), reason=reason)
    # per severity, not per issue code: the codes are in the pool document and the log line (bounded metrics)
    for severity, count in Counter(issue.severity for issue in result.issues).items():
        gauge(outcome.cluster_id, names.METRIC_POOL_ISSUES, float(count), severity=severity)  # METRIC_DIM_SEVERITY
    # trouble gauges: emitted only when above 0 (their alarms treat missing data as not breaching), so a healthy
    # cluster pays nothing for them; cluster + service exactly (the alarms' dimensions)
    overridden = sum(1 for issue in result.issues if issue.code == DYNAMIC_QUOTA_ORCHESTRATOR_ACTIVE)
    for name, value in (
        (names.METRIC_UNGOVERNED_FLAVORS, len(result.ungoverned_flavors)),
        (names.METRIC_FOREIGN_FIELD_MANAGER, len(outcome.conflicts)),
        (names.METRIC_FOREIGN_OBJECTS, len(outcome.foreign)),
        (names.METRIC_FIELD_MANAGER_FIGHTS, len(outcome.fights)),
        (names.METRIC_OBJECTS_REFUSED, len(outcome.refused) + len(outcome.waiting)),
        (names.METRIC_QUOTA_OVERRIDDEN, overridden),
    ):
        trouble(outcome.cluster_id, name, float(value))


def _warn_left_alone(outcome: Outcome) -> None:
    """Warnings for what a recompute left alone: objects of another field manager, objects idleshare did not
    create, objects the API server refused (and those that need them), nodes it could not read."""
    if outcome.conflicts:
        logger.warning("objects left to another field manager", extra={"conflicts": outcome.conflicts})
    if outcome.foreign:
        logger.warning(
            "objects idleshare did not create hold names it wants: left alone",
            extra={"cluster": outcome.cluster_id, "foreign": outcome.foreign},
        )
    if outcome.fights:
        logger.warning(
            "objects another field manager keeps rewriting: idleshare backs off",
            extra={"cluster": outcome.cluster_id, "fights": [f.describe() for f in outcome.fights[:5]]},
        )
    if outcome.refused or outcome.waiting:
        logger.warning(
            "objects the API server refused: everything else was written",
            extra={"cluster": outcome.cluster_id, "refused": outcome.refused[:5], "waiting": outcome.waiting[:5]},
        )
    if outcome.unreadable:  # excluded as Unreadable (counted in ExcludedNodes); why, for the operator
        logger.warning(
            "nodes that could not be read are excluded",
            extra={"cluster": outcome.cluster_id, "count": len(outcome.unreadable), "errors": outcome.unreadable[:5]},
        )


def metric_resource(resource: str) -> str:
    """The ``resource`` dimension of an accelerator resource: its name, every MIG profile folded into
    ``nvidia.com/mig-*`` (the number of metrics is bounded by the kinds of accelerator, not the profiles)."""
    return MIG_FOLDED if resource.startswith(MIG_PREFIX) else resource


MIG_PREFIX = "nvidia.com/mig-"
MIG_FOLDED = MIG_PREFIX + "*"


def _accelerator_gauges(cluster_id: str, result: PoolResult) -> None:
    """Per accelerator resource (summed over the flavors: per-flavor figures are in the pool document) with
    capacity or a shortfall: unallocated, and the shortfall when there is one."""
    unallocated: defaultdict[str, float] = defaultdict(float)
    shortfall: defaultdict[str, float] = defaultdict(float)
    seen: set[str] = set()
    for flavor in result.flavors:
        for resource in result.resources:
            if not is_accelerator(resource):
                continue
            if not result.capacity[flavor][resource] and not result.shortfall[flavor][resource]:
                continue
            r = metric_resource(resource)
            seen.add(r)
            unallocated[r] += float(result.unallocated[flavor][resource])
            shortfall[r] += float(result.shortfall[flavor][resource])
    for r in sorted(seen):
        gauge(cluster_id, names.METRIC_UNALLOCATED, unallocated[r], resource=r)
        trouble(cluster_id, names.METRIC_SHORTFALL, shortfall[r], resource=r)


def trouble(cluster_id: str, name: str, value: float, **dims: str) -> None:
    """A gauge of something wrong (declared ``when_positive``), emitted only when above 0: missing data is all is
    well (its alarm treats missing data as not breaching), and a healthy cluster pays for no such metric."""
    if not spec(name).when_positive:
        raise ValueError(f"metric {name!r} is not declared when_positive (idleshare.metric_specs)")
    if value > 0:
        gauge(cluster_id, name, value, **dims)


def gauge(cluster_id: str, name: str, value: float, **dims: str) -> None:
    """One metric of the cluster with exactly its declared dimensions and unit (``idleshare.metric_specs``: what the
    dashboard's and alarms' SCHEMA() name); other dimensions are a bug, refused. Powertools adds ``service`` from
    POWERTOOLS_SERVICE_NAME when it is set, so it is always set here."""
    from aws_lambda_powertools.metrics import single_metric

    declared = spec(name)
    given = {names.METRIC_DIM_CLUSTER, *dims}
    if given != set(declared.dims):
        raise ValueError(f"metric {name!r} emitted with dimensions {sorted(given)}, declared {list(declared.dims)}")
    unit = MetricUnit(declared.unit)

    with single_metric(
        name=name,
        unit=unit,
        value=value,
        namespace=names.METRICS_NAMESPACE,
        default_dimensions={"service": names.SERVICE},
    ) as m:
        m.add_dimension(name=names.METRIC_DIM_CLUSTER, value=cluster_id)
        for k, v in dims.items():
            m.add_dimension(name=k, value=v)


def emit_watch(report: WatchReport) -> None:
    """A node-watch invocation's log line and its per-cluster metrics: how long the watch ran (the "watch not
    running" alarm), the events it published, its failures and relists."""
    extra = {
        "cluster": report.cluster_id,
        "lease": report.lease,
        "resumed_from": report.resumed_from,
        "resource_version": report.resource_version,
        "published": report.published,
        "changes": dict(report.changes),
        "ignored": report.ignored,
        "watch_requests": report.watch_requests,
        "bookmarks": report.bookmarks,
        "relists": report.relists,
        "checkpoints": report.checkpoints,
        "superseded": report.superseded,
        "watched_seconds": round(report.watched_seconds, 1),
    }
    if report.failures:
        logger.warning("node watch had failures", extra={**extra, "failures": report.failures[:10]})
    else:
        logger.info("node watch handed over", extra=extra)
    gauge(report.cluster_id, names.METRIC_NODE_WATCH_SECONDS, report.watched_seconds)
    gauge(report.cluster_id, names.METRIC_NODE_CHANGES_PUBLISHED, report.published)
    trouble(report.cluster_id, names.METRIC_NODE_WATCH_FAILURES, len(report.failures))
    trouble(report.cluster_id, names.METRIC_NODE_WATCH_RELISTS, report.relists)


def emit_usage(sample: UsageSample) -> None:
    """A usage sample's gauges (accelerators only, per resource: idle, borrowed, idle while pending when some), its
    ``team usage`` log line (per team in use, borrowed, pending workloads); and a log line naming each team that waits
    while its flavor is idle, with Kueue's reason (the IdleWhilePending alarm's context). What the sample could not
    read has no gauge (a gap, never a 0): a log line names each such value."""
    cid = sample.cluster_id
    _team_usage(sample)
    _flavor_usage(sample)
    _unbound_usage(sample)
    if sample.unreadable:
        _warn_rows("usage values not read: no gauge for them (a gap, not zero)", cid, "unreadable", [
            {"object": u.object, "field": u.field, "problem": u.problem, "flavor": u.flavor, "resource": u.resource}
            for u in sample.unreadable
        ])  # fmt: skip
    if sample.above_limit:
        _warn_rows(
            "teams borrow above their current limit (lowered after Kueue admitted the work; Kueue does not evict it)",
            cid, "aboveLimit", [
                {"team": a.team, "flavor": a.flavor, "resource": a.resource, "borrowed": str(a.borrowed),
                 "limit": str(a.limit)}
                for a in sample.above_limit
            ],
        )  # fmt: skip


def _team_usage(sample: UsageSample) -> None:
    """One ``team usage`` log line: per team its pending workloads (when read) and, per accelerator flavor and
    resource in use, in use and borrowed. Not metrics: a metric per team would make the bill grow with the teams
    (the usage API and ``idleshare usage`` keep the history; CloudWatch Logs Insights queries the line)."""
    rows: list[dict[str, Any]] = []
    for team, usage in sorted(sample.teams.items()):
        row: dict[str, Any] = {"team": team}
        if usage.pending is not None:  # unreadable: left out (a gap), never a 0
            row["pending"] = usage.pending
        in_use = {
            f"{flavor}/{resource}": [str(used), str(usage.borrowed[flavor][resource])]
            for flavor, per in usage.in_use.items()
            for resource, used in per.items()
            if is_accelerator(resource) and (used or usage.borrowed[flavor][resource])
        }
        if in_use:
            row["inUseBorrowed"] = in_use
        rows.append(row)
    if rows:
        logger.info(TEAM_USAGE_LOG, extra={"cluster": sample.cluster_id, "teams": rows})


TEAM_USAGE_LOG = "team usage"
"""The message of the per-team usage log line (``teams``: team, pending, ``inUseBorrowed`` per flavor/resource:
[in use, borrowed])."""


def _flavor_usage(sample: UsageSample) -> None:
    """Per accelerator resource with capacity or use (summed over the flavors, MIG profiles folded): idle, borrowed
    and, when some, idle while pending; and the warning naming each team that waits while its flavor is idle."""
    cid = sample.cluster_id
    waiting: dict[tuple[str, str], float] = {(i.flavor, i.resource): float(i.idle) for i in sample.idle_while_pending}
    idle: defaultdict[str, float] = defaultdict(float)
    borrowed: defaultdict[str, float] = defaultdict(float)
    pending: defaultdict[str, float] = defaultdict(float)
    seen: set[str] = set()
    for flavor, usages in sample.flavors.items():
        for resource, fu in usages.items():
            if not is_accelerator(resource) or not (fu.capacity or fu.in_use):
                continue
            r = metric_resource(resource)
            seen.add(r)
            idle[r] += float(fu.idle)
            borrowed[r] += float(fu.borrowed)
            pending[r] += waiting.get((flavor, resource), 0.0)
    for r in sorted(seen):
        gauge(cid, names.METRIC_FLAVOR_IDLE, idle[r], resource=r)
        gauge(cid, names.METRIC_FLAVOR_BORROWED, borrowed[r], resource=r)
        trouble(cid, names.METRIC_IDLE_WHILE_PENDING, pending[r], resource=r)
    if sample.idle_while_pending:
        _warn_rows("accelerators idle while work is pending", cid, "idleWhilePending", [
            {"team": i.team, "flavor": i.flavor, "resource": i.resource, "idle": str(i.idle), "pendingReason": i.reason,
             **({"cause": str(i.cause.cause), "why": i.cause.text} if i.cause else {})}
            for i in sample.idle_while_pending
        ])  # fmt: skip


def _unbound_usage(sample: UsageSample) -> None:
    """The admitted pods no node has taken: their count and the oldest's age, and a warning listing them; not read:
    no gauge, a warning."""
    cid = sample.cluster_id
    if sample.unbound is None:
        logger.warning("unbound pods not read", extra={"cluster": cid, "error": sample.unbound_error})
        return
    trouble(cid, names.METRIC_UNBOUND_PODS, float(sample.unbound_pods()))
    oldest = sample.oldest_unbound_seconds()
    trouble(cid, names.METRIC_UNBOUND_PODS_OLDEST_SECONDS, float(oldest))
    if sample.unbound:
        _warn_rows("admitted pods no node has taken", cid, "unbound", [
            {"team": u.team, "flavor": u.flavor, "pods": u.pods, "workloads": u.workloads,
             "since": u.since.isoformat(), "reason": u.reason}
            for u in sample.unbound
        ], oldestSeconds=oldest)  # fmt: skip


def _warn_rows(message: str, cluster_id: str, key: str, rows: list[dict[str, Any]], **more: Any) -> None:
    """A warning about a cluster listing ``rows`` under ``key`` (and ``more`` keys before it)."""
    logger.warning(message, extra={"cluster": cluster_id, **more, key: rows})


def usage_failed(cluster_id: str, error: str) -> None:
    """A usage sample that could not be taken (recorded as a gap) or recorded."""
    logger.warning("usage sample failed", extra={"cluster": cluster_id, "error": error})
    gauge(cluster_id, names.METRIC_USAGE_SAMPLE_FAILURES, 1)


def watch_failed(cluster_id: str) -> None:
    """A node-watch invocation that raised: logged with its traceback and counted as a failure."""
    logger.exception("node watch failed", extra={"cluster": cluster_id})
    gauge(cluster_id, names.METRIC_NODE_WATCH_FAILURES, 1)
