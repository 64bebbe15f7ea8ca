"""Fights: another controller rewriting an object idleshare keeps writing back (docs/spec.md §3, "Fights").

A recompute writes only the objects that differ from the cluster's. Within one desired state (one generation: the
pool and every manifest unchanged) an object idleshare created that differs again was changed by someone else since
idleshare's last write: with ``field_ownership: Take`` against a controller that force-applies the same fields,
every recompute would write it back, and the other controller would undo it. :func:`track` counts those recomputes
per object; the ``threshold``-th in a row names the fight (issue ``FieldManagerFight``, with the other field
managers read from the object's ``managedFields``) and idleshare backs off: it does not write the object again
until ``retry_seconds`` after its last write of it (one write then, to see whether the other controller is gone),
or until its desired state changes (a new generation starts every count afresh). A write that sticks (the next
recompute finds the object as written) ends the fight.

The state is a plain JSON-able mapping, ``{object: {"count": n, "writtenAt": epoch seconds, "managers": [...]}}``,
kept by the caller with the generation's apply status.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

FIELD_MANAGER_FIGHT = "FieldManagerFight"
"""The named issue of an object another field manager keeps rewriting (apply status ``Conflict``)."""


@dataclass(frozen=True, slots=True)
class Fight:
    """An object rewritten on ``count`` recomputes in a row of one desired state; idleshare writes it next at
    ``retry_at`` (epoch seconds), unless its desired state changes first."""

    what: str
    count: int
    managers: tuple[str, ...]
    retry_at: float
    written: bool
    """This recompute wrote it (the retry after the back-off)."""

    def describe(self) -> str:
        by = ", ".join(self.managers) or "another field manager"
        return f"{self.what}: rewritten on {self.count} recomputes in a row by {by} while idleshare's desired state did not change"


@dataclass(frozen=True, slots=True)
class Tracked:
    """What :func:`track` decided: the state to keep, the objects not to write this run, the fights to name."""

    state: dict[str, dict[str, Any]]
    skip: frozenset[str]
    fights: tuple[Fight, ...]


def other_managers(obj: Mapping[str, Any], ours: str) -> tuple[str, ...]:
    """The field managers of ``obj``'s spec other than ``ours`` (``managedFields`` entries that are not of the status
    subresource, which Kueue writes), sorted."""
    entries = (obj.get("metadata") or {}).get("managedFields") or ()
    return tuple(
        sorted(
            {
                str(e.get("manager"))
                for e in entries
                if isinstance(e, Mapping) and e.get("manager") and e.get("manager") != ours
                and e.get("subresource") != "status"
            }
        )
    )  # fmt: skip


def track(
    state: Mapping[str, Any],
    rewritten: Mapping[str, tuple[str, ...]],
    *,
    same_desired: bool,
    now: float,
    threshold: int,
    retry_seconds: float,
) -> Tracked:
    """One recompute's count. ``state``: the last recompute's (of the same desired state when ``same_desired``;
    anything else is dropped); ``rewritten``: the objects idleshare created that differ from what it wants, each with
    the other field managers on it. Objects not in ``rewritten`` leave the state (a write stuck, or it is no longer
    wanted); an entry that does not read counts from 0."""
    if not same_desired:  # a new desired state: every object is written, nothing counted
        return Tracked({}, frozenset(), ())
    new: dict[str, dict[str, Any]] = {}
    skip: set[str] = set()
    fights: list[Fight] = []
    for what, managers in rewritten.items():
        before = state.get(what)
        count, written_at = _read(before)
        count += 1
        if count < threshold:  # written back, counted
            new[what] = {"count": count, "writtenAt": now, "managers": list(managers)}
            continue
        retry_at = written_at + retry_seconds
        write = now >= retry_at
        if write:
            written_at, retry_at = now, now + retry_seconds
        else:
            skip.add(what)
        new[what] = {"count": count, "writtenAt": written_at, "managers": list(managers)}
        fights.append(Fight(what, count, managers, retry_at, write))
    return Tracked(new, frozenset(skip), tuple(fights))


def _read(entry: Any) -> tuple[int, float]:
    if not isinstance(entry, Mapping):
        return 0, 0.0
    count, written_at = entry.get("count"), entry.get("writtenAt")
    if not isinstance(count, int) or isinstance(count, bool) or count < 0:
        return 0, 0.0
    if not isinstance(written_at, int | float) or isinstance(written_at, bool):
        return 0, 0.0
    return count, float(written_at)
