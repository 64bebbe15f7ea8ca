"""The CDK app's configuration: which clusters idleshare governs and how it runs.

Loaded from the JSON file that the cdk.json context's `idleshare:config` names (or `-c idleshare:config=path.json`),
else from its `idleshare` object, and validated before anything is synthesized. An invalid config raises
`ConfigError` whose message names the offending field; `infra/app.py` prints it and exits 2.

cdk.json ships pointing at the example, `infra/config.example.json`, which has a placeholder cluster (account
111111111111) and is refused as it stands (its `_example` key): no deploy registers a cluster nobody named. The tests
and `make deploy-check` synthesize it without that key (:func:`rehearsal_config`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    InstanceOf,
    SerializerFunctionWrapHandler,
    ValidationError,
    field_validator,
    model_serializer,
    model_validator,
)

from idleshare import timings
from idleshare.adapters.ports import ClusterRecord
from idleshare.domain.cluster_settings import ClusterSettings, SettingError
from idleshare.parse.cluster_settings import SETTINGS, read_settings, settings_json
from idleshare.runtime.env import clusters_json

CONTEXT_KEY = "idleshare"
CONTEXT_CONFIG_FILE = "idleshare:config"
EXAMPLE_CONFIG = "infra/config.example.json"  # relative to the repository root, as cdk.json names it
EXAMPLE_MARKER = "_example"
EXAMPLE_REFUSED = (
    f"{EXAMPLE_CONFIG} is the example config, with a placeholder cluster: copy it (e.g. to idleshare.config.json), "
    "put your clusters in `clusters` (each one's `id`, a DNS label of your choice; `eks_cluster_name`, from "
    "`aws eks list-clusters`; and on HyperPod its `hyperpod_cluster_arn`, from `aws sagemaker list-clusters`), "
    f"delete the `{EXAMPLE_MARKER}` key, and set `{CONTEXT_CONFIG_FILE}` in cdk.json to your copy "
    f"(or pass -c {CONTEXT_CONFIG_FILE}=idleshare.config.json)"
)
# Unit tests only: package the Lambda source without its dependencies (no bundling).
CONTEXT_STUB_ASSET = "idleshare:stub_asset"

DEFAULT_TOLERATED_TAINT_KEYS = ("nvidia.com/gpu", "aws.amazon.com/neuron", "aws.amazon.com/neurondevice")

# EKS: 1-100 chars, alphanumerics, hyphens and underscores, starting with an alphanumeric.
EKS_CLUSTER_NAME = r"^[0-9A-Za-z][A-Za-z0-9\-_]{0,99}$"
HYPERPOD_CLUSTER_ARN = r"^arn:aws[a-z\-]*:sagemaker:[a-z0-9\-]+:\d{12}:cluster/[a-z0-9]+$"
CLUSTER_ID = r"^[a-z0-9]([a-z0-9\-]{0,38}[a-z0-9])?$"
EMAIL = r"^[^@\s]+@[^@\s]+\.[^@\s]+$"
TAINT_KEY = r"^([a-z0-9]([a-z0-9\-.]*[a-z0-9])?/)?[A-Za-z0-9]([A-Za-z0-9\-_.]*[A-Za-z0-9])?$"

SubnetId = Annotated[str, Field(pattern=r"^subnet-[0-9a-f]{8,17}$")]
SecurityGroupId = Annotated[str, Field(pattern=r"^sg-[0-9a-f]{8,17}$")]
RouteTableId = Annotated[str, Field(pattern=r"^rtb-[0-9a-f]{8,17}$")]


class ConfigError(ValueError):
    """The idleshare CDK config is invalid; the message names the field."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class VpcConfig(_Strict):
    """Where the recompute Lambda runs to reach a private cluster endpoint."""

    vpc_id: str = Field(pattern=r"^vpc-[0-9a-f]{8,17}$")
    subnet_ids: tuple[SubnetId, ...] = Field(min_length=1)
    security_group_ids: tuple[SecurityGroupId, ...] = Field(min_length=1, max_length=5)
    # Interface endpoints (sts, eks, sqs, events, logs) and a DynamoDB gateway endpoint. Leave false
    # when the VPC already has them or routes to the internet through a NAT gateway.
    create_vpc_endpoints: bool = False
    # The route tables of `subnet_ids`; the DynamoDB gateway endpoint is attached to them.
    route_table_ids: tuple[RouteTableId, ...] = ()

    @model_validator(mode="after")
    def _route_tables_for_endpoints(self) -> VpcConfig:
        if self.create_vpc_endpoints and not self.route_table_ids:
            raise ValueError(
                "route_table_ids is required when create_vpc_endpoints is true "
                "(the DynamoDB gateway endpoint attaches to the subnets' route tables)"
            )
        return self


class ClusterConfig(_Strict):
    """One governed EKS (or HyperPod EKS) cluster."""

    id: str = Field(pattern=CLUSTER_ID)
    eks_cluster_name: str = Field(pattern=EKS_CLUSTER_NAME)
    hyperpod_cluster_arn: str | None = Field(default=None, pattern=HYPERPOD_CLUSTER_ARN)
    settings: InstanceOf[ClusterSettings] = ClusterSettings()
    """The cluster's settings, given beside the fields above (``namespace_prefix``, ``headroom``, ...): read by the one
    schema of them (``parse/cluster_settings``), each named, typed, defaulted and checked by ``ClusterSettings``."""
    vpc: VpcConfig | None = None

    @model_validator(mode="before")
    @classmethod
    def _settings(cls, raw: Any) -> Any:
        """The settings' keys of the cluster's object read into ``settings`` (a refusal names the setting)."""
        if not isinstance(raw, dict) or isinstance(raw.get("settings"), ClusterSettings):
            return raw
        if "settings" in raw:
            raise SettingError("settings", f"give each setting beside `id` ({', '.join(SETTINGS)}), not in an object")
        given = {k: v for k, v in raw.items() if k in SETTINGS}
        return {**{k: v for k, v in raw.items() if k not in SETTINGS}, "settings": read_settings(given)}

    @model_serializer(mode="wrap")
    def _flat(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """Dumped as it is written: the settings beside ``id`` (what :meth:`_settings` reads back as equal)."""
        out: dict[str, Any] = handler(self)
        out.pop("settings", None)
        return {**out, **settings_json(self.settings)}


class IdleshareConfig(_Strict):
    clusters: list[ClusterConfig] = Field(min_length=1)
    schedule_rate_minutes: int = Field(default=5, ge=1, le=1440)
    tolerated_taint_keys: list[Annotated[str, Field(pattern=TAINT_KEY)]] = Field(
        default_factory=lambda: list(DEFAULT_TOLERATED_TAINT_KEYS)
    )
    dlq_max_receive_count: int = Field(default=timings.DEFAULT_MAX_RECEIVE_COUNT, ge=1, le=1000)
    """The redrive policy's maxReceiveCount: with the recompute's backoff on every failed receive
    (``timings.retry_delay``) a record reaches the DLQ after ``timings.seconds_to_dlq`` of this."""
    history_ttl_days: int = Field(default=timings.HISTORY_TTL_DAYS, ge=1, le=timings.HISTORY_TTL_MAX_DAYS)
    archive_retention_days: int = Field(default=30, ge=0, le=3650)  # 0 = keep forever
    alarm_email: str | None = Field(default=None, pattern=EMAIL)
    # FIFO message groups already serialize per cluster; this caps parallel recomputes (the SQS event source
    # mapping's maximum concurrency: the poller never invokes more at once, so none is throttled).
    recompute_max_concurrency: int = Field(default=timings.RECOMPUTE_MAX_CONCURRENCY, ge=2, le=1000)
    log_retention_days: int = Field(default=30, ge=1, le=3653)
    api_gateway_account_logging_role: bool = False
    """Set API Gateway's account-level CloudWatch logging role (``AWS::ApiGateway::Account``: one per account and
    region, shared by every REST API there) to a role of this stack. Off: the account keeps its own, which the admin
    API's stage logging needs; on: for an account that has none. The role and the setting are retained when the stack
    is deleted, so that the account's other APIs go on logging."""

    @field_validator("dlq_max_receive_count")
    @classmethod
    def _dlq_after_the_stated_time(cls, value: int) -> int:
        least = timings.min_receive_count()
        if value < least:
            raise ValueError(
                f"must be at least {least}: a failed recompute is retried after a backoff of "
                f"{timings.RETRY_FIRST_SECONDS} s doubling up to {timings.RETRY_MAX_SECONDS} s, so {value} receives "
                f"send a failing cluster to the DLQ after {timings.seconds_to_dlq(value)} s; the DLQ must come only "
                f"after {timings.DLQ_AFTER_SECONDS // 60} minutes of failing"
            )
        return value

    @field_validator("clusters")
    @classmethod
    def _unique_clusters(cls, clusters: list[ClusterConfig]) -> list[ClusterConfig]:
        for attr in ("id", "eks_cluster_name"):
            values = [getattr(c, attr) for c in clusters]
            dupes = sorted({v for v in values if values.count(v) > 1})
            if dupes:
                raise ValueError(f"duplicate {attr}: {', '.join(dupes)}")
        arns = [c.hyperpod_cluster_arn for c in clusters if c.hyperpod_cluster_arn]
        if len(arns) != len(set(arns)):
            raise ValueError("duplicate hyperpod_cluster_arn")
        vpcs = {c.vpc for c in clusters if c.vpc is not None}
        if len(vpcs) > 1:
            raise ValueError(
                "clusters with `vpc` must all give the same vpc block: one recompute Lambda runs in one VPC"
            )
        return clusters

    @property
    def vpc(self) -> VpcConfig | None:
        """The VPC the recompute Lambda runs in, if any cluster has a private endpoint."""
        return next((c.vpc for c in self.clusters if c.vpc is not None), None)

    def clusters_env(self) -> str:
        """The governed clusters as the JSON the Lambdas read from names.ENV_CLUSTERS."""
        return clusters_json(
            ClusterRecord(c.id, c.eks_cluster_name, c.hyperpod_cluster_arn, c.settings) for c in self.clusters
        )


def _describe(error: ValidationError) -> str:
    lines = []
    for err in error.errors():
        loc, msg = list(err["loc"]), err["msg"]
        refused = (err.get("ctx") or {}).get("error")
        if isinstance(refused, SettingError):  # a cluster setting: named where the user wrote it
            loc, msg = [*loc, refused.setting], refused.problem
        where = ".".join(str(p) for p in loc) or "(root)"
        lines.append(f"  {CONTEXT_KEY}.{where}: {msg}")
    return "invalid idleshare config:\n" + "\n".join(lines)


def parse_config(raw: Any) -> IdleshareConfig:
    """Validate a config object; raise ConfigError naming every bad field."""
    if raw is None:
        raise ConfigError(
            f"invalid idleshare config: no `{CONTEXT_KEY}` object in the cdk.json context and no "
            f"`{CONTEXT_CONFIG_FILE}` file: copy {EXAMPLE_CONFIG}, put your clusters in it, and pass "
            f"-c {CONTEXT_CONFIG_FILE}=your-copy.json"
        )
    if isinstance(raw, str):  # `-c idleshare='{...}'` arrives as a string
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"invalid idleshare config: `{CONTEXT_KEY}` is not JSON: {exc}") from None
    if isinstance(raw, dict) and EXAMPLE_MARKER in raw:
        raise ConfigError(f"not deployable: {EXAMPLE_REFUSED}")
    try:
        return IdleshareConfig.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(_describe(exc)) from None


def rehearsal_config() -> dict[str, Any]:
    """The example config as the tests and `make deploy-check` synthesize it: without its `_example` key."""
    raw: dict[str, Any] = json.loads((Path(__file__).resolve().parent.parent / EXAMPLE_CONFIG).read_text())
    raw.pop(EXAMPLE_MARKER)
    return raw


def load_config(try_get_context: Any) -> IdleshareConfig:
    """Read the config from the CDK context (`node.try_get_context`)."""
    path = try_get_context(CONTEXT_CONFIG_FILE)
    if path:
        file = Path(path)
        try:
            raw = json.loads(file.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise ConfigError(f"invalid idleshare config: cannot read {CONTEXT_CONFIG_FILE}={path}: {exc}") from None
        return parse_config(raw)
    return parse_config(try_get_context(CONTEXT_KEY))
