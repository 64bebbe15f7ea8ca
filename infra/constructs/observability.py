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

PERIOD = Duration.minutes(5)
NS = names.METRICS_NAMESPACE
# Every gauge also carries Powertools' `service` dimension (handlers/recompute.py sets it): a SCHEMA() query
# matches only metrics with exactly its dimensions.
GAUGE_DIMS = (names.METRIC_DIM_CLUSTER, names.METRIC_DIM_FLAVOR, names.METRIC_DIM_RESOURCE, "service")
EXCLUDED_DIMS = (names.METRIC_DIM_CLUSTER, names.METRIC_DIM_REASON, "service")


def search(metric: str, dims: tuple[str, ...], label: str) -> cw.MathExpression:
    """Every time series of `metric` with exactly `dims` (one line per cluster/flavor/resource)."""
    schema = ",".join((NS, *dims))
    return cw.MathExpression(
        expression=f"SEARCH('{{{schema}}} MetricName=\"{metric}\"', 'Maximum', {int(PERIOD.to_seconds())})",
        label=label,
        period=PERIOD,
        using_metrics={},
    )


def shortfall_query(cluster_id: str) -> str:
    """Metrics Insights: the largest shortfall of any flavor/resource of one cluster (alarmable)."""
    schema = ", ".join(('"' + NS + '"', *GAUGE_DIMS))
    return (
        f"SELECT MAX({names.METRIC_SHORTFALL}) FROM SCHEMA({schema}) WHERE {names.METRIC_DIM_CLUSTER} = '{cluster_id}'"
    )


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
        alarm_email: str | None,
    ) -> None:
        super().__init__(scope, construct_id)
        # Unencrypted on purpose: CloudWatch cannot publish to a topic under the AWS-managed SNS key, and
        # a customer key's policy needs kms:* for the account. Notifications carry names, not data.
        self.topic = sns.Topic(self, "AlarmTopic", display_name="idleshare alarms", enforce_ssl=True)
        if alarm_email:
            self.topic.add_subscription(subs.EmailSubscription(alarm_email))
        action = cw_actions.SnsAction(self.topic)

        self.dlq_alarm = cw.Alarm(
            self,
            "DlqDepthAlarm",
            alarm_description="Recompute messages are failing repeatedly and landing in the DLQ",
            metric=dlq.metric_approximate_number_of_messages_visible(period=PERIOD, statistic="Maximum"),
            threshold=1,
            evaluation_periods=1,
            comparison_operator=cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
        )
        self.errors_alarm = cw.Alarm(
            self,
            "RecomputeErrorsAlarm",
            alarm_description="The recompute Lambda is failing",
            metric=recompute.metric_errors(period=PERIOD, statistic="Sum"),
            threshold=1,
            evaluation_periods=3,
            datapoints_to_alarm=2,
            comparison_operator=cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
        )
        self.permanent_failures_alarm = cw.Alarm(
            self,
            "PermanentFailuresAlarm",
            alarm_description=(
                "A recompute cannot succeed until its input changes (invalid stored policy, objects Kueue refuses):"
                " see the pool's last failure (GET /clusters/{c}/pool); not retried"
            ),
            metric=cw.Metric(
                namespace=NS,
                metric_name=names.METRIC_PERMANENT_FAILURES,
                dimensions_map={"service": names.SERVICE},
                period=PERIOD,
                statistic="Sum",
            ),
            threshold=1,
            evaluation_periods=1,
            comparison_operator=cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
        )
        self.shortfall_alarms = [
            cw.Alarm(
                self,
                f"ShortfallAlarm-{cluster_id}",
                alarm_description=f"Cluster {cluster_id}: quotas allocate more than the eligible nodes provide",
                metric=cw.MathExpression(
                    expression=shortfall_query(cluster_id),
                    label=f"max shortfall {cluster_id}",
                    period=PERIOD,
                    using_metrics={},
                ),
                threshold=0,
                evaluation_periods=3,
                comparison_operator=cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
                treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
            )
            for cluster_id in cluster_ids
        ]
        self.field_manager_alarms = [
            cw.Alarm(
                self,
                f"ForeignFieldManagerAlarm-{cluster_id}",
                alarm_description=(
                    f"Cluster {cluster_id}: another field manager owns fields of idleshare's Kueue objects "
                    "(HyperPod task governance or GitOps?); idleshare leaves them (apply status Conflict)"
                ),
                metric=cw.Metric(
                    namespace=NS,
                    metric_name=names.METRIC_FOREIGN_FIELD_MANAGER,
                    # EMF from the recompute: the cluster, and Powertools' own service dimension
                    dimensions_map={names.METRIC_DIM_CLUSTER: cluster_id, "service": names.SERVICE},
                    period=PERIOD,
                    statistic="Maximum",
                ),
                threshold=0,
                evaluation_periods=1,
                comparison_operator=cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
                treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
            )
            for cluster_id in cluster_ids
        ]
        for alarm in (
            self.dlq_alarm,
            self.errors_alarm,
            self.permanent_failures_alarm,
            *self.shortfall_alarms,
            *self.field_manager_alarms,
        ):
            alarm.add_alarm_action(action)

        self.dashboard = cw.Dashboard(self, "Dashboard", default_interval=Duration.hours(6))
        self.dashboard.add_widgets(
            cw.GraphWidget(
                title="Unallocated capacity per flavor",
                left=[search(names.METRIC_UNALLOCATED, GAUGE_DIMS, "unallocated")],
                width=12,
            ),
            cw.GraphWidget(
                title="Borrowable capacity per flavor (sum of borrow limits)",
                left=[search(names.METRIC_BORROWABLE, GAUGE_DIMS, "borrowable")],
                width=12,
            ),
        )
        self.dashboard.add_widgets(
            cw.GraphWidget(
                title="Shortfall per flavor",
                left=[search(names.METRIC_SHORTFALL, GAUGE_DIMS, "shortfall")],
                width=12,
            ),
            cw.GraphWidget(
                title="Excluded nodes by reason",
                left=[search(names.METRIC_EXCLUDED_NODES, EXCLUDED_DIMS, "excluded")],
                width=12,
            ),
        )
        self.dashboard.add_widgets(
            cw.GraphWidget(
                title="Recompute duration",
                left=[
                    recompute.metric_duration(period=PERIOD, statistic=stat, label=stat)
                    for stat in ("p50", "p99", "Maximum")
                ],
                right=[
                    cw.Metric(
                        namespace=NS,
                        metric_name=names.METRIC_RECOMPUTE_DURATION,
                        dimensions_map={"service": names.SERVICE},
                        period=PERIOD,
                        statistic="p99",
                        label="recompute p99 (ms, in-handler)",
                    )
                ],
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
                    queue.metric_approximate_number_of_messages_visible(period=PERIOD, label="queue depth"),
                ],
                right=[queue.metric_approximate_age_of_oldest_message(period=PERIOD, label="oldest (s)")],
                width=8,
            ),
        )
        self.dashboard.add_widgets(
            cw.AlarmStatusWidget(
                title="Alarms",
                alarms=[
                    self.dlq_alarm,
                    self.errors_alarm,
                    self.permanent_failures_alarm,
                    *self.shortfall_alarms,
                    *self.field_manager_alarms,
                ],
                width=24,
            )
        )
