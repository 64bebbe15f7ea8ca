"""Embedded services: idleshare's real router and recompute handlers on moto and a real Kubernetes + Kueue.

``Embedded`` is a context manager standing in for a deployed stack, in-process and without an AWS
account:

* DynamoDB (moto): one table with the CDK app's key schema (``pk``/``sk`` strings, TTL ``ttl``: both built
  from :mod:`idleshare.table`), used through :class:`~idleshare.adapters.store.DynamoStore`;
* SQS (moto): the recompute FIFO queue, through :class:`~idleshare.adapters.aws.SqsRecomputeQueue`;
* EventBridge (moto): idleshare's bus, through :class:`~idleshare.adapters.aws.EventBridgePublisher`;
  what the recompute publishes is also kept in :attr:`Embedded.published`;
* Kubernetes: etcd + kube-apiserver + the Kueue manager on 127.0.0.1 (:mod:`devkit.kube.stack`, built from
  the pinned modules on first use), read and written by the real
  :class:`~idleshare.adapters.kube.LightkubeCluster` adapter as idleshare's own RBAC user over TLS; the
  node changes and the reads below go through the admin client :class:`devkit.kube.client.Kube`.

The handlers are installed with :func:`idleshare.runtime.wiring.install` and driven as Lambda would:
``send(event)`` invokes the router; ``drain()`` delivers what the queue holds to the recompute handler
(SQS event-source batches of up to 10) and deletes the records that succeeded.

A node event also changes the cluster the way the event says (:meth:`Embedded.apply_to_cluster`):

* ``SageMaker HyperPod Cluster Node Health Event`` -> the node's ``sagemaker.amazonaws.com/node-health-status``
  label (and the health agent's NoSchedule taint), see :func:`health_label`;
* idleshare ``Node Changed`` with ``change`` one of :data:`NODE_CHANGES` -> ``spec.unschedulable``, the
  ``Ready`` condition, the health label, ``metadata.deletionTimestamp`` or the node's removal.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import logging
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from devkit import sqs as event_source
from devkit.kube.client import Kube
from devkit.lambda_context import LambdaContext
from idleshare import names
from idleshare import table as schema
from idleshare.domain.cluster_settings import ClusterSettings

REGION = "us-east-1"
TABLE_NAME = "idleshare-local"
QUEUE_NAME = "idleshare-recompute.fifo"
IDEMPOTENCY_TABLE_NAME = "idleshare-idempotency"
BUS_NAME = "idleshare-local"
HEALTH_LABEL = "sagemaker.amazonaws.com/node-health-status"
HEALTH_TAINT = HEALTH_LABEL
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
NOT_READY_TAINT = "node.kubernetes.io/not-ready"
LIFECYCLE_TAINTS = (NOT_READY_TAINT, "node.kubernetes.io/unreachable")
HEALTHY = "Schedulable"
KUEUE_KINDS = ("ResourceFlavor", "WorkloadPriorityClass", "Cohort", "ClusterQueue", "LocalQueue")
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"

NODE_CHANGES: dict[str, str] = {
    "cordon": "spec.unschedulable = true (+ the node.kubernetes.io/unschedulable taint)",
    "uncordon": "spec.unschedulable removed (and its taint)",
    "NotReady": "condition Ready = False (+ the node.kubernetes.io/not-ready taints)",
    "Ready": "condition Ready = True (the not-ready / unreachable taints lifted)",
    "Unhealthy": f"label {HEALTH_LABEL} = Unschedulable (+ taint)",
    "Healthy": f"label {HEALTH_LABEL} = Schedulable",
    "Deleting": "metadata.deletionTimestamp set",
    "delete": "the node is removed",
}
"""``Node Changed`` ``detail.change`` values the embedded cluster acts on (case-insensitive; aliases below)."""

_CHANGE_ALIASES = {
    "cordoned": "cordon",
    "unschedulable": "cordon",
    "uncordoned": "uncordon",
    "schedulable": "uncordon",
    "notready": "NotReady",
    "ready": "Ready",
    "unhealthy": "Unhealthy",
    "healthy": "Healthy",
    "deleting": "Deleting",
    "delete": "delete",
    "deleted": "delete",
    "removed": "delete",
    "cordon": "cordon",
    "uncordon": "uncordon",
}

CONTEXT = LambdaContext(function_name="idleshare-local", region=REGION, aws_request_id="local")


def canonical_change(change: str | None) -> str | None:
    """The :data:`NODE_CHANGES` key a ``Node Changed`` ``change`` stands for, or None."""
    if not change:
        return None
    return _CHANGE_ALIASES.get(change.strip().lower())


def health_label(health_status: str, repair_action: str | None = None) -> str:
    """The node label value HyperPod's health agent sets for a health event's ``HealthStatus``.

    ``Schedulable``/``Healthy`` -> ``Schedulable``; a label value itself (``Unschedulable``,
    ``UnschedulablePendingReplacement``, ``UnschedulablePendingReboot``) is kept; anything else
    (``Unhealthy``) -> from ``RepairAction``: ``Replace`` -> ``UnschedulablePendingReplacement``,
    ``Reboot`` -> ``UnschedulablePendingReboot``, else ``Unschedulable``.
    """
    status = health_status.strip()
    if status.lower() in ("schedulable", "healthy"):
        return HEALTHY
    if status in ("Unschedulable", "UnschedulablePendingReplacement", "UnschedulablePendingReboot"):
        return status
    action = (repair_action or "").lower()
    if "replace" in action:
        return "UnschedulablePendingReplacement"
    if "reboot" in action:
        return "UnschedulablePendingReboot"
    return "Unschedulable"


@dataclass(frozen=True)
class ClusterSpec:
    """The governed cluster the embedded stack knows (its registry entry)."""

    cluster_id: str = "demo"
    eks_cluster_name: str = "my-hyperPod-eks-cluster"
    hyperpod_cluster_arn: str = "arn:aws:sagemaker:us-west-2:111122223333:cluster/sample-cluster"
    settings: ClusterSettings = field(default_factory=ClusterSettings)


@dataclass
class Delivery:
    """What one ``send`` + ``drain`` did."""

    routed: list[str] = field(default_factory=list)
    dropped: str | None = None
    cluster_change: str | None = None
    recomputes: int = 0
    failures: list[str] = field(default_factory=list)
    events: list[str] = field(default_factory=list)  # what the node watcher published (:meth:`Embedded.watch`)


class CapturingPublisher:
    """The real EventBridge publisher (moto), keeping a copy of every published event."""

    def __init__(self, inner: Any, sink: list[dict[str, Any]]) -> None:
        self.inner = inner
        self.sink = sink

    def publish(self, detail_type: str, detail: dict[str, Any], resources: Any = ()) -> None:
        self.inner.publish(detail_type, detail, resources)
        self.sink.append({"detail-type": detail_type, "detail": json.loads(json.dumps(detail, default=str))})


class Embedded:
    """idleshare's pipeline in-process. ``with Embedded(nodes) as stack: stack.send(event); stack.drain()``.

    ``nodes``: a NodeList dict, a list of Node dicts, or a path to NodeList JSON/YAML. ``sim``: the admin
    client of an already started stack (tests) instead of starting one (then :attr:`shared_kube`, emptied
    first, when set). ``aws``: False when the caller already runs inside ``moto.mock_aws`` (tests).
    ``warn``: where the one-line notices go.
    """

    shared_kube: Kube | None = None
    """A running stack's admin client every Embedded without ``sim`` uses (emptied first) instead of
    starting its own: the tests set it to their session's stack."""

    def __init__(
        self,
        nodes: Any = None,
        *,
        cluster: ClusterSpec | None = None,
        sim: Kube | None = None,
        table: Any = None,
        aws: bool = True,
        warn: Callable[[str], None] | None = None,
    ) -> None:
        self.cluster = cluster or ClusterSpec()
        self._nodes = nodes
        self._given_sim = sim
        self._given_table = table
        self._own_aws = aws
        self._warn = warn or (lambda msg: print(msg, file=sys.stderr))
        self._stack = contextlib.ExitStack()
        self.published: list[dict[str, Any]] = []
        self.logs = io.StringIO()
        self.clock = [1_000_000.0]

    # -- lifecycle ----------------------------------------------------------------------------------

    def __enter__(self) -> Embedded:
        try:
            self._start()
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def _start(self) -> None:
        import boto3

        from idleshare.adapters.aws import EventBridgePublisher, SqsRecomputeQueue
        from idleshare.adapters.kube import LightkubeCluster
        from idleshare.adapters.ports import ClusterRecord
        from idleshare.adapters.sqs_records import SqsRecordReturns
        from idleshare.adapters.store import DynamoStore
        from idleshare.runtime import observability, wiring

        self._stack.enter_context(_environment())
        if self._own_aws:
            from moto import mock_aws

            self._stack.enter_context(mock_aws())
        self.sim = self._given_sim or self._start_kube()
        if self._nodes is not None:
            self.sim.seed_nodes(self._nodes)

        if self._given_table is not None:
            table = self._given_table
        else:
            ddb = boto3.resource("dynamodb", region_name=REGION)
            table = ddb.create_table(**schema.create_table_kwargs(TABLE_NAME))
            ddb.meta.client.update_time_to_live(**schema.time_to_live_kwargs(TABLE_NAME))
        self.store = DynamoStore(table)
        if self._own_aws:
            self._idempotency_table()
        self.sqs = boto3.client("sqs", region_name=REGION)
        # the deployed queue (visibility timeout, delivery delay, redrive policy), on this stack's clock
        self.time = event_source.Clock(self.clock)
        self._stack.enter_context(event_source.sqs_time(self.time))
        self.queues = event_source.create_queue(self.sqs, QUEUE_NAME)
        self.queue_url = self.queues.url
        events = boto3.client("events", region_name=REGION)
        with contextlib.suppress(events.exceptions.ResourceAlreadyExistsException):
            events.create_event_bus(Name=BUS_NAME)
        self.kube: LightkubeCluster = self.sim.idleshare_adapter(timeout=60)  # its own RBAC user, TLS verified
        self._stack.callback(self.kube.close)
        self.deps = wiring.Dependencies(
            store=self.store,
            queue=SqsRecomputeQueue(event_source.Deduplicating(self.sqs, self.time), self.queue_url, clock=self.time),
            publisher=CapturingPublisher(EventBridgePublisher(events, BUS_NAME), self.published),
            kube_for=lambda _cluster: self.kube,
            # a trailing message is handed back until its window closed: on this clock
            clock=self.time,
            returns=SqsRecordReturns(self.sqs),
        )
        wiring.install(self.deps)
        self._stack.callback(wiring.install, None)
        # Powertools logs go to a buffer (``self.logs``), not to the terminal. Swapped, not setStream(): that
        # flushes the stream it replaces, which may be closed (a test's captured stdout, when the logger was made)
        handler = observability.logger.registered_handler
        if isinstance(handler, logging.StreamHandler):
            old, handler.stream = handler.stream, self.logs
            self._stack.callback(setattr, handler, "stream", old)
        c = self.cluster
        self.store.put_cluster(
            ClusterRecord(
                c.cluster_id,
                c.eks_cluster_name,
                c.hyperpod_cluster_arn,
                settings=c.settings,
            )
        )
        # The node watcher, as deployed: its first pass lists the nodes and publishes nothing (a baseline)
        from devkit.watch import LocalWatcher

        # as its own RBAC user (the node watcher's ClusterRole): the recompute's may not watch nodes
        watcher_kube = self.sim.watcher_adapter(timeout=60)
        self._stack.callback(watcher_kube.close)
        self.watcher = LocalWatcher(c.cluster_id, watcher_kube, self.store, self.route)
        self.watcher.pass_(seconds=1)

    def _start_kube(self) -> Kube:
        """etcd + kube-apiserver + Kueue on 127.0.0.1 (built on first use, with progress: minutes, once per
        machine and pin), or :attr:`shared_kube` emptied."""
        if Embedded.shared_kube is not None:
            Embedded.shared_kube.reset()
            return Embedded.shared_kube
        from devkit.kube.stack import running

        stack = self._stack.enter_context(running())
        client = Kube.admin(stack)
        self._stack.callback(client.close)
        return client

    def _idempotency_table(self) -> None:
        """The deployed recompute Lambda's idempotency table (Powertools' layout), so that a replayed
        recalculation request is answered from its record here too."""
        import boto3

        ddb = boto3.client("dynamodb", region_name=REGION)
        ddb.create_table(**schema.idempotency_table_kwargs(IDEMPOTENCY_TABLE_NAME))
        previous = os.environ.get(names.ENV_IDEMPOTENCY_TABLE_NAME)
        os.environ[names.ENV_IDEMPOTENCY_TABLE_NAME] = IDEMPOTENCY_TABLE_NAME

        def restore() -> None:  # the persistence layer (its clients) went with this run's wiring.Dependencies
            if previous is None:
                os.environ.pop(names.ENV_IDEMPOTENCY_TABLE_NAME, None)
            else:
                os.environ[names.ENV_IDEMPOTENCY_TABLE_NAME] = previous

        self._stack.callback(restore)

    # -- driving the pipeline -------------------------------------------------------------------------

    def tick(self, seconds: float = 60.0) -> None:
        """Move the queue's clock on: a new SQS deduplication window (each scenario step is one)."""
        self.clock[0] += seconds

    def route(self, event: Mapping[str, Any]) -> dict[str, Any]:
        """Invoke the router handler with one event, as EventBridge would."""
        from idleshare.handlers import router

        with contextlib.redirect_stdout(io.StringIO()):  # EMF metrics
            out: dict[str, Any] = router.handler(copy.deepcopy(dict(event)), CONTEXT)
        return out

    def drain(self) -> tuple[int, list[str]]:
        """Deliver the queued recompute requests to the recompute handler, as the deployed event source mapping
        does (:class:`devkit.sqs.EventSourceMapping` on this stack's clock: the delivery delay, a failed record's
        backoff), until the queue is empty. A record that keeps failing reaches the DLQ after
        ``timings.DLQ_AFTER_SECONDS`` of clock, as deployed. Returns (records delivered, why each dead-lettered
        message failed): a change's leading and trailing message are two."""
        from idleshare import timings
        from idleshare.handlers import recompute

        def quietly(event: dict[str, Any], context: Any) -> Any:
            with contextlib.redirect_stdout(io.StringIO()):  # EMF metrics
                return recompute.handler(event, context)

        esm = event_source.EventSourceMapping(self.sqs, self.queue_url, quietly, self.time)
        invocations = esm.run(max_seconds=timings.seconds_to_dlq(event_source.DEPLOYED.max_receive_count) + 600)
        failures: list[str] = []
        while True:
            dead = self.sqs.receive_message(QueueUrl=self.queues.dlq_url, MaxNumberOfMessages=10).get("Messages", [])
            if not dead:
                break
            for message in dead:
                failures.append(self._last_error() or "the recompute failed")
                self.sqs.delete_message(QueueUrl=self.queues.dlq_url, ReceiptHandle=message["ReceiptHandle"])
        # records handled (a trailing one handed back until its window closed counts once, when it ran)
        return sum(len(i.records) - len(i.deferred) for i in invocations), failures

    def _last_error(self) -> str:
        for line in reversed(self.logs.getvalue().splitlines()):
            with contextlib.suppress(ValueError):
                entry = json.loads(line)
                if entry.get("level") in ("ERROR", "CRITICAL", "EXCEPTION") or entry.get("exception"):
                    text = str(entry.get("exception") or entry.get("message") or "").strip()
                    return text.splitlines()[-1] if text else ""
        return ""

    def deliver(self, event: Mapping[str, Any]) -> Delivery:
        """One trigger end to end: route it, change the cluster as it says, recompute."""
        out = self.route(event)
        result = Delivery(routed=list(out.get("enqueued", [])), dropped=out.get("dropped"))
        if self.cluster.cluster_id in result.routed:
            result.cluster_change = self.apply_to_cluster(event)
        result.recomputes, result.failures = self.drain()
        return result

    def watch(self) -> Delivery:
        """A pass of the node watcher (what the deployed one does continuously): each change on the real
        apiserver since its last pass that can move the pool becomes a ``Node Changed`` on the router; then the
        queue is drained. Heartbeat-only node updates produce nothing."""
        events = self.watcher.pass_()
        result = Delivery(routed=[self.cluster.cluster_id] if events else [])
        result.events = [
            f"Node Changed {e['detail'].get('node')}: {', '.join(e['detail'].get('changes') or [])}" for e in events
        ]
        result.recomputes, result.failures = self.drain()
        return result

    # -- the cluster follows node events ----------------------------------------------------------

    def find_node(self, ref: str) -> dict[str, Any] | None:
        """A node by name, by instance id (HyperPod names nodes ``hyperpod-<instance id>``) or providerID."""
        for name in (ref, f"hyperpod-{ref}"):
            node = self.sim.get("Node", name)
            if node is not None:
                return node
        for node in self.sim.objects("Node"):
            if str(node.get("spec", {}).get("providerID", "")).endswith(ref):
                return node
        return None

    def apply_to_cluster(self, event: Mapping[str, Any]) -> str | None:
        """Change the cluster as a node event says (as the kubelet, HyperPod's health agent or an admin would);
        a one-line description, or None."""
        detail_type = event.get("detail-type")
        detail = event.get("detail") or {}
        if detail_type == "SageMaker HyperPod Cluster Node Health Event":
            summary = detail.get("HealthSummary") or {}
            value = health_label(str(summary.get("HealthStatus", "")), summary.get("RepairAction"))
            return self._node_health(str(detail.get("InstanceId", "")), value)
        if detail_type == "Node Changed" and event.get("source") == "idleshare" and detail.get("node"):
            return self.change_node(str(detail["node"]), str(detail.get("change") or ""))
        return None

    def _node_health(self, ref: str, value: str) -> str:
        node = self.find_node(ref)
        if node is None:
            return f"no node {ref} in the cluster: nothing changed there"
        labels = node["metadata"].setdefault("labels", {})
        labels[HEALTH_LABEL] = value
        taints = [t for t in node.get("spec", {}).get("taints", []) if t.get("key") != HEALTH_TAINT]
        if value != HEALTHY:
            taints.append({"key": HEALTH_TAINT, "value": value, "effect": "NoSchedule"})
        _set_taints(node, taints)
        self.sim.set_node(node)
        return f"{node['metadata']['name']}: {HEALTH_LABEL}={value}"

    def change_node(self, ref: str, change: str) -> str:
        """Apply one :data:`NODE_CHANGES` change to a node of the cluster."""
        kind = canonical_change(change)
        node = self.find_node(ref)
        if node is None:
            return f"no node {ref} in the cluster: nothing changed there"
        name = node["metadata"]["name"]
        if kind is None:
            return f"{name}: change {change!r} is not one this cluster makes (one of {', '.join(NODE_CHANGES)}): nothing changed"
        spec = node.setdefault("spec", {})
        if kind == "delete":
            self.sim.delete_node(name)
            return f"{name}: removed"
        if kind == "cordon":
            spec["unschedulable"] = True
            taints = [t for t in spec.get("taints", []) if t.get("key") != UNSCHEDULABLE_TAINT]
            _set_taints(node, [*taints, {"key": UNSCHEDULABLE_TAINT, "effect": "NoSchedule"}])
        elif kind == "uncordon":
            spec.pop("unschedulable", None)
            _set_taints(node, [t for t in spec.get("taints", []) if t.get("key") != UNSCHEDULABLE_TAINT])
        elif kind in ("NotReady", "Ready"):
            status = "True" if kind == "Ready" else "False"
            conditions = [c for c in node.setdefault("status", {}).get("conditions", []) if c.get("type") != "Ready"]
            reason = "KubeletReady" if status == "True" else "KubeletNotReady"
            conditions.append({"type": "Ready", "status": status, "reason": reason})
            node["status"]["conditions"] = conditions
            # The node lifecycle controller taints a node that is not ready and lifts the taints when it is.
            taints = [t for t in spec.get("taints", []) if t.get("key") not in LIFECYCLE_TAINTS]
            if kind == "NotReady":
                taints += [{"key": NOT_READY_TAINT, "effect": e} for e in ("NoSchedule", "NoExecute")]
            _set_taints(node, taints)
        elif kind in ("Unhealthy", "Healthy"):
            return self._node_health(name, HEALTHY if kind == "Healthy" else "Unschedulable")
        elif kind == "Deleting":  # the server sets deletionTimestamp only on a delete (a finalizer holds it)
            self.sim.mark_deleting(name)
            return f"{name}: {NODE_CHANGES[kind]}"
        self.sim.set_node(node)
        return f"{name}: {NODE_CHANGES[kind]}"

    # -- what the cluster holds -----------------------------------------------------------------------------

    def kueue_objects(self) -> dict[tuple[str, str, str], dict[str, Any]]:
        """Every Kueue object (and namespace) idleshare manages, by (kind, namespace, name)."""
        out: dict[tuple[str, str, str], dict[str, Any]] = {}
        for kind in (*KUEUE_KINDS, "Namespace"):
            for obj in self.sim.objects(kind):
                meta = obj.get("metadata", {})
                if (meta.get("labels") or {}).get(MANAGED_BY_LABEL) != "idleshare":
                    continue
                out[(kind, meta.get("namespace", ""), meta["name"])] = obj
        return out


@contextlib.contextmanager
def one_stack() -> Iterator[Kube]:
    """Every :class:`Embedded` inside shares one stack (started here unless :attr:`Embedded.shared_kube`
    already is one): several scenarios in a row start the cluster once."""
    if Embedded.shared_kube is not None:
        yield Embedded.shared_kube
        return
    from devkit.kube.stack import running

    with running() as stack:
        client = Kube.admin(stack)
        Embedded.shared_kube = client
        try:
            yield client
        finally:
            Embedded.shared_kube = None
            client.close()


def _set_taints(node: dict[str, Any], taints: list[dict[str, Any]]) -> None:
    spec = node.setdefault("spec", {})
    if taints:
        spec["taints"] = taints
    else:
        spec.pop("taints", None)


@contextlib.contextmanager
def _environment() -> Iterator[None]:
    """No X-Ray, no account-id DynamoDB endpoints, fake credentials if none: nothing leaves the machine."""
    wanted = {
        "POWERTOOLS_TRACE_DISABLED": "1",
        "POWERTOOLS_SERVICE_NAME": "idleshare",
        "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled",
        "AWS_DEFAULT_REGION": REGION,
    }
    saved = {k: os.environ.get(k) for k in wanted}
    os.environ.update(wanted)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
