"""What the admin HTTP API does, without HTTP: compute quotas and the scheduler config (SageMaker's shapes,
versioned), the read side (pool, grants with their derivation, history, excluded nodes) and explicit
recalculation requests with their receipts.

Rules this module keeps:

- A write takes an accepted request (:mod:`idleshare.parse.requests`: the API parsed the body with its
  Shape, every key, bound and botocore shape checked there). What needs the cluster record is checked
  here: the team's queue names under the cluster's namespace prefix (:class:`InputError` naming
  ``ComputeQuotaTarget.TeamName``, the API answers 422); a request wrong as a whole (a bad paging token)
  raises :class:`BadRequestError` (400). Nothing is stored and nothing is published when a check fails.
- Every quota / scheduler config write publishes its event on idleshare's bus (``Compute Quota Changed`` /
  ``Scheduler Config Changed``), so a recompute follows. The write is the truth: if publishing fails after
  it, the failure is logged and the safety-net schedule recomputes the cluster within minutes.
- Unknown cluster, quota, team or receipt -> :class:`~idleshare.errors.NotFoundError`; version
  conflicts and taken names come from the store (``StaleVersionError``, ``AlreadyExistsError``).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Mapping, Sized
from dataclasses import KW_ONLY, dataclass
from datetime import UTC, datetime
from typing import Any

from idleshare import names, pages, timings
from idleshare.adapters.ports import (
    AdminStore,
    ClusterRecord,
    EventPublisher,
    PauseEntry,
    PauseState,
    PoolRecord,
    RecalculationReceipt,
    StoredQuota,
)
from idleshare.domain.cluster_settings import engine_settings
from idleshare.domain.kueue import quota_flavors_problem
from idleshare.domain.kueue_versions import HUB_ONLY
from idleshare.domain.naming import team_name_problem
from idleshare.errors import IdleshareError, NotFoundError, PermanentError
from idleshare.pages import (
    EXCLUDED_PAGE_MAX,
    GRANTS_PAGE_MAX,
    ISSUES_PAGE_MAX,
    POOL_EXCLUDED_SAMPLE,
    POOL_ISSUES_SAMPLE,
    POOL_SAMPLE_MAX_BYTES,
    POOL_TEAMS_SAMPLE,
)
from idleshare.parse.errors import FieldError, InputError
from idleshare.parse.quotas import SchedulerConfig
from idleshare.parse.requests import (
    SOURCE,
    Accepted,
    CreateQuota,
    Pause,
    Recalculate,
    SchedulerConfigRequest,
    UpdateQuota,
)
from idleshare.service.paging import BadRequestError, decode_token, encode_token, first_entries, page_of, page_start

log = logging.getLogger(__name__)

DEFAULT_MAX_RESULTS = pages.QUOTAS_PAGE_MAX

_BARE_SCHEDULER_KEYS = frozenset(SchedulerConfig.__struct_fields__)
DEFAULT_SCHEDULER_CONFIG: dict[str, Any] = {
    "PriorityClasses": [],
    "FairShare": "Enabled",
    "IdleResourceSharing": "Enabled",
}


@dataclass(frozen=True, slots=True)
class RecalcAnswer:
    """``done``: the receipt arrived while waiting (``body`` is the receipt), else ``body`` says Requested."""

    done: bool
    body: dict[str, Any]


# ------------------------------------------------------------------------------------ shapes out
def cluster_json(cluster: ClusterRecord) -> dict[str, Any]:
    out = {"ClusterId": cluster.cluster_id, "EksClusterName": cluster.eks_cluster_name}
    if cluster.hyperpod_cluster_arn:
        out["HyperPodClusterArn"] = cluster.hyperpod_cluster_arn
    return out


def describe_quota(cluster_id: str, quota: StoredQuota) -> dict[str, Any]:
    """DescribeComputeQuota's shape (no ARN: idleshare's quotas are not SageMaker resources), plus ClusterId."""
    body = quota.body
    out: dict[str, Any] = {"ComputeQuotaId": body.get("ComputeQuotaId"), "Name": quota.name}
    if body.get("Description") is not None:
        out["Description"] = body["Description"]
    out.update(
        ComputeQuotaVersion=quota.version,
        Status="Created",
        ClusterId=cluster_id,
        ComputeQuotaConfig=body.get("ComputeQuotaConfig") or {},
        ComputeQuotaTarget=body.get("ComputeQuotaTarget"),
        ActivationState=body.get("ActivationState") or "Enabled",
        CreationTime=body.get("CreationTime") or quota.created_at,
        LastModifiedTime=body.get("LastModifiedTime") or quota.updated_at,
    )
    if body.get("Tags"):
        out["Tags"] = body["Tags"]
    return out


def scheduler_json(cluster_id: str, stored: StoredQuota | None) -> dict[str, Any]:
    if stored is None:
        return {
            "ClusterId": cluster_id,
            "SchedulerConfig": dict(DEFAULT_SCHEDULER_CONFIG),
            "SchedulerConfigVersion": 0,
            "Status": "Default",
        }
    body = stored.body
    config = body if set(body) <= _BARE_SCHEDULER_KEYS else body.get("SchedulerConfig") or {}
    return {
        "ClusterId": cluster_id,
        "ClusterSchedulerConfigId": stored.name,
        "SchedulerConfig": config,
        "SchedulerConfigVersion": stored.version,
        "Status": "Created",
        "CreationTime": stored.created_at,
        "LastModifiedTime": stored.updated_at,
    }


def receipt_json(receipt: RecalculationReceipt) -> dict[str, Any]:
    return {
        "requestId": receipt.request_id,
        "cluster": receipt.cluster_id,
        "status": receipt.status,
        "generation": receipt.generation,
        "changed": receipt.changed,
        "message": receipt.message,
        "completedAt": receipt.completed_at,
    }


def pause_json(cluster_id: str, state: PauseState | None) -> dict[str, Any]:
    """The pause switch as the API answers it (``paused`` False and nothing else: never paused)."""
    if state is None:
        return {"cluster": cluster_id, "paused": False}
    out: dict[str, Any] = {
        "cluster": cluster_id,
        "paused": state.paused,
        "since": state.since,
        "by": state.by,
        "reason": state.reason,
    }
    if state.paused:
        out.update(skippedRecomputes=state.skipped, lastSkippedAt=state.last_skipped_at or None)
    return out


def pause_entry_json(entry: PauseEntry) -> dict[str, Any]:
    return {"action": entry.action, "at": entry.at, "by": entry.by, "reason": entry.reason}


# ----------------------------------------------------------------------------------- the team
def _team_name_errors(document: Mapping[str, Any], cluster: ClusterRecord) -> list[FieldError]:
    """The team's namespace and queues must have valid names in this cluster (its namespace prefix): the
    one check of a quota write that needs the cluster record (the request models made every other)."""
    target = document.get("ComputeQuotaTarget")
    team = target.get("TeamName") if isinstance(target, Mapping) else None
    if not isinstance(team, str) or not team:
        return []
    problem = team_name_problem(team, engine_settings(cluster.settings))
    return [FieldError("ComputeQuotaTarget.TeamName", problem)] if problem else []


QUOTA_RESOURCES = "ComputeQuotaConfig.ComputeQuotaResources"


def _instance_types(body: Mapping[str, Any]) -> list[str]:
    config = body.get("ComputeQuotaConfig")
    entries = config.get("ComputeQuotaResources") if isinstance(config, Mapping) else None
    return [
        e["InstanceType"] for e in entries or () if isinstance(e, Mapping) and isinstance(e.get("InstanceType"), str)
    ]


def _flavor_limit_errors(
    document: Mapping[str, Any], others: list[StoredQuota], pool: PoolRecord | None
) -> list[FieldError]:
    """The cluster's quotas together may name only as many instance types as Kueue holds in one resource group
    (domain/kueue.quota_flavors_problem; the Kueue and the resources of the cluster's last pool, else the newest
    Kueue's): past it, 422 naming the first entry past it. The recompute governs the rest the same way."""
    document_of_pool = pool.pool if pool is not None else {}
    release = (document_of_pool.get("kueueApi") or {}).get("kueue") or HUB_ONLY.release
    found = quota_flavors_problem(
        _instance_types(document),
        [t for q in others for t in _instance_types(q.body)],
        document_of_pool.get("flavors") or (),
        release,
        len(document_of_pool.get("resources") or ()),
    )
    if found is None:
        return []
    index, why = found
    return [FieldError(f"{QUOTA_RESOURCES}[{index}].InstanceType", why)]


def _raise(errors: list[FieldError]) -> None:
    if errors:
        raise InputError(SOURCE, errors)


def _issues(record: PoolRecord) -> list[Any]:
    issues = record.pool.get("issues")
    return issues if isinstance(issues, list) else []


def _summary(items: Sized, shown: Sized, route: str, **counts: Any) -> dict[str, Any]:
    """A paged part of the pool document: how many there are (``counts`` by kind), how many are shown, where the rest
    are."""
    return {"total": len(items), **counts, "shown": len(shown), "route": route}


def _by_code(issues: list[Any]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for issue in issues:
        code = str(issue.get("code")) if isinstance(issue, Mapping) else "?"
        counts[code] = counts.get(code, 0) + 1
    return dict(sorted(counts.items()))


def _teams(record: PoolRecord) -> dict[str, Any]:
    teams = record.pool.get("teams")
    return teams if isinstance(teams, dict) else {}


def _excluded(record: PoolRecord) -> dict[str, str]:
    excluded = record.pool.get("excludedNodes")
    return {str(k): str(v) for k, v in excluded.items()} if isinstance(excluded, dict) else {}


def _by_reason(excluded: Mapping[str, str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for reason in excluded.values():
        counts[reason] = counts.get(reason, 0) + 1
    return dict(sorted(counts.items()))


# -------------------------------------------------------------------------------------- service
@dataclass
class Admin:
    """The admin operations over the store and idleshare's bus (``publisher`` None: read-only); a recalculation
    waits for its receipt on ``clock`` and ``sleep``, polling every ``poll_interval`` seconds."""

    store: AdminStore
    publisher: EventPublisher | None
    _: KW_ONLY
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    poll_interval: float = 0.5
    new_request_id: Callable[[], str] = lambda: str(uuid.uuid4())
    now: Callable[[], str] = lambda: datetime.now(UTC).isoformat(timespec="seconds")

    # ------------------------------------------------------------------------------- plumbing
    def cluster(self, cluster_id: str) -> ClusterRecord:
        found = self.store.get_cluster(cluster_id)
        if found is None:
            raise NotFoundError(f"cluster {cluster_id!r} is not governed by idleshare", operation="get_cluster")
        return found

    def _writable(self) -> EventPublisher:
        if self.publisher is None:  # checked before writing: a write nobody hears of would wait for the schedule
            raise PermanentError("no event bus configured for the admin API", operation="publish")
        return self.publisher

    def _publish(self, publisher: EventPublisher, detail_type: str, detail: dict[str, Any]) -> None:
        try:
            publisher.publish(detail_type, detail)
        except IdleshareError:
            log.exception(
                "event not published after a stored change; the scheduled recompute will pick the change up",
                extra={"detail_type": detail_type, "detail": detail},
            )

    def _limit_errors(self, cluster_id: str, document: Mapping[str, Any], name: str | None) -> list[FieldError]:
        others = [q for q in self.store.list_quotas(cluster_id) if q.name != name]
        return _flavor_limit_errors(document, others, self.store.get_pool(cluster_id))

    def list_clusters(self) -> dict[str, Any]:
        return {"Clusters": [cluster_json(c) for c in self.store.list_clusters()]}

    # --------------------------------------------------------------------------------- quotas
    def create_quota(self, cluster_id: str, request: Accepted[CreateQuota]) -> dict[str, Any]:
        """CreateComputeQuota minus ClusterArn: version 1, a fresh ComputeQuotaId, ``Compute Quota Changed``."""
        cluster = self.cluster(cluster_id)
        document = request.given()
        _raise(_team_name_errors(document, cluster))
        _raise(self._limit_errors(cluster_id, document, name=None))
        publisher = self._writable()
        stored = self.store.create_quota(cluster_id, document)
        self._publish(
            publisher,
            names.DT_QUOTA_CHANGED,
            {"cluster": cluster_id, "quotaName": stored.name, "reason": "CreateComputeQuota (admin API)"},
        )
        return describe_quota(cluster_id, stored)

    def describe_quota(self, cluster_id: str, name: str) -> dict[str, Any]:
        self.cluster(cluster_id)
        return describe_quota(cluster_id, self._quota(cluster_id, name))

    def _quota(self, cluster_id: str, name: str) -> StoredQuota:
        found = self.store.get_quota(cluster_id, name)
        if found is None:
            raise NotFoundError(f"compute quota {name!r} not found in cluster {cluster_id!r}", operation="get_quota")
        return found

    def list_quotas(
        self,
        cluster_id: str,
        *,
        name_contains: str | None = None,
        activation_state: str | None = None,
        max_results: int = DEFAULT_MAX_RESULTS,
        next_token: str | None = None,
    ) -> dict[str, Any]:
        """ListComputeQuotas: by name, ``NameContains`` (a substring), ``ActivationState``, paged."""
        self.cluster(cluster_id)
        after = decode_token(next_token)
        start = after.get("after") if after else None
        if after is not None and not isinstance(start, str):
            raise BadRequestError("query", [FieldError("NextToken", "is not a token this API issued")])
        quotas = sorted(self.store.list_quotas(cluster_id), key=lambda q: q.name)
        described = [
            describe_quota(cluster_id, q)
            for q in quotas
            if (start is None or q.name > start) and (not name_contains or name_contains in q.name)
        ]
        if activation_state:
            described = [d for d in described if d["ActivationState"] == activation_state]
        page, more = pages.take(described, max_results)  # by size too: tags of 4-byte letters are 12 bytes each
        out: dict[str, Any] = {"ComputeQuotaSummaries": page}
        if more:
            out["NextToken"] = encode_token({"after": page[-1]["Name"]})
        return out

    def update_quota(self, cluster_id: str, name: str, request: Accepted[UpdateQuota]) -> dict[str, Any]:
        """UpdateComputeQuota: fields not given keep their value; a stale TargetVersion -> StaleVersionError."""
        cluster = self.cluster(cluster_id)
        current = self._quota(cluster_id, name)
        document = {k: v for k, v in current.body.items() if k in CreateQuota.__struct_fields__ and v is not None}
        document.update(request.given("TargetVersion"))
        _raise(_team_name_errors(document, cluster))
        _raise(self._limit_errors(cluster_id, document, name=name))
        publisher = self._writable()
        stored = self.store.update_quota(cluster_id, name, document, target_version=request.fields.TargetVersion)
        self._publish(
            publisher,
            names.DT_QUOTA_CHANGED,
            {"cluster": cluster_id, "quotaName": name, "reason": "UpdateComputeQuota (admin API)"},
        )
        return describe_quota(cluster_id, stored)

    def delete_quota(self, cluster_id: str, name: str, version: int | None = None) -> None:
        self.cluster(cluster_id)
        publisher = self._writable()
        self.store.delete_quota(cluster_id, name, target_version=version)
        self._publish(
            publisher,
            names.DT_QUOTA_CHANGED,
            {"cluster": cluster_id, "quotaName": name, "reason": "DeleteComputeQuota (admin API)"},
        )

    # ------------------------------------------------------------------------ scheduler config
    def get_scheduler_config(self, cluster_id: str) -> dict[str, Any]:
        self.cluster(cluster_id)
        return scheduler_json(cluster_id, self.store.get_scheduler_config(cluster_id))

    def put_scheduler_config(self, cluster_id: str, request: Accepted[SchedulerConfigRequest]) -> dict[str, Any]:
        """No TargetVersion: create (one already there -> AlreadyExistsError); with it: update."""
        self.cluster(cluster_id)
        publisher = self._writable()
        version = request.fields.target_version()
        stored = self.store.put_scheduler_config(cluster_id, request.given("TargetVersion"), target_version=version)
        operation = "CreateClusterSchedulerConfig" if version is None else "UpdateClusterSchedulerConfig"
        self._publish(
            publisher, names.DT_SCHEDULER_CHANGED, {"cluster": cluster_id, "reason": f"{operation} (admin API)"}
        )
        return scheduler_json(cluster_id, stored)

    def delete_scheduler_config(self, cluster_id: str, version: int | None = None) -> None:
        self.cluster(cluster_id)
        publisher = self._writable()
        self.store.delete_scheduler_config(cluster_id, target_version=version)
        self._publish(
            publisher,
            names.DT_SCHEDULER_CHANGED,
            {"cluster": cluster_id, "reason": "DeleteClusterSchedulerConfig (admin API)"},
        )

    # ------------------------------------------------------------------------------ read side
    def _pool(self, cluster_id: str) -> PoolRecord:
        self.cluster(cluster_id)
        record = self.store.get_pool(cluster_id)
        if record is None or record.generation == 0:
            failure = (
                f" (last failure to read the cluster: {record.read_failure})" if record and record.read_failure else ""
            )
            raise NotFoundError(f"cluster {cluster_id!r} has no pool yet{failure}", operation="get_pool")
        return record

    def pool(self, cluster_id: str) -> dict[str, Any]:
        """The stored pool JSON with the generation, when it was computed, how applying it went. The excluded
        nodes, the teams and the issues are bounded (a mass failure of 100,000 nodes, or 1,500 teams each naming
        instance types the cluster lacks, must not pass Lambda's 6 MB response): the first of each by count and size
        (:mod:`idleshare.pages`), and a summary — how many (per reason, per code) and the route that pages them."""
        record = self._pool(cluster_id)
        out: dict[str, Any] = dict(record.pool)
        excluded = _excluded(record)
        shown, _ = first_entries(excluded, None, POOL_EXCLUDED_SAMPLE, POOL_SAMPLE_MAX_BYTES)
        teams = _teams(record)
        shown_teams, _ = first_entries(teams, None, POOL_TEAMS_SAMPLE, POOL_SAMPLE_MAX_BYTES)
        issues = _issues(record)
        shown_issues, _ = pages.take(issues, POOL_ISSUES_SAMPLE, max_bytes=POOL_SAMPLE_MAX_BYTES)
        out.update(
            teams=shown_teams,
            teamsSummary=_summary(teams, shown_teams, f"/clusters/{cluster_id}/grants"),
            issues=shown_issues,
            issuesSummary=_summary(issues, shown_issues, f"/clusters/{cluster_id}/issues", byCode=_by_code(issues)),
            cluster=cluster_id,
            generation=record.generation,
            computedAt=record.computed_at,
            applyStatus=record.apply_status,
            applyMessage=record.apply_message,
            readFailure=record.read_failure,
            excludedNodes=shown,
            excludedSummary=_summary(
                excluded, shown, f"/clusters/{cluster_id}/excluded-nodes", byReason=_by_reason(excluded)
            ),
        )
        headroom = record.pool.get("headroom")
        if isinstance(headroom, dict) and isinstance(headroom.get("nodes"), dict):  # a sample, the sums whole
            nodes = headroom["nodes"]
            shown_nodes, _ = first_entries(nodes, None, pages.POOL_HEADROOM_SAMPLE, POOL_SAMPLE_MAX_BYTES)
            out["headroom"] = {**headroom, "nodes": shown_nodes, "total": len(nodes), "shown": len(shown_nodes)}
        if record.extra.get("summary"):
            out["summary"] = record.extra["summary"]
        out["pause"] = pause_json(cluster_id, self.store.get_pause(cluster_id))
        return out

    def grants(self, cluster_id: str, *, limit: int = GRANTS_PAGE_MAX, next_token: str | None = None) -> dict[str, Any]:
        """Each team's limits and why, sorted by team, ``limit`` (1..100) a page: ``NextToken`` (opaque) continues
        after the last team of the page, in the pool as it is then (every page names its ``generation``: a reader
        that sees it change starts again). ``total`` counts them all."""
        after = page_start(limit, GRANTS_PAGE_MAX, next_token, "afterTeam")
        record = self._pool(cluster_id)
        teams = _teams(record)
        page, token = page_of(teams, after, limit, "afterTeam")
        out = {"cluster": cluster_id, "generation": record.generation, "total": len(teams), "teams": page}
        return out | ({"NextToken": token} if token else {})

    def grant(self, cluster_id: str, team: str) -> dict[str, Any]:
        record = self._pool(cluster_id)
        teams = _teams(record)
        if team not in teams:
            known = ", ".join(sorted(teams)) or "none"
            raise NotFoundError(
                f"team {team!r} has no grant in cluster {cluster_id!r} (teams: {known})", operation="get_grant"
            )
        return {"cluster": cluster_id, "generation": record.generation, "team": team, **teams[team]}

    def excluded_nodes(
        self, cluster_id: str, *, limit: int = EXCLUDED_PAGE_MAX, next_token: str | None = None
    ) -> dict[str, Any]:
        """The nodes left out of the capacity with their reason, sorted by node name, ``limit`` (1..1000) a page:
        ``NextToken`` (opaque) continues after the last name of the page, in the pool as it is then. ``total`` and
        ``byReason`` count them all."""
        after = page_start(limit, EXCLUDED_PAGE_MAX, next_token, "after")
        record = self._pool(cluster_id)
        excluded = _excluded(record)
        page, token = page_of(excluded, after, limit, "after")
        out = {
            "cluster": cluster_id,
            "generation": record.generation,
            "total": len(excluded),
            "byReason": _by_reason(excluded),
            "excludedNodes": page,
        }
        return out | ({"NextToken": token} if token else {})

    def issues(self, cluster_id: str, *, limit: int = ISSUES_PAGE_MAX, next_token: str | None = None) -> dict[str, Any]:
        """The pool's issues in the recompute's order, ``limit`` (1..1000) and :data:`idleshare.pages.PAGE_MAX_BYTES`
        a page: ``NextToken`` (opaque) continues at the next issue, in the pool as it is then (every page names its
        ``generation``: a reader that sees it change starts again). ``total`` and ``byCode`` count them all."""
        if isinstance(limit, bool) or not 1 <= limit <= ISSUES_PAGE_MAX:
            raise BadRequestError("query", [FieldError("limit", f"must be between 1 and {ISSUES_PAGE_MAX}")])
        token = decode_token(next_token)
        at = token.get("issue") if token else 0
        if isinstance(at, bool) or not isinstance(at, int) or at < 0:
            raise BadRequestError("query", [FieldError("NextToken", "is not a token this API issued")])
        record = self._pool(cluster_id)
        issues = _issues(record)
        page, more = pages.take(issues[at:], limit)
        out = {
            "cluster": cluster_id,
            "generation": record.generation,
            "total": len(issues),
            "byCode": _by_code(issues),
            "issues": page,
        }
        if more:
            out["NextToken"] = encode_token({"issue": at + len(page)})
        return out

    def usage(
        self,
        cluster_id: str,
        start: str | None,
        end: str | None,
        granularity: str = "day",
        *,
        limit: int = pages.USAGE_PAGE_MAX,
        next_token: str | None = None,
    ) -> dict[str, Any]:
        """GET usage: without ``start`` and ``end`` the latest sample, with both the report over ``[start, end)``."""
        from idleshare.service.usage import latest_usage, usage_report

        if start is None and end is None:
            return latest_usage(self.store, cluster_id, limit=limit, next_token=next_token)
        if start is None or end is None:
            missing = "from" if start is None else "to"
            raise BadRequestError("usage", [FieldError(missing, "from and to go together")])
        return usage_report(self.store, cluster_id, start, end, granularity, limit=limit, next_token=next_token)

    def history(
        self, cluster_id: str, *, limit: int = pages.HISTORY_PAGE_DEFAULT, next_token: str | None = None
    ) -> dict[str, Any]:
        """Past generations, newest first, with what changed in each (pools left out: GET pool has it); the first
        page also lists the cluster's pauses and resumes (``pauses``, newest first)."""
        self.cluster(cluster_id)
        token = decode_token(next_token)
        before = token.get("before") if token else None
        if token is not None and (isinstance(before, bool) or not isinstance(before, int) or before < 1):
            raise BadRequestError("query", [FieldError("NextToken", "is not a token this API issued")])
        entries = self.store.list_history(cluster_id, limit, include_pool=False, before_generation=before)
        generations = []
        for entry in entries:
            item: dict[str, Any] = {"generation": entry.generation, "computedAt": entry.computed_at}
            for key in ("summary", "changes"):
                if key in entry.extra:
                    item[key] = entry.extra[key]
            if "expires_at" in entry.extra:
                item["expiresAt"] = entry.extra["expires_at"]
            generations.append(item)
        shown, cut = pages.take(generations, limit)  # by size too: a generation's changes can be long
        out: dict[str, Any] = {"cluster": cluster_id, "generations": shown}
        if token is None:  # the first page: the pauses and resumes, newest first (a few, bounded by the store)
            state = self.store.get_pause(cluster_id)
            out["pauses"] = [pause_entry_json(e) for e in reversed(state.log)] if state is not None else []
        if (cut or len(entries) == limit) and shown and shown[-1]["generation"] > 1:
            out["NextToken"] = encode_token({"before": shown[-1]["generation"]})
        return out

    # ---------------------------------------------------------------------------- recalculate
    def recalculate(
        self, cluster_id: str, request: Accepted[Recalculate] | None, wait_seconds: int = 0
    ) -> RecalcAnswer:
        """Publish ``Recalculation Requested`` with a fresh requestId; with ``wait_seconds``, poll for its
        receipt (written by the recompute) until it arrives or the time is up."""
        self.cluster(cluster_id)
        reason = request.fields.reason if request is not None else None
        publisher = self._writable()
        request_id = self.new_request_id()
        publisher.publish(
            names.DT_RECALC_REQUESTED,
            {"cluster": cluster_id, "requestId": request_id, "reason": reason or "requested through the admin API"},
        )
        requested = {"requestId": request_id, "cluster": cluster_id, "status": "Requested"}
        if wait_seconds <= 0:
            return RecalcAnswer(False, requested)
        deadline = self.clock() + wait_seconds
        while True:
            receipt = self.store.get_receipt(cluster_id, request_id)
            if receipt is not None:
                return RecalcAnswer(True, receipt_json(receipt))
            remaining = deadline - self.clock()
            if remaining <= 0:
                return RecalcAnswer(False, requested)
            self.sleep(min(self.poll_interval, remaining))

    # -------------------------------------------------------------------------------- pause
    def pause(self, cluster_id: str, request: Accepted[Pause] | None, caller: str) -> dict[str, Any]:
        """Stop governing the cluster (docs/spec.md §3, "Pause"): recorded with ``caller`` and the reason; a paused
        cluster's answer is its current state, nothing written (``changed`` False)."""
        return self._switch(cluster_id, request, caller, pause=True)

    def resume(self, cluster_id: str, request: Accepted[Pause] | None, caller: str) -> dict[str, Any]:
        """Govern the cluster again and request a recompute at once (``Recalculation Requested``, its ``requestId``
        in the answer, the receipt at GET recalculations/{requestId}); a governed cluster's answer is its state."""
        return self._switch(cluster_id, request, caller, pause=False)

    def _switch(self, cluster_id: str, request: Accepted[Pause] | None, caller: str, *, pause: bool) -> dict[str, Any]:
        self.cluster(cluster_id)
        current = self.store.get_pause(cluster_id)
        was_paused = current.paused if current is not None else False
        if was_paused == pause:
            return {**pause_json(cluster_id, current), "changed": False}
        publisher = None if pause else self._writable()  # checked before anything is written
        reason = (request.fields.reason if request is not None else None) or ""
        at = self.now()
        entry = PauseEntry("Paused" if pause else "Resumed", at, caller, reason)
        state = PauseState(
            cluster_id,
            paused=pause,
            since=at,
            by=caller,
            reason=reason,
            log=(current.log if current is not None else ()) + (entry,),
        )
        self.store.set_pause(state, was_paused=was_paused)
        out = {**pause_json(cluster_id, state), "changed": True}
        if publisher is not None:
            request_id = self.new_request_id()
            self._publish(
                publisher,
                names.DT_RECALC_REQUESTED,
                {"cluster": cluster_id, "requestId": request_id, "reason": "resumed through the admin API"},
            )
            out["requestId"] = request_id
        return out

    def receipt(self, cluster_id: str, request_id: str) -> dict[str, Any]:
        self.cluster(cluster_id)
        found = self.store.get_receipt(cluster_id, request_id)
        if found is None:
            raise NotFoundError(
                f"no receipt for recalculation {request_id!r} of cluster {cluster_id!r} yet: the recompute has "
                f"not run (or the receipt expired after {timings.RECALC_RECEIPT_TTL_SECONDS // 3600} h)",
                operation="get_receipt",
            )
        return receipt_json(found)
