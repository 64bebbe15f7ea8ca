"""DynamoDB: the main single table and the Powertools idempotency table.

Main table keys (`pk` / `sk`, both strings):
  CLUSTER#<id>  QUOTA#<name> | SCHEDULER | POOL | HISTORY#<generation, zero-padded> | META
  REGISTRY      EKS#<eks cluster name> | ARN#<hyperpod cluster arn>
History items carry `ttl` (epoch seconds). The idempotency table is Powertools' layout:
`id` partition key, TTL attribute `expiration`.
"""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb

from constructs import Construct

PK = "pk"
SK = "sk"
TTL_ATTRIBUTE = "ttl"
IDEMPOTENCY_PK = "id"
IDEMPOTENCY_TTL_ATTRIBUTE = "expiration"


class Storage(Construct):
    def __init__(self, scope: Construct, construct_id: str) -> None:
        super().__init__(scope, construct_id)
        common = {
            "billing_mode": dynamodb.BillingMode.PAY_PER_REQUEST,
            "encryption": dynamodb.TableEncryption.AWS_MANAGED,
            "point_in_time_recovery_specification": dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
        }
        self.table = dynamodb.Table(
            self,
            "Table",
            partition_key=dynamodb.Attribute(name=PK, type=dynamodb.AttributeType.STRING),
            sort_key=dynamodb.Attribute(name=SK, type=dynamodb.AttributeType.STRING),
            time_to_live_attribute=TTL_ATTRIBUTE,
            # The pool, quotas and history outlive a `cdk destroy`.
            removal_policy=RemovalPolicy.RETAIN,
            **common,
        )
        self.idempotency_table = dynamodb.Table(
            self,
            "IdempotencyTable",
            partition_key=dynamodb.Attribute(name=IDEMPOTENCY_PK, type=dynamodb.AttributeType.STRING),
            time_to_live_attribute=IDEMPOTENCY_TTL_ATTRIBUTE,
            # Short-lived records only: nothing to keep.
            removal_policy=RemovalPolicy.DESTROY,
            **common,
        )
