"""The HTML report: one self-contained page (inline CSS and SVG, no script, no font, no fetch) from the JSON
documents the admin API serves, or that `idleshare plan` computes offline.

- per flavor, a bar of its capacity: guaranteed in use (in use within nominal), borrowed and idle (from the usage
  snapshot); without usage, the capacity granted as nominal quota beside the unallocated quota (the Cohort's own);
- per team, its nominal, borrowing and lending limits, and what it uses, borrows and lends;
- why each borrowing limit is what it is (the pool the team saw, the percent cap, the absolute cap, the bound);
- accelerators idle while work is pending, excluded nodes and their reasons, issues;
- what the usage sample could not read of Kueue's objects, named (a gap, never zero usage);
- usage over a period as a chart (allocated and borrowed hours per team), with its gaps named.

A pure function of its inputs (:func:`render`): every value it shows is escaped (``html.escape``); every number
carries its exact source quantity in ``data-value`` and its place in ``data-field`` / ``data-team`` /
``data-flavor`` / ``data-resource``, so a reader (or a test) can check the page against the JSON.
"""

from __future__ import annotations

import functools
import html
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from fractions import Fraction
from typing import Any

from idleshare.domain.model import is_accelerator
from idleshare.domain.pool import BASIS_RULE, BOUND_MEANING
from idleshare.domain.quantity import QuantityError, exact, format_quantity, parse_quantity
from idleshare.domain.usage import parse_time
from idleshare_cli.present import human_text, kueue_api_text, paused_text, short_resource

# The page fetches nothing, and says so to the browser: no script runs, nothing loads from anywhere.
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
OFFLINE_NOTE = "Usage needs a deployed cluster: `idleshare plan` reads no Kueue status offline."
NO_USAGE_NOTE = "No usage yet."
GUARANTEED, BORROWED, IDLE = "#2f6db5", "#e07b24", "#d5dbe3"
NOMINAL_COLOR, POOL_COLOR, SHORTFALL_COLOR = "#5a8fcf", "#7bbf7a", "#c94a4a"
TEAM_COLORS = ("#2f6db5", "#e07b24", "#3c9a5f", "#8e5bb5", "#c94a4a", "#2a9d9d", "#b5832f", "#6b7a8f")
GRANULARITY_SECONDS = {"hour": 3600, "day": 86400}
MAX_TICKS = 12
LIMIT_FIELDS = (("nominal", "nominal"), ("borrowingLimit", "borrowing limit"), ("lendingLimit", "lending limit"))
USE_FIELDS = (("inUse", "in use"), ("borrowed", "borrowed"), ("lent", "lent"))
WHY_FIELDS: tuple[tuple[str, str], ...] = (
    ("basis", "basis"),
    ("pool", "pool the team sees (unallocated + lenders' quota)"),
    ("percent", "percent"),
    ("percentCap", "% cap"),
    ("absoluteCap", "absolute cap"),
    ("limit", "limit"),
    ("bound", "set by"),
)

Json = Mapping[str, Any]


def e(value: object) -> str:
    """Text or an attribute value, escaped (quotes too)."""
    return html.escape("" if value is None else str(value), quote=True)


def amount(text: object) -> Fraction | None:
    """A quantity string's exact value; None for none or not a quantity."""
    if text is None or text == "":
        return None
    try:
        return Fraction(parse_quantity(str(text)))
    except QuantityError:
        return None


def _get(table: object, *keys: str) -> Any:
    for key in keys:
        if not isinstance(table, Mapping):
            return None
        table = table.get(key)
    return table


def _dict(value: object) -> dict[str, Any]:
    return dict(value) if isinstance(value, Mapping) else {}


def _num(
    value: object, resource: str, field: str, *, team: str = "", flavor: str = "", zero: str = "-", tag: str = "td"
) -> str:
    """One number: the readable text, the exact quantity in ``data-value``, where it belongs in ``data-*``."""
    raw = "" if value is None else str(value)
    attrs = f' data-field="{e(field)}" data-value="{e(raw)}"'
    if team:
        attrs += f' data-team="{e(team)}"'
    if flavor:
        attrs += f' data-flavor="{e(flavor)}" data-resource="{e(resource)}"'
    return f'<{tag} class="num"{attrs}>{e(human_text(value, resource, zero))}</{tag}>'


def _hours(value: Fraction) -> str:
    """Hours to two decimals (rounded down: what the page shows never exceeds the exact sum)."""
    hundredths = (value * 100).__floor__()
    whole, rest = divmod(hundredths, 100)
    return str(whole) if rest == 0 else f"{whole}.{rest:02d}".rstrip("0")


def _res(resource: str) -> str:
    return f'<span title="{e(resource)}">{e(short_resource(resource))}</span>'


# --------------------------------------------------------------------------------------------- page
def render(
    pool: Json,
    *,
    grants: Json | None = None,
    excluded_nodes: Mapping[str, str] | None = None,
    usage: Json | None = None,
    history: Json | None = None,
    usage_note: str | None = None,
    generated_at: str | None = None,
) -> str:
    """The page. ``pool``: the pool document (GET pool, or `idleshare plan`'s JSON); ``grants``: GET grants
    (its ``teams`` win over the pool's); ``excluded_nodes``: every excluded node (GET excluded-nodes, all pages;
    default: the pool's); ``usage``: GET usage (the snapshot); ``history``: GET usage?from&to&granularity;
    ``usage_note``: why there is no usage (shown where usage would be)."""
    teams = _dict(_get(grants, "teams")) or _dict(pool.get("teams"))
    excluded = dict(excluded_nodes) if excluded_nodes is not None else _dict(pool.get("excludedNodes"))
    cluster = str(pool.get("cluster") or _get(usage, "cluster") or _get(grants, "cluster") or "plan (offline)")
    note = usage_note or (None if usage or history else NO_USAGE_NOTE)
    body = [
        _header(pool, cluster, usage, generated_at),
        _flavors(pool, usage, note),
        _shortfall(pool),
        _unborrowable(pool, teams),
        _idle_while_pending(usage),
        _unbound(usage),
        _not_read(usage),
        _teams(pool, teams, usage, note),
        _why(teams),
        _history(history, note),
        _excluded(pool, excluded),
        _headroom(pool),
        _issues(pool),
        "<footer>A self-contained page: it loads nothing from anywhere. Every number carries its exact Kubernetes "
        "quantity in <code>data-value</code>.</footer>",
    ]
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{e(CSP)}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>idleshare report: {e(cluster)}</title><style>{STYLE}</style></head>\n<body>\n"
        + "\n".join(part for part in body if part)
        + "\n</body></html>\n"
    )


STYLE = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;color:#1d2430;margin:0;
padding:24px 32px;background:#f6f7f9;max-width:1200px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #d5dbe3;padding-bottom:4px}
h3{font-size:14px;margin:14px 0 4px}
.meta{color:#566070;margin:2px 0}.summary{margin:6px 0 0;color:#334}
section{background:#fff;border:1px solid #e1e5ea;border-radius:6px;padding:4px 18px 14px;margin:14px 0}
table{border-collapse:collapse;margin:6px 0;font-size:13px}
th,td{padding:3px 10px;border-bottom:1px solid #eceff3;text-align:left;vertical-align:top}
th{background:#f1f3f6;font-weight:600}td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
.note{color:#6a5200;background:#fff6d6;border:1px solid #f0dc8c;border-radius:4px;padding:6px 10px;display:inline-block}
.alert{color:#7a1f1f;background:#fde8e8;border:1px solid #f2b8b8;border-radius:4px;padding:6px 10px}
.legend span{display:inline-block;margin-right:14px}.sw{display:inline-block;width:11px;height:11px;
border-radius:2px;margin-right:4px;vertical-align:-1px}
.bar{margin:2px 0 10px}.bar .label{font-size:12px;color:#445}
.flavor{display:inline-block;vertical-align:top;width:540px;margin-right:18px}
.team{border-top:1px solid #eceff3;padding-top:6px}.tag{font-size:12px;color:#566070;margin-left:8px}
details summary{cursor:pointer;color:#2f6db5;margin:6px 0}code{font-size:12px}
footer{color:#7a8494;font-size:12px;margin:18px 0}
svg text{font:11px system-ui,"DejaVu Sans",sans-serif;fill:#445}
"""


def _header(pool: Json, cluster: str, usage: Json | None, generated_at: str | None) -> str:
    facts: list[str] = []
    for key, label in (("generation", "generation"), ("computedAt", "computed at")):
        if pool.get(key) not in (None, ""):
            facts.append(f'{e(label)} <b data-field="{e(key)}">{e(pool[key])}</b>')
    facts.append(f'IdleResourceSharing <b data-field="idleResourceSharing">{e(pool.get("idleResourceSharing"))}</b>')
    if pool.get("kueueApi"):
        facts.append(f'Kueue <b data-field="kueueApi">{e(kueue_api_text(pool["kueueApi"]))}</b>')
    if pool.get("applyStatus"):
        status = str(pool["applyStatus"]) + (f" ({pool['applyMessage']})" if pool.get("applyMessage") else "")
        facts.append(f'apply <b data-field="applyStatus">{e(status)}</b>')
    if _get(usage, "sampledAt"):
        facts.append(f'usage sampled at <b data-field="sampledAt">{e(_get(usage, "sampledAt"))}</b>')
    if generated_at:
        facts.append(f"report generated {e(generated_at)}")
    out = [f'<header><h1>idleshare · <span data-field="cluster">{e(cluster)}</span></h1>']
    out.append('<p class="meta">' + " · ".join(facts) + "</p>")
    if pool.get("summary"):
        out.append(f'<p class="summary">{e(pool["summary"])}</p>')
    if pool.get("readFailure"):
        out.append(f'<p class="alert">Last read failure: {e(pool["readFailure"])}</p>')
    paused = paused_text(pool.get("pause"))
    if paused is not None:
        out.append(
            f'<p class="alert" data-field="pause"><b>Paused</b>: {e(paused)}. idleshare writes nothing to this '
            "cluster: the pool below is as it was when it was paused.</p>"
        )
    return "\n".join(out) + "</header>"


def _legend(items: Iterable[tuple[str, str]]) -> str:
    return (
        '<p class="legend">'
        + "".join(f'<span><i class="sw" style="background:{c}"></i>{e(label)}</span>' for c, label in items)
        + "</p>"
    )


def _bar(segments: list[tuple[str, str, Fraction]], total: Fraction, title: str, width: int = 520) -> str:
    """A horizontal stacked bar of ``total``: (color, label, amount) segments, each with its own tooltip."""
    parts = [f'<svg role="img" aria-label="{e(title)}" width="{width}" height="18" viewBox="0 0 {width} 18">']
    parts.append(f'<rect x="0" y="0" width="{width}" height="18" fill="#f1f3f6"/>')
    x = Fraction(0)
    for color, label, value in segments:
        if value <= 0 or total <= 0:
            continue
        w = min(value / total, 1 - x / width) * width
        parts.append(
            f'<rect x="{float(x):.2f}" y="0" width="{float(w):.2f}" height="18" fill="{color}" '
            f'data-segment="{e(label)}"><title>{e(label)}</title></rect>'
        )
        x += w
    parts.append("</svg>")
    return "".join(parts)


# ----------------------------------------------------------------------------------------- flavors
def _pairs(*tables: object) -> list[tuple[str, str]]:
    seen: set[tuple[str, str]] = set()
    for table in tables:
        for flavor, per in _dict(table).items():
            seen.update((str(flavor), str(r)) for r in _dict(per))
    return sorted(seen)


def _any_amount(pair: tuple[str, str], *tables: object) -> bool:
    """Whether a flavor's resource has anything to show: a row of zeros (a Neuron device on a GPU flavor) is left
    out."""
    for table in tables:
        value = _get(table, *pair)
        values = value.values() if isinstance(value, Mapping) else [value]
        if any(amount(v) for v in values if isinstance(v, str)):
            return True
    return False


def _flavors(pool: Json, usage: Json | None, note: str | None) -> str:
    capacity, used = pool.get("capacity"), _dict(_get(usage, "flavors"))
    allocated, unallocated, shortfall = pool.get("allocated"), pool.get("unallocated"), pool.get("shortfall")
    pairs = [p for p in _pairs(capacity, used) if _any_amount(p, capacity, allocated, unallocated, shortfall, used)]
    counts = _dict(pool.get("nodeCounts"))
    out = ['<section id="flavors"><h2>Capacity per flavor</h2>']
    if used:
        out.append(
            _legend(
                [
                    (GUARANTEED, "guaranteed in use (within nominal)"),
                    (BORROWED, "borrowed (above nominal)"),
                    (IDLE, "idle"),
                ]
            )
        )
    else:
        out.append(
            _legend(
                [
                    (NOMINAL_COLOR, "nominal (granted quota)"),
                    (POOL_COLOR, "unallocated (the Cohort's own quota)"),
                    (IDLE, "not granted"),
                ]
            )
        )
        if note:
            out.append(f'<p class="note" data-usage="none">{e(note)}</p>')
    flavors = sorted({f for f, _ in pairs} | set(counts))
    for flavor in flavors:
        count = _dict(counts.get(flavor))
        nodes = f"{count.get('eligible', '-')} of {count.get('total', '-')} nodes eligible" if count else ""
        out.append(
            f'<div class="flavor" data-flavor-card="{e(flavor)}"><h3>{e(flavor)}<span class="tag">{e(nodes)}</span></h3>'
        )
        shown = [(f, r) for f, r in pairs if f == flavor and is_accelerator(r)]
        if not shown:
            out.append('<p class="meta">no accelerators (cpu and memory: see the table below)</p>')
        for _, resource in shown:
            out.append(_flavor_bar(flavor, resource, capacity, used, allocated, unallocated, shortfall))
        out.append("</div>")
    out.append(_flavor_table(pairs, capacity, used, allocated, unallocated, shortfall))
    return "\n".join(out) + "</section>"


def _shortfall(pool: Json) -> str:
    """Per flavor and resource where the quotas guarantee more than the eligible nodes hold: the amounts."""
    shortfall = _dict(pool.get("shortfall"))
    rows = [(f, r, q) for f, per in sorted(shortfall.items()) for r, q in sorted(_dict(per).items()) if amount(q)]
    if not rows:
        return ""
    out = [
        '<section id="shortfall"><h2>Shortfall: quotas guarantee more than the nodes hold</h2>',
        '<p class="alert">Kueue admits only what the nodes hold: a team may wait within its own quota here, and '
        "nothing of these is lent or borrowed.</p>",
        '<table><tr><th>flavor</th><th>resource</th><th class="num">capacity</th>'
        '<th class="num">guaranteed (nominal)</th><th class="num">short</th></tr>',
    ]
    for flavor, resource, short in rows:
        out.append(
            f'<tr data-shortfall="{e(flavor)}|{e(resource)}"><td>{e(flavor)}</td><td>{_res(resource)}</td>'
            f"{_num(_get(pool.get('capacity'), flavor, resource), resource, 'shortCapacity', flavor=flavor, zero='0')}"
            f"{_num(_get(pool.get('allocated'), flavor, resource), resource, 'shortGuaranteed', flavor=flavor, zero='0')}"
            f"{_num(short, resource, 'short', flavor=flavor)}</tr>"
        )
    return "\n".join(out) + "</table></section>"


def unborrowable_reason(pool: Json, teams: Mapping[str, Any], flavor: str, resource: str) -> str | None:
    """Why no team may borrow the unallocated ``resource`` of ``flavor`` (docs/spec.md §2), or None: one may, or
    nothing is unallocated."""
    if not amount(_get(pool.get("unallocated"), flavor, resource)):
        return None
    grants = [_dict(g) for g in teams.values()]
    if any(amount(_get(g.get("borrowingLimit"), flavor, resource)) for g in grants):
        return None
    if pool.get("idleResourceSharing") == "Disabled":
        return "IdleResourceSharing is Disabled: the unallocated capacity is not lent"
    borrowers = [
        g for g in grants if g.get("strategy") == "LendAndBorrow" and g.get("activationState", "Enabled") == "Enabled"
    ]
    if not borrowers:
        return "no team may borrow: none is LendAndBorrow with its quota enabled"
    bases = {str(d.get("basis")) for g in grants for per in _dict(g.get("why")).values() for d in _dict(per).values()}
    if "Pool" not in bases and not any(flavor in _dict(g.get("nominal")) for g in borrowers):
        return (
            f"Quota basis: a team borrows only on the instance types its quota names, and no borrowing team's quota "
            f"names {flavor}; a borrowing team's quota naming it, or the cluster's Pool basis, makes it lendable"
        )
    return "every borrowing team's limit is 0 here (see why each limit is what it is)"


def _unborrowable(pool: Json, teams: Mapping[str, Any]) -> str:
    """Unallocated capacity that no team may borrow, with the reason (on the Quota basis: no borrowing team's quota
    names the instance type)."""
    unallocated = _dict(pool.get("unallocated"))
    rows = [
        (f, r, why)
        for f, per in sorted(unallocated.items())
        for r in sorted(_dict(per))
        if is_accelerator(r) and (why := unborrowable_reason(pool, teams, f, r)) is not None
    ]
    if not rows:
        return ""
    out = [
        '<section id="unborrowable"><h2>Capacity no team may borrow</h2>',
        '<table><tr><th>flavor</th><th>resource</th><th class="num">unallocated</th><th>why</th></tr>',
    ]
    for flavor, resource, why in rows:
        out.append(
            f'<tr data-unborrowable="{e(flavor)}|{e(resource)}"><td>{e(flavor)}</td><td>{_res(resource)}</td>'
            f"{_num(_get(unallocated, flavor, resource), resource, 'unborrowable', flavor=flavor)}"
            f'<td data-field="unborrowableReason">{e(why)}</td></tr>'
        )
    return "\n".join(out) + "</table></section>"


def _flavor_bar(
    flavor: str, resource: str, capacity: Any, used: dict[str, Any], allocated: Any, unallocated: Any, shortfall: Any
) -> str:
    u = _get(used, flavor, resource)
    label = f"{flavor} {short_resource(resource)}"
    if isinstance(u, Mapping):
        total = amount(u.get("capacity")) or amount(_get(capacity, flavor, resource)) or Fraction(0)
        in_use, borrowed = amount(u.get("inUse")) or Fraction(0), amount(u.get("borrowed")) or Fraction(0)
        idle = amount(u.get("idle"))
        idle = total - in_use if idle is None else idle
        segments = [
            (
                GUARANTEED,
                f"guaranteed in use {human_text(_fmt(in_use - borrowed, resource), resource, '0')}",
                in_use - borrowed,
            ),
            (BORROWED, f"borrowed {human_text(u.get('borrowed'), resource, '0')}", borrowed),
            (IDLE, f"idle {human_text(u.get('idle'), resource, '0')}", idle),
        ]
        text = (
            f"{_num(u.get('capacity'), resource, 'capacity', flavor=flavor, tag='b', zero='0')} {e(short_resource(resource))}: "
            f"{_num(_fmt(in_use - borrowed, resource), resource, 'guaranteedInUse', flavor=flavor, tag='b', zero='0')} guaranteed in use, "
            f"{_num(u.get('borrowed'), resource, 'borrowed', flavor=flavor, tag='b', zero='0')} borrowed, "
            f"{_num(u.get('idle'), resource, 'idle', flavor=flavor, tag='b', zero='0')} idle"
        )
    else:
        total = amount(_get(capacity, flavor, resource)) or Fraction(0)
        nominal = amount(_get(allocated, flavor, resource)) or Fraction(0)
        lendable = amount(_get(unallocated, flavor, resource)) or Fraction(0)
        segments = [
            (NOMINAL_COLOR, f"nominal {human_text(_get(allocated, flavor, resource), resource, '0')}", nominal),
            (POOL_COLOR, f"unallocated {human_text(_get(unallocated, flavor, resource), resource, '0')}", lendable),
            (IDLE, "not granted", total - nominal - lendable),
        ]
        text = (
            f"{_num(_get(capacity, flavor, resource), resource, 'capacity', flavor=flavor, tag='b', zero='0')} "
            f"{e(short_resource(resource))}: "
            f"{_num(_get(allocated, flavor, resource), resource, 'allocated', flavor=flavor, tag='b', zero='0')} nominal, "
            f"{_num(_get(unallocated, flavor, resource), resource, 'unallocated', flavor=flavor, tag='b', zero='0')} "
            "unallocated (the Cohort's own quota; the pool a team sees adds what lenders do not use)"
        )
        short = _get(shortfall, flavor, resource)
        if amount(short):
            text += f', <span class="alert">{_num(short, resource, "shortfall", flavor=flavor, tag="b")} short</span>'
    return (
        f'<div class="bar" data-bar="{e(flavor)}|{e(resource)}">{_bar(segments, total, label)}'
        f'<div class="label">{text}</div></div>'
    )


def _fmt(value: Fraction, resource: str = "") -> str:
    """An exact amount as a Kubernetes quantity string (what ``data-value`` holds)."""
    return format_quantity(exact(value), resource)


def _flavor_table(
    pairs: list[tuple[str, str]], capacity: Any, used: dict[str, Any], allocated: Any, unallocated: Any, shortfall: Any
) -> str:
    head = ["flavor", "resource", "capacity", "nominal", "unallocated", "shortfall"]
    if used:
        head += ["in use", "borrowed", "idle"]

    def row(flavor: str, resource: str) -> str:
        cells = [f"<td>{e(flavor)}</td><td>{_res(resource)}</td>"]
        cells.append(_num(_get(capacity, flavor, resource), resource, "capacity", flavor=flavor))
        cells.append(_num(_get(allocated, flavor, resource), resource, "allocated", flavor=flavor))
        cells.append(_num(_get(unallocated, flavor, resource), resource, "unallocated", flavor=flavor))
        cells.append(_num(_get(shortfall, flavor, resource), resource, "shortfall", flavor=flavor))
        if used:
            for field in ("inUse", "borrowed", "idle"):
                cells.append(_num(_get(used, flavor, resource, field), resource, field, flavor=flavor))
        return "<tr>" + "".join(cells) + "</tr>"

    return _split_table(pairs, head, row, "the pool")


def _split_table(
    pairs: Sequence[tuple[str, ...]], head: list[str], row: Callable[..., str], what: str, lead: int = 2
) -> str:
    """Accelerators in a table on the page, every other resource in one folded below it."""
    header = (
        "<tr>" + "".join(f"<th{' class=num' if i >= lead else ''}>{e(h)}</th>" for i, h in enumerate(head)) + "</tr>"
    )
    accel = [row(*p) for p in pairs if is_accelerator(p[-1])]
    rest = [row(*p) for p in pairs if not is_accelerator(p[-1])]
    out = f"<table>{header}{''.join(accel)}</table>" if accel else '<p class="meta">(no accelerators)</p>'
    if rest:
        out += f"<details><summary>cpu, memory, efa: {e(what)} for every other resource</summary>"
        out += f"<table>{header}{''.join(rest)}</table></details>"
    return out


# ------------------------------------------------------------------------------------------- teams
def _idle_while_pending(usage: Json | None) -> str:
    rows = _get(usage, "idleWhilePending")
    above = _get(usage, "aboveLimit")
    jobs = _get(usage, "pending")
    rows = rows if isinstance(rows, list) else []
    above = above if isinstance(above, list) else []
    jobs = jobs if isinstance(jobs, list) else []
    if not rows and not above and not jobs:
        return ""
    out = ['<section id="idle-while-pending"><h2>Idle while work is pending</h2>']
    out += _above_limit(above)
    if not rows:
        return "\n".join([*out, *_pending_jobs(jobs)]) + "</section>"
    out.append('<p class="alert">Accelerators sit idle in a flavor while a team has pending workloads for it.</p>')
    out.append(
        "<table><tr><th>team</th><th>flavor</th><th>resource</th><th class=num>idle</th><th>why (idleshare)</th>"
        "<th>Kueue's reason</th></tr>"
    )
    for item in rows:
        if not isinstance(item, Mapping):
            continue
        team, flavor, resource = str(item.get("team", "")), str(item.get("flavor", "")), str(item.get("resource", ""))
        out.append(
            f"<tr data-idle-pending><td>{e(team)}</td><td>{e(flavor)}</td><td>{_res(resource)}</td>"
            f"{_num(item.get('idle'), resource, 'idleWhilePending', team=team, flavor=flavor)}"
            f'<td data-cause="{e(item.get("cause") or "")}"><b>{e(item.get("cause") or "")}</b>'
            f"{': ' if item.get('why') else ''}{e(item.get('why') or '')}</td>"
            f"<td>{e(item.get('pendingReason'))}</td></tr>"
        )
    return "\n".join([*out, "</table>", *_pending_jobs(jobs)]) + "</section>"


def _unbound(usage: Json | None) -> str:
    """Admitted but not placed: pods of admitted workloads no node has taken, per team and flavor."""
    error = _get(usage, "unboundError")
    rows = [u for u in (_get(usage, "unbound") or []) if isinstance(u, Mapping)]
    if not rows and not error:
        return ""
    out = ['<section id="unbound"><h2>Admitted but not placed</h2>']
    if error:
        return "\n".join([*out, f'<p class="note">pods not read: {e(error)}</p></section>'])
    out.append(
        f'<p class="alert">{e(_get(usage, "unboundPods"))} pods of admitted workloads have no node, the oldest admitted '
        f"{e(_get(usage, 'oldestUnboundSeconds'))} s ago: Kueue counted their quota, the scheduler found no node "
        "(the pool overstates what pods can get).</p>"
    )
    out.append(
        "<table><tr><th>team</th><th>flavor</th><th class=num>pods</th><th class=num>workloads</th>"
        "<th>admitted since</th><th>the scheduler's reason</th></tr>"
    )
    for u in rows:
        out.append(
            f'<tr data-unbound="{e(u.get("team"))}"><td>{e(u.get("team"))}</td><td>{e(u.get("flavor"))}</td>'
            f"<td class=num>{e(u.get('pods'))}</td><td class=num>{e(u.get('workloads'))}</td>"
            f"<td>{e(u.get('since'))}</td><td>{e(u.get('reason') or '')}</td></tr>"
        )
    return "\n".join([*out, "</table></section>"])


def _not_read(usage: Json | None) -> str:
    """What the sample could not read of Kueue's objects, each named (object, field, problem), as `idleshare usage`'s
    "Not read" table: a gap, never zero usage."""
    rows = [u for u in (_get(usage, "unreadable") or []) if isinstance(u, Mapping)]
    if not rows:
        return ""
    out = [
        '<section id="not-read"><h2>Not read</h2>',
        '<p class="note">A gap, never zero usage: the flavor/resource is left out above.</p>',
        "<table><tr><th>object</th><th>field</th><th>problem</th></tr>",
    ]
    out += [
        f'<tr data-unreadable="{e(u.get("object"))}"><td>{e(u.get("object"))}</td><td><code>{e(u.get("field"))}</code>'
        f"</td><td>{e(u.get('problem'))}</td></tr>"
        for u in rows
    ]
    return "\n".join([*out, "</table></section>"])


def _pending_jobs(rows: list[Any]) -> list[str]:
    """Every pending Job, what it asks for and why it waits (idleshare's cause; Kueue's words in its Workload)."""
    rows = [r for r in rows if isinstance(r, Mapping)]
    if not rows:
        return []
    out = ["<h3>Pending Jobs and why they wait</h3>",
           "<table><tr><th>team</th><th>job</th><th>flavor</th><th>resource</th><th class=num>asks</th>"
           "<th>why (idleshare)</th></tr>"]  # fmt: skip
    for j in rows:
        out.append(
            f'<tr data-pending-job="{e(j.get("job"))}"><td>{e(j.get("team"))}</td><td>{e(j.get("job"))}</td>'
            f"<td>{e(j.get('flavor'))}</td><td>{_res(str(j.get('resource', '')))}</td>"
            f"<td class=num>{e(j.get('request'))}</td>"
            f'<td data-cause="{e(j.get("cause") or "")}"><b>{e(j.get("cause") or "")}</b>: {e(j.get("why") or "")}'
            "</td></tr>"
        )
    return [*out, "</table>"]


def _above_limit(rows: list[Any]) -> list[str]:
    """Teams borrowing more than their current limit: it was lowered after Kueue admitted the work."""
    if not rows:
        return []
    out = ['<p class="alert">Borrowing above its limit: the limit was lowered (a node failed, a quota or a policy '
           "changed) after Kueue admitted the work, which Kueue does not evict; nothing more is borrowed until it "
           "ends.</p>",
           "<table><tr><th>team</th><th>flavor</th><th>resource</th><th class=num>borrowed</th>"
           "<th class=num>limit</th></tr>"]  # fmt: skip
    for a in rows:
        if isinstance(a, Mapping):
            out.append(
                f"<tr data-above-limit><td>{e(a.get('team'))}</td><td>{e(a.get('flavor'))}</td>"
                f"<td>{_res(str(a.get('resource', '')))}</td><td class=num>{e(a.get('borrowed'))}</td>"
                f"<td class=num>{e(a.get('limit'))}</td></tr>"
            )
    return [*out, "</table>"]


def _teams(pool: Json, teams: dict[str, Any], usage: Json | None, note: str | None) -> str:
    used_teams = _dict(_get(usage, "teams"))
    out = ['<section id="teams"><h2>Teams: nominal, limits and use</h2>']
    if not used_teams and note:
        out.append(f'<p class="note" data-usage="none">{e(note)}</p>')
    if not teams and not used_teams:
        out.append('<p class="meta">(no teams)</p>')
    for team in sorted(set(teams) | set(used_teams)):
        grant, used = _dict(teams.get(team)), _dict(used_teams.get(team))
        used_flavors = _dict(used.get("flavors"))
        tags = [str(grant.get("strategy") or "-")]
        if grant.get("activationState") and grant.get("activationState") != "Enabled":
            tags.append(str(grant["activationState"]))
        if grant.get("quota"):
            tags.append(f"quota {grant['quota']}")
        workloads = _dict(used.get("workloads"))
        facts = ""
        if workloads or "preemptions" in used:
            facts = '<p class="meta">workloads: ' + ", ".join(
                f'<b data-team="{e(team)}" data-field="{e(k)}" data-value="{e(workloads.get(k))}">{e(workloads.get(k, "-"))}</b> {e(k)}'
                for k in ("pending", "reserving", "admitted")
            )
            facts += (
                f' · preemptions <b data-team="{e(team)}" data-field="preemptions" data-value="{e(used.get("preemptions"))}">'
                f"{e(used.get('preemptions', '-'))}</b></p>"
            )
        out.append(
            f'<div class="team" data-team-card="{e(team)}"><h3>{e(team)}<span class="tag">{e(" · ".join(tags))}</span></h3>{facts}'
        )
        pairs = _pairs(grant.get("nominal"), grant.get("borrowingLimit"), grant.get("lendingLimit"), used_flavors)
        pairs = [
            (f, r)
            for f, r in pairs
            if any(amount(_get(grant, k, f, r)) for k, _ in LIMIT_FIELDS)
            or any(amount(_get(used_flavors, f, r, k)) for k, _ in USE_FIELDS)
        ]
        head = ["flavor", "resource", *(label for _, label in LIMIT_FIELDS)]
        if used_teams:
            head += [label for _, label in USE_FIELDS]
        head.append("use of nominal + borrowing limit")

        row = functools.partial(_team_row, team, grant, used_flavors, bool(used_teams))
        out.append(_split_table(pairs, head, row, f"{team}'s limits"))
        out.append("</div>")
    if teams:
        items = [(GUARANTEED, "in use within nominal"), (BORROWED, "borrowed"), (IDLE, "nominal not in use")]
        out.append(_legend([*items, ("#f1f3f6", "borrowing headroom (up to the borrowing limit)")]))
    return "\n".join(out) + "</section>"


def _team_row(
    team: str, grant: Mapping[str, Any], used_flavors: Mapping[str, Any], show_use: bool, flavor: str, resource: str
) -> str:
    cells = [f"<td>{e(flavor)}</td><td>{_res(resource)}</td>"]
    for key, _ in LIMIT_FIELDS:
        cells.append(_num(_get(grant, key, flavor, resource), resource, key, team=team, flavor=flavor))
    used = _dict(_get(used_flavors, flavor, resource))
    if show_use:
        for key, _ in USE_FIELDS:
            cells.append(_num(used.get(key), resource, key, team=team, flavor=flavor))
    cells.append(f"<td>{_team_bar(grant, used, flavor, resource)}</td>")
    return "<tr>" + "".join(cells) + "</tr>"


def _team_bar(grant: Mapping[str, Any], used: Mapping[str, Any], flavor: str, resource: str) -> str:
    nominal = amount(_get(grant, "nominal", flavor, resource)) or Fraction(0)
    limit = amount(_get(grant, "borrowingLimit", flavor, resource)) or Fraction(0)
    in_use, borrowed = amount(used.get("inUse")) or Fraction(0), amount(used.get("borrowed")) or Fraction(0)
    total = max(nominal + limit, in_use)
    segments = [
        (GUARANTEED, "in use within nominal", in_use - borrowed),
        (BORROWED, "borrowed", borrowed),
        (IDLE, "nominal not in use", nominal - (in_use - borrowed)),
    ]
    return _bar(segments, total, f"{flavor} {short_resource(resource)}", width=180)


def _why(teams: dict[str, Any]) -> str:
    rows: list[tuple[str, str, str, dict[str, Any]]] = []
    for team in sorted(teams):
        for flavor, per in sorted(_dict(_dict(teams[team]).get("why")).items()):
            for resource, d in sorted(_dict(per).items()):
                if isinstance(d, Mapping):
                    rows.append((team, str(flavor), str(resource), dict(d)))
    if not rows:
        return ""
    out = ['<section id="why"><h2>Why each borrowing limit</h2>']
    bases = sorted({str(d.get("basis") or "Pool") for _, _, _, d in rows})  # stored before the basis: Pool
    used = {str(d.get("bound")) for _, _, _, d in rows}
    out.append(
        '<p class="meta">'
        + "; ".join(f"{e(b)} basis: {e(BASIS_RULE[b])}" for b in bases if b in BASIS_RULE)
        + ". “set by” names the rule that won: "
        + "; ".join(f"<b>{e(b)}</b> = {e(m)}" for b, m in BOUND_MEANING.items() if b in used)
        + "</p>"
    )
    head = ["team", "flavor", "resource", *(label for _, label in WHY_FIELDS)]

    def row(team: str, flavor: str, resource: str) -> str:
        d = next(d for t, f, r, d in rows if (t, f, r) == (team, flavor, resource))
        cells = [f"<td>{e(team)}</td><td>{e(flavor)}</td><td>{_res(resource)}</td>"]
        for key, _ in WHY_FIELDS:
            attrs = (
                f'data-team="{e(team)}" data-flavor="{e(flavor)}" data-resource="{e(resource)}" data-field="why.{key}"'
            )
            value = d.get(key)
            if key in ("percent", "percentCap") and d.get("bound") in ("strategy", "disabled"):
                value = None  # a Lend / DontLend or Disabled team has no BorrowLimit in effect: none is shown
            if key == "percent":
                text = "-" if value is None else f"{value}%"
                cells.append(f'<td class="num" {attrs} data-value="{e("" if value is None else value)}">{e(text)}</td>')
            elif key == "bound":
                cells.append(
                    f'<td {attrs} data-value="{e(value)}" title="{e(BOUND_MEANING.get(str(value), ""))}">{e(value)}</td>'
                )
            else:
                cells.append(
                    f'<td class="num" {attrs} data-value="{e("" if value is None else value)}">'
                    f"{e('-' if value is None else human_text(value, resource, '0'))}</td>"
                )
        return "<tr>" + "".join(cells) + "</tr>"

    out.append(_split_table([(t, f, r) for t, f, r, _ in rows], head, row, "why", lead=3))
    return "\n".join(out) + "</section>"


# ----------------------------------------------------------------------------------------- history
def _history(history: Json | None, note: str | None) -> str:
    out = ['<section id="usage-history"><h2>Usage over the period</h2>']
    rows = [r for r in (history or {}).get("rows") or [] if isinstance(r, Mapping)]
    gaps = [g for g in (history or {}).get("gaps") or [] if isinstance(g, Mapping)]
    if history:
        out.append(
            f'<p class="meta">from <b data-field="from">{e(history.get("from"))}</b> to '
            f'<b data-field="to">{e(history.get("to"))}</b>, by <b data-field="granularity">'
            f"{e(history.get('granularity'))}</b>; allocated hours = hours in use within nominal, "
            "borrowed hours = hours in use above it</p>"
        )
    if not rows:
        text = note if note and not history else "No usage recorded in this period yet."
        out.append(f'<p class="note" data-usage="none">{e(text)}</p>')
    teams = sorted({str(r.get("team", "")) for r in rows})
    colors = {t: TEAM_COLORS[i % len(TEAM_COLORS)] for i, t in enumerate(teams)}
    pairs = sorted({(str(r.get("flavor", "")), str(r.get("resource", ""))) for r in rows})
    accel = [p for p in pairs if is_accelerator(p[1])] or pairs
    if rows:
        out.append(_legend([(colors[t], t) for t in teams]))
        out.append('<p class="meta">solid: allocated hours; light: borrowed hours; hatched: a gap (no sample)</p>')
    for index, (flavor, resource) in enumerate(accel):
        out.append(_history_chart(history or {}, rows, gaps, flavor, resource, colors, index))
    if rows:
        out.append(_history_totals(rows, pairs))
    if gaps:
        out.append("<h3>Gaps (samples that could not be taken: not zero usage)</h3>")
        out.append("<table><tr><th>start</th><th>end</th><th>reason</th></tr>")
        out += [
            f"<tr data-gap><td>{e(g.get('start'))}</td><td>{e(g.get('end'))}</td><td>{e(g.get('reason'))}</td></tr>"
            for g in gaps
        ]
        out.append("</table>")
    return "\n".join(out) + "</section>"


def _history_totals(rows: list[Mapping[str, Any]], pairs: list[tuple[str, str]]) -> str:
    totals: dict[tuple[str, str, str], list[Fraction]] = {}
    for r in rows:
        key = (str(r.get("team", "")), str(r.get("flavor", "")), str(r.get("resource", "")))
        sums = totals.setdefault(key, [Fraction(0), Fraction(0)])
        sums[0] += amount(r.get("allocatedHours")) or 0
        sums[1] += amount(r.get("borrowedHours")) or 0
    head = ["team", "flavor", "resource", "allocated hours", "borrowed hours"]

    def row(team: str, flavor: str, resource: str) -> str:
        allocated, borrowed = totals[(team, flavor, resource)]
        cells = [f"<td>{e(team)}</td><td>{e(flavor)}</td><td>{_res(resource)}</td>"]
        for field, value in (("allocatedHours", allocated), ("borrowedHours", borrowed)):
            cells.append(
                f'<td class="num" data-team="{e(team)}" data-flavor="{e(flavor)}" data-resource="{e(resource)}" '
                f'data-field="total.{field}" data-value="{e(_fmt(value))}">{e(_hours(value))}</td>'
            )
        return "<tr>" + "".join(cells) + "</tr>"

    return "<h3>Totals over the period</h3>" + _split_table(sorted(totals), head, row, "hours", lead=3)


def _history_chart(
    history: Json,
    rows: list[Mapping[str, Any]],
    gaps: list[Mapping[str, Any]],
    flavor: str,
    resource: str,
    colors: dict[str, str],
    index: int = 0,
) -> str:
    """Stacked columns per time bucket: per team, allocated hours (solid) then borrowed hours (light)."""
    step = timedelta(seconds=GRANULARITY_SECONDS.get(str(history.get("granularity")), 3600))
    buckets: dict[datetime, list[tuple[str, str, Fraction]]] = {}
    for r in rows:
        start = parse_time(r.get("start"))
        if start is None or (str(r.get("flavor", "")), str(r.get("resource", ""))) != (flavor, resource):
            continue
        team = str(r.get("team", ""))
        stack = buckets.setdefault(start, [])
        stack.append((team, "allocatedHours", amount(r.get("allocatedHours")) or Fraction(0)))
        stack.append((team, "borrowedHours", amount(r.get("borrowedHours")) or Fraction(0)))
    begin = parse_time(history.get("from")) or (min(buckets) if buckets else None)
    end = parse_time(history.get("to")) or (max(buckets) + step if buckets else None)
    if begin is None or end is None or end <= begin:
        return ""
    width, height, left, bottom, top = 1040, 200, 48, 22, 8
    plot_w, plot_h = width - left - 28, height - bottom - top
    span = (end - begin).total_seconds()
    peak = max((sum((v for _, _, v in s), Fraction(0)) for s in buckets.values()), default=Fraction(0)) or Fraction(1)

    def x(moment: datetime) -> float:
        return left + plot_w * max(0.0, min(1.0, (moment - begin).total_seconds() / span))

    def y(value: Fraction) -> float:
        return top + plot_h * (1 - float(value / peak))

    title = f"{flavor} {short_resource(resource)}: hours per {history.get('granularity') or 'bucket'}"
    parts = [
        f"<h3>{e(flavor)} · {_res(resource)} hours</h3>",
        f'<svg role="img" aria-label="{e(title)}" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        f'data-chart="{e(flavor)}|{e(resource)}">',
        f'<defs><pattern id="gap-{index}" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)">'
        '<rect width="3" height="6" fill="#c7ccd4"/></pattern></defs>',
    ]
    for i in range(3):
        value = peak * i / 2
        parts.append(
            f'<line x1="{left}" x2="{width - 28}" y1="{y(value):.1f}" y2="{y(value):.1f}" stroke="#e3e7ec"/>'
            f'<text x="{left - 4}" y="{y(value) + 4:.1f}" text-anchor="end">{e(_hours(value))}</text>'
        )
    for g in gaps:
        g_start, g_end = parse_time(g.get("start")), parse_time(g.get("end"))
        if g_start is None or g_end is None:
            continue
        parts.append(
            f'<rect x="{x(g_start):.2f}" y="{top}" width="{max(1.0, x(g_end) - x(g_start)):.2f}" height="{plot_h}" '
            f'fill="url(#gap-{index})" data-gap-rect><title>gap: {e(g.get("reason"))}</title></rect>'
        )
    column = max(1.0, plot_w * step.total_seconds() / span * 0.8)
    for start, stack in sorted(buckets.items()):
        base = Fraction(0)
        for team, field, value in sorted(stack, key=lambda s: (s[0], s[1] != "allocatedHours")):
            if value <= 0:
                continue
            opacity = "1" if field == "allocatedHours" else "0.45"
            parts.append(
                f'<rect x="{x(start):.2f}" y="{y(base + value):.2f}" width="{column:.2f}" '
                f'height="{y(base) - y(base + value):.2f}" fill="{colors.get(team, "#888")}" fill-opacity="{opacity}" '
                f'data-team="{e(team)}" data-field="{e(field)}" data-value="{e(_fmt(value))}" data-start="{e(start.isoformat())}">'
                f"<title>{e(team)} {e(start.isoformat())}: {e(_hours(value))} {e(field)}</title></rect>"
            )
            base += value
    count = max(1, int(span // step.total_seconds()))
    stride = -(-count // MAX_TICKS)  # a label under every stride-th column, at most MAX_TICKS of them
    for i in range(0, count, stride):
        moment = begin + step * i
        label = moment.strftime("%m-%d %H:%M" if step < timedelta(days=1) else "%m-%d")
        parts.append(f'<text x="{x(moment) + column / 2:.1f}" y="{height - 6}" text-anchor="middle">{e(label)}</text>')
    parts.append(f'<line x1="{left}" x2="{width - 28}" y1="{top + plot_h}" y2="{top + plot_h}" stroke="#8a94a3"/>')
    parts.append("</svg>")
    return "".join(parts)


# ------------------------------------------------------------------------------------ nodes, issues
def _excluded(pool: Json, excluded: dict[str, Any]) -> str:
    by_reason: dict[str, int] = {}
    for reason in excluded.values():
        by_reason[str(reason)] = by_reason.get(str(reason), 0) + 1
    summary = _dict(pool.get("excludedSummary"))
    total = summary.get("total", len(excluded))
    out = [f'<section id="excluded"><h2>Excluded nodes (<span data-field="excludedTotal">{e(total)}</span>)</h2>']
    if not excluded:
        out.append('<p class="meta">(none: every node counts)</p>')
        return "\n".join(out) + "</section>"
    out.append(
        '<p class="meta">'
        + ", ".join(f'<b data-reason="{e(r)}" data-value="{n}">{e(r)}</b> {n}' for r, n in sorted(by_reason.items()))
        + "</p>"
    )
    out.append("<table><tr><th>node</th><th>reason</th></tr>")
    out += [
        f'<tr data-excluded-node="{e(n)}"><td>{e(n)}</td><td data-field="reason">{e(r)}</td></tr>'
        for n, r in sorted(excluded.items())
    ]
    out.append("</table>")
    if isinstance(total, int) and total != len(excluded):
        out.append(f'<p class="note">The first {len(excluded)} of {e(total)}.</p>')
    return "\n".join(out) + "</section>"


def _headroom(pool: Json) -> str:
    """What the pods that are not Kueue's keep of each node (docs/spec.md §2): per flavor, then per node."""
    found = _dict(pool.get("headroom"))
    nodes, by_flavor = _dict(found.get("nodes")), _dict(found.get("byFlavor"))
    mode = found.get("mode", "off")
    out = [f'<section id="headroom"><h2>Headroom (<span data-field="headroomMode">{e(mode)}</span>)</h2>']
    if not nodes:
        out.append('<p class="meta">(none: every eligible node lends its whole allocatable)</p>')
        return "\n".join(out) + "</section>"
    resources = sorted({str(r) for per in (*nodes.values(), *by_flavor.values()) for r in _dict(per)})
    head = "".join(f"<th>{e(r)}</th>" for r in resources)
    out.append(f"<table><tr><th>flavor / node</th>{head}</tr>")
    for kind, entries in (("flavor", by_flavor), ("node", nodes)):
        for name, per in sorted(entries.items()):
            cells = "".join(
                f'<td data-value="{e(_dict(per).get(r, "0"))}">{e(human_text(_dict(per).get(r), r))}</td>'
                for r in resources
            )
            out.append(f'<tr data-headroom-{kind}="{e(name)}"><td>{e(name)}</td>{cells}</tr>')
    out.append("</table>")
    total = found.get("total")
    if isinstance(total, int) and total != len(nodes):
        out.append(f'<p class="note">The first {len(nodes)} of {e(total)} nodes; the flavor sums count them all.</p>')
    return "\n".join(out) + "</section>"


def _issues(pool: Json) -> str:
    issues = [i for i in pool.get("issues") or [] if isinstance(i, Mapping)]
    if not issues:
        return ""
    out = [
        '<section id="issues"><h2>Issues</h2><table><tr><th>severity</th><th>code</th><th>subject</th><th>message</th></tr>'
    ]
    out += [
        f"<tr data-issue><td>{e(i.get('severity'))}</td><td>{e(i.get('code'))}</td><td>{e(i.get('subject'))}</td>"
        f"<td>{e(i.get('message'))}</td></tr>"
        for i in issues
    ]
    return "\n".join(out) + "</table></section>"
