"""Names shared by the Lambda code, the CDK app and the tests: one place for each, by concern — the service, events,
functions and their environment, Kubernetes access, stack outputs, the admin API's routes and limits, metrics.
Durations, windows and sizes are in ``timings.py``; the table's keys in ``table.py``."""

# -- the service --------------------------------------------------------------------------------------------------

SERVICE = "idleshare"
STACK_NAME = "idleshare"
FIELD_MANAGER = "idleshare"
"""Server-side apply's field manager (the objects' labels: ``idleshare.domain.kueue``)."""

# -- events -------------------------------------------------------------------------------------------------------

# On idleshare's own bus (docs/architecture.md, the pipeline).
EVENT_SOURCE = "idleshare"
DT_NODE_CHANGED = "Node Changed"
DT_QUOTA_CHANGED = "Compute Quota Changed"
DT_SCHEDULER_CHANGED = "Scheduler Config Changed"
DT_RECALC_REQUESTED = "Recalculation Requested"
DT_POOL_RECOMPUTED = "Lendable Pool Recomputed"
OWN_INBOUND_DETAIL_TYPES = (DT_NODE_CHANGED, DT_QUOTA_CHANGED, DT_SCHEDULER_CHANGED, DT_RECALC_REQUESTED)

# From AWS: SageMaker HyperPod, the safety-net schedule (infra/).
SAGEMAKER_SOURCE = "aws.sagemaker"
DT_HYPERPOD_NODE_HEALTH = "SageMaker HyperPod Cluster Node Health Event"
DT_HYPERPOD_STATE_CHANGE = "SageMaker HyperPod Cluster State Change"
DT_HYPERPOD_EVENT = "SageMaker HyperPod Cluster Event"
HYPERPOD_DETAIL_TYPES = (DT_HYPERPOD_NODE_HEALTH, DT_HYPERPOD_STATE_CHANGE, DT_HYPERPOD_EVENT)
SCHEDULE_SOURCE = "aws.scheduler"
DT_SCHEDULED_RECOMPUTE = "Scheduled Recompute"

# -- functions and their environment ------------------------------------------------------------------------------

# Lambda entry points (module.function under functions/).
ROUTER_HANDLER = "idleshare.handlers.router.handler"
RECOMPUTE_HANDLER = "idleshare.handlers.recompute.handler"
API_HANDLER = "idleshare.api.app.handler"
REGISTRAR_HANDLER = "idleshare.handlers.registrar.handler"
"""The deploy-time custom resource that writes the CDK-configured clusters into the registry."""
WATCHER_HANDLER = "idleshare.handlers.watcher.handler"
"""The node watcher: invoked every minute per governed cluster, input ``{"cluster": "<id>"}``."""

# Environment variables the Lambdas read (set by the CDK app, validated at cold start).
ENV_TABLE_NAME = "IDLESHARE_TABLE_NAME"
ENV_IDEMPOTENCY_TABLE_NAME = "IDLESHARE_IDEMPOTENCY_TABLE_NAME"
ENV_QUEUE_URL = "IDLESHARE_QUEUE_URL"
ENV_EVENT_BUS_NAME = "IDLESHARE_EVENT_BUS_NAME"
ENV_HISTORY_TTL_DAYS = "IDLESHARE_HISTORY_TTL_DAYS"
ENV_TOLERATED_TAINT_KEYS = "IDLESHARE_TOLERATED_TAINT_KEYS"
ENV_CLUSTERS = "IDLESHARE_CLUSTERS"  # JSON list of the governed clusters from the CDK config

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
"""Each function's own configuration: exactly these variables, every one required (the CDK app sets them,
``runtime/env.py`` checks them at cold start; Lambda names the running handler in ``_HANDLER``)."""

# -- Kubernetes access (infra/k8s/rbac.yaml) ----------------------------------------------------------------------

K8S_GROUP = "idleshare-recompute"  # the group the recompute role is mapped to by its EKS access entry
K8S_CLUSTER_ROLE = "idleshare-recompute"
K8S_WATCHER_GROUP = "idleshare-node-watcher"  # the node watcher's: list and watch nodes, read Kueue's usage
K8S_WATCHER_CLUSTER_ROLE = "idleshare-node-watcher"

# -- stack outputs (CfnOutput logical ids, read by the tests and the CLI) -----------------------------------------

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

# -- the admin API: routes and limits -----------------------------------------------------------------------------

API_OPENAPI_PATH = "/openapi.json"
API_SWAGGER_PATH = "/swagger"
API_MAX_BODY_BYTES = 64 * 1024  # larger request bodies are refused with 413 before parsing

# -- metrics (CloudWatch EMF, namespace METRICS_NAMESPACE; the dashboard and alarms: infra/constructs) ------------
# Gauges carry exactly the dimensions named beside them (and Powertools' ``service``): the dashboard's SCHEMA()
# queries match only those. docs/operations.md says what each one means.

METRICS_NAMESPACE = "idleshare"
METRIC_DIM_CLUSTER = "cluster"
METRIC_DIM_RESOURCE = "resource"
METRIC_DIM_REASON = "reason"
METRIC_DIM_SEVERITY = "severity"

# The router (counts).
METRIC_EVENTS_DROPPED = "EventsDropped"  # inbound events malformed or naming no governed cluster
METRIC_RECOMPUTES_REQUESTED = "RecomputesRequested"  # clusters a routed event asked a recompute of

# The number of metrics is bounded and independent of the teams and flavors (docs/operations.md, what bounds the
# bill): no team dimension, no flavor dimension (summed over the flavors; MIG profiles folded as nvidia.com/mig-*);
# the per-team and per-flavor figures are in the usage API, the pool document and the ``team usage`` log line.
# Trouble gauges (marked "when > 0") are emitted only when above 0: their alarms treat missing data as fine.
# The recompute: the pool, per (cluster, resource), accelerators only.
METRIC_UNALLOCATED = "Unallocated"  # capacity no quota's nominal takes: the cohort's own, the lendable pool's base
METRIC_SHORTFALL = "Shortfall"  # nominal quota granted beyond the eligible nodes' capacity (when > 0)
METRIC_EXCLUDED_NODES = "ExcludedNodes"  # per (cluster, reason)
METRIC_POOL_ISSUES = "PoolIssues"  # per (cluster, severity): the pool's named issues (codes: the pool, the log)
METRIC_UNGOVERNED_FLAVORS = "UngovernedFlavors"  # per cluster: flavors past Kueue's limits, in no Kueue object
# (when > 0, as the four below and QuotaOverridden)
METRIC_FOREIGN_FIELD_MANAGER = "ForeignFieldManagerConflicts"  # objects left to another field manager (cluster)
METRIC_FOREIGN_OBJECTS = "ForeignObjects"  # objects of a name idleshare wants that it did not create (cluster)
METRIC_FIELD_MANAGER_FIGHTS = "FieldManagerFights"  # objects another field manager keeps rewriting, which idleshare
# backs off from (cluster; issue FieldManagerFight; field_ownership Take only)
METRIC_OBJECTS_REFUSED = "ObjectsRefused"  # writes and deletions the API server refused for good, and the objects
# held back because they need a refused one (cluster; issues NamespaceTerminating, WriteRefused, WaitingForRefused)
METRIC_QUOTA_OVERRIDDEN = "QuotaOverridden"  # idleshare's ClusterQueues/Cohorts Kueue schedules from another
# writer's status.effectiveQuotas, not from idleshare's spec (cluster; issue DynamicQuotaOrchestratorActive)
# The recompute's run (counts, dimension service; the duration in milliseconds).
METRIC_RECOMPUTE_DURATION = "RecomputeDuration"
METRIC_OBJECTS_APPLIED = "ObjectsApplied"
METRIC_PERMANENT_FAILURES = "RecomputesFailedPermanently"  # cannot succeed until its input changes: alarmed
METRIC_RECOMPUTES_COALESCED = "RecomputesCoalesced"  # a batch's further records of a cluster, answered by one run
METRIC_TRAILING_DEFERRED = "TrailingRecomputesDeferred"  # trailing messages handed back until their window closed
METRIC_RECALCULATIONS_DEDUPLICATED = "RecalculationsDeduplicated"  # redelivered requests answered by the first run
METRIC_RECOMPUTES_OUT_OF_TIME = "RecomputesOutOfTime"  # handed back: too little of the function's time left
METRIC_RECORDS_HANDED_BACK = "RecordsHandedBack"  # failed records made visible again after their backoff

# The node watcher, per cluster.
METRIC_NODE_WATCH_SECONDS = "NodeWatchSeconds"  # seconds the watch was held: the "watch not running" alarm
METRIC_NODE_CHANGES_PUBLISHED = "NodeChangesPublished"  # Node Changed events put on the bus
METRIC_NODE_WATCH_FAILURES = "NodeWatchFailures"  # failed watch requests, publishes, checkpoints, invocations (when
# > 0)
METRIC_NODE_WATCH_RELISTS = "NodeWatchRelists"  # 410 Gone (or no bookmark): listed again, watched afresh (when > 0)

# Usage read back from Kueue every minute (accelerators only; per team: the ``team usage`` log line, the usage API).
METRIC_FLAVOR_IDLE = "Idle"  # per (cluster, resource): capacity no workload uses
METRIC_FLAVOR_BORROWED = "Borrowed"  # per (cluster, resource): the teams' borrowed, added up
METRIC_IDLE_WHILE_PENDING = "IdleWhilePending"  # per (cluster, resource): idle while a team waits for it (when > 0)
METRIC_USAGE_SAMPLE_FAILURES = "UsageSampleFailures"  # per cluster
METRIC_UNBOUND_PODS = "UnboundPods"  # per cluster: pods of admitted workloads no node has taken (when > 0)
METRIC_UNBOUND_PODS_OLDEST_SECONDS = "UnboundPodsOldestSeconds"  # per cluster: since the oldest of them was admitted
# (when > 0)
