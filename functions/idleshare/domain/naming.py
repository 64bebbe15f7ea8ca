"""The names of a team's Kubernetes objects, and whether a team name can have them (docs/spec.md §3).

HyperPod's conventions: namespace ``<prefix><team>``, ``<prefix><team>-clusterqueue`` and, in the
namespace, ``<prefix><team>-localqueue``. Jobs name their LocalQueue in the ``kueue.x-k8s.io/queue-name``
label, so that name must fit a label value (63 characters): with the default prefix ``hyperpod-ns-`` that is
a team name of at most 40 characters, the length SageMaker's ``TeamName`` pattern was written for.

Every name idleshare writes is checked here before any write (:func:`object_name_problems`): the API server's
rules for each kind's ``metadata.name`` and namespace, for every name an object refers to, and the rules that make
a name usable (a Job names its LocalQueue and its priority class in label values).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from idleshare.domain.model import Settings

LABEL_VALUE_MAX = 63  # a namespace name (DNS-1123 label) and a label value
SUBDOMAIN_MAX = 253  # a cluster-scoped object's name (DNS-1123 subdomain)
DNS_LABEL = r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?"  # a DNS-1123 label, its length aside
_DNS_LABEL = re.compile(DNS_LABEL)
_DNS_SUBDOMAIN = re.compile(rf"{DNS_LABEL}(?:\.{DNS_LABEL})*")
_LABEL_VALUE = re.compile(r"(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?)?")
_LABEL_NAME = re.compile(r"[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")
_cached = functools.lru_cache(maxsize=4096)
"""A rule's answers, kept: the same few names (flavors, the cohort) are checked on every object naming them."""

CLUSTER_QUEUE_SUFFIX = "-clusterqueue"
LOCAL_QUEUE_SUFFIX = "-localqueue"
PRIORITY_CLASS_SUFFIX = "-priority"
PRIORITY_CLASS_NAME_MAX = LABEL_VALUE_MAX - len(PRIORITY_CLASS_SUFFIX)
"""54: ``<name>-priority`` is what a Job names in its ``kueue.x-k8s.io/priority-class`` label (a label value)."""
NAMESPACE_PREFIX_MAX = 31
"""The longest namespace prefix: a team name of at least 21 characters still fits a LocalQueue name beside it."""
RESERVED_NAMESPACE_PREFIXES = ("default", "kube-", "openshift")
"""idleshare never makes nor writes in a namespace whose name starts with one of these: Kubernetes' own
(``default``, ``kube-system``, ``kube-public``, ``kube-node-lease``) and OpenShift's (``openshift``,
``openshift-*``). A namespace prefix starting with one is refused, and so is a team whose namespace would."""


def namespace_name(team: str, settings: Settings) -> str:
    return f"{settings.namespace_prefix}{team}"


def cluster_queue_name(team: str, settings: Settings) -> str:
    return f"{settings.namespace_prefix}{team}{CLUSTER_QUEUE_SUFFIX}"


def local_queue_name(team: str, settings: Settings) -> str:
    return f"{settings.namespace_prefix}{team}{LOCAL_QUEUE_SUFFIX}"


def priority_class_name(name: str) -> str:
    """The WorkloadPriorityClass of the SchedulerConfig's priority class ``name``: what a Job names in its
    ``kueue.x-k8s.io/priority-class`` label."""
    return f"{name}{PRIORITY_CLASS_SUFFIX}"


def max_team_name_length(settings: Settings) -> int:
    """The longest team name whose objects all have valid names under ``settings.namespace_prefix``."""
    prefix = len(settings.namespace_prefix)
    return min(
        LABEL_VALUE_MAX - prefix,  # the namespace
        LABEL_VALUE_MAX - prefix - len(LOCAL_QUEUE_SUFFIX),  # the LocalQueue, a label value on every job
        SUBDOMAIN_MAX - prefix - len(CLUSTER_QUEUE_SUFFIX),
    )


def team_name_problem(team: str, settings: Settings) -> str | None:
    """Why ``team`` cannot have its namespace and queues in a cluster with these settings, or None."""
    longest = max_team_name_length(settings)
    if len(team) > longest:
        return (
            f"must be at most {longest} characters with namespace prefix {settings.namespace_prefix!r} "
            f"(got {len(team)}): LocalQueue {local_queue_name(team, settings)!r} must fit a "
            f"{LABEL_VALUE_MAX}-character label value"
        )
    if not _DNS_LABEL.fullmatch(namespace_name(team, settings)):
        return f"namespace {namespace_name(team, settings)!r} must be a DNS-1123 label (lower-case a-z, 0-9, '-')"
    return _reserved_problem(namespace_name(team, settings))


def is_dns_label(text: str) -> bool:
    """A DNS-1123 label: what a namespace, a Job or a label value may be called (at most 63 characters)."""
    return len(text) <= LABEL_VALUE_MAX and _DNS_LABEL.fullmatch(text) is not None


def is_dns_subdomain(text: str) -> bool:
    """A DNS-1123 subdomain: what a cluster-scoped object (and any custom resource) may be called."""
    return len(text) <= SUBDOMAIN_MAX and _DNS_SUBDOMAIN.fullmatch(text) is not None


def is_label_value(text: str) -> bool:
    return len(text) <= LABEL_VALUE_MAX and _LABEL_VALUE.fullmatch(text) is not None


@_cached
def is_label_key(name: str) -> bool:
    """A label key (a qualified name): an optional DNS-subdomain prefix and ``/``, then a name of at most 63."""
    prefix, _, key = name.rpartition("/")
    if prefix and not is_dns_subdomain(prefix):
        return False
    return _LABEL_NAME.fullmatch(key) is not None


# -- the rules, one function each ------------------------------------------------------------------------------


def show(name: str, limit: int = 80) -> str:
    """``name`` quoted for a message, cut to ``limit`` characters (a hostile name can be any length)."""
    return repr(name) if len(name) <= limit else f"{name[:limit]!r}... ({len(name)} characters)"


@dataclass(frozen=True, slots=True)
class _Form:
    """A kind of name: at most ``most`` characters of ``pattern``; ``must_be`` says so in a message."""

    most: int
    pattern: re.Pattern[str]
    must_be: str

    def problem(self, name: str) -> str | None:
        if len(name) > self.most:
            return f"must be at most {self.most} characters (got {len(name)})"
        if not self.pattern.fullmatch(name):
            return f"must be {self.must_be}"
        return None


_SUBDOMAIN = _Form(
    SUBDOMAIN_MAX,
    _DNS_SUBDOMAIN,
    "a lower-case RFC 1123 subdomain (a-z, 0-9, '-' and '.', starting and ending alphanumeric)",
)
_LABEL = _Form(
    LABEL_VALUE_MAX, _DNS_LABEL, "a lower-case RFC 1123 label (a-z, 0-9 and '-', starting and ending alphanumeric)"
)
_VALUE = _Form(
    LABEL_VALUE_MAX, _LABEL_VALUE, "a label value (A-Z, a-z, 0-9, '-', '_' and '.', starting and ending alphanumeric)"
)
_FLAVOR = _Form(
    LABEL_VALUE_MAX, _DNS_SUBDOMAIN, "a lower-case RFC 1123 subdomain to name a ResourceFlavor (a-z, 0-9, '-' and '.')"
)
_subdomain_problem = _cached(_SUBDOMAIN.problem)
_label_problem = _cached(_LABEL.problem)
_label_value_problem = _cached(_VALUE.problem)


def _usable_label_problem(name: str) -> str | None:
    """A name a Job carries in a label (its LocalQueue's, its priority class's): a subdomain and a label value."""
    return _subdomain_problem(name) or (
        None
        if len(name) <= LABEL_VALUE_MAX
        else f"must be at most {LABEL_VALUE_MAX} characters (got {len(name)}): Jobs name it in a label value"
    )


def _reserved_problem(namespace: str) -> str | None:
    reserved = next((p for p in RESERVED_NAMESPACE_PREFIXES if namespace.startswith(p)), None)
    if reserved is None:
        return None
    return f"namespace {show(namespace)} starts with {reserved!r}: reserved for the cluster's own namespaces"


def _namespace_problem(name: str) -> str | None:
    return _label_problem(name) or _reserved_problem(name)


@_cached
def flavor_name_problem(instance_type: str) -> str | None:
    """Why a node's (or a quota's) instance type cannot name a ResourceFlavor, or None. The flavor is named after
    it and selects its nodes by it (``nodeLabels``): a lower-case RFC 1123 subdomain that is also a label value."""
    return _FLAVOR.problem(instance_type)


def priority_class_name_problem(name: str) -> str | None:
    """Why a SchedulerConfig priority class cannot have its WorkloadPriorityClass ``<name>-priority`` (a name a
    Job names in its ``kueue.x-k8s.io/priority-class`` label value), or None."""
    if len(name) > PRIORITY_CLASS_NAME_MAX:
        return (
            f"must be at most {PRIORITY_CLASS_NAME_MAX} characters (got {len(name)}): "
            f"{PRIORITY_CLASS_SUFFIX!r} is added and a Job's kueue.x-k8s.io/priority-class label value holds "
            f"{LABEL_VALUE_MAX}"
        )
    if not _DNS_LABEL.fullmatch(name):
        return "must be a lower-case RFC 1123 label (a-z, 0-9 and '-', starting and ending alphanumeric)"
    return None


def namespace_prefix_problem(prefix: str) -> str | None:
    """Why ``prefix`` cannot start the teams' namespace and queue names, or None."""
    if not prefix:
        return "must not be empty: the teams would get bare namespaces, beside everything else in the cluster"
    if len(prefix) > NAMESPACE_PREFIX_MAX:
        return f"must be at most {NAMESPACE_PREFIX_MAX} characters (got {len(prefix)})"
    if not re.fullmatch(r"[a-z0-9][-a-z0-9]*", prefix):
        return "must start with a-z or 0-9 and hold only a-z, 0-9 and '-' (it starts DNS-1123 labels)"
    reserved = next((p for p in RESERVED_NAMESPACE_PREFIXES if prefix.startswith(p)), None)
    if reserved is not None:
        return f"must not start with {reserved!r}: reserved for the cluster's own namespaces"
    return None


def cohort_name_problem(name: str) -> str | None:
    """Why ``name`` cannot name the Kueue Cohort the teams' ClusterQueues share (``cohortName``), or None."""
    return _subdomain_problem(name)


# -- every name of one object ----------------------------------------------------------------------------------

_NAME_RULES: dict[str, Callable[[str], str | None]] = {
    "Namespace": _namespace_problem,
    "ResourceFlavor": _subdomain_problem,
    "WorkloadPriorityClass": _usable_label_problem,
    "Cohort": _subdomain_problem,
    "ClusterQueue": _subdomain_problem,
    "LocalQueue": _usable_label_problem,
}
"""The rule of each kind's ``metadata.name``: the API server's (a namespace is a label, any other object a
subdomain), and a label value's where a Job names the object in one."""


def object_name_problems(obj: Mapping[str, Any]) -> list[str]:
    """Every name in ``obj`` (a desired manifest) that the API server would refuse, or that would make it unusable,
    as ``<field>: <why>``; empty when the object can be written. Names checked: ``metadata.name`` (by kind),
    ``metadata.namespace``, the labels, and every name it refers to: ``nodeLabels``, ``cohortName``,
    ``parentName``, the flavors of ``resourceGroups``, ``namespaceSelector`` labels, a LocalQueue's
    ``clusterQueue``."""
    return [f"{where}: {why}" for where, why in _problems(obj)]


def _problems(obj: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    rule = _NAME_RULES.get(str(obj.get("kind")), _subdomain_problem)
    yield from _check("metadata.name", meta.get("name"), rule)
    if "namespace" in meta:
        yield from _check("metadata.namespace", meta["namespace"], _namespace_problem)
    yield from _labels("metadata.labels", meta.get("labels"))
    yield from _labels("spec.nodeLabels", spec.get("nodeLabels"))
    yield from _labels("spec.namespaceSelector.matchLabels", (spec.get("namespaceSelector") or {}).get("matchLabels"))
    for field in ("cohortName", "parentName"):
        if spec.get(field):
            yield from _check(f"spec.{field}", spec[field], cohort_name_problem)
    if "clusterQueue" in spec:
        yield from _check("spec.clusterQueue", spec["clusterQueue"], _subdomain_problem)
    for g, group in enumerate(spec.get("resourceGroups") or ()):
        for f, flavor in enumerate(group.get("flavors") or ()):
            yield from _check(f"spec.resourceGroups[{g}].flavors[{f}].name", flavor.get("name"), _subdomain_problem)


def _check(where: str, name: object, rule: Callable[[str], str | None]) -> Iterator[tuple[str, str]]:
    if not isinstance(name, str):
        yield where, f"must be a string (got {type(name).__name__})"
        return
    why = rule(name)
    if why is not None:
        yield where, f"{show(name)} {why}"


def _labels(where: str, labels: object) -> Iterator[tuple[str, str]]:
    for key, value in (labels or {}).items() if isinstance(labels, Mapping) else ():
        if not isinstance(key, str) or not is_label_key(key):
            yield f"{where}", f"{show(str(key))} is not a valid label key"
        elif not isinstance(value, str):
            yield f"{where}[{key}]", f"must be a string (got {type(value).__name__})"
        else:
            why = _label_value_problem(value)
            if why is not None:
                yield f"{where}[{key}]", f"{show(value)} {why}"
