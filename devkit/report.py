"""Readable step reports: compact tables of the pool, the borrow limits and the Kueue changes."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from devkit.scenario import StepReport, bound_of, is_accelerator
from idleshare.domain.quantity import parse_quantity
from idleshare_cli.present import short_resource

BOUND_SHORT = {
    "percentage of quota": "%",
    "absolute": "abs",
    "not in quota": "n/q",
    "percentage": "% pool",
    "pool": "pool",
    "strategy": "-",
    "disabled": "off",
}
"""Each bound (docs/spec.md §2) in a column: the Quota basis's first three, then the Pool basis's."""
PREEMPTED_BY = {
    "InCohortFairSharing": "by fair sharing",
    "InCohortReclamation": "its lender reclaimed the quota",
    "InClusterQueue": "by the team's higher-priority work",
}
"""Kueue's Preempted reasons, said."""


def _set_by(pool: dict[str, Any], team: str, flavor: str, resource: str, bound: str) -> str:
    """What set a limit, in parentheses after the amount: ``(50% q)`` — never ``140 %``, which reads as a
    percentage when it is 140 units set by the percentage. A limit with nothing to explain (all zero) has no
    derivation: the percentage is the team's own, the same on every resource, read from any other of its."""
    why = ((pool.get("teams") or {}).get(team) or {}).get("why") or {}
    d = why.get(flavor, {}).get(resource) or {}
    pct = d.get("percent")
    if pct is None:
        pct = next((e["percent"] for per in why.values() for e in per.values() if e.get("percent") is not None), None)
    if bound == "percentage of quota":
        return f"({pct}% q)" if pct is not None else "(% q)"
    if bound == "percentage":
        return f"({pct}% pool)" if pct is not None else "(% pool)"
    return f"({BOUND_SHORT.get(bound, bound)})"


def _table(rows: list[list[str]], header: list[str], indent: str = "  ") -> list[str]:
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows, strict=False)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return [indent + fmt.format(*header).rstrip()] + [indent + fmt.format(*r).rstrip() for r in rows]


def _columns(pool: dict[str, Any], all_resources: bool) -> list[tuple[str, str]]:
    """(flavor, resource) pairs worth a column: accelerators with capacity or quota (all with --all)."""
    cols = []
    for flavor in pool.get("flavors", []):
        for r in pool.get("resources", []):
            if not all_resources and not is_accelerator(r):
                continue
            seen = any(r in pool.get(t, {}).get(flavor, {}) for t in ("capacity", "allocated", "shortfall"))
            if seen:
                cols.append((flavor, r))
    return cols


def _flavor_short(flavor: str, among: Iterable[str] = ()) -> str:
    """``p5`` for ``ml.p5.48xlarge``; the whole type (``g5.8xlarge``) when another of ``among`` is of its family,
    so two instance types never share a column."""
    family = flavor.removeprefix("ml.").split(".")[0]
    if any(other != flavor and other.removeprefix("ml.").split(".")[0] == family for other in among):
        return flavor.removeprefix("ml.")
    return family


def render_step(
    report: StepReport,
    previous: StepReport | None,
    *,
    all_resources: bool = False,
    total: int = 0,
    aliases: dict[str, str] | None = None,
) -> str:
    """One step as text; ``aliases`` names nodes as ``<type>#<n>`` beside their generated names."""
    pool = report.pool
    prev_pool = previous.pool if previous else {}
    lines = [f"── {report.index}{'/' + str(total) if total else ''}  {report.title} " + "─" * 8]
    how = report.action
    routed = f" -> {', '.join(report.routed)}" if report.routed else ""
    dropped = f" -> dropped ({report.dropped})" if report.dropped else ""
    lines.append(f"  {how}: {', '.join(report.events)}{routed}{dropped}")
    for change in report.cluster_changes:
        lines.append(f"  cluster: {change}")
    gen = f"generation {report.generation}" + ("" if report.changed else " (unchanged)")
    lines.append(f"  {gen}; IdleResourceSharing {pool.get('idleResourceSharing', '?')}")
    for failure in report.failures:
        lines.append(f"  ! recompute failed: {failure}")
    if not pool:
        return "\n".join(lines)

    cols = _columns(pool, all_resources)
    flavors = pool.get("flavors", [])
    head = ["", *[f"{_flavor_short(f, flavors)} {short_resource(r)}" for f, r in cols]]

    def cell(table: str, f: str, r: str, src: dict[str, Any]) -> str:
        return str(src.get(table, {}).get(f, {}).get(r, "0"))

    rows = []
    marked = False
    for label, table in (("capacity", "capacity"), ("allocated", "allocated"), ("unallocated", "unallocated")):
        row = [label]
        for f, r in cols:
            now = cell(table, f, r, pool)
            mark = "*" if prev_pool and cell(table, f, r, prev_pool) != now else ""
            marked = marked or bool(mark)
            row.append(now + mark)
        rows.append(row)
    lines.append("  pool" + (" (* changed)" if marked else ""))
    lines += _table(rows, head, "    ")

    team_rows = []
    seen_bounds: set[str] = set()
    for team, grant in pool.get("teams", {}).items():
        row = [f"{team} ({grant.get('strategy')}{'' if grant.get('activationState') == 'Enabled' else ', Disabled'})"]
        for f, r in cols:
            limit = grant.get("borrowingLimit", {}).get(f, {}).get(r, "0")
            bound = bound_of(pool, team, f, r) or "?"
            prev = (
                (prev_pool.get("teams", {}).get(team, {}).get("borrowingLimit", {}).get(f, {}).get(r, "0"))
                if prev_pool
                else limit
            )
            seen_bounds.add(bound)
            text = "-" if bound in ("strategy", "disabled") else f"{limit} {_set_by(pool, team, f, r, bound)}"
            row.append(text + ("*" if prev != limit else ""))
        team_rows.append(row)
    lines.append(
        "  borrow limits, amounts (set by: (50% q) BorrowLimit 50% of the team's quota, (abs) AbsoluteBorrowLimits,"
        " (n/q) not in its quota; - no borrowing)"
        if not any(b in seen_bounds for b in ("percentage", "pool"))
        else "  borrow limits, amounts (Pool basis, set by: (50% pool) BorrowLimit 50% of the pool, (abs)"
        " AbsoluteBorrowLimits, (pool) the whole pool; - no borrowing)"
    )
    lines += _table(team_rows, ["team", *head[1:]], "    ")

    excluded = pool.get("excludedNodes", {})
    if excluded:
        names = aliases or {}
        shown = [f"{names[n]} {r}" if n in names else f"{n} {r}" for n, r in excluded.items()]
        lines.append("  excluded: " + ", ".join(sorted(shown)))
    for issue in pool.get("issues", []):
        if issue.get("severity") == "error":
            lines.append(f"  ! {issue.get('code')}: {issue.get('message')}")
    lines += render_changes(report.kueue_changes, all_resources)
    lines += render_workloads(report)
    lines += render_fair_sharing(report, previous)
    lines += render_usage(report.usage, previous.usage if previous else None)
    if report.mismatches:
        lines.append(f"  ✗ {len(report.mismatches)} of {report.checked} expectations failed:")
        lines += [f"    - {m}" for m in report.mismatches]
    elif report.checked:
        lines.append(f"  ✓ {report.checked} expectations hold")
    return "\n".join(lines)


def render_usage(usage: dict[str, Any], previous: dict[str, Any] | None = None) -> list[str]:
    """The usage read back from Kueue beside the limits: per flavor accelerators in use, borrowed and idle (and
    idle while work waits); per team in use, borrowed and lent. Accelerators only (cpu and memory follow them).
    What the sample could not read of Kueue's objects is named (left out of the lines above: a gap, not zero).
    Admitted work whose pods no node took is said once with its cause, then again only when it changes (``previous``:
    the step before's sample), and once more when it is gone."""
    flavors = usage.get("flavors") or {}
    among = list(flavors)
    rows = [
        (f, r, v)
        for f, per in sorted(flavors.items())
        for r, v in sorted(per.items())
        if is_accelerator(r) and v.get("capacity") not in (None, "0")
    ]
    unread = [
        f"    ? not read (a gap, never zero usage): {u.get('object')} {u.get('field')}: {u.get('problem')}"
        for u in usage.get("unreadable") or []
    ]
    unbound = _unbound_lines(usage, previous, among)
    if not rows and not unread and not unbound:
        return []
    out = ["  usage (read back from Kueue)"]
    for f, r, v in rows:
        out.append(
            f"    {_flavor_short(f, among)} {short_resource(r)}: {v.get('inUse', '0')} of {v.get('capacity')} in use, "
            f"{v.get('borrowed', '0')} borrowed, {v.get('idle', '0')} idle"
        )
    for team, t in sorted((usage.get("teams") or {}).items()):
        parts = [
            f"{_flavor_short(f, among)} {short_resource(r)} in use {v.get('inUse', '0')}"
            + (f", borrowed {v['borrowed']}" if v.get("borrowed", "0") != "0" else "")
            + (f", lent {v['lent']}" if v.get("lent", "0") != "0" else "")
            for f, per in sorted((t.get("flavors") or {}).items())
            for r, v in sorted(per.items())
            if is_accelerator(r) and any(v.get(k, "0") != "0" for k in ("inUse", "borrowed", "lent"))
        ]
        if parts:
            out.append(f"    {team}: " + "; ".join(parts))
    for w in usage.get("idleWhilePending") or []:
        out.append(
            f"    ! {w.get('idle')} {short_resource(str(w.get('resource')))} idle on {_flavor_short(str(w.get('flavor')), among)}"
            f" while {w.get('team')} waits" + (f": {w['cause']} — {w.get('why')}" if w.get("cause") else "")
        )
    out += unbound
    for a in usage.get("aboveLimit") or []:
        out.append(
            f"    ! {a.get('team')} borrows {a.get('borrowed')} {short_resource(str(a.get('resource')))} on "
            f"{_flavor_short(str(a.get('flavor')), among)}, above its limit of {a.get('limit')} (lowered after Kueue admitted "
            "the work; Kueue does not evict it)"
        )
    return out + unread


def _unbound_lines(usage: dict[str, Any], previous: dict[str, Any] | None, among: list[str]) -> list[str]:
    """Per (team, flavor): its unbound pods with the cause when new or when their count changed; nothing while the
    same; a line when they are all placed (or gone)."""

    def keyed(sample: dict[str, Any] | None) -> dict[tuple[str, str], dict[str, Any]]:
        return {(str(u.get("team")), str(u.get("flavor"))): u for u in (sample or {}).get("unbound") or []}

    now, before = keyed(usage), keyed(previous)
    out = []
    for (team, flavor), u in now.items():
        if before.get((team, flavor), {}).get("pods") == u.get("pods"):
            continue  # said already, with its cause
        out.append(
            f"    ! {u.get('pods')} pods of {team}'s admitted work on {_flavor_short(flavor, among)} have no node"
            f" ({u.get('seconds')} s since admitted): Kueue admitted it within quota, but the Kubernetes scheduler"
            f" places its pods on no node: {u.get('reason') or 'no reason given yet'}"
        )
    for team, flavor in before.keys() - now.keys():
        out.append(f"    ✓ {team}'s admitted work on {_flavor_short(flavor, among)}: no pod without a node now")
    return out


def render_workloads(report: StepReport) -> list[str]:
    """Per team, what the real Kueue did with its workloads: admitted (and what it borrows), pending with
    Kueue's own reason, preempted."""
    if not report.workloads:
        return []
    by_team: dict[str, list[dict[str, Any]]] = {}
    for w in report.workloads:
        by_team.setdefault(w["team"], []).append(w)
    width = max(len(t) for t in by_team)
    out = ["  workloads (what Kueue did)"]
    causes = {(p.get("team"), p.get("job")): p for p in (report.usage or {}).get("pending") or []}
    for team in sorted(by_team):
        ws = by_team[team]
        parts = []
        admitted = [w["name"] for w in ws if w["state"] == "Admitted"]
        if admitted:
            borrowed = [
                f"{q} {short_resource(r)} on {_flavor_short(f, report.pool.get('flavors', []))}"
                for f, per in sorted(report.borrowed.get(team, {}).items())
                for r, q in sorted(per.items())
                if r not in ("cpu", "memory")
            ]
            parts.append(
                f"{len(admitted)} admitted ({', '.join(admitted)})"
                + (f", borrowing {', '.join(borrowed)}" if borrowed else "")
            )
        preempted: dict[str, list[str]] = {}
        for w in ws:
            if w["state"] == "Preempted":
                preempted.setdefault(w.get("reason") or "?", []).append(w["name"])
        for reason, names in sorted(preempted.items()):
            parts.append(
                f"{len(names)} preempted, {PREEMPTED_BY.get(reason, reason)}, queued again ({', '.join(names)})"
            )
        names = [w["name"] for w in ws if w["state"] == "Finished"]
        if names:
            parts.append(f"{len(names)} finished ({', '.join(names)})")
        for w in ws:
            if w["state"] == "Pending":
                reason = w["message"].removeprefix("couldn't assign flavors to pod set main: ")
                # flavors the pods' node selector rules out are not news: keep why the right one said no
                reason = ", ".join(p for p in reason.split(", ") if "doesn't match node affinity" not in p)
                why = causes.get((team, w["name"]))
                told = f" [{why['cause']}: {why.get('why')}]" if why and why.get("cause") else ""
                parts.append(f"{w['name']} pending: {reason}{told}")
        out.append(f"    {team:<{width}}  " + "; ".join(parts))
    return out


def render_fair_sharing(report: StepReport, previous: StepReport | None = None) -> list[str]:
    """When two or more teams borrow and Kueue just decided something (a Job's state or what a team borrows changed
    since ``previous``): how Kueue shared the borrowed capacity and why — each team's weight, what it borrows beside
    its limit, and its dominant resource share (borrowed x 1000 / lendable / weight, the largest over resources)
    worked out beside the one Kueue reports. Kueue admits the next borrowed work to the team of the lowest share,
    and preempts borrowed work of a higher share while the preemptor's share stays at or below it."""
    if previous is not None and previous.borrowed == report.borrowed:
        states = [(w["name"], w["state"]) for w in report.workloads]
        if states == [(w["name"], w["state"]) for w in previous.workloads]:
            return []
    fs = report.fair_sharing or {}
    borrowers = sorted(t for t, per in report.borrowed.items() if any(is_accelerator(r) for r in _resources(per)))
    if len(borrowers) < 2:
        return []
    lendable = {r: int(q) for r, q in (fs.get("lendable") or {}).items()}
    teams = fs.get("teams") or {}
    fair = any((teams.get(t) or {}).get("weightedShare") is not None for t in borrowers)
    if fair:
        out = [
            "  fair sharing (Kueue): share = borrowed x 1000 / lendable / weight, of the largest resource; the lowest",
            "    share borrows next; borrowed work of a higher share is preempted while the borrower's stays at or below it",
        ]
    else:
        out = ["  fair sharing: off in Kueue (no shares): first come, first served, up to each team's borrowing limit"]
    rows = []
    for team in borrowers:
        info = teams.get(team) or {}
        per_resource = _resources(report.borrowed[team])
        weight = info.get("weight")
        where = ", ".join(
            f"{q} {short_resource(r)} on {_flavor_short(f, report.pool.get('flavors', []))} (limit {_limit(report, team, f, r)})"
            for f, per in sorted(report.borrowed[team].items())
            for r, q in sorted(per.items())
            if is_accelerator(r)
        )
        row = [team, f"weight {weight if weight is not None else '- (1)'}", f"borrows {where}"]
        if fair:
            row.append(_share(per_resource, lendable, weight, info.get("weightedShare")))
        rows.append(row)
    out += _table(rows, ["team", "weight", "borrowed", *(["share"] if fair else [])], "    ")[1:]
    return out


def _resources(per_flavor: dict[str, dict[str, str]]) -> dict[str, Any]:
    """Borrowed per resource name, summed over flavors as Kueue adds them up for the share (exact quantities)."""
    out: dict[str, Any] = {}
    for per in per_flavor.values():
        for r, q in per.items():
            out[r] = out.get(r, 0) + parse_quantity(str(q))
    return {r: q for r, q in out.items() if q}


def _limit(report: StepReport, team: str, flavor: str, resource: str) -> str:
    limit = report.pool.get("teams", {}).get(team, {}).get("borrowingLimit", {}).get(flavor, {}).get(resource)
    if limit is None:
        return "?"
    bound = bound_of(report.pool, team, flavor, resource) or "?"
    return f"{limit} {_set_by(report.pool, team, flavor, resource, bound)}"


def _share(per_resource: dict[str, Any], lendable: dict[str, int], weight: str | None, kueue: Any) -> str:
    """The dominant resource share worked out (Kueue's rule: the largest over resources of borrowed x 1000 /
    lendable, divided by the weight; weight 0 borrowing: infinite), beside the one Kueue reports."""
    w = float(weight) if weight is not None else 1.0
    best: tuple[float, str, Any] | None = None
    for r, b in sorted(per_resource.items()):
        if lendable.get(r, 0) > 0:
            ratio = float(b) * 1000 / lendable[r]
            if best is None or ratio > best[0]:
                best = (ratio, r, b)
    told = f"Kueue's share {kueue}" if kueue is not None else "no share from Kueue"
    if best is None:
        return told
    ratio, r, b = best
    if w == 0:
        return f"weight 0: infinite while it borrows ({told})"
    return f"{b} x 1000 / {lendable[r]} {short_resource(r)} / {weight or 1} = {ratio / w:.1f} -> {told}"


def render_changes(changes: list[dict[str, Any]], all_resources: bool) -> list[str]:
    if not changes:
        return ["  kueue: no change"]
    out = [f"  kueue: {len(changes)} object(s) changed"]
    created = [c for c in changes if c["op"] == "created"]
    if len(created) > 4:
        kinds: dict[str, int] = {}
        for c in created:
            kinds[c["kind"]] = kinds.get(c["kind"], 0) + 1
        out.append("    + created " + ", ".join(f"{n} {k}" for k, n in kinds.items()))
    else:
        out += [f"    + {c['kind']} {c['name']}" for c in created]
    for c in changes:
        if c["op"] == "deleted":
            out.append(f"    - {c['kind']} {c['name']}")
        elif c["op"] == "updated":
            shown = [f for f in c["fields"] if all_resources or _accelerator_field(f["field"])]
            hidden = len(c["fields"]) - len(shown)
            parts = [
                f"{f['field']} {f['old'] if f['old'] is not None else '∅'}→{f['new'] if f['new'] is not None else '∅'}"
                for f in shown
            ]
            if hidden:
                parts.append(f"+{hidden} cpu/memory/efa")
            out.append(f"    ~ {c['kind']} {c['name']}: " + "; ".join(parts))
    return out


def _accelerator_field(path: str) -> bool:
    if "/" not in path:
        return True  # not a quota field (stopPolicy, fairSharing...)
    resource = path.split("/", 1)[1].rsplit(".", 1)[0]
    return resource in ("gpu", "neuron") or resource.startswith("mig-")


def summary_line(reports: list[StepReport]) -> str:
    checked = sum(r.checked for r in reports)
    failed = sum(len(r.mismatches) for r in reports)
    failures = sum(len(r.failures) for r in reports)
    text = f"{len(reports)} steps, {checked} expectations checked, {failed} failed"
    if failures:
        text += f", {failures} recompute failures"
    return text
