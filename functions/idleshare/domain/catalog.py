"""Built-in catalog of SageMaker HyperPod instance types (docs/spec.md §2 "Instance shape").

The engine takes the shape of a flavor from a real node of that flavor when the cluster has one;
this catalog is the fallback when it has none yet (a quota set up before its nodes arrive). Its
figures are *nominal*: a real node reports somewhat less allocatable (a p4d.24xlarge reports about
1113 GiB of its 1152), so a node's own shape always wins.

Names: the keys are SageMaker's ``ml.*`` names, the members of botocore's ``ClusterInstanceType``
enum (``KNOWN_INSTANCE_TYPES``). ``lookup`` also resolves plain EC2 names (``p5.48xlarge``), which
is what nodes of a plain EKS cluster carry; the spec returned always carries the ``ml.`` name.

Sources:
- accelerated types: ``tests/data/instance-specs.csv`` (the SageMaker HyperPod CLI's
  ``INSTANCE_RESOURCES`` joined with Karpenter's EC2-generated instance-type reference); a unit test
  checks every row against this module;
- ``ml.g4dn.*`` (NVIDIA T4): AWS's published G4dn specs; EFA on 8xlarge, 12xlarge and 16xlarge;
- ``ml.g7.*`` (NVIDIA RTX PRO 4500 Blackwell): vCPU and memory agree across the public sources
  seen, the GPU count per size does not (8xlarge 1 or 2, 12xlarge 2 or 4) and no EFA count was
  found. These entries follow the G7e size-to-GPU pattern and have ``verified=False``: confirm
  against ``aws ec2 describe-instance-types`` before relying on them;
- non-accelerated types: vCPU, memory and EFA of the HyperPod CLI table (``c5``, ``c5n``, ``m5``,
  ``t3``, ``c6i``, ``m6i``, ``r6i``, ``m7i``, ``r7i``, ``i3en``; ``c5n.large`` corrected to its
  published 5.25 GiB); vCPU and memory of the other families from EC2's published specs, whose EFA
  interfaces are not recorded (0).

Pure stdlib: the Lambda reads no CSV and loads no botocore service model.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction

from idleshare.domain.model import CPU, EFA, GIB, MEMORY, NEURON_DEVICE, NVIDIA_GPU

__all__ = [
    "CATALOG",
    "KNOWN_INSTANCE_TYPES",
    "MIG_PROFILES",
    "FlavorNaming",
    "InstanceSpec",
    "canonical_name",
    "instance_accelerator",
    "lookup",
]

ML_PREFIX = "ml."

NVIDIA = NVIDIA_GPU
NEURON = NEURON_DEVICE


@dataclass(frozen=True, slots=True)
class InstanceSpec:
    """Nominal resources of one instance type."""

    instance_type: str  # the SageMaker name, ``ml.p5.48xlarge``
    vcpu: int
    memory_gib: int | Fraction
    accelerator: str | None = None  # ``nvidia.com/gpu`` | ``aws.amazon.com/neurondevice`` | None
    accelerators: int = 0
    efa: int = 0
    accelerator_name: str | None = None  # ``h100``, ``trainium2``, ...
    accelerator_memory_mib: int | None = None  # per device
    verified: bool = True  # False: public sources disagree, see the module docstring

    @property
    def ec2_name(self) -> str:
        """The plain EC2 name: ``p5.48xlarge``."""
        return self.instance_type.removeprefix(ML_PREFIX)

    def allocatable(self) -> dict[str, int]:
        """The node shape as Kubernetes would report it, without overhead: cpu in cores, memory in
        bytes, the accelerator in devices, EFA interfaces when there are any."""
        memory = self.memory_gib * GIB
        if int(memory) != memory:  # pragma: no cover - guarded by the catalog's unit test
            raise ValueError(f"{self.instance_type}: memory is not a whole number of bytes")
        out: dict[str, int] = {CPU: self.vcpu, MEMORY: int(memory)}
        if self.accelerator is not None:
            out[self.accelerator] = self.accelerators
        if self.efa > 0:
            out[EFA] = self.efa
        return out


# Every member of botocore's SageMaker ``ClusterInstanceType`` enum, in the model's order.
_CLUSTER_INSTANCE_TYPES: tuple[str, ...] = (
    "ml.p4d.24xlarge",
    "ml.p4de.24xlarge",
    "ml.p5.48xlarge",
    "ml.p5.4xlarge",
    "ml.p6e-gb200.36xlarge",
    "ml.trn1.32xlarge",
    "ml.trn1n.32xlarge",
    "ml.g5.xlarge",
    "ml.g5.2xlarge",
    "ml.g5.4xlarge",
    "ml.g5.8xlarge",
    "ml.g5.12xlarge",
    "ml.g5.16xlarge",
    "ml.g5.24xlarge",
    "ml.g5.48xlarge",
    "ml.c5.large",
    "ml.c5.xlarge",
    "ml.c5.2xlarge",
    "ml.c5.4xlarge",
    "ml.c5.9xlarge",
    "ml.c5.12xlarge",
    "ml.c5.18xlarge",
    "ml.c5.24xlarge",
    "ml.c5n.large",
    "ml.c5n.2xlarge",
    "ml.c5n.4xlarge",
    "ml.c5n.9xlarge",
    "ml.c5n.18xlarge",
    "ml.m5.large",
    "ml.m5.xlarge",
    "ml.m5.2xlarge",
    "ml.m5.4xlarge",
    "ml.m5.8xlarge",
    "ml.m5.12xlarge",
    "ml.m5.16xlarge",
    "ml.m5.24xlarge",
    "ml.t3.medium",
    "ml.t3.large",
    "ml.t3.xlarge",
    "ml.t3.2xlarge",
    "ml.g6.xlarge",
    "ml.g6.2xlarge",
    "ml.g6.4xlarge",
    "ml.g6.8xlarge",
    "ml.g6.16xlarge",
    "ml.g6.12xlarge",
    "ml.g6.24xlarge",
    "ml.g6.48xlarge",
    "ml.gr6.4xlarge",
    "ml.gr6.8xlarge",
    "ml.g6e.xlarge",
    "ml.g6e.2xlarge",
    "ml.g6e.4xlarge",
    "ml.g6e.8xlarge",
    "ml.g6e.16xlarge",
    "ml.g6e.12xlarge",
    "ml.g6e.24xlarge",
    "ml.g6e.48xlarge",
    "ml.p5e.48xlarge",
    "ml.p5en.48xlarge",
    "ml.p6-b200.48xlarge",
    "ml.trn2.3xlarge",
    "ml.trn2.48xlarge",
    "ml.c6i.large",
    "ml.c6i.xlarge",
    "ml.c6i.2xlarge",
    "ml.c6i.4xlarge",
    "ml.c6i.8xlarge",
    "ml.c6i.12xlarge",
    "ml.c6i.16xlarge",
    "ml.c6i.24xlarge",
    "ml.c6i.32xlarge",
    "ml.m6i.large",
    "ml.m6i.xlarge",
    "ml.m6i.2xlarge",
    "ml.m6i.4xlarge",
    "ml.m6i.8xlarge",
    "ml.m6i.12xlarge",
    "ml.m6i.16xlarge",
    "ml.m6i.24xlarge",
    "ml.m6i.32xlarge",
    "ml.r6i.large",
    "ml.r6i.xlarge",
    "ml.r6i.2xlarge",
    "ml.r6i.4xlarge",
    "ml.r6i.8xlarge",
    "ml.r6i.12xlarge",
    "ml.r6i.16xlarge",
    "ml.r6i.24xlarge",
    "ml.r6i.32xlarge",
    "ml.i3en.large",
    "ml.i3en.xlarge",
    "ml.i3en.2xlarge",
    "ml.i3en.3xlarge",
    "ml.i3en.6xlarge",
    "ml.i3en.12xlarge",
    "ml.i3en.24xlarge",
    "ml.m7i.large",
    "ml.m7i.xlarge",
    "ml.m7i.2xlarge",
    "ml.m7i.4xlarge",
    "ml.m7i.8xlarge",
    "ml.m7i.12xlarge",
    "ml.m7i.16xlarge",
    "ml.m7i.24xlarge",
    "ml.m7i.48xlarge",
    "ml.r7i.large",
    "ml.r7i.xlarge",
    "ml.r7i.2xlarge",
    "ml.r7i.4xlarge",
    "ml.r7i.8xlarge",
    "ml.r7i.12xlarge",
    "ml.r7i.16xlarge",
    "ml.r7i.24xlarge",
    "ml.r7i.48xlarge",
    "ml.r5d.16xlarge",
    "ml.g7e.2xlarge",
    "ml.g7e.4xlarge",
    "ml.g7e.8xlarge",
    "ml.g7e.12xlarge",
    "ml.g7e.24xlarge",
    "ml.g7e.48xlarge",
    "ml.p6-b300.48xlarge",
    "ml.g4dn.xlarge",
    "ml.g4dn.2xlarge",
    "ml.g4dn.4xlarge",
    "ml.g4dn.8xlarge",
    "ml.g4dn.12xlarge",
    "ml.g4dn.16xlarge",
    "ml.c6g.medium",
    "ml.c6g.large",
    "ml.c6g.xlarge",
    "ml.c6g.2xlarge",
    "ml.c6g.4xlarge",
    "ml.c6g.8xlarge",
    "ml.c6g.12xlarge",
    "ml.c6g.16xlarge",
    "ml.c7g.medium",
    "ml.c7g.large",
    "ml.c7g.xlarge",
    "ml.c7g.2xlarge",
    "ml.c7g.4xlarge",
    "ml.c7g.8xlarge",
    "ml.c7g.12xlarge",
    "ml.c7g.16xlarge",
    "ml.c8g.medium",
    "ml.c8g.large",
    "ml.c8g.xlarge",
    "ml.c8g.2xlarge",
    "ml.c8g.4xlarge",
    "ml.c8g.8xlarge",
    "ml.c8g.12xlarge",
    "ml.c8g.16xlarge",
    "ml.c8g.24xlarge",
    "ml.c8g.48xlarge",
    "ml.c6a.large",
    "ml.c6a.xlarge",
    "ml.c6a.2xlarge",
    "ml.c6a.4xlarge",
    "ml.c6a.8xlarge",
    "ml.c6a.12xlarge",
    "ml.c6a.16xlarge",
    "ml.c6a.24xlarge",
    "ml.c6a.32xlarge",
    "ml.c6a.48xlarge",
    "ml.m6a.large",
    "ml.m6a.xlarge",
    "ml.m6a.2xlarge",
    "ml.m6a.4xlarge",
    "ml.m6a.8xlarge",
    "ml.m6a.12xlarge",
    "ml.m6a.16xlarge",
    "ml.m6a.24xlarge",
    "ml.m6a.32xlarge",
    "ml.m6a.48xlarge",
    "ml.m6g.medium",
    "ml.m6g.large",
    "ml.m6g.xlarge",
    "ml.m6g.2xlarge",
    "ml.m6g.4xlarge",
    "ml.m6g.8xlarge",
    "ml.m6g.12xlarge",
    "ml.m6g.16xlarge",
    "ml.m7g.medium",
    "ml.m7g.large",
    "ml.m7g.xlarge",
    "ml.m7g.2xlarge",
    "ml.m7g.4xlarge",
    "ml.m7g.8xlarge",
    "ml.m7g.12xlarge",
    "ml.m7g.16xlarge",
    "ml.m8g.medium",
    "ml.m8g.large",
    "ml.m8g.xlarge",
    "ml.m8g.2xlarge",
    "ml.m8g.4xlarge",
    "ml.m8g.8xlarge",
    "ml.m8g.12xlarge",
    "ml.m8g.16xlarge",
    "ml.m8g.24xlarge",
    "ml.m8g.48xlarge",
    "ml.g7.2xlarge",
    "ml.g7.4xlarge",
    "ml.g7.8xlarge",
    "ml.g7.12xlarge",
    "ml.g7.24xlarge",
    "ml.g7.48xlarge",
    "ml.c8a.16xlarge",
    "ml.m8a.16xlarge",
)
KNOWN_INSTANCE_TYPES: frozenset[str] = frozenset(_CLUSTER_INSTANCE_TYPES)

# botocore's SageMaker ``MIGProfileType`` enum (``AcceleratorPartition.Type``); the Kubernetes
# resource is ``nvidia.com/<profile>``.
MIG_PROFILES: frozenset[str] = frozenset(
    {
        "mig-1g.5gb", "mig-1g.10gb", "mig-1g.18gb", "mig-1g.20gb", "mig-1g.23gb", "mig-1g.35gb",
        "mig-1g.45gb", "mig-1g.47gb", "mig-2g.10gb", "mig-2g.20gb", "mig-2g.35gb", "mig-2g.45gb",
        "mig-2g.47gb", "mig-3g.20gb", "mig-3g.40gb", "mig-3g.71gb", "mig-3g.90gb", "mig-3g.93gb",
        "mig-4g.20gb", "mig-4g.40gb", "mig-4g.71gb", "mig-4g.90gb", "mig-4g.93gb", "mig-7g.40gb",
        "mig-7g.80gb", "mig-7g.141gb", "mig-7g.180gb", "mig-7g.186gb",
    }
)  # fmt: skip

_Accelerated = tuple[str, int, int, str, int, str | None, int | None, int]

# instance type, vCPU, memory GiB, accelerator resource, accelerators, accelerator name,
# accelerator memory MiB (per device), EFA interfaces.
_ACCELERATED: tuple[_Accelerated, ...] = (
    ("ml.p4d.24xlarge", 96, 1152, NVIDIA, 8, "a100", 40960, 4),
    ("ml.p4de.24xlarge", 96, 1152, NVIDIA, 8, "a100", 81920, 4),
    ("ml.p5.48xlarge", 192, 2048, NVIDIA, 8, "h100", 81920, 32),
    ("ml.p5.4xlarge", 16, 256, NVIDIA, 1, "h100", 81920, 1),
    ("ml.trn1.32xlarge", 128, 512, NEURON, 16, "trainium", None, 8),
    ("ml.trn1n.32xlarge", 128, 512, NEURON, 16, "trainium", None, 16),
    ("ml.g5.xlarge", 4, 16, NVIDIA, 1, "a10g", 22888, 0),
    ("ml.g5.2xlarge", 8, 32, NVIDIA, 1, "a10g", 22888, 0),
    ("ml.g5.4xlarge", 16, 64, NVIDIA, 1, "a10g", 22888, 0),
    ("ml.g5.8xlarge", 32, 128, NVIDIA, 1, "a10g", 22888, 1),
    ("ml.g5.12xlarge", 48, 192, NVIDIA, 4, "a10g", 22888, 1),
    ("ml.g5.16xlarge", 64, 256, NVIDIA, 1, "a10g", 22888, 1),
    ("ml.g5.24xlarge", 96, 384, NVIDIA, 4, "a10g", 22888, 1),
    ("ml.g5.48xlarge", 192, 768, NVIDIA, 8, "a10g", 22888, 1),
    ("ml.g6.xlarge", 4, 16, NVIDIA, 1, "l4", 22888, 0),
    ("ml.g6.2xlarge", 8, 32, NVIDIA, 1, "l4", 22888, 0),
    ("ml.g6.4xlarge", 16, 64, NVIDIA, 1, "l4", 22888, 0),
    ("ml.g6.8xlarge", 32, 128, NVIDIA, 1, "l4", 22888, 1),
    ("ml.g6.16xlarge", 64, 256, NVIDIA, 1, "l4", 22888, 1),
    ("ml.g6.12xlarge", 48, 192, NVIDIA, 4, "l4", 22888, 1),
    ("ml.g6.24xlarge", 96, 384, NVIDIA, 4, "l4", 22888, 1),
    ("ml.g6.48xlarge", 192, 768, NVIDIA, 8, "l4", 22888, 1),
    ("ml.gr6.4xlarge", 16, 128, NVIDIA, 1, "l4", 22888, 0),
    ("ml.gr6.8xlarge", 32, 256, NVIDIA, 1, "l4", 22888, 1),
    ("ml.g6e.xlarge", 4, 32, NVIDIA, 1, "l40s", 45776, 0),
    ("ml.g6e.2xlarge", 8, 64, NVIDIA, 1, "l40s", 45776, 0),
    ("ml.g6e.4xlarge", 16, 128, NVIDIA, 1, "l40s", 45776, 0),
    ("ml.g6e.8xlarge", 32, 256, NVIDIA, 1, "l40s", 45776, 1),
    ("ml.g6e.16xlarge", 64, 512, NVIDIA, 1, "l40s", 45776, 1),
    ("ml.g6e.12xlarge", 48, 384, NVIDIA, 4, "l40s", 45776, 1),
    ("ml.g6e.24xlarge", 96, 768, NVIDIA, 4, "l40s", 45776, 2),
    ("ml.g6e.48xlarge", 192, 1536, NVIDIA, 8, "l40s", 45776, 4),
    ("ml.g7e.2xlarge", 8, 64, NVIDIA, 1, "rtx-pro-server-6000", 98304, 0),
    ("ml.g7e.4xlarge", 16, 128, NVIDIA, 1, "rtx-pro-server-6000", 98304, 0),
    ("ml.g7e.8xlarge", 32, 256, NVIDIA, 1, "rtx-pro-server-6000", 98304, 1),
    ("ml.g7e.12xlarge", 48, 512, NVIDIA, 2, "rtx-pro-server-6000", 98304, 1),
    ("ml.g7e.24xlarge", 96, 1024, NVIDIA, 4, "rtx-pro-server-6000", 98304, 2),
    ("ml.g7e.48xlarge", 192, 2048, NVIDIA, 8, "rtx-pro-server-6000", 98304, 4),
    ("ml.p5e.48xlarge", 192, 2048, NVIDIA, 8, "h200", 144384, 32),
    ("ml.p5en.48xlarge", 192, 2048, NVIDIA, 8, "h200", 144384, 16),
    ("ml.trn2.3xlarge", 12, 128, NEURON, 1, None, None, 1),
    ("ml.trn2.48xlarge", 192, 2048, NEURON, 16, "trainium2", None, 16),
    ("ml.p6e-gb200.36xlarge", 144, 960, NVIDIA, 4, None, None, 0),
    ("ml.p6-b200.48xlarge", 192, 2048, NVIDIA, 8, "b200", 183359, 8),
    ("ml.p6-b300.48xlarge", 192, 4096, NVIDIA, 8, "b300", 275040, 16),
    # Not in instance-specs.csv: AWS's published G4dn specs (NVIDIA T4, 16 GiB).
    ("ml.g4dn.xlarge", 4, 16, NVIDIA, 1, "t4", 16384, 0),
    ("ml.g4dn.2xlarge", 8, 32, NVIDIA, 1, "t4", 16384, 0),
    ("ml.g4dn.4xlarge", 16, 64, NVIDIA, 1, "t4", 16384, 0),
    ("ml.g4dn.8xlarge", 32, 128, NVIDIA, 1, "t4", 16384, 1),
    ("ml.g4dn.12xlarge", 48, 192, NVIDIA, 4, "t4", 16384, 1),
    ("ml.g4dn.16xlarge", 64, 256, NVIDIA, 1, "t4", 16384, 1),
    # Not in instance-specs.csv and not verified (see the module docstring): G7, RTX PRO 4500.
    ("ml.g7.2xlarge", 8, 32, NVIDIA, 1, "rtx-pro-4500", None, 0),
    ("ml.g7.4xlarge", 16, 64, NVIDIA, 1, "rtx-pro-4500", None, 0),
    ("ml.g7.8xlarge", 32, 128, NVIDIA, 1, "rtx-pro-4500", None, 0),
    ("ml.g7.12xlarge", 48, 192, NVIDIA, 2, "rtx-pro-4500", None, 0),
    ("ml.g7.24xlarge", 96, 384, NVIDIA, 4, "rtx-pro-4500", None, 0),
    ("ml.g7.48xlarge", 192, 768, NVIDIA, 8, "rtx-pro-4500", None, 0),
)
_UNVERIFIED = frozenset(
    {"ml.g7.2xlarge", "ml.g7.4xlarge", "ml.g7.8xlarge", "ml.g7.12xlarge", "ml.g7.24xlarge", "ml.g7.48xlarge"}
)


def _family(family: str, sizes: str, vcpu_per_xlarge: int, gib_per_vcpu: int) -> list[tuple[str, int, int]]:
    """Sizes of a family with a fixed memory-per-vCPU ratio: ``medium`` 1 vCPU, ``large`` 2,
    ``xlarge`` 4, ``<n>xlarge`` 4n."""
    out = []
    for size in sizes.split():
        if size == "medium":
            vcpu = 1
        elif size == "large":
            vcpu = 2
        elif size == "xlarge":
            vcpu = vcpu_per_xlarge
        else:
            vcpu = int(size.removesuffix("xlarge")) * vcpu_per_xlarge
        out.append((f"ml.{family}.{size}", vcpu, vcpu * gib_per_vcpu))
    return out


_GRAVITON = "medium large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge"
_GRAVITON4 = _GRAVITON + " 24xlarge 48xlarge"
_AMD6 = "large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge 32xlarge 48xlarge"

# instance type, vCPU, memory GiB, EFA interfaces (the HyperPod CLI's table).
_GENERAL: tuple[tuple[str, int, int | Fraction, int], ...] = (
    ("ml.c5.large", 2, 4, 0),
    ("ml.c5.xlarge", 4, 8, 0),
    ("ml.c5.2xlarge", 8, 16, 0),
    ("ml.c5.4xlarge", 16, 32, 0),
    ("ml.c5.9xlarge", 36, 72, 0),
    ("ml.c5.12xlarge", 48, 96, 0),
    ("ml.c5.18xlarge", 72, 144, 0),
    ("ml.c5.24xlarge", 96, 192, 0),
    ("ml.c5n.large", 2, Fraction(21, 4), 0),
    ("ml.c5n.2xlarge", 8, 21, 0),
    ("ml.c5n.4xlarge", 16, 42, 0),
    ("ml.c5n.9xlarge", 36, 96, 1),
    ("ml.c5n.18xlarge", 72, 192, 1),
    ("ml.m5.large", 2, 8, 0),
    ("ml.m5.xlarge", 4, 16, 0),
    ("ml.m5.2xlarge", 8, 32, 0),
    ("ml.m5.4xlarge", 16, 64, 0),
    ("ml.m5.8xlarge", 32, 128, 0),
    ("ml.m5.12xlarge", 48, 192, 0),
    ("ml.m5.16xlarge", 64, 256, 0),
    ("ml.m5.24xlarge", 96, 384, 0),
    ("ml.t3.medium", 2, 4, 0),
    ("ml.t3.large", 2, 8, 0),
    ("ml.t3.xlarge", 4, 16, 0),
    ("ml.t3.2xlarge", 8, 32, 0),
    ("ml.c6i.large", 2, 4, 0),
    ("ml.c6i.xlarge", 4, 8, 0),
    ("ml.c6i.2xlarge", 8, 16, 0),
    ("ml.c6i.4xlarge", 16, 32, 0),
    ("ml.c6i.8xlarge", 32, 64, 0),
    ("ml.c6i.12xlarge", 48, 96, 0),
    ("ml.c6i.16xlarge", 64, 128, 0),
    ("ml.c6i.24xlarge", 96, 192, 0),
    ("ml.c6i.32xlarge", 128, 256, 1),
    ("ml.m6i.large", 2, 8, 0),
    ("ml.m6i.xlarge", 4, 16, 0),
    ("ml.m6i.2xlarge", 8, 32, 0),
    ("ml.m6i.4xlarge", 16, 64, 0),
    ("ml.m6i.8xlarge", 32, 128, 0),
    ("ml.m6i.12xlarge", 48, 192, 0),
    ("ml.m6i.16xlarge", 64, 256, 0),
    ("ml.m6i.24xlarge", 96, 384, 0),
    ("ml.m6i.32xlarge", 128, 512, 1),
    ("ml.r6i.large", 2, 16, 0),
    ("ml.r6i.xlarge", 4, 32, 0),
    ("ml.r6i.2xlarge", 8, 64, 0),
    ("ml.r6i.4xlarge", 16, 128, 0),
    ("ml.r6i.8xlarge", 32, 256, 0),
    ("ml.r6i.12xlarge", 48, 384, 0),
    ("ml.r6i.16xlarge", 64, 512, 0),
    ("ml.r6i.24xlarge", 96, 768, 0),
    ("ml.r6i.32xlarge", 128, 1024, 1),
    ("ml.m7i.large", 2, 8, 0),
    ("ml.m7i.xlarge", 4, 16, 0),
    ("ml.m7i.2xlarge", 8, 32, 0),
    ("ml.m7i.4xlarge", 16, 64, 0),
    ("ml.m7i.8xlarge", 32, 128, 0),
    ("ml.m7i.12xlarge", 48, 192, 0),
    ("ml.m7i.16xlarge", 64, 256, 0),
    ("ml.m7i.24xlarge", 96, 384, 0),
    ("ml.m7i.48xlarge", 192, 768, 1),
    ("ml.r7i.large", 2, 16, 0),
    ("ml.r7i.xlarge", 4, 32, 0),
    ("ml.r7i.2xlarge", 8, 64, 0),
    ("ml.r7i.4xlarge", 16, 128, 0),
    ("ml.r7i.8xlarge", 32, 256, 0),
    ("ml.r7i.12xlarge", 48, 384, 0),
    ("ml.r7i.16xlarge", 64, 512, 0),
    ("ml.r7i.24xlarge", 96, 768, 0),
    ("ml.r7i.48xlarge", 192, 1536, 1),
    ("ml.i3en.large", 2, 16, 0),
    ("ml.i3en.xlarge", 4, 32, 0),
    ("ml.i3en.2xlarge", 8, 64, 0),
    ("ml.i3en.3xlarge", 12, 96, 0),
    ("ml.i3en.6xlarge", 24, 192, 0),
    ("ml.i3en.12xlarge", 48, 384, 1),
    ("ml.i3en.24xlarge", 96, 768, 1),
    # EC2's published specs; EFA not recorded.
    ("ml.r5d.16xlarge", 64, 512, 0),
    ("ml.c8a.16xlarge", 64, 128, 0),
    ("ml.m8a.16xlarge", 64, 256, 0),
    *(
        (name, vcpu, gib, 0)
        for name, vcpu, gib in (
            _family("c6g", _GRAVITON, 4, 2)
            + _family("c7g", _GRAVITON, 4, 2)
            + _family("c8g", _GRAVITON4, 4, 2)
            + _family("m6g", _GRAVITON, 4, 4)
            + _family("m7g", _GRAVITON, 4, 4)
            + _family("m8g", _GRAVITON4, 4, 4)
            + _family("c6a", _AMD6, 4, 2)
            + _family("m6a", _AMD6, 4, 4)
        )
    ),
)


def _build() -> dict[str, InstanceSpec]:
    specs: dict[str, InstanceSpec] = {}
    for name, vcpu, gib, resource, count, model, model_mib, efa in _ACCELERATED:
        specs[name] = InstanceSpec(
            instance_type=name,
            vcpu=vcpu,
            memory_gib=gib,
            accelerator=resource,
            accelerators=count,
            efa=efa,
            accelerator_name=model,
            accelerator_memory_mib=model_mib,
            verified=name not in _UNVERIFIED,
        )
    for name, vcpu, mem, efa in _GENERAL:
        specs[name] = InstanceSpec(instance_type=name, vcpu=vcpu, memory_gib=mem, efa=efa)
    return specs


CATALOG: dict[str, InstanceSpec] = _build()
"""``ml.`` name -> spec. Treat as read-only."""

# Accelerator of families the catalog does not list a size of (plain EKS nodes such as ``p3.2xlarge``).
_EXTRA_FAMILIES = {"p3": NVIDIA, "p3dn": NVIDIA, "g5g": NVIDIA, "inf1": NEURON, "inf2": NEURON}
_FAMILY_ACCELERATOR: dict[str, str] = {
    **_EXTRA_FAMILIES,
    **{spec.ec2_name.split(".", 1)[0]: spec.accelerator for spec in CATALOG.values() if spec.accelerator is not None},
}


def canonical_name(instance_type: str) -> str:
    """``p5.48xlarge`` -> ``ml.p5.48xlarge``; an ``ml.`` name is returned unchanged."""
    return instance_type if instance_type.startswith(ML_PREFIX) else ML_PREFIX + instance_type


def lookup(instance_type: str) -> InstanceSpec | None:
    """The spec of ``ml.p5.48xlarge`` or ``p5.48xlarge``; None for a type the catalog lacks."""
    return CATALOG.get(canonical_name(instance_type))


def instance_accelerator(instance_type: str) -> str | None:
    """The accelerator resource of an instance type (``ml.`` or EC2 name): ``nvidia.com/gpu``,
    ``aws.amazon.com/neurondevice``, or None for a type without accelerators. Types the catalog
    lacks are judged by their family (``p5.4xlarge`` -> ``p5``) when the family is known."""
    spec = lookup(instance_type)
    if spec is not None:
        return spec.accelerator
    family = canonical_name(instance_type).removeprefix(ML_PREFIX).split(".", 1)[0]
    return _FAMILY_ACCELERATOR.get(family)


def _ec2_name(instance_type: str) -> str:
    return instance_type.removeprefix(ML_PREFIX)


@dataclass(frozen=True, slots=True)
class FlavorNaming:
    """Which flavor a quota's instance type governs: ``ml.X`` and ``X`` are one instance type under two names
    (HyperPod labels its nodes ``ml.p5.48xlarge``, EKS and Karpenter ``p5.48xlarge``), and a quota naming either
    governs the one flavor this chooses, decided for the whole cluster from its nodes (docs/decisions.md, "Flavor
    names"; docs/spec.md §1):

    1. the name the cluster's nodes carry when they carry only one of the two;
    2. both carried: the name more *eligible* nodes carry, then more nodes, then the cluster's naming;
    3. neither carried: the cluster's naming — ``ml.`` when more of its eligible nodes (then of all its nodes) carry
       ``ml.`` names than EC2 names —, and on a tie (an empty cluster) ``ml.X`` when SageMaker's enum has it, else ``X``.

    So one node (of one name or the other, Ready or not) never moves a flavor that more nodes carry under the other
    name, and the order of the nodes never matters."""

    counts: Mapping[str, tuple[int, int]]
    """flavor (a node label) -> (eligible nodes, nodes): the pool's ``node_counts``."""
    ml_naming: bool | None
    """The cluster's naming: True ``ml.``, False EC2, None a tie."""

    @classmethod
    def of(cls, counts: Mapping[str, tuple[int, int]]) -> FlavorNaming:
        ml, ec2 = [0, 0], [0, 0]
        for flavor, (eligible, total) in counts.items():
            side = ml if flavor.startswith(ML_PREFIX) else ec2
            side[0] += eligible
            side[1] += total
        return cls(counts, None if ml == ec2 else ml > ec2)

    def flavor(self, instance_type: str) -> str:
        """The flavor a quota's ``instance_type`` (``ml.X`` or ``X``) governs."""
        bare = _ec2_name(instance_type)
        ml, ec2 = ML_PREFIX + bare, bare
        on_ml, on_ec2 = self.counts.get(ml), self.counts.get(ec2)
        if on_ml is not None and on_ec2 is not None and on_ml != on_ec2:
            return ml if on_ml > on_ec2 else ec2  # (eligible, nodes), compared in that order
        if (on_ml is None) != (on_ec2 is None):
            return ml if on_ml is not None else ec2
        if self.ml_naming is not None:
            return ml if self.ml_naming else ec2
        return ml if ml in KNOWN_INSTANCE_TYPES else ec2

    def both_named(self) -> list[tuple[str, str]]:
        """(the flavor quotas govern, the other name) for every instance type whose nodes carry both names, sorted."""
        out = []
        for flavor in self.counts:
            if flavor.startswith(ML_PREFIX) and _ec2_name(flavor) in self.counts:
                chosen = self.flavor(flavor)
                out.append((chosen, _ec2_name(flavor) if chosen == flavor else flavor))
        return sorted(out)
