"""CloudWatch: the idleshare dashboard, the alarms, and the SNS topic they notify.

Pool metrics are the Powertools EMF metrics the recompute Lambda emits (namespace
names.METRICS_NAMESPACE, names in idleshare.names: METRIC_*); Lambda and SQS metrics come from AWS.
"""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subs
from aws_cdk import aws_sqs as sqs

from constructs import Construct
from idleshare import names
from idleshare.metric_specs import Alarm, spec

PERIOD = Duration.minutes(5)
NS = names.METRICS_NAMESPACE
# Every gauge also carries Powertools' `service` dimension (handlers/recompute.py sets it): a SCHEMA() query
# matches only metrics with exactly its dimensions. No team and no flavor dimension: the number of metrics (the bill)
# is bounded whatever the teams and flavors (per team and flavor: the usage API, the pool, the `team usage` log).
# The dimensions are the metrics' declarations' (idleshare.metric_specs), never typed again here.
GAUGE_DIMS = spec(names.METRIC_UNALLOCATED).schema_dims
EXCLUDED_DIMS = spec(names.METRIC_EXCLUDED_NODES).schema_dims
ISSUE_DIMS = spec(names.METRIC_POOL_ISSUES).schema_dims
CLUSTER_DIMS = spec(names.METRIC_UNBOUND_PODS).schema_dims


def search(metric: str, dims: tuple[str, ...], label: str) -> cw.MathExpression:
    """Every time series of `metric` with exactly `dims` (one line per cluster/flavor/resource)."""
    schema = ",".join((NS, *dims))
    return cw.MathExpression(
        expression=f"SEARCH('{{{schema}}} MetricName=\"{metric}\"', 'Maximum', {int(PERIOD.to_seconds())})",
        label=label,
        period=PERIOD,
        using_metrics={},
    )


def search_graph(title: str, metric: str, dims: tuple[str, ...], label: str) -> cw.GraphWidget:
    """A half-width graph of every time series of `metric` (see `search`)."""
    return cw.GraphWidget(title=title, left=[search(metric, dims, label)], width=12)


Graph = tuple[str, str, tuple[str, ...], str]  # search_graph's title, metric, dimensions, label
POOL_GRAPHS: tuple[tuple[Graph, Graph], ...] = (
    (
        (
            "Unallocated capacity per accelerator (the cohort's own)",
            names.METRIC_UNALLOCATED,
            GAUGE_DIMS,
            "unallocated",
        ),
        ("Shortfall per accelerator (none: no line)", names.METRIC_SHORTFALL, GAUGE_DIMS, "shortfall"),
    ),
    (
        ("Excluded nodes by reason", names.METRIC_EXCLUDED_NODES, EXCLUDED_DIMS, "excluded"),
        (
            "The pool's issues by severity (which: GET /clusters/{c}/pool)",
            names.METRIC_POOL_ISSUES,
            ISSUE_DIMS,
            "issues",
        ),
    ),
    (
        ("Objects left to another field manager", names.METRIC_FOREIGN_FIELD_MANAGER, CLUSTER_DIMS, "objects"),
        ("Objects the API server refused", names.METRIC_OBJECTS_REFUSED, CLUSTER_DIMS, "refused"),
    ),
)
"""The pool as the recompute last wrote it, two graphs a row."""
USAGE_GRAPHS: tuple[tuple[Graph, Graph], ...] = (
    (
        ("Idle accelerators", names.METRIC_FLAVOR_IDLE, GAUGE_DIMS, "idle"),
        ("Borrowed accelerators", names.METRIC_FLAVOR_BORROWED, GAUGE_DIMS, "borrowed"),
    ),
    (
        ("Idle accelerators while work is pending", names.METRIC_IDLE_WHILE_PENDING, GAUGE_DIMS, "idle+pending"),
        ("Usage samples that failed", names.METRIC_USAGE_SAMPLE_FAILURES, CLUSTER_DIMS, "failed"),
    ),
    (
        ("Admitted pods no node has taken", names.METRIC_UNBOUND_PODS, CLUSTER_DIMS, "unbound pods"),
        (
            "Since the oldest of them was admitted (s)",
            names.METRIC_UNBOUND_PODS_OLDEST_SECONDS,
            CLUSTER_DIMS,
            "oldest unbound (s)",
        ),
    ),
)
"""Usage read back from Kueue every minute, two graphs a row."""


def emf_metric(metric: str, statistic: str, dims: dict[str, str] | None = None, label: str | None = None) -> cw.Metric:
    """A metric the recompute emits as EMF: `dims` and Powertools' own `service` dimension."""
    return cw.Metric(
        namespace=NS,
        metric_name=metric,
        dimensions_map={**(dims or {}), "service": names.SERVICE},
        period=PERIOD,
        statistic=statistic,
        label=label,
    )


def cluster_max(metric: str, cluster_id: str, label: str, period: Duration) -> cw.MathExpression:
    """Metrics Insights: the largest ``metric`` of any resource of one cluster (alarmable)."""
    schema = ", ".join(('"' + NS + '"', *GAUGE_DIMS))
    return cw.MathExpression(
        expression=f"SELECT MAX({metric}) FROM SCHEMA({schema}) WHERE {names.METRIC_DIM_CLUSTER} = '{cluster_id}'",
        label=label,
        period=period,
        using_metrics={},
    )


def _alarm_of(metric: str) -> Alarm:
    declared = spec(metric).alarm
    assert declared is not None, f"metric {metric} declares no alarm (idleshare.metric_specs)"
    return declared


def _minutes(alarm: Alarm) -> int:
    return alarm.periods * alarm.period_seconds // 60


class Observability(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster_ids: list[str],
        recompute: lambda_.Function,
        router: lambda_.Function,
        api_handler: lambda_.Function,
        queue: sqs.IQueue,
        dlq: sqs.IQueue,
        router_dlq: sqs.IQueue,
        alarm_email: str | None,
    ) -> None:
        super().__init__(scope, construct_id)
        # Unencrypted on purpose: CloudWatch cannot publish to a topic under the AWS-managed SNS key, and
        # a customer key's policy needs kms:* for the account. Notifications carry names, not data.
        self.topic = sns.Topic(self, "AlarmTopic", display_name="idleshare alarms", enforce_ssl=True)
        if alarm_email:
            self.topic.add_subscription(subs.EmailSubscription(alarm_email))
        self._action = cw_actions.SnsAction(self.topic)
        self._queue_and_function_alarms(recompute, dlq, router_dlq)
        self._cluster_alarms(cluster_ids)
        self._dashboard((recompute, router, api_handler), (queue, dlq, router_dlq))

    def _alarm(
        self,
        alarm_id: str,
        description: str,
        metric: cw.IMetric,
        *,
        above: int,
        periods: int,
        datapoints: int | None = None,
    ) -> cw.Alarm:
        """Alarm when `metric` passes `above` (1: reaches 1; 0: above 0) in `datapoints` of `periods` periods
        (all of them by default), missing data not breaching; notify the topic."""
        created = cw.Alarm(
            self,
            alarm_id,
            alarm_description=description,
            metric=metric,
            threshold=above,
            evaluation_periods=periods,
            comparison_operator=(
                cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD
                if above
                else cw.ComparisonOperator.GREATER_THAN_THRESHOLD
            ),
            datapoints_to_alarm=datapoints,
            treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
        )
        created.add_alarm_action(self._action)
        return created

    def _cluster_gauge_alarms(
        self, cluster_ids: list[str], prefix: str, metric: str, description: str
    ) -> list[cw.Alarm]:
        """``<prefix>-<cluster>`` for each cluster: the recompute's per-cluster gauge ``metric`` above 0 (EMF: the
        cluster, and Powertools' own service dimension). ``description`` names the cluster as ``{cluster}``."""
        declared = _alarm_of(metric)
        return [
            self._alarm(
                f"{prefix}-{cluster_id}",
                description.replace("{cluster}", cluster_id),
                emf_metric(metric, "Maximum", {names.METRIC_DIM_CLUSTER: cluster_id}),
                above=int(declared.threshold),
                periods=declared.periods,
            )
            for cluster_id in cluster_ids
        ]

    def _queue_and_function_alarms(self, recompute: lambda_.Function, dlq: sqs.IQueue, router_dlq: sqs.IQueue) -> None:
        """The DLQs' depth, the recompute's errors and its permanent failures."""
        self.dlq_alarm = self._alarm(
            "DlqDepthAlarm",
            "Recompute messages are failing repeatedly and landing in the DLQ",
            dlq.metric_approximate_number_of_messages_visible(period=PERIOD, statistic="Maximum"),
            above=1,
            periods=1,
        )
        self.router_dlq_alarm = self._alarm(
            "RouterDlqDepthAlarm",
            "Trigger events were not routed: EventBridge could not invoke the router, or its invocations failed"
            " after Lambda's retries; they are kept in the router DLQ (stack output "
            f"{names.OUTPUT_ROUTER_DLQ_URL}); the safety-net schedule still recomputes every cluster",
            router_dlq.metric_approximate_number_of_messages_visible(period=PERIOD, statistic="Maximum"),
            above=1,
            periods=1,
        )
        self.errors_alarm = self._alarm(
            "RecomputeErrorsAlarm",
            "The recompute Lambda is failing",
            recompute.metric_errors(period=PERIOD, statistic="Sum"),
            above=1,
            periods=3,
            datapoints=2,
        )
        self.permanent_failures_alarm = self._alarm(
            "PermanentFailuresAlarm",
            "A recompute cannot succeed until its input changes (invalid stored policy, objects Kueue refuses):"
            " see the pool's last failure (GET /clusters/{c}/pool); not retried",
            emf_metric(names.METRIC_PERMANENT_FAILURES, "Sum"),
            above=1,
            periods=1,
        )

    def _cluster_alarms(self, cluster_ids: list[str]) -> None:
        """One alarm per cluster for each of: shortfall, another field manager, a fight, a foreign object, a refused
        object, a quota overridden by an orchestrator, accelerators idle while work is pending, pods no node has taken.
        Thresholds and windows: the metrics' declarations (``idleshare.metric_specs``)."""
        shortfall, idle, unbound = (
            _alarm_of(m)
            for m in (names.METRIC_SHORTFALL, names.METRIC_IDLE_WHILE_PENDING, names.METRIC_UNBOUND_PODS_OLDEST_SECONDS)
        )
        self.shortfall_alarms = [
            self._alarm(
                f"ShortfallAlarm-{cluster_id}",
                f"Cluster {cluster_id}: quotas allocate more than the eligible nodes provide",
                cluster_max(names.METRIC_SHORTFALL, cluster_id, f"max shortfall {cluster_id}", PERIOD),
                above=int(shortfall.threshold),
                periods=shortfall.periods,
            )
            for cluster_id in cluster_ids
        ]

        self.field_manager_alarms = self._cluster_gauge_alarms(
            cluster_ids,
            "ForeignFieldManagerAlarm",
            names.METRIC_FOREIGN_FIELD_MANAGER,
            "Cluster {cluster}: another field manager owns fields of idleshare's Kueue objects "
            "(HyperPod task governance or GitOps?); idleshare leaves them (apply status Conflict)",
        )
        self.foreign_object_alarms = self._cluster_gauge_alarms(
            cluster_ids,
            "ForeignObjectAlarm",
            names.METRIC_FOREIGN_OBJECTS,
            "Cluster {cluster}: an object of a name idleshare wants exists and idleshare did not create it "
            "(no idleshare.io/created-by annotation): never written nor deleted by idleshare (apply status "
            "Conflict, issue ForeignObject names it)",
        )
        self.fight_alarms = self._cluster_gauge_alarms(
            cluster_ids,
            "FieldManagerFightAlarm",
            names.METRIC_FIELD_MANAGER_FIGHTS,
            "Cluster {cluster}: another field manager keeps rewriting one of idleshare's objects (field_ownership "
            "Take against a controller that force-applies the same fields): idleshare backs off instead of writing "
            "it every recompute; issue FieldManagerFight names the object and the other manager (apply status "
            "Conflict, GET /clusters/<c>/pool)",
        )
        self.objects_refused_alarms = self._cluster_gauge_alarms(
            cluster_ids,
            "ObjectsRefusedAlarm",
            names.METRIC_OBJECTS_REFUSED,
            "Cluster {cluster}: the API server refused a write or deletion of one of idleshare's objects for good "
            "(its namespace being deleted: issue NamespaceTerminating; an admission policy, a ResourceQuota, a "
            "webhook: WriteRefused, with the status and message), or holds back an object that needs it "
            "(WaitingForRefused); everything else is written and deleted (apply status Conflict names each: "
            "GET /clusters/<c>/pool)",
        )
        self.quota_overridden_alarms = self._cluster_gauge_alarms(
            cluster_ids,
            "QuotaOverriddenAlarm",
            names.METRIC_QUOTA_OVERRIDDEN,
            "Cluster {cluster}: Kueue schedules one of idleshare's ClusterQueues or its Cohort from "
            "status.effectiveQuotas (Dynamic Quota Orchestration), not from the spec idleshare writes: idleshare's "
            "limits are not in force there. Issue DynamicQuotaOrchestratorActive (GET /clusters/<c>/pool) names "
            "each object and its orchestrator",
        )

        self.idle_while_pending_alarms = [
            self._alarm(
                f"IdleWhilePendingAlarm-{cluster_id}",
                f"Cluster {cluster_id}: accelerators idle in a flavor for {_minutes(idle)} "
                "minutes while a team's workloads asking for that flavor are pending (the waste idleshare exists to "
                "remove). Which team, flavor, Kueue pending reason and the cause idleshare names (cause/why: the bound "
                "of its limit, above limit, no free capacity): GET /clusters/{c}/usage (idleWhilePending), "
                "`idleshare usage --cluster c`, or the node watcher's log line 'accelerators idle while work is "
                "pending'; the metric's dimensions name the flavor and resource",
                cluster_max(
                    names.METRIC_IDLE_WHILE_PENDING,
                    cluster_id,
                    f"idle while pending {cluster_id}",
                    Duration.seconds(idle.period_seconds),
                ),
                above=int(idle.threshold),
                periods=idle.periods,
            )
            for cluster_id in cluster_ids
        ]

        self.unbound_pods_alarms = [
            self._alarm(
                f"UnboundPodsAlarm-{cluster_id}",
                f"Cluster {cluster_id}: a workload Kueue admitted {int(unbound.threshold) // 60} minutes ago or "
                "more still has pods no node has taken: Kueue counted their quota, the scheduler found no node (the "
                "pool overstates what pods can get: DaemonSets and other pods hold part of each node, or a node is "
                "gone). Which team, flavor, how many pods and the scheduler's reason: GET /clusters/{c}/usage "
                "(unbound), `idleshare usage --cluster c`, or the node watcher's log line 'admitted pods no node has "
                "taken'",
                emf_metric(names.METRIC_UNBOUND_PODS_OLDEST_SECONDS, "Maximum", {names.METRIC_DIM_CLUSTER: cluster_id}),
                above=int(unbound.threshold),
                periods=unbound.periods,
            )
            for cluster_id in cluster_ids
        ]

    def _dashboard(
        self, functions: tuple[lambda_.Function, lambda_.Function, lambda_.Function], queues: tuple[sqs.IQueue, ...]
    ) -> None:
        """The pool's graphs, the functions' (recompute, router, admin API) and the queues' (queue, DLQ, router
        DLQ), usage's, and every alarm's state."""
        recompute, router, api_handler = functions
        queue, dlq, router_dlq = queues
        self.dashboard = cw.Dashboard(self, "Dashboard", default_interval=Duration.hours(6))
        for row in POOL_GRAPHS:
            self.dashboard.add_widgets(*(search_graph(*graph) for graph in row))
        self.dashboard.add_widgets(
            cw.GraphWidget(
                title="Recompute duration",
                left=[
                    recompute.metric_duration(period=PERIOD, statistic=stat, label=stat)
                    for stat in ("p50", "p99", "Maximum")
                ],
                right=[emf_metric(names.METRIC_RECOMPUTE_DURATION, "p99", label="recompute p99 (ms, in-handler)")],
                width=8,
            ),
            cw.GraphWidget(
                title="Errors and throttles",
                left=[
                    recompute.metric_errors(period=PERIOD, label="recompute errors"),
                    router.metric_errors(period=PERIOD, label="router errors"),
                    api_handler.metric_errors(period=PERIOD, label="admin API errors"),
                    recompute.metric_throttles(period=PERIOD, label="recompute throttles"),
                ],
                width=8,
            ),
            cw.GraphWidget(
                title="Queue",
                left=[
                    dlq.metric_approximate_number_of_messages_visible(period=PERIOD, label="DLQ depth"),
                    router_dlq.metric_approximate_number_of_messages_visible(period=PERIOD, label="router DLQ depth"),
                    queue.metric_approximate_number_of_messages_visible(period=PERIOD, label="queue depth"),
                ],
                right=[queue.metric_approximate_age_of_oldest_message(period=PERIOD, label="oldest (s)")],
                width=8,
            ),
        )
        for row in USAGE_GRAPHS:
            self.dashboard.add_widgets(*(search_graph(*graph) for graph in row))
        self.dashboard.add_widgets(
            cw.AlarmStatusWidget(
                title="Alarms",
                alarms=[
                    self.dlq_alarm,
                    self.router_dlq_alarm,
                    self.errors_alarm,
                    self.permanent_failures_alarm,
                    *self.shortfall_alarms,
                    *self.field_manager_alarms,
                    *self.foreign_object_alarms,
                    *self.fight_alarms,
                    *self.objects_refused_alarms,
                    *self.quota_overridden_alarms,
                    *self.idle_while_pending_alarms,
                    *self.unbound_pods_alarms,
                ],
                width=24,
            )
        )
