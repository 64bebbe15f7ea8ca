"""Which nodes count toward capacity (docs/spec.md §2, "Eligible node")."""

from __future__ import annotations

from collections.abc import Iterable

from idleshare.domain.catalog import instance_accelerator
from idleshare.domain.model import BLOCKING_TAINT_EFFECTS, MIG_PREFIX, ExclusionReason, Node
from idleshare.domain.naming import flavor_name_problem

ACCELERATOR_RESOURCE_PREFIXES = ("nvidia.com/gpu", MIG_PREFIX, "aws.amazon.com/neuron")
"""What a device plugin reports once it is up: whole GPUs, MIG profiles, Neuron devices or cores."""


def exclusion_reason(node: Node, tolerated_taint_keys: Iterable[str]) -> ExclusionReason | None:
    """The first reason the node does not count, in docs/spec.md's order, or None when it is eligible."""
    if node.unreadable:
        return ExclusionReason.UNREADABLE
    if node.instance_type and flavor_name_problem(node.instance_type) is not None:
        return ExclusionReason.INVALID_INSTANCE_TYPE  # before the rest: no flavor can ever hold this node
    if node.deleting:
        return ExclusionReason.DELETING
    if not node.ready:
        return ExclusionReason.NOT_READY if node.ready_condition else ExclusionReason.NO_READY_CONDITION
    if node.unschedulable:
        return ExclusionReason.UNSCHEDULABLE
    if node.health_status is not None and node.health_status != "Schedulable":
        return ExclusionReason.UNHEALTHY
    tolerated = frozenset(tolerated_taint_keys)
    if any(t.effect in BLOCKING_TAINT_EFFECTS and t.key not in tolerated for t in node.taints):
        return ExclusionReason.UNTOLERATED_TAINT
    if not node.instance_type:
        return ExclusionReason.NO_INSTANCE_TYPE
    if instance_accelerator(node.instance_type) is not None and not accelerators_reported(node):
        return ExclusionReason.ACCELERATORS_NOT_READY
    return None


def accelerators_reported(node: Node) -> bool:
    """Whether the node's device plugin reports any accelerator allocatable (a MIG node's whole GPUs are 0, its
    profiles are not). Asked of the node as read, before headroom: accelerators pods hold are reported, not missing
    (``domain.pool`` passes the node as read, docs/spec.md §2)."""
    return any(q > 0 for r, q in node.allocatable.items() if r.startswith(ACCELERATOR_RESOURCE_PREFIXES))
