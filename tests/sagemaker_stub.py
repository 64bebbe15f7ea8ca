"""SageMaker's compute-quota APIs as botocore's real service model has them (moto lacks them): a client whose
answers are stubbed with ``botocore.stub.Stubber``, which checks every request and every stubbed response against
the model, and the JSON the AWS CLI prints for a response."""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

import boto3

EXAMPLES = Path(__file__).parents[1] / "events" / "examples"
CLUSTER_ARN = "arn:aws:sagemaker:us-west-2:123456789012:cluster/k1ft7ynfs0qz"
REGION = "us-west-2"


def client() -> Any:
    """A SageMaker client that never reaches AWS (dummy credentials; stub its answers)."""
    return boto3.client("sagemaker", region_name=REGION, aws_access_key_id="testing", aws_secret_access_key="testing")


def members(operation: str, shape: str | None = None) -> list[str]:
    """The members of ``shape`` (default: ``operation``'s output) in botocore's model."""
    model = client().meta.service_model
    found = model.shape_for(shape) if shape else model.operation_model(operation).output_shape
    return list(found.members)


def _timestamps(value: Any) -> Any:
    """Response values as botocore returns them: ISO 8601 strings of the *Time fields become datetimes."""
    if isinstance(value, dict):
        return {
            k: datetime.fromisoformat(v.replace("Z", "+00:00"))
            if k.endswith("Time") and isinstance(v, str)
            else _timestamps(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_timestamps(v) for v in value]
    return value


def example_quotas() -> list[dict[str, Any]]:
    """The example cluster's quotas (``DescribeComputeQuota`` shape, timestamps as datetimes)."""
    return [_timestamps(q) for q in json.loads((EXAMPLES / "quotas.json").read_text())]


def summary(described: dict[str, Any]) -> dict[str, Any]:
    """A ``ComputeQuotaSummary`` (a ListComputeQuotas item) of a described quota."""
    keep = members("ListComputeQuotas", "ComputeQuotaSummary")
    return {k: v for k, v in described.items() if k in keep}


def describe_response(described: dict[str, Any]) -> dict[str, Any]:
    keep = members("DescribeComputeQuota")
    return {k: v for k, v in described.items() if k in keep}


def cli_json(response: dict[str, Any]) -> str:
    """What ``aws sagemaker ...`` prints for ``response`` (no ResponseMetadata, timestamps in ISO 8601)."""
    body = {k: v for k, v in response.items() if k != "ResponseMetadata"}
    return json.dumps(body, indent=4, default=lambda v: v.isoformat() if isinstance(v, datetime) else str(v)) + "\n"


def list_compute_quotas_output(quotas: Iterable[dict[str, Any]] | None = None) -> str:
    """``aws sagemaker list-compute-quotas --cluster-arn ...`` of the example cluster, checked against the model."""
    from botocore.stub import Stubber

    sagemaker = client()
    response = {"ComputeQuotaSummaries": [summary(q) for q in (example_quotas() if quotas is None else quotas)]}
    with Stubber(sagemaker) as stub:
        stub.add_response("list_compute_quotas", response, {"ClusterArn": CLUSTER_ARN})
        return cli_json(sagemaker.list_compute_quotas(ClusterArn=CLUSTER_ARN))


def example_scheduler_config() -> dict[str, Any]:
    """The example cluster's ``DescribeClusterSchedulerConfig`` response (timestamps as datetimes)."""
    described = _timestamps(json.loads((EXAMPLES / "scheduler-config.json").read_text()))
    keep = members("DescribeClusterSchedulerConfig")
    return {k: v for k, v in described.items() if k in keep}


def scheduler_config_summary(described: dict[str, Any]) -> dict[str, Any]:
    keep = members("ListClusterSchedulerConfigs", "ClusterSchedulerConfigSummary")
    return {k: v for k, v in described.items() if k in keep}
