"""DynamoDB: the main single table and the Powertools idempotency table.

Both are built from :mod:`idleshare.table`, the one definition of their keys, TTL attributes and billing
(the store, the devkit and the tests create their tables from it too). Main table: `pk` / `sk` strings,
TTL `ttl`, the item keys listed there. The idempotency table is Powertools' layout: `id` partition key,
TTL attribute `expiration`.
"""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb

from constructs import Construct
from idleshare import table as schema

# idleshare.table's attribute types (boto3's letters) as CDK's
ATTRIBUTE_TYPES = {
    "S": dynamodb.AttributeType.STRING,
    "N": dynamodb.AttributeType.NUMBER,
    "B": dynamodb.AttributeType.BINARY,
}


def _key(name: str) -> dynamodb.Attribute:
    return dynamodb.Attribute(name=name, type=ATTRIBUTE_TYPES[schema.KEY_ATTRIBUTE_TYPE])


class Storage(Construct):
    def __init__(self, scope: Construct, construct_id: str) -> None:
        super().__init__(scope, construct_id)
        common = {
            "billing_mode": dynamodb.BillingMode(schema.BILLING_MODE),
            "encryption": dynamodb.TableEncryption.AWS_MANAGED,
            "point_in_time_recovery_specification": dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
        }
        self.table = dynamodb.Table(
            self,
            "Table",
            partition_key=_key(schema.PK),
            sort_key=_key(schema.SK),
            time_to_live_attribute=schema.TTL_ATTRIBUTE,
            # The pool, quotas and history outlive a `cdk destroy`.
            removal_policy=RemovalPolicy.RETAIN,
            **common,
        )
        self.idempotency_table = dynamodb.Table(
            self,
            "IdempotencyTable",
            partition_key=_key(schema.IDEMPOTENCY_PK),
            time_to_live_attribute=schema.IDEMPOTENCY_TTL_ATTRIBUTE,
            # Short-lived records only: nothing to keep.
            removal_policy=RemovalPolicy.DESTROY,
            **common,
        )
