"""Networking for private cluster endpoints.

When a governed cluster's API endpoint is private (common on HyperPod EKS), the recompute Lambda runs
in the cluster's VPC, in the subnets and security groups given in the config (imported by id: synth
never looks anything up). From there it must still reach DynamoDB, SQS, EventBridge, STS and EKS:
either through a NAT gateway the VPC already has, or through the endpoints created here when the
config says `create_vpc_endpoints: true` (interface endpoints with private DNS, plus a DynamoDB
gateway endpoint on the given route tables).
"""

from __future__ import annotations

from aws_cdk import Aws, Fn
from aws_cdk import aws_ec2 as ec2

from constructs import Construct
from infra.config import VpcConfig
from infra.constructs.functions import Placement

INTERFACE_ENDPOINT_SERVICES = ("sts", "eks", "sqs", "events", "logs")
HTTPS = 443


class Network(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, config: VpcConfig) -> None:
        super().__init__(scope, construct_id)
        # Only the id matters: subnets are passed explicitly, so the (unused) AZ list is a placeholder.
        vpc = ec2.Vpc.from_vpc_attributes(
            self, "Vpc", vpc_id=config.vpc_id, availability_zones=[Fn.select(0, Fn.get_azs())]
        )
        subnets = [ec2.Subnet.from_subnet_id(self, f"Subnet{i}", s) for i, s in enumerate(config.subnet_ids)]
        groups = [
            ec2.SecurityGroup.from_security_group_id(self, f"SecurityGroup{i}", sg, mutable=False)
            for i, sg in enumerate(config.security_group_ids)
        ]
        self.placement = Placement(vpc=vpc, subnets=subnets, security_groups=groups)
        self.endpoint_security_group: ec2.CfnSecurityGroup | None = None
        self.interface_endpoints: list[ec2.CfnVPCEndpoint] = []
        self.gateway_endpoint: ec2.CfnVPCEndpoint | None = None
        if config.create_vpc_endpoints:
            self._endpoints(config)

    def _endpoints(self, config: VpcConfig) -> None:
        sg = ec2.CfnSecurityGroup(
            self,
            "EndpointSecurityGroup",
            vpc_id=config.vpc_id,
            group_description="idleshare VPC endpoints: HTTPS from the recompute Lambda",
            security_group_ingress=[
                ec2.CfnSecurityGroup.IngressProperty(
                    ip_protocol="tcp",
                    from_port=HTTPS,
                    to_port=HTTPS,
                    source_security_group_id=source,
                    description="HTTPS from the idleshare recompute Lambda",
                )
                for source in config.security_group_ids
            ],
            # The endpoints answer; they never open connections.
            security_group_egress=[
                ec2.CfnSecurityGroup.EgressProperty(
                    ip_protocol="icmp",
                    from_port=252,
                    to_port=86,
                    cidr_ip="255.255.255.255/32",
                    description="Disallow all traffic",
                )
            ],
        )
        self.endpoint_security_group = sg
        for service in INTERFACE_ENDPOINT_SERVICES:
            self.interface_endpoints.append(
                ec2.CfnVPCEndpoint(
                    self,
                    f"{service.capitalize()}Endpoint",
                    vpc_id=config.vpc_id,
                    service_name=Fn.join("", ["com.amazonaws.", Aws.REGION, f".{service}"]),
                    vpc_endpoint_type="Interface",
                    private_dns_enabled=True,
                    subnet_ids=list(config.subnet_ids),
                    security_group_ids=[sg.attr_group_id],
                )
            )
        self.gateway_endpoint = ec2.CfnVPCEndpoint(
            self,
            "DynamodbEndpoint",
            vpc_id=config.vpc_id,
            service_name=Fn.join("", ["com.amazonaws.", Aws.REGION, ".dynamodb"]),
            vpc_endpoint_type="Gateway",
            route_table_ids=list(config.route_table_ids),
        )
