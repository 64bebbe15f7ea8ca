"""Synthesis helpers for the infra suite: every test here is marked `infra`.

Templates are synthesized with the stub Lambda asset (source only) to stay fast; the real local
bundling is exercised by test_infra_cdk_cli.py (`npx cdk synth`).
"""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

from aws_cdk import App
from aws_cdk.assertions import Template

from infra.app import build_app
from infra.config import CONTEXT_STUB_ASSET, parse_config, rehearsal_config
from infra.stack import IdleshareStack

REPO_ROOT = Path(__file__).resolve().parents[2]
SAMPLE = rehearsal_config()  # the example config (its placeholder cluster), which cdk.json's as shipped refuses

VPC = {
    "vpc_id": "vpc-0a1b2c3d4e5f60718",
    "subnet_ids": ["subnet-0a1b2c3d4e5f60711", "subnet-0a1b2c3d4e5f60722"],
    "security_group_ids": ["sg-0a1b2c3d4e5f60733"],
}


def private_config(*, endpoints: bool) -> dict[str, Any]:
    raw = copy.deepcopy(SAMPLE)
    vpc: dict[str, Any] = dict(VPC)
    if endpoints:
        vpc |= {"create_vpc_endpoints": True, "route_table_ids": ["rtb-0a1b2c3d4e5f60744", "rtb-0a1b2c3d4e5f60755"]}
    raw["clusters"][0]["vpc"] = vpc
    raw["clusters"].append(
        {"id": "research", "eks_cluster_name": "research-eks", "namespace_prefix": "rs-", "vpc": vpc}
    )
    raw["alarm_email"] = "gpu-ops@example.com"
    raw["api_gateway_account_logging_role"] = True  # the opt-in shape (the public one has the default: off)
    return raw


@dataclass
class Synth:
    app: App
    stack: IdleshareStack
    template: Template

    @property
    def json(self) -> dict[str, Any]:
        return self.template.to_json()

    def resources(self, type_: str) -> dict[str, dict[str, Any]]:
        return self.template.find_resources(type_)

    def only(self, type_: str) -> tuple[str, dict[str, Any]]:
        found = self.resources(type_)
        assert len(found) == 1, f"expected one {type_}, found {sorted(found)}"
        return next(iter(found.items()))


# --------------------------------------------------------------------------------- reading a template


def as_list(value: Any) -> list[Any]:
    """A template value that may be one item or a list of them, as a list."""
    return value if isinstance(value, list) else [value]


def policy_statements(template: dict[str, Any]) -> list[tuple[str, list[Any], dict[str, Any]]]:
    """Every statement of the template's identity policies (AWS::IAM::Policy, AWS::IAM::ManagedPolicy, a role's
    inline policies): (where: the policy's logical id or ``<role>/<policy name>``, the roles it is attached to as
    ``{"Ref": <role>}``, the statement)."""
    out: list[tuple[str, list[Any], dict[str, Any]]] = []
    for logical_id, res in template["Resources"].items():
        props = res.get("Properties", {})
        if res["Type"] in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
            out += [(logical_id, props.get("Roles", []), s) for s in as_list(props["PolicyDocument"]["Statement"])]
        elif res["Type"] == "AWS::IAM::Role":
            for policy in props.get("Policies", []):
                where, roles = f"{logical_id}/{policy.get('PolicyName')}", [{"Ref": logical_id}]
                out += [(where, roles, s) for s in as_list(policy["PolicyDocument"]["Statement"])]
    return out


def own_arn(service: str, resource: str) -> dict[str, Any]:
    """The ARN the stack builds for ``resource`` of ``service`` in its own partition, region and account."""
    pseudo = [{"Ref": "AWS::Partition"}, {"Ref": "AWS::Region"}, {"Ref": "AWS::AccountId"}]
    return {"Fn::Join": ["", ["arn:", pseudo[0], f":{service}:", pseudo[1], ":", pseudo[2], f":{resource}"]]}


def synth(raw: dict[str, Any], *, tmp: Path) -> Synth:
    app = App(outdir=str(tmp), context={CONTEXT_STUB_ASSET: "true"})
    stack = build_app(app, config=parse_config(raw), nag=False)
    return Synth(app=app, stack=stack, template=Template.from_stack(stack))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.infra)


@pytest.fixture(scope="session")
def public(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    return synth(SAMPLE, tmp=tmp_path_factory.mktemp("public"))


@pytest.fixture(scope="session")
def private(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    return synth(private_config(endpoints=True), tmp=tmp_path_factory.mktemp("private"))


@pytest.fixture(scope="session")
def private_nat(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    return synth(private_config(endpoints=False), tmp=tmp_path_factory.mktemp("private-nat"))


@pytest.fixture(scope="session")
def sample() -> dict[str, Any]:
    """The example config, infra/config.example.json, without its `_example` key (a copy: tests may change it)."""
    return copy.deepcopy(SAMPLE)


@pytest.fixture(scope="session")
def synthesize():
    """synth(raw_config, tmp=dir) for tests that need their own shape."""
    return synth
