"""The node watcher: its schedules, permissions, EKS access, alarm and dashboard widget.

One EventBridge Scheduler schedule per governed cluster invokes the watcher Lambda every minute with
``{"cluster": "<id>"}``; each invocation holds a watch on that cluster's nodes until shortly before its
timeout and hands over to the next (``idleshare.service.watcher``). One schedule per cluster rather than
one invocation for all: a cluster whose API server is slow or unreachable holds up no other cluster's
watch, each cluster's watch has its own timeout, lease and alarm, and the cost is per cluster-minute either
way for the one or two clusters a deployment usually governs.

Least privilege: ``eks:DescribeCluster`` on the governed clusters; on the table :data:`TABLE_ACTIONS`, only for
the items whose partition key is one of the governed clusters' (``CLUSTER#<id>``: its watch, node views and their
parts, and the usage history); ``events:PutEvents`` on idleshare's bus. In Kubernetes the role is mapped to its own
group, bound by ``infra/k8s/rbac.yaml``. The grants and the group's rules as deployed: infra/README.md, "The stack
as synthesized" (generated from the template).
"""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns

from constructs import Construct
from idleshare import names, timings
from idleshare.table import cluster_pk
from infra.config import ClusterConfig
from infra.constructs.eks_access import access_entries, cluster_arn
from infra.constructs.events import invoke_role, invoke_schedule

# DynamoDB actions: the claim and checkpoints are UpdateItem (both items in one transaction, which IAM authorises
# item by item), the saved node views and the usage cursor are read with GetItem, the parts and the usage hours with
# Query; DeleteItem removes the parts a smaller checkpoint no longer uses.
TABLE_ACTIONS = ("dynamodb:GetItem", "dynamodb:UpdateItem", "dynamodb:Query", "dynamodb:DeleteItem")
ALARM_PERIOD = Duration.minutes(timings.WATCHER_ALARM_MINUTES)


def alarm_threshold(node_watch_seconds: int) -> float:
    """Seconds of watch expected per alarm period: the cluster's hold (``node_watch_seconds``) per minute; below half
    of it the watch is not running."""
    return timings.WATCHER_ALARM_MINUTES * node_watch_seconds / 2


ALARM_THRESHOLD = alarm_threshold(timings.DEFAULT_NODE_WATCH_SECONDS)
"""The threshold of a cluster on the default hold (the dashboard's annotation)."""


class NodeWatcher(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        function: lambda_.IFunction,
        role: iam.IRole,
        clusters: list[ClusterConfig],
        table_arn: str,
        bus_arn: str,
        topic: sns.ITopic,
        dashboard: cw.Dashboard,
    ) -> None:
        super().__init__(scope, construct_id)
        ids = [c.id for c in clusters]
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["eks:DescribeCluster"],
                resources=[cluster_arn(self, c.eks_cluster_name) for c in clusters],
            )
        )
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=list(TABLE_ACTIONS),
                resources=[table_arn],
                conditions={"ForAllValues:StringEquals": {"dynamodb:LeadingKeys": [cluster_pk(i) for i in ids]}},
            )
        )
        role.add_to_principal_policy(iam.PolicyStatement(actions=["events:PutEvents"], resources=[bus_arn]))
        self.access_entries = access_entries(self, clusters, role, names.K8S_WATCHER_GROUP)

        self.schedule_role = invoke_role(self, function, "the idleshare node watcher")
        # not retried: the next minute's invocation resumes from the last checkpoint anyway
        self.schedules = [
            invoke_schedule(
                self,
                f"Schedule-{cluster_id}",
                description=f"idleshare node watcher for cluster {cluster_id}: one invocation a minute",
                minutes=timings.WATCHER_SCHEDULE_MINUTES,
                function=function,
                role=self.schedule_role,
                payload={"cluster": cluster_id},
            )
            for cluster_id in ids
        ]

        def metric(name: str, cluster_id: str, *, label: bool = True) -> cw.Metric:
            return cw.Metric(
                namespace=names.METRICS_NAMESPACE,
                metric_name=name,
                dimensions_map={names.METRIC_DIM_CLUSTER: cluster_id, "service": names.SERVICE},
                period=ALARM_PERIOD,
                statistic="Sum",
                label=cluster_id if label else None,
            )

        action = cw_actions.SnsAction(topic)
        self.not_running_alarms = []
        for cluster in clusters:
            cluster_id = cluster.id
            alarm = cw.Alarm(
                self,
                f"WatchNotRunning-{cluster_id}",
                alarm_description=(
                    f"Cluster {cluster_id}: the node watch is not running (less than half of the last "
                    f"{timings.WATCHER_ALARM_MINUTES} minutes watched): node changes reach idleshare only through "
                    "the scheduled recompute. See the node watcher's logs (NodeWatchFailures)."
                ),
                metric=metric(names.METRIC_NODE_WATCH_SECONDS, cluster_id, label=False),
                threshold=alarm_threshold(cluster.settings.node_watch_seconds),
                evaluation_periods=2,
                datapoints_to_alarm=2,
                comparison_operator=cw.ComparisonOperator.LESS_THAN_THRESHOLD,
                treat_missing_data=cw.TreatMissingData.BREACHING,
            )
            alarm.add_alarm_action(action)
            self.not_running_alarms.append(alarm)

        dashboard.add_widgets(
            cw.GraphWidget(
                title="Node watcher: seconds watched per cluster (5 min)",
                left=[metric(names.METRIC_NODE_WATCH_SECONDS, i) for i in ids],
                left_annotations=[cw.HorizontalAnnotation(value=ALARM_THRESHOLD, label="not running below")],
                width=8,
            ),
            cw.GraphWidget(
                title="Node watcher: Node Changed published",
                left=[metric(names.METRIC_NODE_CHANGES_PUBLISHED, i) for i in ids],
                width=8,
            ),
            cw.GraphWidget(
                title="Node watcher: failures and relists",
                left=[metric(names.METRIC_NODE_WATCH_FAILURES, i) for i in ids],
                right=[metric(names.METRIC_NODE_WATCH_RELISTS, i) for i in ids],
                width=8,
            ),
        )
        dashboard.add_widgets(
            cw.AlarmStatusWidget(title="Node watcher alarms", alarms=self.not_running_alarms, width=24)
        )
