"""Why a team's pending Job waits, in words: the cause idleshare knows, beside Kueue's own message.

:func:`why_waits` is the one classification every surface uses (the usage sample and its route, ``idleshare usage``,
the demo's and replay's step output, the HTML report, the IdleWhilePending alarm's log line). It is pure: given what
the team's borrowing limit is for one flavor and resource and the rule that set it (docs/spec.md §2, the grant's
``bound``), what the team uses and borrows there now, what the Job asks for and what is free to the team, it names
the first cause that holds, in this order:

1. ``disabled`` — the team's quota is Disabled: Kueue holds its ClusterQueue, nothing is admitted.
2. ``above limit`` — the team already borrows more than its limit (the limit was lowered after Kueue admitted the
   work: a node failed, a quota or a policy changed; Kueue does not evict for that), so nothing more is admitted
   that needs borrowing until its borrowed work ends.
3. the bound of the limit — the Job needs to borrow beyond the limit: ``percentage of quota``, ``absolute``,
   ``not in quota``, ``strategy`` (Quota basis) or ``percentage``, ``absolute``, ``pool`` (Pool basis).
4. ``no free capacity`` — within its limit, but the Job asks for more than is free to the team: its unused quota plus
   what the cohort can lend it now (the cohort's own quota and the lenders' unused quota, less what is borrowed).
5. ``kueue`` — none of these: it fits; Kueue's own message says why it waits (ordering, fair sharing, a preemption
   under way, an admission not yet made).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from idleshare.domain.model import Amount
from idleshare.domain.quantity import format_quantity

ZERO: Amount = 0


class Cause(enum.StrEnum):
    DISABLED = "disabled"
    ABOVE_LIMIT = "above limit"
    PERCENTAGE_OF_QUOTA = "percentage of quota"
    ABSOLUTE = "absolute"
    NOT_IN_QUOTA = "not in quota"
    STRATEGY = "strategy"
    PERCENTAGE = "percentage"
    POOL = "pool"
    LIMIT = "limit"  # a limit whose rule is not known (no derivation stored): the number alone
    NO_FREE_CAPACITY = "no free capacity"
    KUEUE = "kueue"


_BY_BOUND = {c.value: c for c in (Cause.PERCENTAGE_OF_QUOTA, Cause.ABSOLUTE, Cause.NOT_IN_QUOTA, Cause.STRATEGY,
                                  Cause.PERCENTAGE, Cause.POOL, Cause.DISABLED)}  # fmt: skip
"""Each bound of a limit (domain/pool.Bound) as its cause; not imported from there: the usage sample would load the
engine and its catalog for six names (tests/unit/test_why.py holds the two together)."""

RANK: dict[Cause, int] = {c: i for i, c in enumerate(Cause)}
"""The order in which causes are told when a Job waits on several resources (the first is the one named)."""


@dataclass(frozen=True, slots=True)
class WaitCause:
    cause: Cause
    text: str

    @property
    def above_limit(self) -> bool:
        return self.cause is Cause.ABOVE_LIMIT


def _rule(bound: str | None, percent: int | None, nominal: Amount, res: str) -> str:
    pct = f"{percent}%" if percent is not None else "BorrowLimit %"
    match bound:
        case Cause.PERCENTAGE_OF_QUOTA:
            return f"{pct} of its quota of {format_quantity(nominal, res)}"
        case Cause.ABSOLUTE:
            return "its AbsoluteBorrowLimits cap"
        case Cause.NOT_IN_QUOTA:
            return "the instance type is not in its quota"
        case Cause.PERCENTAGE:
            return f"{pct} of the pool it sees"
        case Cause.POOL:
            return "the whole pool it sees"
        case Cause.STRATEGY:
            return "its strategy does not borrow"
    return "its borrowing limit"


def why_waits(
    *,
    resource: str,
    request: Amount,
    nominal: Amount,
    in_use: Amount,
    borrowed: Amount,
    limit: Amount | None,
    free: Amount,
    bound: str | None = None,
    percent: int | None = None,
    disabled: bool = False,
) -> WaitCause:
    """The cause a Job asking ``request`` of ``resource`` waits for (module docstring).

    ``nominal``, ``in_use`` and ``borrowed`` are the team's in the flavor (``in_use`` includes ``borrowed``, as
    Kueue reports it); ``limit`` its borrowing limit there (None: unlimited) and ``bound`` the rule that set it
    (``percent`` the BorrowLimit, for the text); ``free`` what the team could be given now (its unused quota and
    what the cohort can lend it)."""
    q = format_quantity
    r = resource
    if disabled or bound == Cause.DISABLED:
        return WaitCause(Cause.DISABLED, "its quota is Disabled: Kueue holds its queue and admits nothing")
    own_left = max(ZERO, nominal - (in_use - borrowed))
    needs = max(ZERO, request - own_left)  # what the Job would borrow
    rule = _rule(bound, percent, nominal, r)
    if limit is not None and borrowed > limit:
        return WaitCause(
            Cause.ABOVE_LIMIT,
            f"borrows {q(borrowed, r)}, above its limit of {q(limit, r)} ({rule}): the limit was lowered after "
            "Kueue admitted that work, which Kueue does not evict; nothing more is borrowed until it ends",
        )
    if needs > 0 and limit is not None and borrowed + needs > limit:
        cause = _BY_BOUND.get(str(bound), Cause.LIMIT)
        if cause is Cause.STRATEGY or (limit == 0 and cause is Cause.NOT_IN_QUOTA):
            text = f"{rule}: it may borrow none, and the Job needs {q(needs, r)} beyond its quota"
        else:
            text = (
                f"its limit of {q(limit, r)} ({rule}): it borrows {q(borrowed, r)}, "
                f"the Job would need {q(needs, r)} more"
            )
        return WaitCause(cause, text)
    if request > free:
        return WaitCause(
            Cause.NO_FREE_CAPACITY,
            f"not enough free: the Job asks {q(request, r)}, {q(free, r)} is free to the team "
            "(its unused quota and what the cohort can lend it)",
        )
    return WaitCause(Cause.KUEUE, "fits its limit and the free capacity: Kueue's own message says why it waits")


def worst(causes: list[WaitCause]) -> WaitCause | None:
    """The cause to name when a Job waits on several resources: the first in :data:`RANK`."""
    return min(causes, key=lambda c: RANK[c.cause], default=None)
