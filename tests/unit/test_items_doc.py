"""The main table's kinds of item are `idleshare.table.ITEMS`, and docs/architecture.md's table is generated from
it: every kind the store writes (one of each, written through the store on moto, large documents in parts) has a
row, every row is written by some call, and the document says what `make docs` renders."""

from __future__ import annotations

import base64
import random
import re
from datetime import UTC, datetime

import boto3
from moto import mock_aws

from devkit import docgen
from idleshare import table
from idleshare.adapters.ports import (
    ClusterRecord,
    PauseEntry,
    PauseState,
    PoolRecord,
    RecalculationReceipt,
    UsageBucket,
    UsageCursor,
)
from idleshare.adapters.store import DynamoStore
from idleshare.domain.ownership import Record
from tests.aws_env import all_items, create_table, fake_aws_env
from tests.builders import quota_body

REPO = docgen.REPO_ROOT
T0 = datetime(2026, 12, 3, 13, 58, tzinfo=UTC)


def pattern(kind: table.ItemKind) -> tuple[re.Pattern[str], re.Pattern[str]]:
    def one(key: str) -> re.Pattern[str]:
        return re.compile("".join(".+" if p.startswith("<") else re.escape(p) for p in re.split(r"(<[^>]*>)", key)))

    return one(kind.pk), one(kind.sk)


def noise(size: int) -> str:
    return base64.b64encode(random.Random(0).randbytes(size * 3 // 4)).decode()


def every_kind_written() -> set[tuple[str, str]]:
    with fake_aws_env(), mock_aws():
        t = create_table(boto3.resource("dynamodb", region_name="us-east-1"))
        store = DynamoStore(t, clock=lambda: T0)
        arn = "arn:aws:sagemaker:us-east-1:111122223333:cluster/abcdef123456"
        store.put_cluster(ClusterRecord("c1", "eks-c1", arn))
        store.create_quota("c1", quota_body("research", name="research-quota"))
        store.put_scheduler_config("c1", {"SchedulerConfig": {"FairShare": "Enabled"}})
        big = {"noise": noise(700_000)}  # two parts compressed: POOL's and HISTORY's
        store.put_pool(PoolRecord("c1", 1, "d1", big, T0.isoformat()), expected_generation=0)
        store.put_receipt(RecalculationReceipt("c1", "r-1", "Done", 1, True))
        store.set_pause(
            PauseState("c1", paused=True, log=(PauseEntry("Paused", T0.isoformat(), "arn:x"),)), was_paused=False
        )
        lease = store.claim_watch("c1", "inv-1").lease
        store.save_watch("c1", lease, "10", {f"node-{i}": {"noise": noise(2_000)} for i in range(400)})
        cursor = UsageCursor("c1", T0.isoformat(), T0.isoformat(), {"teams": {}})
        store.add_usage(cursor, {"2026-12-03T13": UsageBucket("2026-12-03T13")}, expected=None)
        store.compact_usage_day("c1", "2026-12-03")
        store.put_owned("c1", Record(objects={("ClusterQueue", "", "hyperpod-ns-a-clusterqueue"): "uid-1"}))
        return {(i[table.PK], i[table.SK]) for i in all_items(t)}


def test_every_item_the_store_writes_is_a_kind_of_table_items_and_every_kind_is_written() -> None:
    keys = every_kind_written()
    patterns = {kind: pattern(kind) for kind in table.ITEMS}
    matched: dict[table.ItemKind, list[tuple[str, str]]] = {kind: [] for kind in table.ITEMS}
    for pk, sk in keys:
        kinds = [k for k, (p, s) in patterns.items() if p.fullmatch(pk) and s.fullmatch(sk)]
        # the PART# kind and its owners never overlap; HISTORY# alone would match a PART#HISTORY# key if unanchored
        assert len(kinds) == 1, f"{pk} / {sk}: {kinds or 'no kind of table.ITEMS'}"
        matched[kinds[0]].append((pk, sk))
    assert not [k for k, found in matched.items() if not found], "kinds of table.ITEMS nothing wrote"


def test_every_key_constant_of_table_py_is_in_a_kind() -> None:
    constants = {v for k, v in vars(table).items() if re.fullmatch(r"[A-Z_]+_(PREFIX|SK|PK)", k) and isinstance(v, str)}
    used = " ".join(f"{k.pk} {k.sk}" for k in table.ITEMS)
    assert {c for c in constants if c not in used} == set()


def test_docs_architecture_holds_the_generated_table() -> None:
    text = (REPO / "docs" / "architecture.md").read_text()
    assert docgen.section(text, "items") == docgen.items(), "docs/architecture.md's items differ: run `make docs`"
    assert f"`{table.PART_PREFIX}<owner sk>#<index:03d>`" in docgen.items()
