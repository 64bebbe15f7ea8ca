"""`idleshare pool show|explain|history`: the stored lendable pool of a deployed stack, read through
the admin API. Quantities arrive formatted (``"8"``, ``"1536Gi"``); tables show them as they are."""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from typing import Any

from idleshare import pages
from idleshare.domain.model import is_accelerator
from idleshare.domain.pool import BASIS_RULE, BOUND_MEANING
from idleshare_cli import remote
from idleshare_cli.main import CommandError, UsageError
from idleshare_cli.present import human_text, kueue_api_text, paused_text, short_resource

GRANTS_ATTEMPTS = 3  # reads of every page when a recompute lands between two of them
# What GET pool shows only the first of: (its summary, the route that pages them, the key, its JSON type, a page)
SAMPLED = (
    ("excludedSummary", "excluded-nodes", "excludedNodes", dict, pages.EXCLUDED_PAGE_MAX),
    ("teamsSummary", "grants", "teams", dict, pages.GRANTS_PAGE_MAX),
    ("issuesSummary", "issues", "issues", list, pages.ISSUES_PAGE_MAX),
)
HISTORY_LIMIT_MAX = 1000
SUMMARY_WIDTH = 100  # history table; --format json has the whole summary


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    verbs = remote.verbs(sub, "pool", "the lendable pool of a governed cluster (admin API)")

    remote.cluster_command(
        verbs, "show", "capacity, allocation, shortfall, apply status, every excluded node (paged)", show
    )

    p = remote.cluster_command(verbs, "explain", "each team's borrow limits and which bound set them", explain)
    p.add_argument("--team", help="one team only")
    p.add_argument("--all-resources", action="store_true", help="cpu, memory, efa too (default: accelerators)")

    p = remote.cluster_command(verbs, "history", "past generations, newest first", history)
    first = pages.HISTORY_PAGE_DEFAULT
    p.add_argument(
        "--limit", type=int, default=first, metavar="N", help=f"at most N (1..{HISTORY_LIMIT_MAX}, default {first})"
    )


def _cluster(cluster: str) -> list[str]:
    if not cluster.strip():
        raise UsageError("--cluster: must not be empty")
    return ["clusters", cluster]


# ---------------------------------------------------------------------------------- commands
def show(args: argparse.Namespace) -> int:
    path = _cluster(args.cluster)
    api = remote.connect(args)
    remote.emit(args, whole_pool(api, path), show_text)
    return 0


def _paged(
    api: remote.ApiClient, path: list[str], route: str, key: str, kind: type, limit: int
) -> tuple[list[Any], Any]:
    """(the generations its pages named, in order, every entry) of every page of ``GET .../route``: more than one
    generation when the pages were read across a recompute."""
    merged: Any = kind()
    generations: dict[Any, None] = {}
    for page in api.each_page([*path, route], key, {"limit": limit}, kind):
        generations[page.get("generation")] = None
        if kind is list:
            merged.extend(page[key])
        else:
            merged.update(page[key])
    return list(generations), merged


def whole_pool(api: remote.ApiClient, path: list[str]) -> dict[str, Any]:
    """GET pool with what it shows only the first of (excluded nodes, teams, issues) read from their pages, all of
    the pool's generation: read again from the pool when a recompute lands in between (``GRANTS_ATTEMPTS`` times)."""
    seen: list[Any] = []
    for _ in range(GRANTS_ATTEMPTS):
        pool = api.get([*path, "pool"])
        if not isinstance(pool, dict):
            raise CommandError(f"GET /{'/'.join([*path, 'pool'])}: unexpected response: not an object")
        seen.append(pool.get("generation"))
        for summary_key, route, key, kind, limit in SAMPLED:
            summary = pool.get(summary_key)
            if isinstance(summary, dict) and summary.get("total", 0) != summary.get("shown", 0):
                generations, entries = _paged(api, path, route, key, kind, limit)
                if generations != [pool.get("generation")]:
                    seen += generations
                    break
                pool[key] = entries
                summary["shown"] = len(entries)
        else:
            return pool
    raise CommandError(
        f"GET /{'/'.join(path)}: the pool changed while its pages were read, {GRANTS_ATTEMPTS} times "
        f"(generations {', '.join(str(g) for g in dict.fromkeys(seen))}); try again"
    )


def all_grants(api: remote.ApiClient, path: list[str]) -> dict[str, Any]:
    """Every team's grants of one generation (``GET .../grants``, following ``NextToken``): ``{cluster,
    generation, teams}``. Pages read across a recompute are read again from the first."""
    generations: list[Any] = []
    for _ in range(GRANTS_ATTEMPTS):
        generations, teams = _paged(api, path, "grants", "teams", dict, pages.GRANTS_PAGE_MAX)
        if len(generations) == 1:
            return {"cluster": path[-1], "generation": generations[0], "teams": teams}
    raise CommandError(
        f"GET /{'/'.join([*path, 'grants'])}: the pool changed while its pages were read, {GRANTS_ATTEMPTS} times "
        f"(generations {', '.join(str(g) for g in generations)}); try again"
    )


def explain(args: argparse.Namespace) -> int:
    path = _cluster(args.cluster)
    if args.team is not None and not args.team.strip():
        raise UsageError("--team: must not be empty")
    api = remote.connect(args)
    data = api.get([*path, "grants", args.team]) if args.team else all_grants(api, path)
    remote.emit(args, data, lambda d: explain_text(d, all_resources=args.all_resources))
    return 0


def history(args: argparse.Namespace) -> int:
    path = _cluster(args.cluster)
    if not 1 <= args.limit <= HISTORY_LIMIT_MAX:
        raise UsageError(f"--limit: must be between 1 and {HISTORY_LIMIT_MAX} (got {args.limit})")
    api = remote.connect(args)
    generations: list[Any] = []
    pauses: list[Any] = []
    token: str | None = None
    while len(generations) < args.limit:
        query: dict[str, object] = {"limit": min(pages.HISTORY_PAGE_MAX, args.limit - len(generations))}
        if token:
            query["NextToken"] = token
        page = api.get([*path, "history"], query)
        found = page.get("generations") if isinstance(page, dict) else None
        if not isinstance(found, list):
            raise CommandError(f"GET /{'/'.join([*path, 'history'])}: unexpected response: no generations list")
        generations.extend(found)
        if not token and isinstance(page.get("pauses"), list):  # the first page names the pauses and resumes
            pauses = page["pauses"]
        token = page.get("NextToken")
        if not token or not found:
            break
    data = {"cluster": args.cluster, "generations": generations[: args.limit], "pauses": pauses}
    remote.emit(args, data, history_text)
    return 0


# ---------------------------------------------------------------------------------- rendering
def _pairs(*tables: Any) -> list[tuple[str, str]]:
    """Every (flavor, resource) any of these ``{flavor: {resource: quantity}}`` tables mentions, sorted."""
    seen: set[tuple[str, str]] = set()
    for table in tables:
        for flavor, per in (table or {}).items():
            seen.update((flavor, resource) for resource in per or {})
    return sorted(seen)


def _q(table: Any, flavor: str, resource: str) -> str:
    return human_text(((table or {}).get(flavor) or {}).get(resource), resource)


def show_text(pool: dict[str, Any]) -> str:
    status = str(pool.get("applyStatus") or "-")
    if pool.get("applyMessage"):
        status += f" ({pool['applyMessage']})"
    head: list[tuple[str, object]] = [
        ("Cluster", pool.get("cluster")),
        ("Generation", pool.get("generation")),
        ("Computed at", pool.get("computedAt")),
        ("Apply status", status),
        ("IdleResourceSharing", pool.get("idleResourceSharing")),
        ("Kueue", kueue_api_text(pool.get("kueueApi"))),
    ]
    if pool.get("readFailure"):
        head.append(("Last read failure", pool["readFailure"]))
    sections: list[str] = []
    paused = paused_text(pool.get("pause"))
    if paused is not None:
        skipped = pool["pause"].get("skippedRecomputes") or 0
        sections += [
            f"PAUSED: {paused}; {skipped} recompute(s) skipped. idleshare writes nothing to this cluster: what "
            f"follows is the pool as it was. `idleshare resume --cluster {pool.get('cluster')}` governs it again.",
            "",
        ]
    if pool.get("summary"):
        sections += [str(pool["summary"]), ""]
    sections += [f"{key + ':':<21}{'-' if value in (None, '') else value}" for key, value in head]
    capacity, allocated = pool.get("capacity"), pool.get("allocated")
    unallocated, shortfall = pool.get("unallocated"), pool.get("shortfall")
    rows = [
        [f, short_resource(r), _q(capacity, f, r), _q(allocated, f, r), _q(unallocated, f, r), _q(shortfall, f, r)]
        for f, r in _pairs(capacity, allocated, shortfall)
    ]
    sections += ["", "Lendable pool"]
    sections.append(remote.table(rows, ["FLAVOR", "RESOURCE", "CAPACITY", "ALLOCATED", "UNALLOCATED", "SHORTFALL"]))
    counts = pool.get("nodeCounts") or {}
    if counts:
        sections += ["", "Nodes"]
        sections.append(
            remote.table(
                [[f, c.get("eligible"), c.get("total")] for f, c in sorted(counts.items())],
                ["FLAVOR", "ELIGIBLE", "TOTAL"],
            )
        )
    excluded = pool.get("excludedNodes") or {}
    found = pool.get("excludedSummary")
    summary: dict[str, Any] = found if isinstance(found, dict) else {}
    total = summary.get("total", len(excluded))
    by_reason = summary.get("byReason") or {}
    title = f"Excluded nodes ({total})"
    if by_reason:
        title += ": " + ", ".join(f"{reason}={n}" for reason, n in sorted(by_reason.items()))
    sections += ["", title]
    sections.append(remote.table(sorted(excluded.items()), ["NODE", "REASON"]))
    if total != len(excluded):
        sections.append(f"(the first {len(excluded)} of {total}: GET {summary.get('route', 'excluded-nodes')})")
    issues = pool.get("issues") or []
    if issues:
        sections += ["", "Issues"]
        sections.append(
            remote.table(
                [[i.get("severity"), i.get("code"), i.get("subject"), i.get("message")] for i in issues],
                ["SEVERITY", "CODE", "SUBJECT", "MESSAGE"],
            )
        )
    return "\n".join(sections)


def _derivations(why: Any) -> Iterable[tuple[str, str, dict[str, Any]]]:
    """(flavor, resource, derivation) from ``{flavor: {resource: d}}`` or a list of dicts naming both."""
    if isinstance(why, dict):
        for flavor, per in sorted(why.items()):
            for resource, d in sorted((per or {}).items()):
                if isinstance(d, dict):
                    yield flavor, resource, d
    elif isinstance(why, list):
        for d in why:
            if isinstance(d, dict):
                yield str(d.get("flavor", "")), str(d.get("resource", "")), d


def _teams(data: dict[str, Any]) -> dict[str, Any]:
    if isinstance(data.get("teams"), dict):
        return dict(data["teams"])
    team = data.get("team")
    if isinstance(team, str):  # one team: {"cluster", "generation", "team", ...its grant}
        return {team: data.get("grant", data)}
    if isinstance(team, dict):
        return {str(data.get("name") or team.get("team") or "-"): team}
    return {}


def explain_text(data: dict[str, Any], all_resources: bool = False) -> str:
    rows = []
    bases: set[str] = set()
    for team, grant in sorted(_teams(data).items()):
        strategy = str(grant.get("strategy") or "-")
        if grant.get("activationState") == "Disabled":
            strategy += " (Disabled)"
        for flavor, resource, d in _derivations(grant.get("why")):
            if not all_resources and not is_accelerator(resource):
                continue
            bases.add(str(d.get("basis") or "Pool"))  # a pool stored before the basis existed: the Pool basis
            rows.append(
                [
                    team,
                    strategy,
                    flavor,
                    short_resource(resource),
                    _q(grant.get("nominal"), flavor, resource),
                    human_text(d.get("pool"), resource, "0"),
                    f"{d.get('percent')}%" if d.get("percent") is not None else None,
                    human_text(d.get("percentCap"), resource, "0"),
                    None if d.get("absoluteCap") is None else human_text(d["absoluteCap"], resource, "0"),
                    human_text(d.get("limit"), resource, "0"),
                    d.get("bound"),
                ]
            )
    head = f"Cluster {data.get('cluster', '-')}, generation {data.get('generation', '-')}: "
    rules = [f"{b} basis: {BASIS_RULE[b]}" for b in sorted(bases) if b in BASIS_RULE] or [BASIS_RULE["Quota"]]
    head += "; ".join(rules) + "; SET BY names the rule that won"
    table = remote.table(
        rows,
        ["TEAM", "STRATEGY", "FLAVOR", "RES", "NOMINAL", "POOL SEEN", "PERCENT", "% CAP", "ABS CAP", "LIMIT", "SET BY"],
    )
    used = sorted({str(r[-1]) for r in rows if r[-1] in BOUND_MEANING})
    legend = "; ".join(f"{b} = {BOUND_MEANING[b]}" for b in used)
    if not all_resources:
        legend += ("\n" if legend else "") + "(accelerators only; --all-resources shows cpu, memory and efa too)"
    return "\n".join([head, "", table] + ([f"\n{legend}"] if legend else []))


def changes_text(changes: Any) -> str | None:
    """What moved in a generation, in a few words (the JSON has the details)."""
    if isinstance(changes, list):
        return "; ".join(str(c) for c in changes) or None
    if not isinstance(changes, dict):
        return None if changes is None else str(changes)
    if changes.get("first"):
        return "first pool"
    parts = []
    if "unallocated" in changes:
        parts.append("unallocated capacity")
    if changes.get("teams"):
        parts.append("limits of " + ", ".join(str(t) for t in changes["teams"]))
    if "excludedNodes" in changes:
        moved = changes["excludedNodes"] or {}
        # counts ({"count": n, "added": ...}) since the change summary is bounded; a {node: reason} map before
        count = moved.get("count") if isinstance(moved, dict) and isinstance(moved.get("count"), int) else len(moved)
        parts.append(f"excluded nodes ({count})")
    return "; ".join(parts) or None


def history_text(data: dict[str, Any]) -> str:
    rows = []
    for g in data.get("generations") or []:
        summary = str(g.get("summary") or "")
        summary = summary if len(summary) <= SUMMARY_WIDTH else summary[: SUMMARY_WIDTH - 3] + "..."
        rows.append([g.get("generation"), g.get("computedAt"), changes_text(g.get("changes")), summary])
    text = f"Cluster {data.get('cluster')}: {len(rows)} generation(s), newest first\n\n" + remote.table(
        rows, ["GENERATION", "COMPUTED AT", "CHANGES", "SUMMARY"]
    )
    pauses = [p for p in data.get("pauses") or [] if isinstance(p, dict)]
    if pauses:
        rows = [[p.get("action"), p.get("at"), p.get("by"), p.get("reason") or "-"] for p in pauses]
        text += "\n\nPauses and resumes, newest first\n" + remote.table(rows, ["ACTION", "AT", "BY", "REASON"])
    return text
