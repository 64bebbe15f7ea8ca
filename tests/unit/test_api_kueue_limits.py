"""Issue 40: a quota that would take the instance types the cluster's quotas name past what Kueue holds in the one
resource group idleshare writes is refused by the admin API (422 naming the entry), on the real DynamoStore (moto);
the Kueue is the one the cluster's last pool was written for."""

from __future__ import annotations

from typing import Any

from idleshare.adapters.ports import PoolRecord
from idleshare.domain.catalog import KNOWN_INSTANCE_TYPES
from tests.admin_api import World, call
from tests.builders import quota_body

QUOTAS = "/clusters/demo/compute-quotas"
TYPES = sorted(t for t in KNOWN_INSTANCE_TYPES if t.startswith(("ml.c", "ml.m", "ml.r")))  # CPU types of the enum
FIELD = "ComputeQuotaConfig.ComputeQuotaResources"


def naming(team: str, types: list[str]) -> dict[str, Any]:
    return quota_body(team, resources=[{"InstanceType": t, "VCpu": 1} for t in types])


def test_the_fifth_team_naming_fifteen_instance_types_is_422_naming_the_entry_past_64(world: World) -> None:
    # Given four teams naming 15 distinct instance types each (60), accepted
    for i in range(4):
        assert call("POST", QUOTAS, naming(f"team{i}", TYPES[i * 15 : (i + 1) * 15])).status == 201
    before = world.items()
    world.publisher.events.clear()
    # When a fifth names 15 more (75 in all, past Kueue's 64 flavors per resource group)
    reply = call("POST", QUOTAS, naming("team4", TYPES[60:75]))
    # Then 422 names the first entry past 64 (the fifth of its 15), the limit and its source; nothing stored or sent
    assert reply.status == 422, reply.body
    (error,) = reply.body["errors"]
    assert error["field"] == f"{FIELD}[4].InstanceType"
    assert "75 instance types" in error["message"] and "at most 64" in error["message"]
    assert "maxItems" in error["message"]
    assert world.items() == before and world.publisher.events == []
    # And four more fit: 64 in all
    assert call("POST", QUOTAS, naming("team4", TYPES[60:64])).status == 201


def _update(team: str, types: list[str]) -> dict[str, Any]:
    return {"TargetVersion": 1, "ComputeQuotaConfig": naming(team, types)["ComputeQuotaConfig"]}


def test_an_update_that_adds_past_the_limit_is_422_and_one_that_does_not_passes(world: World) -> None:
    # Given 64 instance types named: four teams of 15 and one of 4
    for i in range(4):
        assert call("POST", QUOTAS, naming(f"team{i}", TYPES[i * 15 : (i + 1) * 15])).status == 201
    assert call("POST", QUOTAS, naming("team4", TYPES[60:64])).status == 201
    # When team4 names a fifth: 65, refused at that entry
    grow = call("PUT", f"{QUOTAS}/team4-quota", _update("team4", TYPES[60:65]))
    assert grow.status == 422 and [e["field"] for e in grow.body["errors"]] == [f"{FIELD}[4].InstanceType"]
    # Then swapping one of its own for a new one keeps 64, and naming what another quota names costs nothing
    assert call("PUT", f"{QUOTAS}/team4-quota", _update("team4", [*TYPES[61:65]])).status == 200
    assert call("PUT", f"{QUOTAS}/team0-quota", _update("team0", [*TYPES[:14], TYPES[20]])).status == 200


def test_the_clusters_own_kueue_sets_the_limit(world: World) -> None:
    # Given the last pool was written for Kueue v0.12 (16 flavors per resource group)
    pool = {"flavors": [], "resources": ["cpu", "memory"], "kueueApi": {"apiVersions": {}, "kueue": "v0.12"}}
    world.store.put_pool(PoolRecord("demo", 1, "d1", pool, "2026-01-01T00:00:00+00:00"), expected_generation=0)
    assert call("POST", QUOTAS, naming("a", TYPES[:15])).status == 201
    assert call("POST", QUOTAS, naming("b", TYPES[15:16])).status == 201  # 16
    reply = call("POST", QUOTAS, naming("c", TYPES[16:17]))
    assert reply.status == 422 and "Kueue v0.12 holds at most 16" in reply.body["errors"][0]["message"]


def test_a_quota_naming_the_ec2_name_of_a_flavor_counts_once(world: World) -> None:
    # Given the cluster's nodes carry EC2 names (ml.X governs X): the pool's flavors are the bare names
    flavors = [t.removeprefix("ml.") for t in TYPES[:64]]
    pool = {"flavors": flavors, "resources": ["cpu", "memory"], "kueueApi": {"apiVersions": {}, "kueue": "v0.20+"}}
    world.store.put_pool(PoolRecord("demo", 1, "d1", pool, "2026-01-01T00:00:00+00:00"), expected_generation=0)
    for i in range(4):
        assert call("POST", QUOTAS, naming(f"t{i}", TYPES[i * 15 : (i + 1) * 15])).status == 201
    assert call("POST", QUOTAS, naming("t4", TYPES[60:64])).status == 201  # 64
    assert call("POST", QUOTAS, naming("t5", TYPES[:15])).status == 201  # all named already
    assert call("POST", QUOTAS, naming("t6", TYPES[64:65])).status == 422
