"""Run idleshare's real Lambda code under exactly the IAM policy the synthesized template gives its role.

moto enforces IAM (``set_initial_no_auth_action_count``) for requests signed with an assumed role's
credentials. Two differences from AWS are handled here, openly:

* moto checks **actions, not resources**: the role's statements are installed with ``Resource: "*"``.
  Resource scoping is checked on the template itself (``test_infra_iam.py``, ``test_infra_stack.py``).
* moto asks for ``dynamodb:TransactWriteItems`` where AWS authorises a transaction by **each item's action**
  (``Put`` -> ``dynamodb:PutItem``, ``Update`` -> ``UpdateItem``, ``Delete`` -> ``DeleteItem``,
  ``ConditionCheck`` -> ``ConditionCheckItem``): the moto policy also allows ``TransactWriteItems``, and
  every transaction is checked here item by item against the role's real grants (AccessDenied otherwise).

* SQS authorises a batch call by its single action (``ChangeMessageVisibilityBatch`` -> ``ChangeMessageVisibility``,
  ``DeleteMessageBatch`` -> ``DeleteMessage``, ``SendMessageBatch`` -> ``SendMessage``); moto asks for the batch
  action: the moto policy also allows it where the single one is granted, and the call is recorded as the
  single action it needs on AWS.

* moto recomputes SigV4 signatures wrongly for EKS's REST-JSON requests (``SignatureDoesNotMatch`` for a
  correctly signed ``DescribeCluster``): for ``eks`` only, the signature check is skipped; the action is
  still checked against the role's policy.

Every AWS call the code makes is recorded per role (``Recorder.used``), so a test can show that a role's
grants are exactly what its flows use; every call refused (``Recorder.denied``), so a test can show none was,
even where the code swallows the error (a record handed back late is not a failure of the run).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections import defaultdict
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import botocore.client
from botocore.exceptions import ClientError
from moto.core import set_initial_no_auth_action_count

from tests.infra.conftest import as_list, policy_statements

ACCOUNT = "123456789012"
REGION = "us-east-1"
# Used by the Lambda runtime on the function's behalf, not by idleshare's code.
RUNTIME_ACTIONS = frozenset(
    {"logs:CreateLogStream", "logs:PutLogEvents", "xray:PutTraceSegments", "xray:PutTelemetryRecords"}
)
SQS_BATCH_ACTIONS = {
    "sqs:ChangeMessageVisibilityBatch": "sqs:ChangeMessageVisibility",
    "sqs:DeleteMessageBatch": "sqs:DeleteMessage",
    "sqs:SendMessageBatch": "sqs:SendMessage",
}
TRANSACTION_ITEM_ACTIONS = {
    "Put": "dynamodb:PutItem",
    "Update": "dynamodb:UpdateItem",
    "Delete": "dynamodb:DeleteItem",
    "ConditionCheck": "dynamodb:ConditionCheckItem",
}


def role_statements(template: dict[str, Any], role_id: str) -> list[dict[str, Any]]:
    """Every identity statement the template gives the role (the policies attached to it, its inline policies)."""
    return [s for _, roles, s in policy_statements(template) if {"Ref": role_id} in roles]


def granted_actions(statements: list[dict[str, Any]]) -> set[str]:
    return {a for s in statements if s.get("Effect") == "Allow" for a in as_list(s["Action"])}


def moto_policy(statements: list[dict[str, Any]]) -> dict[str, Any]:
    """The statements as moto can check them: actions kept, resources ``*`` (moto checks no resource);
    ``TransactWriteItems`` allowed where DynamoDB item actions are (the items are checked by the recorder)."""
    converted = []
    for s in statements:
        actions = as_list(s["Action"])
        if any(a in TRANSACTION_ITEM_ACTIONS.values() for a in actions):
            actions = [*actions, "dynamodb:TransactWriteItems"]
        actions = [*actions, *(batch for batch, single in SQS_BATCH_ACTIONS.items() if single in actions)]
        converted.append({"Effect": s["Effect"], "Action": actions, "Resource": "*"})
    return {"Version": "2012-10-17", "Statement": converted}


class Recorder:
    """Records every AWS API call by the credentials' role; checks transaction items against the grants."""

    def __init__(self) -> None:
        self.used: dict[str, set[str]] = defaultdict(set)
        self.keys: dict[str, tuple[str, set[str]]] = {}  # access key id -> (role, granted actions)
        self.denied: list[tuple[str, str, str]] = []  # (role, operation, error code) of every refused call

    def install(self) -> contextlib.AbstractContextManager[None]:
        original = botocore.client.BaseClient._make_api_call
        recorder = self

        def make_api_call(client: Any, operation: str, params: dict[str, Any]) -> Any:
            creds = client._request_signer._credentials
            key = creds.get_frozen_credentials().access_key if creds else None
            role, granted = recorder.keys.get(key or "", (None, set()))
            prefix = client.meta.service_model.signing_name
            if role is not None:
                if operation == "TransactWriteItems":
                    for item in params.get("TransactItems", []):
                        (kind,) = item
                        action = TRANSACTION_ITEM_ACTIONS[kind]
                        recorder.used[role].add(action)
                        if action not in granted:
                            recorder.denied.append((role, f"{operation} {kind}", "AccessDeniedException"))
                            raise ClientError(
                                {
                                    "Error": {
                                        "Code": "AccessDeniedException",
                                        "Message": f"{role} is not authorized to perform {action} (transaction item)",
                                    },
                                    "ResponseMetadata": {"HTTPStatusCode": 400},
                                },
                                operation,
                            )
                else:
                    action = f"{prefix}:{operation}"
                    recorder.used[role].add(SQS_BATCH_ACTIONS.get(action, action))
            try:
                return original(client, operation, params)
            except ClientError as exc:
                code = str(exc.response.get("Error", {}).get("Code", ""))
                if role is not None and ("AccessDenied" in code or "Unauthorized" in code):
                    recorder.denied.append((role, operation, code))
                raise

        from moto.iam.access_control import IAMRequest

        original_check = IAMRequest.check_signature

        def check_signature(request: Any) -> None:
            if request._service != "eks":
                original_check(request)

        @contextlib.contextmanager
        def patched() -> Iterator[None]:
            botocore.client.BaseClient._make_api_call = make_api_call  # type: ignore[method-assign]
            IAMRequest.check_signature = check_signature  # type: ignore[method-assign]
            try:
                yield
            finally:
                botocore.client.BaseClient._make_api_call = original  # type: ignore[method-assign]
                IAMRequest.check_signature = original_check  # type: ignore[method-assign]

        return patched()


class Roles:
    """One IAM role in moto per Lambda role of the template, holding exactly its statements."""

    def __init__(self, template: dict[str, Any], recorder: Recorder) -> None:
        self.template = template
        self.recorder = recorder
        self.credentials: dict[str, dict[str, str]] = {}
        self.granted: dict[str, set[str]] = {}
        iam = boto3.client("iam", region_name=REGION)
        sts = boto3.client("sts", region_name=REGION)
        for role_id, res in template["Resources"].items():
            if res["Type"] != "AWS::IAM::Role":
                continue
            statements = role_statements(template, role_id)
            trust = json.dumps(
                {
                    "Version": "2012-10-17",
                    "Statement": [{"Effect": "Allow", "Principal": {"AWS": ACCOUNT}, "Action": "sts:AssumeRole"}],
                }
            )
            arn = iam.create_role(RoleName=role_id, AssumeRolePolicyDocument=trust)["Role"]["Arn"]
            if statements:
                iam.put_role_policy(
                    RoleName=role_id, PolicyName="template", PolicyDocument=json.dumps(moto_policy(statements))
                )
            creds = sts.assume_role(RoleArn=arn, RoleSessionName=role_id)["Credentials"]
            self.credentials[role_id] = {
                "AWS_ACCESS_KEY_ID": creds["AccessKeyId"],
                "AWS_SECRET_ACCESS_KEY": creds["SecretAccessKey"],
                "AWS_SESSION_TOKEN": creds["SessionToken"],
            }
            self.granted[role_id] = granted_actions(statements)
            recorder.keys[creds["AccessKeyId"]] = (role_id, self.granted[role_id])

    def function_role(self, handler: str) -> str:
        for res in self.template["Resources"].values():
            if res["Type"] == "AWS::Lambda::Function" and res["Properties"]["Handler"] == handler:
                return str(res["Properties"]["Role"]["Fn::GetAtt"][0])
        raise KeyError(handler)

    def function_env(self, handler: str, resolve: dict[str, str]) -> dict[str, str]:
        """The function's environment from the template, each Ref / GetAtt resolved to the moto resource."""
        for res in self.template["Resources"].values():
            if res["Type"] == "AWS::Lambda::Function" and res["Properties"]["Handler"] == handler:
                out = {}
                for var, value in res["Properties"]["Environment"]["Variables"].items():
                    if isinstance(value, str):
                        out[var] = value
                    else:
                        target = value.get("Ref") or value["Fn::GetAtt"][0]
                        out[var] = resolve[target]
                return out
        raise KeyError(handler)


@contextlib.contextmanager
def running_as(roles: Roles, handler: str, resolve: dict[str, str]) -> Iterator[str]:
    """The process looks like the function's Lambda: its role's credentials, exactly its environment
    (no other idleshare variable), ``_HANDLER``, fresh boto3 clients and wiring (a cold start)."""
    from idleshare.runtime import wiring

    role = roles.function_role(handler)
    env = {**roles.credentials[role], **roles.function_env(handler, resolve), "_HANDLER": handler}
    saved = dict(os.environ)
    for var in list(os.environ):
        if var.startswith("IDLESHARE_"):
            del os.environ[var]
    os.environ.update(env)
    boto3.DEFAULT_SESSION = None
    wiring.install(None)  # the idempotency records' persistence layer (its clients) with the rest
    try:
        yield role
    finally:
        wiring.install(None)
        boto3.DEFAULT_SESSION = None
        os.environ.clear()
        os.environ.update(saved)


def enforced(fn: Callable[[], Any]) -> Any:
    """Run ``fn`` with moto's IAM enforcement from its first request on."""
    return set_initial_no_auth_action_count(0)(fn)()
