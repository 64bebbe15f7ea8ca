"""Isolation at admission (docs/spec.md §3 "Admission policy"): a ValidatingAdmissionPolicy and its binding, in the
API server (``admissionregistration.k8s.io/v1``: no webhook to run), that refuse in the governed teams' namespaces a
Job of a kind Kueue queues that does not name its team's LocalQueue in ``kueue.x-k8s.io/queue-name``: without the
label Kueue ignores the Job, which then runs beside the quotas on capacity other teams were guaranteed.

- The policy names the kinds (:data:`QUEUED_KINDS`: Kueue's job integrations); a kind whose CRD is not installed
  simply never matches. A bare pod is not among them: Kueue queues one only with its ``pod`` integration on.
- The binding selects the teams' namespaces by name (``kubernetes.io/metadata.name``), so a namespace idleshare did
  not create but uses (an existing ``<prefix><team>``) is covered too, and nothing else is.
- CREATE must carry the label with the team's LocalQueue (``<namespace>-localqueue``: :data:`LOCAL_QUEUE_SUFFIX`);
  an UPDATE may not take away a right label (``oldObject`` had it), and leaves alone a Job that never had it (created
  before the policy: it is the team's to delete, the policy never blocks its controller's writes).
- Per cluster (``ClusterSettings.admission_policy``), on by default; off for a cluster whose own policy does this
  (HyperPod task governance installs one in the namespaces it manages): both apply, Kubernetes admits only what
  every policy allows.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from idleshare.domain.naming import LOCAL_QUEUE_SUFFIX

POLICY_NAME = "idleshare-queue-name"
"""The ValidatingAdmissionPolicy's name and its binding's (cluster-scoped, one per cluster)."""
ADMISSION_API = "admissionregistration.k8s.io/v1"
QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
QUEUED_KINDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("batch", ("jobs",)),
    ("jobset.x-k8s.io", ("jobsets",)),
    ("kubeflow.org", ("pytorchjobs", "tfjobs", "mpijobs", "xgboostjobs", "paddlejobs", "jaxjobs")),
    ("trainer.kubeflow.org", ("trainjobs",)),
    ("ray.io", ("rayjobs", "rayclusters")),
    ("workload.codeflare.dev", ("appwrappers",)),
)
"""(API group, resources) of the job kinds Kueue integrates (its ``integrations.frameworks``, pods aside)."""

_WANT = f"namespaceObject.metadata.name + '{LOCAL_QUEUE_SUFFIX}'"
_LABELLED = (
    "has({o}.metadata.labels) && '{label}' in {o}.metadata.labels && {o}.metadata.labels['{label}'] == variables.want"
)


def admission_objects(namespaces: Iterable[str], meta: Any, *, enabled: bool = True) -> list[dict[str, Any]]:
    """The policy and its binding for the teams' ``namespaces`` (none: no object; ``enabled`` False: none either).
    ``meta(name)``: the metadata idleshare gives an object of that name (its labels)."""
    selected = sorted(set(namespaces))
    if not enabled or not selected:
        return []
    policy = {
        "apiVersion": ADMISSION_API,
        "kind": "ValidatingAdmissionPolicy",
        "metadata": meta(POLICY_NAME),
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": [group],
                        "apiVersions": ["*"],
                        "operations": ["CREATE", "UPDATE"],
                        "resources": list(resources),
                    }
                    for group, resources in QUEUED_KINDS
                ]
            },
            "variables": [
                {"name": "want", "expression": _WANT},
                {"name": "labelled", "expression": _LABELLED.format(o="object", label=QUEUE_NAME_LABEL)},
                {
                    "name": "was_labelled",
                    "expression": "oldObject != null && " + _LABELLED.format(o="oldObject", label=QUEUE_NAME_LABEL),
                },
            ],
            "validations": [
                {
                    "expression": "variables.labelled || (request.operation == 'UPDATE' && !variables.was_labelled)",
                    "messageExpression": (
                        f"'idleshare: a ' + request.kind.kind + ' in namespace ' + namespaceObject.metadata.name"
                        f" + ' must carry the label {QUEUE_NAME_LABEL}: ' + variables.want"
                        " + ' (its team\\'s LocalQueue: Kueue queues it within the team\\'s quota)'"
                    ),
                    "reason": "Forbidden",
                }
            ],
        },
    }
    binding = {
        "apiVersion": ADMISSION_API,
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": meta(POLICY_NAME),
        "spec": {
            "policyName": POLICY_NAME,
            "validationActions": ["Deny"],
            "matchResources": {
                "namespaceSelector": {
                    "matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": selected}]
                }
            },
        },
    }
    return [policy, binding]
