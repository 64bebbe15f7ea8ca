"""A small admin client for the real apiserver: what the tests and the demo do *to* the cluster.

idleshare itself talks through :class:`idleshare.adapters.kube.LightkubeCluster` as its own restricted user;
this client is the cluster's other actors — the kubelet reporting node status, an admin cordoning a node,
a team submitting Kueue ``Workload`` s — and the tests' eyes. It keeps the simulator's test-hook names
(``objects``, ``get``, ``put``, ``seed_nodes``, ``set_node``, ``delete_node``, ``set_status``) so a test
reads the same against either.
"""

from __future__ import annotations

import copy
import json
import ssl
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import yaml

from devkit.kube.kueue_versions import GROUP as KUEUE_GROUP
from devkit.kube.kueue_versions import KueueVersion
from idleshare.adapters.kube import KINDS
from idleshare.domain.kueue import KUEUE_API

T = TypeVar("T")

KUEUE = KUEUE_API
# kind -> (apiVersion, plural, namespaced): the kinds idleshare writes (the adapter's own table), and what the
# cluster's other actors touch
RESOURCES: dict[str, tuple[str, str, bool]] = {
    "Node": ("v1", "nodes", False),
    "Event": ("v1", "events", True),
    "Job": ("batch/v1", "jobs", True),
    "Pod": ("v1", "pods", True),
    "DaemonSet": ("apps/v1", "daemonsets", True),
    "Workload": (KUEUE, "workloads", True),
    "ConfigMap": ("v1", "configmaps", True),
    **KINDS,
}
_PLURAL = {plural: kind for kind, (_, plural, _) in RESOURCES.items()}
SYSTEM_NAMESPACES = frozenset({"default", "kube-system", "kube-public", "kube-node-lease", "kueue-system"})


class KubeRequestError(RuntimeError):
    def __init__(self, method: str, path: str, status: int, body: Any) -> None:
        message = body.get("message") if isinstance(body, dict) else str(body)[:300]
        super().__init__(f"{method} {path}: HTTP {status}: {message}")
        self.status = status
        self.body = body


class Kube:
    """The apiserver at ``server`` as ``token`` (the stack's admin unless told otherwise)."""

    def __init__(self, server: str, ca_file: str | Path | None, token: str, *, timeout: float = 30.0) -> None:
        import httpx2

        self.url = server
        self._http = httpx2.Client(
            base_url=server,
            verify=ssl.create_default_context(cafile=str(ca_file)) if ca_file else False,
            headers={"Authorization": f"Bearer {token}"},
            timeout=timeout,
            trust_env=False,
            limits=httpx2.Limits(max_connections=16, max_keepalive_connections=16),
        )

        self.stack: Any = None
        self.resources = dict(RESOURCES)
        """kind -> (apiVersion, plural, namespaced) as this client reads and writes them: :data:`RESOURCES`, the
        Kueue kinds in the version the stack's Kueue serves (:meth:`speak`)."""

    @classmethod
    def admin(cls, stack: Any, *, timeout: float = 30.0) -> Kube:
        """The stack's admin; ``.stack`` is kept, so idleshare's own adapter can be made for the same server.
        It reads and writes Kueue's kinds in the newest version that stack's Kueue serves. ``timeout``: each
        request's (the scale bench's deletions of a thousand Kueue objects on a loaded server take minutes)."""
        client = cls(stack.server, stack.ca_file, stack.admin_token, timeout=timeout)
        client.stack = stack
        client.speak(stack.kueue_facts)
        return client

    def speak(self, kueue: KueueVersion) -> None:
        """Read and write ``kueue.x-k8s.io`` kinds in the versions ``kueue`` serves (v1beta1 on Kueue 0.14...)."""
        for kind, (api_version, plural, namespaced) in RESOURCES.items():
            if api_version.startswith(f"{KUEUE_GROUP}/"):
                self.resources[kind] = (kueue.api_version_of(kind), plural, namespaced)

    def idleshare_adapter(self, *, timeout: float = 30.0) -> Any:
        """idleshare's :class:`LightkubeCluster` on the same server, as its own restricted user."""
        from idleshare.adapters.kube import LightkubeCluster

        stack = self.stack
        return LightkubeCluster(
            stack.server, stack.ca_pem, lambda: stack.idleshare_token, timeout=timeout, name="local"
        )

    def watcher_adapter(self, *, timeout: float = 30.0, name: str = "idleshare-local-node-watcher") -> Any:
        """A :class:`LightkubeCluster` as the node watcher runs: a ServiceAccount (``kube-system``) bound to the
        watcher's ClusterRole of ``infra/k8s/rbac.yaml`` and nothing else (list/watch nodes, read Kueue's
        ClusterQueues and Workloads)."""
        from idleshare import names
        from idleshare.adapters.kube import LightkubeCluster

        ns = "kube-system"
        self.request("POST", f"/api/v1/namespaces/{ns}/serviceaccounts",
                     {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}}, ok=(201, 409))  # fmt: skip
        binding = {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": name},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": names.K8S_WATCHER_CLUSTER_ROLE,
            },
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": ns}],
        }
        self.request("POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", binding, ok=(201, 409))
        token = self.request(
            "POST",
            f"/api/v1/namespaces/{ns}/serviceaccounts/{name}/token",
            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 3600}},
            ok=(200, 201),
        )["status"]["token"]
        stack = self.stack
        return LightkubeCluster(stack.server, stack.ca_pem, lambda: token, timeout=timeout, name="watcher")

    def close(self) -> None:
        self._http.close()

    # -- raw -------------------------------------------------------------------------------------------

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        params: Mapping[str, str] | None = None,
        content_type: str = "application/json",
        ok: Iterable[int] = (200, 201),
    ) -> Any:
        headers = {"Content-Type": content_type} if body is not None else {}
        content = json.dumps(body) if body is not None else None
        r = self._http.request(method, path, content=content, params=params, headers=headers)
        try:
            data = r.json() if r.content else None
        except ValueError:
            data = r.text
        if r.status_code not in tuple(ok):
            raise KubeRequestError(method, path, r.status_code, data)
        return data

    def path(
        self, kind: str, name: str | None = None, namespace: str | None = None, subresource: str | None = None
    ) -> str:
        kind = _PLURAL.get(kind, kind)
        api_version, plural, namespaced = self.resources[kind]
        base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
        if namespaced and namespace:
            base += f"/namespaces/{namespace}"
        parts = [base, plural] + ([name] if name else []) + ([subresource] if subresource else [])
        return "/".join(parts)

    # -- the simulator's test hooks, on the real server --------------------------------------------------

    def objects(self, kind: str, namespace: str | None = None, *, labels: str | None = None) -> list[dict[str, Any]]:
        """Every object of a kind (all namespaces unless one is named), sorted by (namespace, name)."""
        kind = _PLURAL.get(kind, kind)
        api_version = self.resources[kind][0]
        items: list[dict[str, Any]] = []
        params: dict[str, str] = {"limit": "500"}
        if labels:
            params["labelSelector"] = labels
        while True:
            page = self.request("GET", self.path(kind, namespace=namespace), params=params)
            for item in page.get("items", []):
                item.setdefault("apiVersion", api_version)
                item.setdefault("kind", kind)
                items.append(item)
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                break
            params["continue"] = token
        return sorted(items, key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"]))

    def get(self, kind: str, name: str, namespace: str = "") -> dict[str, Any] | None:
        try:
            return self.request("GET", self.path(kind, name, namespace or None))  # type: ignore[no-any-return]
        except KubeRequestError as exc:
            if exc.status == 404:
                return None
            raise

    def create(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        meta = obj["metadata"]
        return self.request("POST", self.path(obj["kind"], namespace=meta.get("namespace")), obj)  # type: ignore[no-any-return]

    def apply(
        self, obj: Mapping[str, Any], manager: str, *, force: bool = False, subresource: str | None = None
    ) -> Any:
        meta = obj["metadata"]
        params = {"fieldManager": manager, "fieldValidation": "Strict"}
        if force:
            params["force"] = "true"
        return self.request(
            "PATCH",
            self.path(obj["kind"], meta["name"], meta.get("namespace"), subresource),
            obj,
            params=params,
            content_type="application/apply-patch+yaml",
        )

    def merge_patch(
        self, kind: str, name: str, patch: Any, namespace: str = "", *, subresource: str | None = None
    ) -> Any:
        return self.request(
            "PATCH",
            self.path(kind, name, namespace or None, subresource),
            patch,
            content_type="application/merge-patch+json",
        )

    def put(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Create or replace ``obj`` (spec and metadata; status through :meth:`set_status`)."""
        meta = obj["metadata"]
        ns = meta.get("namespace", "")
        current = self.get(obj["kind"], meta["name"], ns)
        if current is None:
            return self.create(obj)
        new = copy.deepcopy(obj)
        new["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        return self.request("PUT", self.path(obj["kind"], meta["name"], ns or None), new)  # type: ignore[no-any-return]

    def set_status(self, kind: str, name: str, status: dict[str, Any], namespace: str = "") -> dict[str, Any]:
        return self.merge_patch(kind, name, {"status": status}, namespace, subresource="status")  # type: ignore[no-any-return]

    def delete(self, kind: str, name: str, namespace: str = "", *, missing_ok: bool = True) -> None:
        try:
            self.request("DELETE", self.path(kind, name, namespace or None), ok=(200, 202))
        except KubeRequestError as exc:
            if not (missing_ok and exc.status == 404):
                raise

    def set_node(self, node: dict[str, Any]) -> dict[str, Any]:
        """Create or replace a Node, status included (as its kubelet would report it)."""
        node = copy.deepcopy(node)
        node.setdefault("apiVersion", "v1")
        node.setdefault("kind", "Node")
        status = node.get("status")
        current = self.get("Node", node["metadata"]["name"])
        if current is None:
            return self.create(node)  # a Node's status may be set on create
        stored = self.put(node)
        if status is not None:
            stored = self.request(
                "PUT", self.path("Node", node["metadata"]["name"], subresource="status"), {**stored, "status": status}
            )
        return stored

    def mark_deleting(self, name: str, finalizer: str = "idleshare.test/hold") -> dict[str, Any]:
        """A node being deleted: a finalizer holds it, the delete sets ``deletionTimestamp`` (as when a node
        drains before it goes). :meth:`delete_node` removes it for good."""
        self.merge_patch("Node", name, {"metadata": {"finalizers": [finalizer]}})
        self.delete("Node", name)
        node = self.get("Node", name)
        assert node is not None and node["metadata"].get("deletionTimestamp"), node
        return node

    def delete_node(self, name: str) -> None:
        node = self.get("Node", name)
        if node is None:
            raise KeyError(name)
        if node["metadata"].get("finalizers"):
            self.merge_patch("Node", name, {"metadata": {"finalizers": None}})
        self.delete("Node", name)

    def seed_nodes(self, nodes: list[dict[str, Any]] | dict[str, Any] | str | Path, *, workers: int = 8) -> None:
        """Replace every node: a list of Node dicts, a NodeList dict, or a path to NodeList JSON/YAML."""
        if isinstance(nodes, str | Path):
            nodes = yaml.safe_load(Path(nodes).read_text())
        items = nodes.get("items", []) if isinstance(nodes, dict) else nodes
        self.delete_all("Node")
        fresh = []
        for node in items:
            node = copy.deepcopy(node)
            node.setdefault("apiVersion", "v1")
            node.setdefault("kind", "Node")
            for key in ("resourceVersion", "uid", "creationTimestamp", "managedFields"):
                node["metadata"].pop(key, None)
            fresh.append(node)
        self.map(self.create, fresh, workers=workers)

    def map(self, fn: Callable[[Any], T], items: Iterable[Any], *, workers: int = 8) -> list[T]:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            return list(pool.map(fn, items))

    def delete_all(self, kind: str, namespace: str | None = None, *, grace: int | None = None) -> None:
        """deletecollection (every namespace when ``namespace`` is None and the kind is namespaced), in the
        background: a Job's default is to orphan its dependents (its pods would stay), the garbage collector
        deletes them with it in the background. ``grace``: the pods' grace period (0: at once)."""
        kind = _PLURAL.get(kind, kind)
        if self.resources[kind][2] and namespace is None:
            for ns in {o["metadata"]["namespace"] for o in self.objects(kind)}:
                self.delete_all(kind, ns, grace=grace)
            return
        body: dict[str, Any] = {"propagationPolicy": "Background"}
        if grace is not None:
            body["gracePeriodSeconds"] = grace
        self.request("DELETE", self.path(kind, namespace=namespace), body, ok=(200, 202))

    TEAM_KINDS = ("Job", "DaemonSet", "Workload", "LocalQueue", "Pod", "Event")
    """What the tests create in a namespace, owners first: the garbage collector deletes a Job's pods and Workload,
    a DaemonSet's pods with it; pods no owner holds are deleted at once (grace 0: no kubelet would end them)."""

    def _delete_team_objects(self, namespace: str | None = None) -> None:
        for kind in self.TEAM_KINDS:
            self.delete_all(kind, namespace, grace=0 if kind == "Pod" else None)

    def drop_namespace(self, name: str) -> None:
        """Delete a namespace and finalize it at once: the namespace controller would, after seconds of
        discovery and retries a reset does not wait for; the objects the tests create in it are deleted first
        (:data:`TEAM_KINDS`), or they would outlive it in etcd."""
        self._delete_team_objects(name)
        self._wait_gone(("Job", "Workload", "Pod"), name)  # while the namespace is there: a finalizer cannot go after
        self.delete("Namespace", name)
        ns = self.get("Namespace", name)
        if ns is not None:
            ns.setdefault("spec", {})["finalizers"] = []
            self.request("PUT", f"/api/v1/namespaces/{name}/finalize", ns)

    def reset(self) -> None:
        """An empty cluster again: no nodes, no Jobs, DaemonSets or pods, no Kueue objects, no namespaces but the
        system ones. Owners go first (Kueue would make a Job's Workload again, a DaemonSet its pods), the garbage
        collector takes their dependents; an admitted Workload holds its ClusterQueue's finalizer. idleshare's
        admission policy first: the next test's Jobs are its own."""
        for kind in ("ValidatingAdmissionPolicyBinding", "ValidatingAdmissionPolicy"):
            self.delete_all(kind)
        self._delete_team_objects()
        self._wait_gone(("Job", "DaemonSet", "Workload", "Pod"))
        for node in self.objects("Node"):
            if node["metadata"].get("finalizers"):
                self.merge_patch("Node", node["metadata"]["name"], {"metadata": {"finalizers": None}})
        for kind in ("ClusterQueue", "Cohort", "ResourceFlavor", "WorkloadPriorityClass", "Node"):
            self.delete_all(kind)
        for ns in self.objects("Namespace"):
            name = ns["metadata"]["name"]
            if name not in SYSTEM_NAMESPACES:
                self.drop_namespace(name)
        # ClusterQueues and ResourceFlavors carry Kueue's finalizers: gone when Kueue has let them go. A flavor
        # still being deleted would be the next test's flavor of the same name, with the old one's frozen fields
        # (a topologyName makes its tolerations immutable: a later apply of the same name is refused).
        self._wait_gone(("ClusterQueue", "Cohort", "ResourceFlavor", "WorkloadPriorityClass", "Node"))

    STUCK_SECONDS = 5.0
    """How long a Job, Workload or pod may stay "being deleted" before :meth:`_wait_gone` drops its finalizers: the
    garbage collector, the job controller and Kueue let go of theirs in well under a second; a stack run without
    them (``place_pods=False``) or a controller that missed an event would otherwise hold the reset."""

    def _wait_gone(self, kinds: tuple[str, ...], namespace: str | None = None) -> None:
        """Until no object of ``kinds`` is left. A Job or Workload left behind would refuse the next one of its name
        (HTTP 409) and hold its ClusterQueue: each is deleted again (Kueue may have made a Workload for a Job since)
        and, once being deleted for :data:`STUCK_SECONDS`, let go of its finalizers. The error names what is left."""
        left: list[str] = []
        started = time.monotonic()

        def gone() -> bool:
            left[:] = []
            stuck = time.monotonic() - started > self.STUCK_SECONDS
            for kind in kinds:
                for obj in self.objects(kind, namespace):
                    meta = obj["metadata"]
                    left.append(f"{kind} {meta.get('namespace', '')}/{meta['name']} {meta.get('finalizers', [])}")
                    if kind in ("Job", "Workload", "Pod", "DaemonSet"):
                        self._let_go(kind, meta, drop_finalizers=stuck)
            return not left

        try:
            self.wait_for(gone, f"{', '.join(kinds)} deleted")
        except TimeoutError as exc:
            raise TimeoutError(f"{exc}: {', '.join(left[:10])}") from None

    def _let_go(self, kind: str, meta: dict[str, Any], *, drop_finalizers: bool) -> None:
        try:
            if not meta.get("deletionTimestamp"):
                body: dict[str, Any] = {"propagationPolicy": "Background"}
                if kind == "Pod":
                    body["gracePeriodSeconds"] = 0
                self.request("DELETE", self.path(kind, meta["name"], meta["namespace"]), body, ok=(200, 202))
            elif drop_finalizers and meta.get("finalizers"):
                self.merge_patch(kind, meta["name"], {"metadata": {"finalizers": None}}, meta["namespace"])
        except KubeRequestError as exc:
            if exc.status not in (404, 409):  # gone meanwhile, or changed meanwhile: the next poll sees it
                raise

    def wait_for(self, predicate: Callable[[], T], what: str, *, timeout: float = 30.0, interval: float = 0.1) -> T:
        """Poll until ``predicate()`` is truthy; returns its value, raises TimeoutError naming ``what``."""
        deadline = time.monotonic() + timeout
        while True:
            value = predicate()
            if value:
                return value
            if time.monotonic() > deadline:
                raise TimeoutError(f"not {what} after {timeout:.0f} s")
            time.sleep(interval)
