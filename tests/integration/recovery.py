"""How long a cluster takes to recover from a fault, measured on the deployed pipeline's semantics.

The harness (``test_pipeline.Harness``) runs the real router and recompute handlers, DynamoDB Local, moto's SQS and
EventBridge, and the real kube-apiserver + Kueue behind the recording fault proxy; the recompute queue is the one the
stack deploys (visibility timeout, delivery delay, redrive policy from :mod:`idleshare.timings`) and is polled as the
event source mapping does, on the harness's clock (``devkit.sqs.EventSourceMapping``: waits are clock seconds, and
each invocation's real work is added to the clock).

:func:`measure` converges the cluster — on the Pool basis (``test_pipeline.harness``), where a node change moves a
team's limit — removes a node (team ``a``'s GPU ``borrowingLimit`` must go from 12 to 8),
routes the node's event, starts a fault, lets the queue deliver while the fault lasts :data:`FAULT_SECONDS`, ends it,
and reads the clock when the ClusterQueue holds the right limit (and the fault's own ``done``: the event published,
for an EventBridge fault). Recovery = that time - the fault's end. The bound is the coalescing window + 30 s.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from devkit.sqs import FunctionTimeout
from idleshare import timings
from idleshare.adapters.kube import LightkubeCluster
from tests.integration.invariants import GenerationLog, assert_converged, settle

FAULT_SECONDS = 61.0
"""How long each fault lasts, in clock seconds: several retries in backoff, and it ends 1 s after one of them (the
retries fall at 10, 12, 16, 24, 40, 60 s), so the next is a whole backoff cap away: the worst case."""
BOUND_SECONDS = timings.COALESCE_SECONDS + 30
"""Fault end -> the right borrowingLimit in the ClusterQueue, at most."""
CLIENT_TIMEOUT = 2.0
NODES = "^/api/v1/nodes$"
CQ_A = "^/apis/kueue.x-k8s.io/v1beta2/clusterqueues/hyperpod-ns-a-clusterqueue$"
GONE = "p5-3"
WANTED = "8"  # team a's GPU borrowingLimit once GONE is gone, Pool basis: (8 unallocated + 8 lent by b) x 50 %


@dataclass
class Fault:
    """A fault class: ``start(h)`` and ``end(h)`` (``end`` may be called by the fault itself, e.g. a timeout, when
    it ends; then ``ends_itself``), and what else must hold once recovered (``done``)."""

    name: str
    start: Callable[[Any], None]
    end: Callable[[Any], None]
    ends_itself: bool = False
    done: Callable[[Any], bool] = lambda h: True
    state: dict[str, Any] = field(default_factory=dict)


@dataclass
class Recovery:
    fault: str
    seconds: float
    attempts: int
    attempts_during_fault: int
    dead_lettered: int
    published: int


class _Throttle:
    """DynamoDB answering ProvisionedThroughputExceededException to every call while on (a botocore hook)."""

    def __init__(self) -> None:
        self.on = False

    def __call__(self, model: Any, **_: Any) -> Any:
        if not self.on:
            return None
        error = {"Code": "ProvisionedThroughputExceededException", "Message": "Rate of requests exceeds capacity"}
        return SimpleNamespace(status_code=400, headers={}), {
            "Error": error,
            "ResponseMetadata": {"HTTPStatusCode": 400},
        }


class _EventsDown:
    """PutEvents answering every entry with InternalFailure while on (EventBridge's partial failure)."""

    def __init__(self) -> None:
        self.on = False

    def __call__(self, model: Any, params: Any = None, **_: Any) -> Any:
        if not self.on or model.name != "PutEvents":
            return None
        entries = (params or {}).get("Entries") or [{}]
        failed = [{"ErrorCode": "InternalFailure", "ErrorMessage": "injected"} for _ in entries]
        return SimpleNamespace(status_code=200, headers={}), {
            "FailedEntryCount": len(failed),
            "Entries": failed,
            "ResponseMetadata": {"HTTPStatusCode": 200},
        }


class _Hang(LightkubeCluster):
    """The API server hangs the node list past the function's timeout once (the clock moves on by it): Lambda ends
    the invocation, and the batch it held is lost until the queue's visibility timeout."""

    def __init__(self, h: Any, fault: Fault) -> None:
        sim = h.sim
        super().__init__(sim.url, token=lambda: sim.stack.idleshare_token, timeout=CLIENT_TIMEOUT, name="demo")
        self.h, self.fault = h, fault

    def list_nodes(self, page_size: int = 500) -> Any:
        if self.fault.state.get("on"):
            self.fault.state["on"] = False
            self.h.time.advance(timings.RECOMPUTE_TIMEOUT_SECONDS + 1)
            self.fault.state["ended_at"] = self.h.clock[0]  # the timeout is the fault's end
            raise FunctionTimeout("Task timed out")
        return super().list_nodes(page_size=page_size)


def _hook(h: Any, client: Any, name: str, hook: Any) -> None:
    client.meta.events.register(f"before-call.{name}.*", hook, unique_id=f"recovery-{id(hook)}")
    h.cleanups.append(lambda: client.meta.events.unregister(f"before-call.{name}.*", unique_id=f"recovery-{id(hook)}"))


def _published_generation(h: Any, generation: int) -> int:
    return sum(1 for e in h.published if e["detail"].get("generation") == generation)


def faults() -> list[Fault]:
    """Every fault class the issue names, each as a start and an end."""
    throttle, events_down = _Throttle(), _EventsDown()

    def start_throttle(h: Any) -> None:
        _hook(h, h.store.client, "dynamodb", throttle)
        throttle.on = True

    def start_events_down(h: Any) -> None:
        _hook(h, h.events, "events", events_down)
        events_down.on = True

    def end_throttle(h: Any) -> None:
        throttle.on = False

    def end_events_down(h: Any) -> None:
        events_down.on = False

    hang = Fault("Lambda timeout mid-batch", lambda h: None, lambda h: None, ends_itself=True)

    def start_hang(h: Any) -> None:
        hang.state["on"] = True
        h.kube = _Hang(h, hang)

    hang.start = start_hang
    return [
        Fault("Kubernetes 5xx", lambda h: h.sim.inject("GET", NODES, 503, times=None), lambda h: h.sim.clear_faults()),
        Fault(
            "Kubernetes timeout",
            lambda h: h.sim.inject_timeout("GET", NODES, seconds=CLIENT_TIMEOUT + 3, times=None),
            lambda h: h.sim.clear_faults(),
        ),
        Fault("Kubernetes outage", lambda h: h.sim.outage("refuse"), lambda h: h.sim.restore()),
        Fault("Kubernetes 401", lambda h: h.sim.inject("GET", NODES, 401, times=None), lambda h: h.sim.clear_faults()),
        Fault(
            "Kubernetes 5xx applying",
            lambda h: h.sim.inject("PATCH", CQ_A, 500, times=None),
            lambda h: h.sim.clear_faults(),
        ),
        Fault("DynamoDB throttling", start_throttle, end_throttle),
        Fault(
            "EventBridge failure",
            start_events_down,
            end_events_down,
            done=lambda h: _published_generation(h, 2) == 1,
        ),
        hang,
    ]


def measure(h: Any, fault: Fault) -> Recovery:
    """Converge, fault, change, deliver through the fault, end it, and time the recovery (clock seconds)."""
    _, log = settle(h)
    h.kube = h.sim.adapter(timeout=CLIENT_TIMEOUT)
    h.sim.delete_node(GONE)
    h.send(json.loads((h.events_dir / "hyperpod-node-health-event.json").read_text()))  # routed: on the queue
    fault.start(h)
    started = h.clock[0]
    ends = {"at": None}
    during = {"n": 0}

    def tick(now: float) -> None:
        if fault.ends_itself:
            if ends["at"] is None and fault.state.get("ended_at") is not None:
                ends["at"] = fault.state["ended_at"]
            return
        if ends["at"] is None and now - started >= FAULT_SECONDS:
            fault.end(h)
            ends["at"] = now
        if ends["at"] is None:
            during["n"] = len(h.esm.invocations) - first

    def recovered() -> bool:
        if fault.ends_itself and ends["at"] is None and fault.state.get("ended_at") is not None:
            ends["at"] = fault.state["ended_at"]
        return ends["at"] is not None and h.cq_gpu("a") == WANTED and fault.done(h)

    first = len(h.esm.invocations)
    invocations = h.esm.run(until=recovered, max_seconds=FAULT_SECONDS + 10 * BOUND_SECONDS, on_tick=tick)
    if ends["at"] is None:  # it never ended by itself within the bound: end it, so later tests start clean
        fault.end(h)
    assert ends["at"] is not None, f"{fault.name}: the fault never ended"
    assert recovered(), f"{fault.name}: not recovered within {10 * BOUND_SECONDS} s of clock after the fault"
    seconds = h.clock[0] - float(ends["at"])
    dead = int(
        h.sqs.get_queue_attributes(QueueUrl=h.queues.dlq_url, AttributeNames=["ApproximateNumberOfMessages"])[
            "Attributes"
        ]["ApproximateNumberOfMessages"]
    )
    log.observe()
    assert_converged(h.sim, h.store, "demo")
    assert isinstance(log, GenerationLog)
    return Recovery(
        fault=fault.name,
        seconds=round(seconds, 1),
        attempts=len(invocations),
        attempts_during_fault=during["n"],
        dead_lettered=dead,
        published=_published_generation(h, 2),
    )
