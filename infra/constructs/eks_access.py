"""EKS access for the recompute role on every governed cluster.

An access entry (type STANDARD) maps the recompute Lambda's role to the Kubernetes group
`idleshare-recompute`; what that group may do is the ClusterRole in infra/k8s/rbac.yaml, applied
with `kubectl apply` (see the manifest's header). The role may also `eks:DescribeCluster` the
governed clusters, to find each endpoint and CA.
"""

from __future__ import annotations

from pathlib import Path

from aws_cdk import Stack
from aws_cdk import aws_eks as eks
from aws_cdk import aws_iam as iam

from constructs import Construct
from idleshare import names
from infra.config import ClusterConfig

RBAC_MANIFEST = Path(__file__).resolve().parent.parent / "k8s" / "rbac.yaml"
RBAC_HEADROOM_ALL_MANIFEST = RBAC_MANIFEST.with_name("rbac-headroom-all.yaml")
"""Applied only to a cluster whose headroom setting is ``all``: the recompute's list of bound pods and Workloads."""
RBAC_MANIFESTS = (RBAC_MANIFEST, RBAC_HEADROOM_ALL_MANIFEST)


def rbac_text() -> str:
    """Both manifests as one YAML stream (what the stack's description and the deploy rehearsal read)."""
    return "---\n".join(path.read_text() for path in RBAC_MANIFESTS)


def cluster_arn(scope: Construct, eks_cluster_name: str) -> str:
    return Stack.of(scope).format_arn(service="eks", resource="cluster", resource_name=eks_cluster_name)


def access_entries(
    scope: Construct, clusters: list[ClusterConfig], role: iam.IRole, group: str
) -> list[eks.CfnAccessEntry]:
    """One EKS access entry per cluster mapping ``role`` to the Kubernetes ``group`` (``infra/k8s/rbac.yaml``)."""
    return [
        eks.CfnAccessEntry(
            scope,
            f"AccessEntry-{cluster.id}",
            cluster_name=cluster.eks_cluster_name,
            principal_arn=role.role_arn,
            type="STANDARD",
            kubernetes_groups=[group],
        )
        for cluster in clusters
    ]


class EksAccess(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, clusters: list[ClusterConfig], role: iam.IRole) -> None:
        super().__init__(scope, construct_id)
        self.access_entries = access_entries(self, clusters, role, names.K8S_GROUP)
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["eks:DescribeCluster"],
                resources=[cluster_arn(self, c.eks_cluster_name) for c in clusters],
            )
        )
