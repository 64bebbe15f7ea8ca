"""Both networking shapes: the recompute Lambda in the cluster VPC, with or without VPC endpoints."""

from __future__ import annotations

from idleshare import names
from infra.constructs.network import INTERFACE_ENDPOINT_SERVICES

SUBNETS = ["subnet-0a1b2c3d4e5f60711", "subnet-0a1b2c3d4e5f60722"]
SG = "sg-0a1b2c3d4e5f60733"
VPC_ACCESS = {
    "Fn::Join": [
        "",
        ["arn:", {"Ref": "AWS::Partition"}, ":iam::aws:policy/service-role/AWSLambdaVPCAccessExecutionRole"],
    ]
}


def _functions(synth) -> dict[str, dict]:
    return {fn["Properties"]["Handler"]: fn["Properties"] for fn in synth.resources("AWS::Lambda::Function").values()}


def test_only_recompute_runs_in_the_vpc(private, private_nat) -> None:
    for shape in (private, private_nat):
        fns = _functions(shape)
        assert fns[names.RECOMPUTE_HANDLER]["VpcConfig"] == {"SecurityGroupIds": [SG], "SubnetIds": SUBNETS}
        assert "VpcConfig" not in fns[names.ROUTER_HANDLER]
        assert "VpcConfig" not in fns[names.API_HANDLER]


def test_recompute_role_gets_the_eni_policy_in_a_vpc(private) -> None:
    recompute = _functions(private)[names.RECOMPUTE_HANDLER]
    role = private.json["Resources"][recompute["Role"]["Fn::GetAtt"][0]]
    assert role["Properties"]["ManagedPolicyArns"] == [VPC_ACCESS]


def test_interface_and_gateway_endpoints(private) -> None:
    endpoints = [e["Properties"] for e in private.resources("AWS::EC2::VPCEndpoint").values()]
    interface = sorted(
        (e["ServiceName"]["Fn::Join"][1][2] for e in endpoints if e["VpcEndpointType"] == "Interface"),
    )
    assert interface == sorted(f".{s}" for s in INTERFACE_ENDPOINT_SERVICES)
    assert set(INTERFACE_ENDPOINT_SERVICES) == {"sts", "eks", "sqs", "events", "logs"}
    sg = next(iter(private.resources("AWS::EC2::SecurityGroup")))
    for e in endpoints:
        assert e["VpcId"] == "vpc-0a1b2c3d4e5f60718"
        if e["VpcEndpointType"] == "Interface":
            assert e["PrivateDnsEnabled"] is True
            assert e["SubnetIds"] == SUBNETS
            assert e["SecurityGroupIds"] == [{"Fn::GetAtt": [sg, "GroupId"]}]
    (gateway,) = [e for e in endpoints if e["VpcEndpointType"] == "Gateway"]
    assert gateway["ServiceName"]["Fn::Join"][1][2] == ".dynamodb"
    assert gateway["RouteTableIds"] == ["rtb-0a1b2c3d4e5f60744", "rtb-0a1b2c3d4e5f60755"]


def test_endpoint_security_group_admits_https_from_the_lambda_only(private) -> None:
    (sg,) = private.resources("AWS::EC2::SecurityGroup").values()
    props = sg["Properties"]
    assert props["SecurityGroupIngress"] == [
        {
            "IpProtocol": "tcp",
            "FromPort": 443,
            "ToPort": 443,
            "SourceSecurityGroupId": SG,
            "Description": "HTTPS from the idleshare recompute Lambda",
        }
    ]
    assert props["SecurityGroupEgress"][0]["CidrIp"] == "255.255.255.255/32"  # no egress


def test_nat_shape_creates_no_endpoints(private_nat) -> None:
    private_nat.template.resource_count_is("AWS::EC2::VPCEndpoint", 0)
    private_nat.template.resource_count_is("AWS::EC2::SecurityGroup", 0)


def test_the_recompute_may_describe_every_configured_cluster(private) -> None:
    recompute = _functions(private)[names.RECOMPUTE_HANDLER]
    role = recompute["Role"]["Fn::GetAtt"][0]
    (policy,) = [
        p for p in private.resources("AWS::IAM::Policy").values() if p["Properties"]["Roles"] == [{"Ref": role}]
    ]
    (describe,) = [
        s for s in policy["Properties"]["PolicyDocument"]["Statement"] if s["Action"] == "eks:DescribeCluster"
    ]
    assert [r["Fn::Join"][1][-1] for r in describe["Resource"]] == [":cluster/ml-cluster-eks", ":cluster/research-eks"]


def test_alarm_email_subscribes_and_each_cluster_has_a_shortfall_alarm(private) -> None:
    private.template.has_resource_properties(
        "AWS::SNS::Subscription", {"Protocol": "email", "Endpoint": "gpu-ops@example.com"}
    )
    shortfall = [k for k in private.resources("AWS::CloudWatch::Alarm") if k.startswith("ObservabilityShortfallAlarm")]
    assert len(shortfall) == 2
