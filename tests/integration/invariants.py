"""Invariants the fault and burst tests check after injecting something.

- :func:`nominal_by_team` / :func:`assert_nominal_unchanged`: no team's nominal quota changed;
- :func:`assert_borrow_within_pool`: every derivation records the pool the team sees, re-derived independently
  from the stored pool (unallocated when idle sharing is on, plus what the other enabled lending teams lend); on
  the Pool basis no borrow limit is above it; on the Quota basis (the default) a limit is its BorrowLimit % of
  the team's own nominal (rounded down), its absolute cap, or 0 — never more than the percentage or the cap;
- :class:`GenerationLog`: the stored generation never goes down, and history holds every generation
  1..N (none missing, none twice) with N the current one;
- :func:`assert_converged`: the stored pool is exactly a fresh ``idleshare plan`` of the cluster's
  nodes, stored quotas and scheduler config, and the cluster's managed Kueue objects are exactly
  the desired objects of that plan (nothing to apply, nothing to delete).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from idleshare.adapters.kube import KINDS
from idleshare.adapters.store import DynamoStore
from idleshare.domain.document import pool_document
from idleshare.domain.kueue import MANAGED_BY, MANAGED_BY_LABEL
from idleshare.domain.kueue_config import with_kueue_config
from idleshare.domain.kueue_diff import diff
from idleshare.domain.kueue_fit import with_kueue_api
from idleshare.domain.model import SchedulerConfig, Settings
from idleshare.parse.kueue_config import read_kueue_config
from idleshare.parse.quotas import parse_scheduler_config
from idleshare_cli.plan import plan

LENDING = ("Lend", "LendAndBorrow")


def quantity(text: str) -> Decimal:
    from lightkube.utils.quantity import parse_quantity

    value = parse_quantity(text)
    assert value is not None, f"not a quantity: {text!r}"
    return Decimal(value)


def nominal_by_team(pool: dict[str, Any]) -> dict[str, Any]:
    return {team: grant["nominal"] for team, grant in pool.get("teams", {}).items()}


def assert_nominal_unchanged(before: dict[str, Any], after: dict[str, Any]) -> None:
    assert nominal_by_team(after) == nominal_by_team(before), "a team's nominal quota changed"


def pool_seen_by(pool: dict[str, Any], team: str, flavor: str, resource: str) -> Decimal:
    """docs/spec.md §2 pool_i(f, r), from the stored pool alone."""
    seen = Decimal(0)
    if pool.get("idleResourceSharing") == "Enabled":
        seen += quantity(pool.get("unallocated", {}).get(flavor, {}).get(resource, "0"))
    for other, grant in pool.get("teams", {}).items():
        if other != team and grant["activationState"] == "Enabled" and grant["strategy"] in LENDING:
            seen += quantity(grant["nominal"].get(flavor, {}).get(resource, "0"))
    return seen


def assert_borrow_within_pool(pool: dict[str, Any]) -> int:
    """Every team's borrowing limit within its basis's bound (docs/spec.md §2): on the Pool basis <= the pool it
    sees; on the Quota basis <= BorrowLimit % of its own nominal, or its absolute cap when one set it. Returns how
    many limits were checked."""
    checked = 0
    for team, grant in pool.get("teams", {}).items():
        for flavor, per in grant["borrowingLimit"].items():
            for resource, limit in per.items():
                seen = pool_seen_by(pool, team, flavor, resource)
                recorded = grant["why"].get(flavor, {}).get(resource)
                where = f"{team} may borrow {limit} {resource} of {flavor}"
                if recorded is None:  # nothing to explain: no pool, no quota, no cap
                    assert quantity(limit) == 0 and seen == 0, where
                    checked += 1
                    continue
                assert quantity(recorded["pool"]) == seen, (team, flavor, resource)
                nominal = quantity(grant["nominal"].get(flavor, {}).get(resource, "0"))
                assert quantity(recorded["nominal"]) == nominal, (team, flavor, resource)
                if recorded["basis"] == "Pool":
                    assert quantity(limit) <= seen, f"{where}, pool is {seen}"
                elif recorded["bound"] == "absolute":
                    assert quantity(limit) <= quantity(recorded["absoluteCap"]), where
                else:
                    assert quantity(limit) <= nominal * recorded["percent"] / 100, f"{where}, own nominal {nominal}"
                    if recorded["bound"] == "not in quota":
                        assert quantity(limit) == 0 and nominal == 0, where
                checked += 1
    return checked


@dataclass
class GenerationLog:
    """Generations observed over a test: never down; history always 1..N."""

    store: DynamoStore
    cluster_id: str
    seen: list[int] = field(default_factory=list)

    def observe(self) -> int:
        record = self.store.get_pool(self.cluster_id)
        generation = record.generation if record else 0
        if self.seen:
            assert generation >= self.seen[-1], f"generation went back from {self.seen[-1]} to {generation}"
        self.seen.append(generation)
        history = self.store.list_history(self.cluster_id, limit=100_000, include_pool=False)[::-1]
        assert [h.generation for h in history] == list(range(1, generation + 1)), "history has a gap or extra"
        stamps = [h.computed_at for h in history]
        assert stamps == sorted(stamps), "history computed_at goes back in time"
        return generation


def managed_objects(sim: Any) -> list[dict[str, Any]]:
    """What ``LightkubeCluster.list_managed`` sees: our label, the kinds idleshare writes."""
    return [
        {**obj, "kind": kind}
        for kind in KINDS
        for obj in sim.objects(kind)
        if ((obj.get("metadata") or {}).get("labels") or {}).get(MANAGED_BY_LABEL) == MANAGED_BY
    ]


def managed_specs(sim: Any) -> list[tuple[str, str, str, Any, Any]]:
    """The managed objects as idleshare wrote them: (kind, namespace, name, generation, spec). Kueue keeps
    writing their status (so their resourceVersion moves); generation moves only when the spec does."""
    return [
        (
            o["kind"],
            o["metadata"].get("namespace", ""),
            o["metadata"]["name"],
            o["metadata"].get("generation"),
            o.get("spec"),
        )
        for o in managed_objects(sim)
    ]


def fresh_plan(sim: Any, store: DynamoStore, cluster_id: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``idleshare plan`` of the cluster's nodes (as the apiserver holds them) and its stored quotas."""
    cluster = store.get_cluster(cluster_id)
    assert cluster is not None, cluster_id
    quotas = [q.body for q in store.list_quotas(cluster_id)]
    scheduler = store.get_scheduler_config(cluster_id)
    result, desired = plan(
        json.dumps({"apiVersion": "v1", "kind": "NodeList", "items": sim.objects("Node")}),
        json.dumps(quotas),
        json.dumps(scheduler.body) if scheduler is not None else None,
        Settings(
            cohort_name=cluster.settings.cohort_name,
            namespace_prefix=cluster.settings.namespace_prefix,
            borrow_limit_basis=cluster.settings.borrow_limit_basis,
        ),
    )
    # what the recompute adds from the cluster's Kueue configuration (its ConfigMap, as the cluster holds it)
    reader = sim.idleshare_adapter(timeout=10)  # as idleshare's RBAC user, as the recompute reads it
    try:
        reading = read_kueue_config(reader.get_config_map)
        api = reader.kueue_api()  # and the Kueue API versions it serves
    finally:
        reader.close()
    parsed = parse_scheduler_config(scheduler.body, source="scheduler") if scheduler is not None else SchedulerConfig()
    result = with_kueue_api(with_kueue_config(result, reading, parsed), desired, api)
    return pool_document(result), desired


def assert_converged(sim: Any, store: DynamoStore, cluster_id: str) -> dict[str, Any]:
    """The stored pool is a fresh plan's and the cluster holds exactly its objects; returns the pool."""
    pool, desired = fresh_plan(sim, store, cluster_id)
    stored = store.get_pool(cluster_id)
    assert stored is not None and stored.generation >= 1, f"{cluster_id}: no pool stored"
    assert stored.pool == pool, (
        f"{cluster_id}: the stored pool is not a fresh plan of the cluster (differs in "
        f"{sorted(k for k in set(pool) | set(stored.pool) if pool.get(k) != stored.pool.get(k))}: stored "
        f"{ {k: stored.pool.get(k) for k in pool if pool.get(k) != stored.pool.get(k)} })"
    )
    assert stored.apply_status == "Applied", (cluster_id, stored.apply_status, stored.apply_message)
    to_apply, to_delete = diff(desired, managed_objects(sim))
    assert (to_apply, to_delete) == ([], []), f"{cluster_id}: the cluster differs from the stored grants"
    return pool


def assert_pool_invariants(store: DynamoStore, cluster_id: str, baseline: dict[str, Any] | None = None) -> None:
    """Nominal unchanged (against ``baseline``, a pool stored before the fault) and borrow <= pool."""
    stored = store.get_pool(cluster_id)
    assert stored is not None
    if stored.generation == 0:
        return
    if baseline is not None:
        assert_nominal_unchanged(baseline, stored.pool)
    assert assert_borrow_within_pool(stored.pool) > 0


def settle(h: Any, cluster_id: str = "demo") -> tuple[dict[str, Any], GenerationLog]:
    """A clean recompute through ``h`` (a ``test_pipeline.Harness``): the baseline pool and a log."""
    out = h.recalc()
    assert out["batchItemFailures"] == [], out
    log = GenerationLog(h.store, cluster_id)
    log.observe()
    return assert_converged(h.sim, h.store, cluster_id), log


def recovers(h: Any, log: GenerationLog, baseline: dict[str, Any], cluster_id: str = "demo") -> dict[str, Any]:
    """After a fault: invariants hold as left, then one more recompute converges and they still hold."""
    assert_pool_invariants(h.store, cluster_id, baseline)
    log.observe()
    out = h.recalc()
    assert out["batchItemFailures"] == [], out
    log.observe()
    assert_pool_invariants(h.store, cluster_id, baseline)
    return assert_converged(h.sim, h.store, cluster_id)
