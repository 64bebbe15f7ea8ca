"""The stored pool document (deployed clusters hold documents of this shape, the change digest is taken over it): its
shape and the digest's canonical form are pinned here."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from idleshare.domain.document import digest, pool_document
from idleshare.domain.model import BorrowLimitBasis
from idleshare.domain.pool import Bound, PoolResult
from idleshare_cli.plan import plan
from idleshare_cli.present import result_json

EXAMPLES = Path(__file__).resolve().parents[2] / "events" / "examples"


def example() -> tuple[PoolResult, list[dict[str, Any]]]:
    return plan(*((EXAMPLES / name).read_bytes() for name in ("nodes.json", "quotas.json", "scheduler-config.json")))


def test_the_document_keeps_the_stored_shape() -> None:
    result, _ = example()
    doc = pool_document(result)
    keys = "idleResourceSharing flavors resources capacity allocated unallocated shortfall teams excludedNodes"
    assert " ".join(doc) == keys + " nodeCounts issues headroom"
    assert " ".join(doc["headroom"]) == "mode byFlavor nodes"  # what the pods not Kueue's keep (issue 31)
    team = next(iter(doc["teams"].values()))
    assert " ".join(team) == "quota strategy activationState nominal borrowingLimit lendingLimit why bounds"
    why = next(d for per in team["why"].values() for d in per.values())
    # each derivation names its basis and the team's own quota beside the pool it saw (issue 29)
    assert " ".join(why) == "basis nominal pool percent percentCap absoluteCap limit bound"
    # plain JSON values: strings, not the domain's enums (a stored document reads back equal)
    assert json.loads(json.dumps(doc)) == doc
    assert type(why["bound"]) is str and why["bound"] in {str(b) for b in Bound}
    assert type(why["basis"]) is str and why["basis"] in {str(b) for b in BorrowLimitBasis}
    assert all(type(b) is str for b in team["bounds"].values())


def test_the_digest_and_plans_json_are_over_the_document_and_the_manifests() -> None:
    result, manifests = example()
    doc = pool_document(result)
    canonical = json.dumps({"pool": doc, "manifests": manifests}, sort_keys=True, separators=(",", ":"))
    assert digest(doc, manifests) == hashlib.sha256(canonical.encode()).hexdigest()
    shown = result_json(result, manifests)  # plan's JSON is the document with its summary and manifests
    assert shown.pop("summary") == result.summary()
    assert shown.pop("manifests") == manifests
    assert shown == pool_document(result)
