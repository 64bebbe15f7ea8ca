"""The governed clusters, registered at deploy time: a Lambda-backed CloudFormation custom resource.

``Custom::IdleshareClusterRegistry`` is served by the registrar function (``handlers/registrar.py``,
the same asset as the others, no provider framework): CloudFormation invokes it on create, and on update
when the clusters of the config change (the ``Clusters`` property is the same JSON as the function's
``IDLESHARE_CLUSTERS``); it writes the registry entries and answers CloudFormation. On update it also
deregisters the clusters of the previous list (CloudFormation's ``OldResourceProperties``) that are no
longer configured, and on delete every configured cluster. It runs after the table exists and after the
registrar's policy is attached (explicit dependencies), so a first deploy routes events as soon as it
completes; no Lambda writes anything merely because it started.

The construct's path (so the logical id) must not change: CloudFormation would create the renamed resource
(registering the clusters) and then delete the old one, deregistering them.
"""

from __future__ import annotations

from aws_cdk import CustomResource

from constructs import Construct
from infra.constructs.functions import IdleshareFunction

RESOURCE_TYPE = "Custom::IdleshareClusterRegistry"


class ClusterRegistry(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, registrar: IdleshareFunction, clusters: str) -> None:
        super().__init__(scope, construct_id)
        self.resource = CustomResource(
            self,
            "Resource",
            service_token=registrar.function.function_arn,
            resource_type=RESOURCE_TYPE,
            properties={"Clusters": clusters},
        )
        # the role's policy (a separate AWS::IAM::Policy) must be in place before CloudFormation invokes it
        self.resource.node.add_dependency(registrar.role)
