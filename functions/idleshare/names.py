"""Names shared by the Lambda code, the CDK app and the tests: one place for each."""

SERVICE = "idleshare"
METRICS_NAMESPACE = "idleshare"

# Event sources and detail-types on idleshare's own bus (SPEC §4).
EVENT_SOURCE = "idleshare"
DT_NODE_CHANGED = "Node Changed"
DT_QUOTA_CHANGED = "Compute Quota Changed"
DT_SCHEDULER_CHANGED = "Scheduler Config Changed"
DT_RECALC_REQUESTED = "Recalculation Requested"
DT_POOL_RECOMPUTED = "Lendable Pool Recomputed"
OWN_INBOUND_DETAIL_TYPES = (DT_NODE_CHANGED, DT_QUOTA_CHANGED, DT_SCHEDULER_CHANGED, DT_RECALC_REQUESTED)

SAGEMAKER_SOURCE = "aws.sagemaker"
DT_HYPERPOD_NODE_HEALTH = "SageMaker HyperPod Cluster Node Health Event"
DT_HYPERPOD_STATE_CHANGE = "SageMaker HyperPod Cluster State Change"
DT_HYPERPOD_EVENT = "SageMaker HyperPod Cluster Event"
HYPERPOD_DETAIL_TYPES = (DT_HYPERPOD_NODE_HEALTH, DT_HYPERPOD_STATE_CHANGE, DT_HYPERPOD_EVENT)
DT_CLOUDTRAIL = "AWS API Call via CloudTrail"
CLOUDTRAIL_EVENT_NAMES = (
    "CreateComputeQuota",
    "UpdateComputeQuota",
    "DeleteComputeQuota",
    "CreateClusterSchedulerConfig",
    "UpdateClusterSchedulerConfig",
    "DeleteClusterSchedulerConfig",
)
SCHEDULE_SOURCE = "aws.scheduler"  # the safety-net schedule's events, see infra
DT_SCHEDULED_RECOMPUTE = "Scheduled Recompute"

# Environment variables the Lambdas read (set by the CDK app, validated at cold start).
ENV_TABLE_NAME = "IDLESHARE_TABLE_NAME"
ENV_IDEMPOTENCY_TABLE_NAME = "IDLESHARE_IDEMPOTENCY_TABLE_NAME"
ENV_QUEUE_URL = "IDLESHARE_QUEUE_URL"
ENV_EVENT_BUS_NAME = "IDLESHARE_EVENT_BUS_NAME"
ENV_HISTORY_TTL_DAYS = "IDLESHARE_HISTORY_TTL_DAYS"
ENV_TOLERATED_TAINT_KEYS = "IDLESHARE_TOLERATED_TAINT_KEYS"

# Lambda entry points (module:function under functions/).
ROUTER_HANDLER = "idleshare.handlers.router.handler"
RECOMPUTE_HANDLER = "idleshare.handlers.recompute.handler"
API_HANDLER = "idleshare.api.app.handler"
# The deploy-time custom resource that writes the CDK-configured clusters into the registry.
REGISTRAR_HANDLER = "idleshare.handlers.registrar.handler"
# The node watcher (issue 16): invoked every minute per governed cluster, input {"cluster": "<id>"}.
WATCHER_HANDLER = "idleshare.handlers.watcher.handler"

# Coalescing (leading and trailing edge, idleshare.timings.COALESCE_SECONDS): per cluster and window of this many
# seconds a leading message (recomputed at once) and a trailing one (``notBefore``: the window's end; handed back by
# the recompute until then), each deduplicated by SQS.
RECOMPUTE_COALESCE_SECONDS = 10

# Server-side apply field manager (labels on the objects: idleshare.domain.kueue).
FIELD_MANAGER = "idleshare"

# --- Added by the CDK app (infra/): resource names, outputs, metrics. ---
STACK_NAME = "idleshare"
ENV_CLUSTERS = "IDLESHARE_CLUSTERS"  # JSON list of the governed clusters from the CDK config

# Each function's own configuration: exactly these variables, every one required (the CDK app sets
# them, runtime/env.py checks them at cold start; Lambda names the running handler in ``_HANDLER``).
FUNCTION_ENV: dict[str, tuple[str, ...]] = {
    ROUTER_HANDLER: (ENV_TABLE_NAME, ENV_QUEUE_URL),
    RECOMPUTE_HANDLER: (
        ENV_TABLE_NAME,
        ENV_IDEMPOTENCY_TABLE_NAME,
        ENV_EVENT_BUS_NAME,
        ENV_HISTORY_TTL_DAYS,
        ENV_TOLERATED_TAINT_KEYS,
    ),
    API_HANDLER: (ENV_TABLE_NAME, ENV_EVENT_BUS_NAME),
    REGISTRAR_HANDLER: (ENV_TABLE_NAME, ENV_CLUSTERS),
    WATCHER_HANDLER: (ENV_TABLE_NAME, ENV_EVENT_BUS_NAME, ENV_CLUSTERS),
}

# EKS access: the Kubernetes group the recompute role is mapped to (infra/k8s/rbac.yaml).
K8S_GROUP = "idleshare-recompute"
K8S_CLUSTER_ROLE = "idleshare-recompute"
# The node watcher's own group and ClusterRole: list and watch nodes, nothing else (infra/k8s/rbac.yaml).
K8S_WATCHER_GROUP = "idleshare-node-watcher"
K8S_WATCHER_CLUSTER_ROLE = "idleshare-node-watcher"

# Stack outputs (CfnOutput logical ids) read by the tests and the CLI.
OUTPUT_EVENT_BUS_NAME = "EventBusName"
OUTPUT_EVENT_BUS_ARN = "EventBusArn"
OUTPUT_ARCHIVE_NAME = "EventArchiveName"
OUTPUT_API_URL = "ApiUrl"
OUTPUT_TABLE_NAME = "TableName"
OUTPUT_IDEMPOTENCY_TABLE_NAME = "IdempotencyTableName"
OUTPUT_QUEUE_URL = "RecomputeQueueUrl"
OUTPUT_DLQ_URL = "RecomputeDlqUrl"
OUTPUT_ROUTER_DLQ_URL = "RouterDlqUrl"  # trigger events not routed: undeliverable to the router, or failed in it
OUTPUT_RECOMPUTE_ROLE_ARN = "RecomputeRoleArn"
OUTPUT_ALARM_TOPIC_ARN = "AlarmTopicArn"
OUTPUT_DASHBOARD_NAME = "DashboardName"

# CloudWatch metrics (EMF, namespace METRICS_NAMESPACE) the dashboard and alarms read: gauges per
# (cluster, flavor, resource) and excluded nodes per (cluster, reason), exactly those dimensions.
METRIC_DIM_CLUSTER = "cluster"
METRIC_DIM_FLAVOR = "flavor"
METRIC_DIM_RESOURCE = "resource"
METRIC_DIM_REASON = "reason"
METRIC_UNALLOCATED = "Unallocated"
METRIC_BORROWABLE = "Borrowable"
METRIC_SHORTFALL = "Shortfall"
METRIC_EXCLUDED_NODES = "ExcludedNodes"
METRIC_RECOMPUTE_DURATION = "RecomputeDuration"  # dimension: service
# Objects whose fields another field manager owns, left to it (dimension: cluster); alarmed.
METRIC_FOREIGN_FIELD_MANAGER = "ForeignFieldManagerConflicts"
# A recompute that cannot succeed until someone changes its input (invalid stored policy, objects Kueue
# refuses): recorded, not retried; alarmed (dimension: service).
METRIC_PERMANENT_FAILURES = "RecomputesFailedPermanently"
# The node watcher (dimension: cluster). Seconds its watch was held: the "watch not running" alarm fires when a
# cluster's sum over WATCHER_ALARM_MINUTES falls below half that time (or nothing is reported at all).
METRIC_NODE_WATCH_SECONDS = "NodeWatchSeconds"
METRIC_NODE_WATCH_EVENTS = "NodeChangesPublished"  # Node Changed events put on the bus
METRIC_NODE_WATCH_FAILURES = "NodeWatchFailures"  # failed watch requests, publishes, checkpoints
METRIC_NODE_WATCH_RELISTS = "NodeWatchRelists"  # 410 Gone (or no bookmark): list again, watch afresh
WATCHER_SCHEDULE_MINUTES = 1  # one invocation per cluster per minute; each holds the watch until its deadline
WATCHER_TIMEOUT_SECONDS = 90  # the Lambda timeout: the watch is held until WATCHER_STOP_BEFORE_SECONDS before it
WATCHER_STOP_BEFORE_SECONDS = 10  # left for the last publish and checkpoint
WATCHER_MEMORY_MB = 256
WATCHER_ALARM_MINUTES = 5
# Usage read back from Kueue (issue 21), sampled by the node watcher's invocation every minute per cluster; gauges
# of accelerators only. Per (cluster, team, flavor, resource): in use and borrowed; per (cluster, team): pending
# workloads; per (cluster, flavor, resource): idle, borrowed, and idle while some team's workload that asks for the
# flavor is pending (alarmed when it lasts IDLE_WHILE_PENDING_ALARM_MINUTES).
METRIC_DIM_TEAM = "team"
METRIC_TEAM_IN_USE = "TeamInUse"
METRIC_TEAM_BORROWED = "TeamBorrowed"
METRIC_TEAM_PENDING_WORKLOADS = "TeamPendingWorkloads"
METRIC_FLAVOR_IDLE = "Idle"
METRIC_FLAVOR_BORROWED = "Borrowed"
METRIC_IDLE_WHILE_PENDING = "IdleWhilePending"
METRIC_USAGE_SAMPLE_FAILURES = "UsageSampleFailures"  # dimension: cluster
IDLE_WHILE_PENDING_ALARM_MINUTES = 15

# --- Added by the admin API (idleshare.api): routes the CLI and the README name, limits, receipts. ---
API_OPENAPI_PATH = "/openapi.json"
API_SWAGGER_PATH = "/swagger"
API_MAX_BODY_BYTES = 64 * 1024  # larger request bodies are refused with 413 before parsing
API_MAX_WAIT_SECONDS = 25  # POST .../recalculate?waitSeconds=0..25 (API Gateway's integration timeout is 29 s)
RECALC_RECEIPT_TTL_SECONDS = 24 * 3600  # how long GET .../recalculations/{requestId} can find a receipt
# How long a recalculation request's idempotency record answers a redelivery of the same requestId
# (EventBridge's at-least-once delivery, SQS redeliveries): after that the same id recomputes again.
RECALC_IDEMPOTENCY_SECONDS = 3600
