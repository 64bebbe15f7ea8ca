"""The one error the parsers raise for input they cannot accept.

Every parser in ``idleshare.parse`` (quotas, scheduler config, nodes) turns whatever went wrong —
JSON syntax, a missing field, a bound, a duplicate — into an :class:`InputError` that names the
input (``source``) and the path of every offending field. Nothing else escapes a parser: no
msgspec or pydantic ``ValidationError``, no ``json.JSONDecodeError``, no traceback.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

MAX_ERRORS = 50
"""Errors reported per input (nodes, quotas, requests): a file where every node is broken should not print
20,000 lines."""


@dataclass(frozen=True, slots=True)
class FieldError:
    """One problem at one place: ``loc`` is a path such as ``[1].ComputeQuotaTarget.TeamName``
    (empty for the document as a whole), ``message`` says what is wrong and what was found."""

    loc: str
    message: str

    def __str__(self) -> str:
        return f"{self.loc}: {self.message}" if self.loc else self.message


class InputError(ValueError):
    """Input named ``source`` (a file name, ``quotas``, an event id, ...) was rejected."""

    def __init__(self, source: str, errors: Iterable[FieldError]) -> None:
        self.source = source
        self.errors: list[FieldError] = list(errors) or [FieldError("", "invalid input")]
        super().__init__(str(self))

    def __str__(self) -> str:
        if len(self.errors) == 1:
            return f"{self.source}: {self.errors[0]}"
        return f"{self.source}: {len(self.errors)} errors: " + "; ".join(str(e) for e in self.errors)

    def __reduce__(self) -> tuple[type[InputError], tuple[str, list[FieldError]]]:
        return (type(self), (self.source, self.errors))


def capped(errors: list[FieldError]) -> list[FieldError]:
    """The first MAX_ERRORS errors, and one saying how many more there were."""
    if len(errors) <= MAX_ERRORS:
        return errors
    return [*errors[:MAX_ERRORS], FieldError("", f"... and {len(errors) - MAX_ERRORS} more errors")]
