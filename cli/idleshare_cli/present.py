"""How the CLI shows a pool result: `idleshare plan`'s JSON (the stored pool document with its summary
and the manifests) and the tables an operator reads (also used by `idleshare pool` on the admin API's JSON).

The document itself is :func:`idleshare.domain.document.pool_document`; nothing here is stored or digested.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from idleshare.domain.document import pool_document
from idleshare.domain.kueue import Manifest
from idleshare.domain.model import CPU, GIB, MEMORY, Amount, is_accelerator
from idleshare.domain.pool import PoolResult
from idleshare.domain.quantity import MI, QuantityError, format_quantity, parse_quantity


def result_json(result: PoolResult, manifests: list[Manifest] | None = None) -> dict[str, Any]:
    """`idleshare plan --format json`: the summary line, the pool document, and the manifests if given."""
    out: dict[str, Any] = {"summary": result.summary(), **pool_document(result)}
    if manifests is not None:
        out["manifests"] = manifests
    return out


# -- tables ---------------------------------------------------------------------------------------


def human_quantity(value: Amount, resource: str) -> str:
    """An amount as an operator reads it (tables only; JSON keeps the exact Kubernetes quantity):
    memory in Gi, with one decimal when not whole (``1900Gi``, ``7870.6Gi``; under 0.1 Gi in Mi); cpu
    in cores, to the millicore (``191.45``); devices as counts. Always rounded down, as grants are."""
    if resource == MEMORY:
        tenths = math.floor(Fraction(value) * 10 / GIB)
        if value and tenths == 0:
            return f"{math.floor(Fraction(value) / MI)}Mi"
        return f"{tenths // 10}Gi" if tenths % 10 == 0 else f"{tenths // 10}.{tenths % 10}Gi"
    if resource == CPU:
        milli = math.floor(Fraction(value) * 1000)
        whole, rest = divmod(milli, 1000)
        return str(whole) if rest == 0 else f"{whole}.{rest:03d}".rstrip("0")
    return format_quantity(value, resource)


def human_text(text: object, resource: str, zero: str = "-") -> str:
    """A quantity string from the API as :func:`human_quantity` prints it; ``zero`` for none or zero."""
    if text in (None, "", "0", 0):
        return zero
    try:
        return human_quantity(parse_quantity(str(text)), resource)
    except QuantityError:
        return str(text)  # not a quantity: shown as it came


def render_table(rows: list[list[str]], header: list[str]) -> str:
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows, strict=False)]
    line = "  ".join(f"{{:<{w}}}" for w in widths)
    out = [line.format(*header), line.format(*("-" * w for w in widths))]
    out += [line.format(*row) for row in rows]
    return "\n".join(s.rstrip() for s in out)


def short_resource(resource: str) -> str:
    return {"nvidia.com/gpu": "gpu", "aws.amazon.com/neurondevice": "neuron", "vpc.amazonaws.com/efa": "efa"}.get(
        resource, resource.removeprefix("nvidia.com/")
    )


def _cell(table: Mapping[str, Mapping[str, Amount]], f: str, r: str) -> str:
    value = table.get(f, {}).get(r, 0)
    return human_quantity(value, r) if value else "-"


def result_tables(result: PoolResult) -> str:
    """The pool per flavor and resource, each team's grants and which bound set them, excluded nodes."""
    sections: list[str] = [result.summary(), ""]
    pool_rows = []
    for f in result.flavors:
        for r in result.resources:
            if any(t[f][r] for t in (result.capacity, result.allocated, result.shortfall)):
                pool_rows.append(
                    [
                        f,
                        short_resource(r),
                        _cell(result.capacity, f, r),
                        _cell(result.allocated, f, r),
                        _cell(result.unallocated, f, r),
                        _cell(result.shortfall, f, r),
                    ]
                )
    sharing = "Enabled" if result.idle_resource_sharing else "Disabled"
    sections.append(f"Lendable pool (IdleResourceSharing {sharing})")
    sections.append(
        render_table(pool_rows, ["FLAVOR", "RESOURCE", "CAPACITY", "ALLOCATED", "UNALLOCATED", "SHORTFALL"])
    )
    grant_rows = []
    for team, g in result.teams.items():
        bounds = g.bounds()
        for f in result.flavors:
            for r in result.resources:
                nominal, borrow = g.nominal[f][r], g.borrowing_limit[f][r]
                if not is_accelerator(r):
                    continue
                if not nominal and not borrow:
                    continue
                d = g.why[f][r]
                grant_rows.append(
                    [
                        team,
                        str(g.strategy) + ("" if g.enabled else " (Disabled)"),
                        f,
                        short_resource(r),
                        _cell(g.nominal, f, r),
                        _cell(g.borrowing_limit, f, r),
                        _cell(g.lending_limit, f, r),
                        human_quantity(d.pool, r),
                        str(d.bound) if d.matters else bounds.get(f, "-"),
                    ]
                )
    sections += ["", "Team grants (accelerators; `idleshare plan --format json` has every resource)"]
    sections.append(
        render_table(
            grant_rows, ["TEAM", "STRATEGY", "FLAVOR", "RES", "NOMINAL", "BORROW", "LEND", "POOL SEEN", "SET BY"]
        )
    )
    if result.excluded_nodes:
        sections += ["", "Excluded nodes"]
        sections.append(render_table([[n, str(r)] for n, r in result.excluded_nodes.items()], ["NODE", "REASON"]))
    if result.headroom:
        shown = sorted({r for by in result.headroom.values() for r in by})
        sections += ["", f"Headroom ({result.headroom_mode}): what the pods that are not Kueue's keep of each node"]
        rows = [[n, *(human_quantity(by.get(r, 0), r) for r in shown)] for n, by in result.headroom.items()]
        rows += [
            [f"{f} (all)", *(human_quantity(by.get(r, 0), r) for r in shown)]
            for f, by in result.headroom_by_flavor.items()
        ]
        sections.append(render_table(rows, ["NODE", *(r.upper() for r in shown)]))
    if result.issues:
        sections += ["", "Issues"]
        sections.append(render_table([[i.severity, i.code, i.message] for i in result.issues], ["", "CODE", "MESSAGE"]))
    return "\n".join(sections)


def kueue_api_text(found: Any) -> str:
    """The pool's ``kueueApi`` in one line: the Kueue release and the API versions written ("v0.12 (Cohort
    v1alpha1, others v1beta1)"); "-" when the pool names none (computed before idleshare read them)."""
    if not isinstance(found, dict) or not isinstance(found.get("apiVersions"), dict):
        return "-"
    versions: dict[str, list[str]] = {}
    for kind, version in found["apiVersions"].items():
        versions.setdefault(str(version), []).append(str(kind))
    common = max(versions, key=lambda v: len(versions[v]))
    parts = [f"{', '.join(sorted(kinds))} {v}" for v, kinds in sorted(versions.items()) if v != common]
    written = f"kueue.x-k8s.io/{common}" + (f"; {'; '.join(parts)}" if parts else "")
    return f"{found.get('kueue') or '?'} ({written})"


def paused_text(state: Any) -> str | None:
    """``paused since … by … (reason)`` for a paused cluster's state (GET pool's ``pause``), else None."""
    if not isinstance(state, dict) or state.get("paused") is not True:
        return None
    text = f"paused since {state.get('since') or '?'} by {state.get('by') or '?'}"
    return text + (f" ({state['reason']})" if state.get("reason") else "")
