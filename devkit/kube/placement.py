"""The stack places pods: kube-scheduler and kube-controller-manager from the pinned Kubernetes module, and a
kubelet stand-in that does the two things of a kubelet's the tests need and nothing else.

No kubelet runs here, so no container ever starts: a pod the scheduler binds stays ``Pending`` with
``PodScheduled=True`` and ``spec.nodeName`` set — enough to prove placement. What the kubelet would do that the
cluster's controllers wait for:

* **the end of a pod's deletion**: a bound pod deleted gracefully (the job controller stopping a Job Kueue
  suspended, a namespace going) is only removed once its kubelet says the containers stopped; until then it
  holds its node's resources for the scheduler. :class:`KubeletStandIn` completes it at once (``gracePeriodSeconds:
  0``, as the kubelet does when its containers are gone);
* **a pod's end**: :func:`complete_pods` sets a Job's pods ``Succeeded`` (exit 0), as the kubelet reports them;
  the job controller then completes the Job and Kueue finishes its Workload.

The controllers run (:data:`CONTROLLERS`) are those Kueue's Jobs and the tests' DaemonSets need; the
node-lifecycle controller is deliberately not among them (see there).
"""

from __future__ import annotations

import contextlib
import http.client
import json
import ssl
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

CONTROLLERS = (
    "job-controller",  # a Job Kueue unsuspends gets its pods; Complete once they succeed
    "daemonset-controller",  # a DaemonSet's pod for every node it selects (the scheduler binds it there)
    "replicaset-controller",
    "garbage-collector-controller",  # a deleted Job's pods and Workload, a DaemonSet's pods: gone with their owner
    "namespace-controller",  # a deleted namespace's objects deleted, then the namespace finalized
    "serviceaccount-token-controller",
)
"""kube-controller-manager's ``--controllers``. NOT the node-lifecycle controller: the tests' Nodes have no
kubelet, so no heartbeat (Lease, Ready condition renewed); it would mark every one unreachable, taint it
``node.kubernetes.io/unreachable:NoSchedule`` and ``NoExecute``, and the scheduler would place nothing (nor the
taint-eviction controller, which would then evict). Neither the pod garbage collector (it force-deletes the pods of
a Node a test deletes, 40 s later: timing the tests do not want), nor the ttl controller (it annotates every Node:
changes the node watcher would see)."""

SCHEDULER_USER = "system:kube-scheduler"
"""The user the bootstrap ClusterRoleBindings ``system:kube-scheduler`` and ``system:volume-scheduler`` grant what
kube-scheduler needs: it runs with no more."""
CONTROLLER_MANAGER_USER = ("system:kube-controller-manager", ("system:masters",))
"""With ``--use-service-account-credentials=false`` every controller talks as kube-controller-manager itself, which
the bootstrap role ``system:kube-controller-manager`` alone does not cover (it is written for per-controller service
accounts): as Kueue here, it is in ``system:masters``."""


def scheduler_config(kubeconfig: Path) -> dict[str, Any]:
    """kube-scheduler's configuration: leader election off (one replica), and a pod it could not place retried
    after a second (the default backoff grows to 10 s: a test would wait for it)."""
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "leaderElection": {"leaderElect": False},
        "podInitialBackoffSeconds": 1,
        "podMaxBackoffSeconds": 1,
    }


def scheduler_argv(binary: Path, config: Path, port: int, pki: Mapping[str, Path]) -> list[str]:
    return [
        str(binary),
        f"--config={config}",
        "--bind-address=127.0.0.1",
        f"--secure-port={port}",
        f"--tls-cert-file={pki['tls.crt']}",
        f"--tls-private-key-file={pki['tls.key']}",
        "--v=1",
    ]


def controller_manager_argv(binary: Path, kubeconfig: Path, port: int, pki: Mapping[str, Path]) -> list[str]:
    return [
        str(binary),
        f"--kubeconfig={kubeconfig}",
        f"--controllers={','.join(CONTROLLERS)}",
        "--leader-elect=false",
        "--use-service-account-credentials=false",
        f"--service-account-private-key-file={pki['sa.key']}",  # the key pair the apiserver verifies tokens with
        f"--root-ca-file={pki['ca.crt']}",
        "--bind-address=127.0.0.1",
        f"--secure-port={port}",
        f"--tls-cert-file={pki['tls.crt']}",
        f"--tls-private-key-file={pki['tls.key']}",
        "--v=1",
    ]


def write_scheduler_config(path: Path, kubeconfig: Path) -> Path:
    path.write_text(yaml.safe_dump(scheduler_config(kubeconfig)))
    return path


def healthy(port: int, ca_file: Path) -> bool:
    """``/healthz`` of a component's secure port answers ok (an always-allowed path: no credentials)."""
    conn = http.client.HTTPSConnection(
        "127.0.0.1", port, timeout=2, context=ssl.create_default_context(cafile=str(ca_file))
    )
    try:
        conn.request("GET", "/healthz")
        resp = conn.getresponse()
        return resp.status == 200 and resp.read().strip() == b"ok"
    finally:
        conn.close()


# -- the kubelet stand-in ------------------------------------------------------------------------------------


class KubeletStandIn:
    """Completes the deletion of bound pods: for every pod with ``spec.nodeName`` and a ``deletionTimestamp``, a
    ``DELETE`` with ``gracePeriodSeconds: 0`` (its uid as precondition), as a kubelet does once the containers
    stopped. Pods still carrying a finalizer (the job controller's ``batch.kubernetes.io/job-tracking``) go when
    their controller lets go of it. One thread, one watch of every pod (relisted when the watch ends)."""

    def __init__(self, server: str, ca_file: Path, token: str) -> None:
        url = urllib.parse.urlsplit(server)
        self._host, self._port = url.hostname or "127.0.0.1", url.port or 443
        self._context = ssl.create_default_context(cafile=str(ca_file))
        self._headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kubelet-stand-in", daemon=True)
        self._conn: http.client.HTTPSConnection | None = None
        self.completed = 0
        """Pod deletions completed (for a test's eyes)."""

    def start(self) -> KubeletStandIn:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        conn = self._conn
        if conn is not None and conn.sock is not None:
            with contextlib.suppress(OSError):
                conn.sock.shutdown(2)  # the watch's read returns at once
        self._thread.join(timeout=5)

    def _connection(self, timeout: float) -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection(self._host, self._port, timeout=timeout, context=self._context)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                version = self._relist()
                self._watch(version)
            except Exception:  # the apiserver going away, a watch expiring (410): list again
                if not self._stop.wait(0.5):
                    continue

    def _relist(self) -> str:
        conn = self._connection(30)
        try:
            conn.request("GET", "/api/v1/pods?fieldSelector=spec.nodeName%21%3D", headers=self._headers)
            resp = conn.getresponse()
            body = json.loads(resp.read())
            if resp.status != 200:
                raise RuntimeError(f"listing pods: HTTP {resp.status}")
        finally:
            conn.close()
        for pod in body.get("items") or []:
            self._consider(pod)
        return str(body["metadata"]["resourceVersion"])

    def _watch(self, version: str) -> None:
        conn = self._connection(330)
        self._conn = conn
        try:
            query = urllib.parse.urlencode(
                {"watch": "1", "resourceVersion": version, "fieldSelector": "spec.nodeName!=", "timeoutSeconds": "300"}
            )
            conn.request("GET", f"/api/v1/pods?{query}", headers=self._headers)
            resp = conn.getresponse()
            if resp.status != 200:
                raise RuntimeError(f"watching pods: HTTP {resp.status}")
            while not self._stop.is_set():
                line = resp.readline()
                if not line:
                    return
                event = json.loads(line)
                if event.get("type") == "ERROR":
                    raise RuntimeError(f"watch: {event.get('object')}")
                if event.get("type") in ("ADDED", "MODIFIED"):
                    self._consider(event["object"])
        finally:
            self._conn = None
            conn.close()

    def _consider(self, pod: Mapping[str, Any]) -> None:
        meta = pod["metadata"]
        if not meta.get("deletionTimestamp") or not (pod.get("spec") or {}).get("nodeName"):
            return
        if meta.get("deletionGracePeriodSeconds") == 0:
            return  # already completed: only finalizers hold it
        body = json.dumps(
            {
                "apiVersion": "v1",
                "kind": "DeleteOptions",
                "gracePeriodSeconds": 0,
                "preconditions": {"uid": meta["uid"]},
            }
        )
        conn = self._connection(30)
        try:
            path = f"/api/v1/namespaces/{meta['namespace']}/pods/{urllib.parse.quote(meta['name'])}"
            conn.request("DELETE", path, body=body, headers={**self._headers, "Content-Type": "application/json"})
            resp = conn.getresponse()
            resp.read()
            if resp.status in (200, 202):
                self.completed += 1
            # 404: gone meanwhile; 409: another pod of that name now: either way nothing to complete
        finally:
            conn.close()


# -- what a kubelet reports when a pod's containers end ---------------------------------------------------------


def pod_succeeded(pod: Mapping[str, Any], now: str | None = None) -> dict[str, Any]:
    """The status a kubelet writes when every container of ``pod`` exited 0: phase ``Succeeded``, each container
    terminated ``Completed``, the pod no longer ready."""
    now = now or time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    containers = (pod.get("spec") or {}).get("containers") or []
    terminated = {"exitCode": 0, "reason": "Completed", "startedAt": now, "finishedAt": now}
    return {
        "phase": "Succeeded",
        "conditions": [
            *[
                c
                for c in (pod.get("status") or {}).get("conditions") or []
                if c.get("type") not in ("Ready", "ContainersReady")
            ],
            {"type": "Ready", "status": "False", "reason": "PodCompleted", "lastTransitionTime": now},
            {"type": "ContainersReady", "status": "False", "reason": "PodCompleted", "lastTransitionTime": now},
        ],
        "containerStatuses": [
            {
                "name": c["name"],
                "image": c.get("image", ""),
                "imageID": "",
                "ready": False,
                "restartCount": 0,
                "started": False,
                "state": {"terminated": terminated},
            }
            for c in containers
        ],
    }


def complete_pods(
    pods: Iterable[Mapping[str, Any]], set_status: Callable[[Mapping[str, Any], dict[str, Any]], Any]
) -> int:
    """Every pod of ``pods`` not yet ended ends ``Succeeded`` (``set_status(pod, status)`` writes it); how many."""
    done = 0
    for pod in pods:
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed") or pod["metadata"].get(
            "deletionTimestamp"
        ):
            continue
        set_status(pod, pod_succeeded(pod))
        done += 1
    return done
