"""The pool document: what a recompute stores for a cluster and takes its change digest over.

Derived from the domain result alone, with every amount an exact Kubernetes quantity string
(``"8"``, ``"1536Gi"``, ``"191450m"``), so that only a change in the pool itself changes the document,
never a change in how a surface presents it. Deployed clusters hold documents of this shape: a field
renamed or reshaped here is a change of the stored format, read by the admin API and by every
generation's change summary.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from idleshare.domain.model import Amount
from idleshare.domain.pool import Derivation, PoolResult, TeamGrant
from idleshare.domain.quantity import format_quantity


def quantities(table: Mapping[str, Mapping[str, Amount]], keep_zero: bool = False) -> dict[str, dict[str, str]]:
    """``{flavor: {resource: "quantity"}}``; zeros omitted unless asked for."""
    return {f: {r: format_quantity(q, r) for r, q in per.items() if keep_zero or q != 0} for f, per in table.items()}


def derivation_document(resource: str, d: Derivation) -> dict[str, Any]:
    """How one borrowing limit was reached: the basis, the team's quota and the pool it saw, each cap, the limit,
    which rule set it."""
    return {
        "basis": str(d.basis),
        "nominal": format_quantity(d.nominal, resource),
        "pool": format_quantity(d.pool, resource),
        "percent": d.percent,
        "percentCap": format_quantity(d.percent_cap, resource),
        "absoluteCap": None if d.absolute_cap is None else format_quantity(d.absolute_cap, resource),
        "limit": format_quantity(d.limit, resource),
        "bound": str(d.bound),
    }


def team_document(grant: TeamGrant) -> dict[str, Any]:
    """One team's grants and why (derivations of the resources it saw a pool of or is capped on)."""
    return {
        "quota": grant.quota_name,
        "strategy": str(grant.strategy),
        "activationState": "Enabled" if grant.enabled else "Disabled",
        "nominal": quantities(grant.nominal),
        "borrowingLimit": quantities(grant.borrowing_limit),
        "lendingLimit": quantities(grant.lending_limit),
        "why": {f: {r: derivation_document(r, d) for r, d in per.items() if d.matters} for f, per in grant.why.items()},
        "bounds": grant.bounds(),
    }


def pool_document(result: PoolResult) -> dict[str, Any]:
    """The stored pool of one generation (without its one-line summary, which is stored beside it)."""
    document: dict[str, Any] = {
        "idleResourceSharing": "Enabled" if result.idle_resource_sharing else "Disabled",
        "flavors": list(result.flavors),
        "resources": list(result.resources),
        "capacity": quantities(result.capacity),
        "allocated": quantities(result.allocated),
        "unallocated": quantities(result.unallocated),
        "shortfall": quantities(result.shortfall),
        "teams": {team: team_document(g) for team, g in result.teams.items()},
        "excludedNodes": {name: str(reason) for name, reason in result.excluded_nodes.items()},
        "nodeCounts": {f: {"eligible": ok, "total": total} for f, (ok, total) in result.node_counts.items()},
        "issues": [
            {"severity": i.severity, "code": i.code, "subject": i.subject, "message": i.message} for i in result.issues
        ],
    }
    document["headroom"] = {  # what the pods that are not Kueue's keep of each eligible node (docs/spec.md §2)
        "mode": str(result.headroom_mode),
        "byFlavor": quantities(result.headroom_by_flavor),
        "nodes": quantities(result.headroom),
    }
    if result.ungoverned_flavors or result.ungoverned_resources:  # past Kueue's limits: in no Kueue object
        document["ungoverned"] = {
            "flavors": list(result.ungoverned_flavors),
            "resources": list(result.ungoverned_resources),
        }
    if result.kueue_api is not None:  # the API versions written in, and the Kueue release they imply
        document["kueueApi"] = result.kueue_api.document()
    return document


def digest(document: Mapping[str, Any], manifests: Sequence[Mapping[str, Any]]) -> str:
    """The change digest of a generation: SHA-256 of the pool document and the desired objects as
    canonical JSON (sorted keys, no spaces). Equal digests: nothing to store, nothing new to announce."""
    import hashlib  # here, not at import: `idleshare plan` never digests, and OpenSSL's start is 3 ms of its start

    body = json.dumps({"pool": document, "manifests": manifests}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(body.encode()).hexdigest()
