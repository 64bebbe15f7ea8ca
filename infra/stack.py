"""The idleshare stack: composes one construct per concern and wires their permissions."""

from __future__ import annotations

from aws_cdk import CfnOutput, Duration, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_

import idleshare
from constructs import Construct
from idleshare import names, timings
from infra.config import IdleshareConfig
from infra.constructs.api import AdminApi
from infra.constructs.eks_access import EksAccess
from infra.constructs.events import Events
from infra.constructs.functions import DEFAULT_MEMORY, DEFAULT_TIMEOUT, IdleshareFunction, retention
from infra.constructs.network import Network
from infra.constructs.observability import Observability
from infra.constructs.queue import RecomputeQueue, RouterDeadLetterQueue
from infra.constructs.registry import ClusterRegistry
from infra.constructs.storage import Storage
from infra.constructs.watcher import NodeWatcher

# The timeout (s) and memory (MB) of the functions that need more than the default: the recompute's are
# idleshare.timings', as are the node watcher's (the recompute's queue and event source mapping read it too; so does the devkit).
RECOMPUTE_SIZE = (timings.RECOMPUTE_TIMEOUT_SECONDS, timings.RECOMPUTE_MEMORY_MB)
WATCHER_SIZE = (timings.WATCHER_FUNCTION_TIMEOUT_SECONDS, timings.WATCHER_MEMORY_MB)

# Each role's grants are exactly what its flows call: tests/infra/test_least_privilege.py runs every flow under
# the synthesized policy with moto's IAM enforcement. IAM authorises a TransactWriteItems by each item's action
# (PutItem, UpdateItem, DeleteItem, ConditionCheckItem), so those are the transaction grants.
ROUTER_TABLE = ("dynamodb:GetItem", "dynamodb:Query")  # the registry: lookups by EKS name / ARN, every cluster
RECOMPUTE_TABLE = (
    "dynamodb:GetItem",  # the cluster, the pool, the scheduler config
    "dynamodb:Query",  # the quotas
    "dynamodb:PutItem",  # recalculation receipts
    "dynamodb:UpdateItem",  # apply status, read failures, the recomputes a paused cluster skipped
    "dynamodb:DeleteItem",  # the pool's parts a larger generation left (in put_pool's transaction)
)
API_TABLE = (
    "dynamodb:GetItem",
    "dynamodb:Query",
    "dynamodb:PutItem",  # quotas and their team guards (transactions), the scheduler config, the pause switch
    "dynamodb:DeleteItem",  # deleting them
)
# the registry entries of a cluster in one transaction; a renamed cluster's old lookups deleted in it; a cluster
# no longer configured deregistered (its entries deleted in one transaction), the registered ones listed for it
REGISTRAR_TABLE = ("dynamodb:GetItem", "dynamodb:Query", "dynamodb:PutItem", "dynamodb:DeleteItem")
# Powertools idempotency (DynamoDBPersistenceLayer): the record is put, updated with the result, deleted
# when the run failed (so the retry recomputes); GetItem reads a record that already exists.
IDEMPOTENCY = ("dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem")
# The SQS event source mapping polls with the function's role (AWSLambdaSQSQueueExecutionRole's actions).
SQS_POLL = ("sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes")
# The recompute hands a failed record back with a short backoff (ChangeMessageVisibilityBatch, authorised as this).
SQS_RETURN = ("sqs:ChangeMessageVisibility",)


DESCRIPTIONS = {
    names.ROUTER_HANDLER: "idleshare: route trigger events to the recompute queue",
    names.RECOMPUTE_HANDLER: "idleshare: recompute a cluster's lendable pool and write it to Kueue",
    names.API_HANDLER: "idleshare: admin HTTP API",
    names.REGISTRAR_HANDLER: "idleshare: register the configured clusters (deploy time)",
    names.WATCHER_HANDLER: (
        "idleshare: watch a cluster's nodes, publish Node Changed (one invocation per cluster per minute)"
    ),
}


def stack_description() -> str:
    """The CloudFormation stack's description: what it is and idleshare's version (``idleshare.__version__``, the
    one place), so the console tells which release a deployed stack runs."""
    return f"idleshare {idleshare.__version__}: lendable GPU pool for EKS / HyperPod + Kueue"


def _allow(principal: iam.IGrantable, actions: tuple[str, ...], *resources: str) -> None:
    principal.grant_principal.add_to_principal_policy(
        iam.PolicyStatement(actions=list(actions), resources=list(resources))
    )


class IdleshareStack(Stack):
    def __init__(
        self, scope: Construct, construct_id: str, *, config: IdleshareConfig, code: lambda_.Code, **kwargs
    ) -> None:
        super().__init__(scope, construct_id, description=stack_description(), **kwargs)
        self.config = config
        storage = Storage(self, "Storage")
        queue = RecomputeQueue(self, "RecomputeQueue", max_receive_count=config.dlq_max_receive_count)
        router_dlq = RouterDeadLetterQueue(self, "RouterDlq")
        network = Network(self, "Network", config=config.vpc) if config.vpc is not None else None
        self._output(names.OUTPUT_TABLE_NAME, storage.table.table_name, "Main DynamoDB table")
        self._output(names.OUTPUT_IDEMPOTENCY_TABLE_NAME, storage.idempotency_table.table_name, "Idempotency table")
        self._output(names.OUTPUT_QUEUE_URL, queue.queue.queue_url, "Recompute FIFO queue")
        self._output(names.OUTPUT_DLQ_URL, queue.dlq.queue_url, "Recompute dead-letter queue")
        self._output(
            names.OUTPUT_ROUTER_DLQ_URL, router_dlq.queue.queue_url, "Router dead-letter queue (events not routed)"
        )

        # Each function's own configuration only (names.FUNCTION_ENV; the bus is added once it exists).
        values = {
            names.ENV_TABLE_NAME: storage.table.table_name,
            names.ENV_IDEMPOTENCY_TABLE_NAME: storage.idempotency_table.table_name,
            names.ENV_QUEUE_URL: queue.queue.queue_url,
            names.ENV_HISTORY_TTL_DAYS: str(config.history_ttl_days),
            names.ENV_TOLERATED_TAINT_KEYS: ",".join(config.tolerated_taint_keys),
            names.ENV_CLUSTERS: config.clusters_env(),
        }

        def function(
            construct_id: str,
            handler: str,
            seconds: int = int(DEFAULT_TIMEOUT.to_seconds()),
            mb: int = DEFAULT_MEMORY,
            vpc: bool = False,
        ):
            return IdleshareFunction(
                self,
                construct_id,
                code=code,
                handler=handler,
                description=DESCRIPTIONS[handler],
                environment={k: values[k] for k in names.FUNCTION_ENV[handler] if k in values},
                log_retention_days=config.log_retention_days,
                timeout=Duration.seconds(seconds),
                memory_size=mb,
                placement=network.placement if vpc and network is not None else None,
            )

        # The functions that talk to Kubernetes run in the cluster's VPC when the config gives one.
        router = function("Router", names.ROUTER_HANDLER, timings.ROUTER_FUNCTION_TIMEOUT_SECONDS)
        recompute = function("Recompute", names.RECOMPUTE_HANDLER, *RECOMPUTE_SIZE, vpc=True)
        api_handler = function("AdminApi", names.API_HANDLER)
        registrar = function("Registrar", names.REGISTRAR_HANDLER, timings.REGISTRAR_FUNCTION_TIMEOUT_SECONDS)
        watcher = function("NodeWatcher", names.WATCHER_HANDLER, *WATCHER_SIZE, vpc=True)

        events = Events(
            self,
            "Events",
            router=router.function,
            schedule_rate_minutes=config.schedule_rate_minutes,
            archive_retention_days=config.archive_retention_days,
            dead_letter_queue=router_dlq.queue,
        )
        self._output(names.OUTPUT_EVENT_BUS_NAME, events.bus.event_bus_name, "idleshare's event bus")
        self._output(names.OUTPUT_EVENT_BUS_ARN, events.bus.event_bus_arn, "idleshare's event bus ARN")
        self._output(names.OUTPUT_ARCHIVE_NAME, events.archive.archive_name, "Archive of every trigger (replay)")
        for fn in (router, recompute, api_handler, registrar, watcher):
            if names.ENV_EVENT_BUS_NAME in names.FUNCTION_ENV[fn.handler]:
                fn.function.add_environment(names.ENV_EVENT_BUS_NAME, events.bus.event_bus_name)

        table, idem = storage.table.table_arn, storage.idempotency_table.table_arn
        # Router: registry reads, one message per cluster. It writes nothing.
        _allow(router.role, ROUTER_TABLE, table)
        _allow(router.role, ("sqs:SendMessage",), queue.queue.queue_arn)
        router_dlq.keep_failed_invocations(router.function, router.role)  # sqs:SendMessage on the router DLQ
        # Recompute: state, idempotency, results on the bus, the queue it is fed from.
        _allow(recompute.role, RECOMPUTE_TABLE, table)
        _allow(recompute.role, IDEMPOTENCY, idem)
        _allow(recompute.role, ("events:PutEvents",), events.bus.event_bus_arn)
        _allow(recompute.role, SQS_POLL + SQS_RETURN, queue.queue.queue_arn)
        recompute.function.add_event_source_mapping(
            "RecomputeQueueSource",
            event_source_arn=queue.queue.queue_arn,
            batch_size=timings.RECOMPUTE_BATCH_SIZE,
            # the poller never invokes more at once (no reserved concurrency: a throttled batch's receives would
            # count toward the redrive policy)
            max_concurrency=config.recompute_max_concurrency,
            report_batch_item_failures=True,
        )
        # Admin API: quota / scheduler CRUD, recalculation requests (on the bus).
        _allow(api_handler.role, API_TABLE, table)
        _allow(api_handler.role, ("events:PutEvents",), events.bus.event_bus_arn)
        # Registrar: the clusters' registry entries, written at deploy time.
        _allow(registrar.role, REGISTRAR_TABLE, table)
        registry = ClusterRegistry(self, "ClusterRegistry", registrar=registrar, clusters=values[names.ENV_CLUSTERS])

        EksAccess(self, "EksAccess", clusters=config.clusters, role=recompute.role)
        api = AdminApi(
            self,
            "AdminApiGateway",
            handler=api_handler.function,
            log_retention=retention(config.log_retention_days),
            account_logging_role=config.api_gateway_account_logging_role,
        )
        self._output(names.OUTPUT_API_URL, api.api.url, "Admin API base URL (SigV4, execute-api)")
        self._output(names.OUTPUT_RECOMPUTE_ROLE_ARN, recompute.role.role_arn, "Role mapped by the EKS access entries")
        # what the dashboard and alarms watch: the functions' errors and durations, the queues' depth
        watched = {"recompute": recompute.function, "router": router.function, "api_handler": api_handler.function}
        watched |= {"queue": queue.queue, "dlq": queue.dlq, "router_dlq": router_dlq.queue}
        cluster_ids = [c.id for c in config.clusters]
        observability = Observability(
            self, "Observability", cluster_ids=cluster_ids, alarm_email=config.alarm_email, **watched
        )
        self._output(names.OUTPUT_ALARM_TOPIC_ARN, observability.topic.topic_arn, "SNS topic of the alarms")
        self._output(names.OUTPUT_DASHBOARD_NAME, observability.dashboard.dashboard_name, "CloudWatch dashboard")

        # The node watcher: a schedule per cluster, its grants, EKS access, alarm and dashboard widgets.
        self.node_watcher = NodeWatcher(
            self,
            "NodeWatch",
            function=watcher.function,
            role=watcher.role,
            clusters=config.clusters,
            table_arn=table,
            bus_arn=events.bus.event_bus_arn,
            topic=observability.topic,
            dashboard=observability.dashboard,
        )
        self.watcher = watcher

        self.storage, self.queue, self.network, self.events = storage, queue, network, events
        self.router_dlq = router_dlq
        self.router, self.recompute, self.api_handler, self.api = router, recompute, api_handler, api
        self.registrar, self.registry = registrar, registry
        self.observability = observability

    def _output(self, key: str, value: str, description: str) -> None:
        """An output of the stack: the CLI reads the API's URL, the tests and the operator the others."""
        CfnOutput(self, key, value=value, description=description)
