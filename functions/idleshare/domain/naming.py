"""The names of a team's Kubernetes objects, and whether a team name can have them (docs/spec.md §3).

HyperPod's conventions: namespace ``<prefix><team>``, ``<prefix><team>-clusterqueue`` and, in the
namespace, ``<prefix><team>-localqueue``. Jobs name their LocalQueue in the ``kueue.x-k8s.io/queue-name``
label, so that name must fit a label value (63 characters): with the default prefix ``hyperpod-ns-`` that is
a team name of at most 40 characters, the length SageMaker's ``TeamName`` pattern was written for.
"""

from __future__ import annotations

import re

from idleshare.domain.model import Settings

LABEL_VALUE_MAX = 63  # a namespace name (DNS-1123 label) and a label value
SUBDOMAIN_MAX = 253  # a cluster-scoped object's name (DNS-1123 subdomain)
DNS_LABEL = r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?"  # a DNS-1123 label, its length aside
_DNS_LABEL = re.compile(DNS_LABEL)

CLUSTER_QUEUE_SUFFIX = "-clusterqueue"
LOCAL_QUEUE_SUFFIX = "-localqueue"


def namespace_name(team: str, settings: Settings) -> str:
    return f"{settings.namespace_prefix}{team}"


def cluster_queue_name(team: str, settings: Settings) -> str:
    return f"{settings.namespace_prefix}{team}{CLUSTER_QUEUE_SUFFIX}"


def local_queue_name(team: str, settings: Settings) -> str:
    return f"{settings.namespace_prefix}{team}{LOCAL_QUEUE_SUFFIX}"


def priority_class_name(name: str) -> str:
    """The WorkloadPriorityClass of the SchedulerConfig's priority class ``name``: what a Job names in its
    ``kueue.x-k8s.io/priority-class`` label."""
    return f"{name}-priority"


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
    return None


def is_dns_label(text: str) -> bool:
    """A DNS-1123 label: what a namespace, a Job or a label value may be called (at most 63 characters)."""
    return len(text) <= LABEL_VALUE_MAX and _DNS_LABEL.fullmatch(text) is not None
