"""What an operator sets per governed cluster: one frozen type, its defaults and its rules, in one place.

The CDK config (``infra/config.py``), the Lambdas' environment (``runtime/env.py``), the cluster registry
(``adapters/store/registry.py``) and the devkit all read a cluster's settings through one schema
(``parse/cluster_settings.py``) into this type; a setting is added here (a field, its default, its rule in
:meth:`ClusterSettings.__post_init__` when its type does not say it all) and read where it is used. The engine's own
:class:`~idleshare.domain.model.Settings` takes the fields both have by name (:func:`engine_settings`).
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import typing
from dataclasses import dataclass
from typing import Any

from idleshare import timings
from idleshare.domain.model import (
    DEFAULT_ADMISSION_POLICY,
    DEFAULT_COHORT_NAME,
    DEFAULT_HEADROOM,
    DEFAULT_NAMESPACE_PREFIX,
    BorrowLimitBasis,
    Headroom,
    Settings,
)
from idleshare.domain.naming import cohort_name_problem, namespace_prefix_problem


class FieldOwnership(enum.StrEnum):
    """What idleshare does with a field of its own Kueue objects that another field manager owns."""

    RESPECT = "Respect"
    """Leave it to the other manager (HyperPod task governance, an admin's GitOps) and report it (issue
    ``ForeignFieldManager``, apply status ``Conflict``)."""
    TAKE = "Take"
    """Force ownership of every field idleshare writes (on objects it created only)."""


class SettingError(ValueError):
    """A cluster setting's value breaks its rule; ``str()`` starts with the setting's name."""

    def __init__(self, setting: str, problem: str) -> None:
        super().__init__(f"{setting}: {problem}")
        self.setting = setting
        self.problem = problem


@dataclass(frozen=True, slots=True)
class ClusterSettings:
    """One governed cluster's settings (docs/spec.md §2–§3; infra/README.md's configuration table)."""

    namespace_prefix: str = DEFAULT_NAMESPACE_PREFIX
    """Prepended to the teams' namespace and queue names (``<namespace_prefix><team>``): HyperPod task governance's
    by default; never empty, never ``kube-``, ``openshift``, ``default`` (``naming.namespace_prefix_problem``)."""
    cohort_name: str = DEFAULT_COHORT_NAME
    """The Cohort the cluster's teams share."""
    field_ownership: FieldOwnership = FieldOwnership.RESPECT
    """``Respect``: fields of idleshare's Kueue objects that another field manager owns are left to it and reported;
    ``Take``: idleshare's server-side apply forces ownership of every field it writes."""
    borrow_limit_basis: BorrowLimitBasis = BorrowLimitBasis.QUOTA
    """What a quota's ``BorrowLimit`` is a percentage of: ``Quota`` (HyperPod's: the team's own quota) or ``Pool``
    (the lendable pool the team sees); docs/spec.md §2."""
    headroom: Headroom = DEFAULT_HEADROOM
    """Which pods that are not Kueue's reduce a node's allocatable before the pool: ``off``, ``daemonsets`` (the
    DaemonSets that will run on it), ``all`` (also the bound pods neither a DaemonSet's nor Kueue's); docs/spec.md §2."""
    admission_policy: bool = DEFAULT_ADMISSION_POLICY
    """Whether idleshare writes its admission policy (a Job in a team's namespace must name its team's LocalQueue);
    off for a cluster whose own policy does this; docs/spec.md §3."""
    node_watch_seconds: int = timings.DEFAULT_NODE_WATCH_SECONDS
    """How long each minute's node watcher invocation holds the cluster's node watch (1 ..
    ``timings.NODE_WATCH_MAX_SECONDS``): cost against how late a node change is seen (docs/operations.md)."""

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            problem = _type_problem(f.name, getattr(self, f.name))
            if problem is not None:
                raise SettingError(f.name, problem)
        for setting, problem in (
            ("namespace_prefix", namespace_prefix_problem(self.namespace_prefix)),
            ("cohort_name", cohort_name_problem(self.cohort_name)),
            ("node_watch_seconds", _watch_problem(self.node_watch_seconds)),
        ):
            if problem is not None:
                raise SettingError(setting, f"{problem} (got {getattr(self, setting)!r})")

    def replace(self, **changes: Any) -> ClusterSettings:
        """These settings with ``changes`` (checked like any others)."""
        return dataclasses.replace(self, **changes)


def setting_type(name: str) -> Any:
    """The Python type of the setting ``name``, as :class:`ClusterSettings` annotates it."""
    return _types()[name]


@functools.cache
def _types() -> dict[str, Any]:
    return typing.get_type_hints(ClusterSettings)


def describe_type(kind: Any) -> str:
    """What a value of ``kind`` must be, as an error message says it."""
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        return f"must be one of {', '.join(str(v.value) for v in kind)}"
    return {bool: "must be true or false", int: "must be a whole number", str: "must be a string"}[kind]


def _type_problem(name: str, value: object) -> str | None:
    kind = setting_type(name)
    ok = isinstance(value, kind) and not (kind is int and isinstance(value, bool))
    return None if ok else f"{describe_type(kind)} (got {value!r})"


def _watch_problem(seconds: int) -> str | None:
    if 1 <= seconds <= timings.NODE_WATCH_MAX_SECONDS:
        return None
    return f"must be a whole number of seconds from 1 to {timings.NODE_WATCH_MAX_SECONDS}"


def engine_settings(cluster: ClusterSettings, **extra: Any) -> Settings:
    """The engine's :class:`~idleshare.domain.model.Settings` for a cluster: every field the two types share by name
    taken from ``cluster``, the rest its defaults or ``extra``."""
    shared = {f.name for f in dataclasses.fields(Settings)} & {f.name for f in dataclasses.fields(ClusterSettings)}
    return Settings(**{name: getattr(cluster, name) for name in sorted(shared)}, **extra)
