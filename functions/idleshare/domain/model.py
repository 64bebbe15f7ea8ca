"""Frozen inputs and outputs of the lendable-pool engine.

Quantities are exact numbers: ``int`` or ``fractions.Fraction`` (never float). The edge
(``idleshare.parse``) parses Kubernetes quantity strings and SageMaker floats into these.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction

Amount = int | Fraction
"""An exact quantity: cpu in cores, memory in bytes, devices in units."""

Resources = Mapping[str, Amount]
"""resource name -> amount"""

CPU = "cpu"
MEMORY = "memory"
NVIDIA_GPU = "nvidia.com/gpu"
NVIDIA_GPU_SHARED = "nvidia.com/gpu.shared"  # NVIDIA's device plugin, time-slicing with renameByDefault: replicas
NEURON = "aws.amazon.com/neuron"  # the Neuron device plugin's whole devices (Neuron 2.20 on)
NEURON_DEVICE = "aws.amazon.com/neurondevice"  # the same, as the plugin named them up to Neuron 2.19
NEURON_CORE = "aws.amazon.com/neuroncore"  # the Neuron device plugin's cores (a device's cores, one by one)
EFA = "vpc.amazonaws.com/efa"
MIG_PREFIX = "nvidia.com/mig-"

DEVICE_RESOURCES = (NVIDIA_GPU, NEURON, NEURON_DEVICE, NVIDIA_GPU_SHARED)
"""What a quota's ``Accelerators`` counts on a flavor: the first of these its nodes expose (docs/spec.md §2)."""


def is_accelerator(resource: str) -> bool:
    """A GPU (whole or time-sliced), a MIG slice, a Neuron device or core: what the pool lends and the gauges and
    tables show."""
    return resource in DEVICE_RESOURCES or resource == NEURON_CORE or resource.startswith(MIG_PREFIX)


GIB = 1024**3

INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
BETA_INSTANCE_TYPE_LABEL = "beta.kubernetes.io/instance-type"  # read when the current label is absent
HEALTH_LABEL = "sagemaker.amazonaws.com/node-health-status"
MIG_CONFIG_STATE_LABEL = "nvidia.com/mig.config.state"  # NVIDIA's MIG manager: pending, rebooting, success, failed
BLOCKING_TAINT_EFFECTS = frozenset({"NoSchedule", "NoExecute"})  # a taint with these keeps pods off
DEFAULT_TOLERATED_TAINT_KEYS = frozenset({NVIDIA_GPU, NEURON, NEURON_DEVICE})


class ExclusionReason(enum.StrEnum):
    """Why a node does not count toward capacity; the first that holds wins (docs/spec.md §2)."""

    UNREADABLE = "Unreadable"  # the API server's Node object could not be read: counted as nothing, named
    INVALID_INSTANCE_TYPE = "InvalidInstanceType"  # its instance-type label cannot name a ResourceFlavor
    DELETING = "Deleting"
    NOT_READY = "NotReady"  # its Ready condition is False or Unknown
    NO_READY_CONDITION = "NoReadyCondition"  # no Ready condition at all: the kubelet never posted one
    UNSCHEDULABLE = "Unschedulable"
    UNHEALTHY = "Unhealthy"
    UNTOLERATED_TAINT = "UntoleratedTaint"
    NO_INSTANCE_TYPE = "NoInstanceType"
    ACCELERATORS_NOT_READY = "AcceleratorsNotReady"  # an accelerator instance reporting none: its plugin is not up
    MIG_NOT_READY = "MigNotReady"  # only the node's MIG profiles are left out; its other resources count


class BorrowLimitBasis(enum.StrEnum):
    """What a quota's ``BorrowLimit`` percentage is a percentage of (docs/spec.md §2, "Borrow limit")."""

    QUOTA = "Quota"
    """HyperPod task governance's: of the team's own nominal quota, per instance type in its quota (the default)."""
    POOL = "Pool"
    """idleshare's earlier reading: of the lendable pool the team sees, capped at that pool, on every flavor."""


class Headroom(enum.StrEnum):
    """Which pods that are not Kueue's reduce a node's allocatable (docs/spec.md §2, "Headroom")."""

    OFF = "off"
    """Allocatable as the node reports it."""
    DAEMONSETS = "daemonsets"
    """Less the DaemonSets that will run on the node (one cheap list per recompute): the default."""
    ALL = "all"
    """Also less the pods bound to the node that are neither a DaemonSet's nor Kueue's (a cluster-wide pod list, and
    the Workloads: a pod is Kueue's only when an admitted Workload read owns it)."""


DEFAULT_HEADROOM = Headroom.DAEMONSETS
"""The one default of the per-cluster headroom setting (decisions.md says why)."""
DEFAULT_ADMISSION_POLICY = True
"""The one default of the per-cluster admission policy switch: on (docs/spec.md §3, "Admission policy")."""


class Strategy(enum.StrEnum):
    LEND = "Lend"
    DONT_LEND = "DontLend"
    LEND_AND_BORROW = "LendAndBorrow"


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    effect: str
    value: str | None = None


@dataclass(frozen=True, slots=True)
class Node:
    """What the engine needs of one Kubernetes Node object."""

    name: str
    instance_type: str | None
    allocatable: Resources
    ready: bool = True
    ready_condition: bool = True
    """Whether the node has a ``Ready`` condition at all (not ready without one: ``NoReadyCondition``)."""
    unschedulable: bool = False
    deleting: bool = False
    health_status: str | None = None
    taints: tuple[Taint, ...] = ()
    unreadable: bool = False
    """The Node object did not parse (a field of the wrong type, ...): it counts as nothing and says so."""
    mig_config_state: str | None = None
    """The ``nvidia.com/mig.config.state`` label (NVIDIA's MIG manager); None when absent."""
    labels: Mapping[str, str] = field(default_factory=dict)
    """Every label of the node: what DaemonSets' node selectors and affinity match (headroom)."""

    @property
    def mig_ready(self) -> bool:
        """Whether the node's MIG profiles count: no MIG manager label (a cluster without one), or it says
        ``success`` (HyperPod task governance: "must show success ... to contribute MIG profiles")."""
        return self.mig_config_state is None or self.mig_config_state == "success"


@dataclass(frozen=True, slots=True)
class Toleration:
    """One toleration of a pod template (``operator`` ``Equal`` or ``Exists``; None key or effect: any)."""

    key: str | None = None
    operator: str = "Equal"
    value: str | None = None
    effect: str | None = None


@dataclass(frozen=True, slots=True)
class Requirement:
    """One ``matchExpressions`` or ``matchFields`` entry of a node selector term."""

    key: str
    operator: str  # In, NotIn, Exists, DoesNotExist, Gt, Lt
    values: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class SelectorTerm:
    """One ``nodeSelectorTerms`` entry: its expressions (on labels) and fields (``metadata.name``), all must hold."""

    match_expressions: tuple[Requirement, ...] = ()
    match_fields: tuple[Requirement, ...] = ()


@dataclass(frozen=True, slots=True)
class PodRequests:
    """What a pod (or a pod template) requests, per container, as kube-scheduler sums it (``domain.headroom``)."""

    containers: tuple[Resources, ...] = ()
    init_containers: tuple[tuple[Resources, bool], ...] = ()
    """Each init container's requests and whether it is a sidecar (``restartPolicy: Always``)."""
    overhead: Resources = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class DaemonSet:
    """What headroom needs of one DaemonSet: where its pods go and what each requests."""

    namespace: str
    name: str
    requests: PodRequests
    node_selector: Mapping[str, str] = field(default_factory=dict)
    affinity_terms: tuple[SelectorTerm, ...] | None = None
    """The required node affinity's ``nodeSelectorTerms`` (ORed); None: no required node affinity."""
    tolerations: tuple[Toleration, ...] = ()
    uid: str = ""
    """``metadata.uid``: its pods name it in their controlling owner reference."""


@dataclass(frozen=True, slots=True)
class OwnerReference:
    """One of a pod's ``metadata.ownerReferences``, as its creator wrote it (proof of nothing until matched with an
    object that was read: ``domain.headroom``)."""

    api_version: str
    kind: str
    uid: str
    controller: bool = False


@dataclass(frozen=True, slots=True)
class Pod:
    """What headroom needs of one pod bound to a node."""

    namespace: str
    name: str
    node_name: str
    requests: PodRequests
    phase: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    owners: tuple[OwnerReference, ...] = ()
    """Its ``metadata.ownerReferences`` (a DaemonSet's pod: counted with its DaemonSet; a Kueue Workload's: in
    Kueue's usage — both only when matched by uid with what was read, docs/spec.md §2)."""
    uid: str = ""
    """``metadata.uid`` (a plain pod Kueue manages owns its Workload)."""


@dataclass(frozen=True, slots=True)
class AcceleratorPartition:
    type: str  # a MIG profile such as "mig-1g.10gb"
    count: int


@dataclass(frozen=True, slots=True)
class ResourceConfig:
    """One ``ComputeQuotaResourceConfig`` (a quota entry or an absolute borrow limit)."""

    instance_type: str
    count: int | None = None
    accelerators: int | None = None
    vcpu: Amount | None = None
    memory_gib: Amount | None = None
    accelerator_partition: AcceleratorPartition | None = None


@dataclass(frozen=True, slots=True)
class Quota:
    """One compute quota policy (SageMaker ``CreateComputeQuota`` shape), parsed."""

    name: str
    team: str
    resources: tuple[ResourceConfig, ...] = ()
    strategy: Strategy = Strategy.LEND_AND_BORROW
    borrow_limit: int | None = None  # percent (of the team's quota or of the pool: Settings.borrow_limit_basis)
    absolute_borrow_limits: tuple[ResourceConfig, ...] = ()
    preempt_team_tasks: str = "Never"  # "Never" | "LowerPriority"
    fair_share_weight: int | None = None
    enabled: bool = True


@dataclass(frozen=True, slots=True)
class PriorityClass:
    name: str
    weight: int


@dataclass(frozen=True, slots=True)
class SchedulerConfig:
    priority_classes: tuple[PriorityClass, ...] = ()
    fair_share: bool = True
    idle_resource_sharing: bool = True


DEFAULT_COHORT_NAME = "shared-pool"
"""The Cohort a cluster's teams share, unless the operator names another (``Settings.cohort_name``)."""
DEFAULT_NAMESPACE_PREFIX = "hyperpod-ns-"
"""Prepended to the teams' namespace and queue names, unless the operator sets another
(``Settings.namespace_prefix``): HyperPod task governance's."""


@dataclass(frozen=True, slots=True)
class Settings:
    """Per-cluster knobs an operator sets (not part of the SageMaker shapes)."""

    tolerated_taint_keys: frozenset[str] = DEFAULT_TOLERATED_TAINT_KEYS
    extra_resources: frozenset[str] = frozenset()  # other allocatable resources to track
    cohort_name: str = DEFAULT_COHORT_NAME
    namespace_prefix: str = DEFAULT_NAMESPACE_PREFIX
    default_borrow_limit: int = 50
    borrow_limit_basis: BorrowLimitBasis = BorrowLimitBasis.QUOTA
    headroom: Headroom = DEFAULT_HEADROOM
    admission_policy: bool = DEFAULT_ADMISSION_POLICY
    """Whether idleshare writes its admission policy (``domain.admission``) in this cluster."""


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Everything one recompute looks at."""

    nodes: tuple[Node, ...]
    quotas: tuple[Quota, ...] = ()
    scheduler_config: SchedulerConfig = field(default_factory=SchedulerConfig)
    settings: Settings = field(default_factory=Settings)
    daemonsets: tuple[DaemonSet, ...] = ()
    pods: tuple[Pod, ...] = ()
    """Pods bound to nodes (read only on ``Headroom.ALL``)."""
    kueue_owners: frozenset[tuple[str, str]] = frozenset()
    """(namespace, uid) of every owner of an admitted Workload read (on ``Headroom.ALL``): a bound pod whose own uid
    or one of whose owners' is one is Kueue's (``domain.headroom.kueue_owners``)."""
