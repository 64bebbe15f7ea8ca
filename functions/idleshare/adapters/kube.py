"""The Kubernetes API of one cluster, through lightkube: nodes in, Kueue objects out (docs/spec.md §3).

:class:`LightkubeCluster` implements :class:`idleshare.adapters.ports.KubeCluster`; which objects to
apply and which to delete is decided by :func:`idleshare.domain.kueue_diff.diff` (pure).

Every lightkube / httpx error is translated into :mod:`idleshare.errors`:

====================================  ==============================================================
401                                   the request is sent once more with a fresh token
                                      (``on_auth_expired`` is called first, so the token provider
                                      signs a new one); a second 401 is :class:`AuthExpiredError`
                                      (retryable: the next invocation signs anew again)
403, 400, 422 and other 4xx           :class:`PermanentError` (422 carries the apiserver's message,
                                      which names the invalid field)
403 with a ``NamespaceTerminating``   :class:`NamespaceTerminatingError` (permanent: a create into a
cause                                 namespace being deleted; the namespace is kept)
404                                   :class:`NotFoundError`
409 with ``FieldManagerConflict``     :class:`FieldOwnershipError` (permanent: another field manager
causes (server-side apply)            owns a field idleshare would set; the names are kept)
other 409                             :class:`ConflictError`
410 (expired ``continue`` token or    :class:`ResourceExpiredError` (retryable: the step, from a
watch ``resourceVersion``)            relist)
429, 5xx, timeouts, connection        :class:`RetryableError`
errors, an unreadable response body
====================================  ==============================================================

**One retry after a 401.** A token can be refused before its age says so (EKS's clock, a revoked or
rotated token): every request is then signed anew and sent once more within the same call — reads,
and writes too (server-side apply, create and delete are idempotent here: applying the same object
twice, or deleting one already gone, ends in the same state). Streams are retried only while
nothing was yielded from them: :meth:`LightkubeCluster.list_nodes` refused on a later page raises
(restarting would hand the caller nodes twice), and a watch is refused, if at all, when it opens.

lightkube (and httpx2 under it) is imported on first use, not at import time: a handler that
imports this module without talking to a cluster does not pay for it in its cold start.
"""

from __future__ import annotations

import base64
import functools
import re
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import closing, contextmanager, suppress
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

from idleshare.domain import kueue_versions
from idleshare.domain.admission import ADMISSION_API
from idleshare.domain.coexistence import QUOTA_KINDS
from idleshare.domain.kueue import KIND_ORDER, KUEUE_API, MANAGED_BY, MANAGED_BY_LABEL
from idleshare.domain.kueue_diff import (
    CREATED_BY_ANNOTATION,
    created_by_idleshare,
    fields_applied,
    is_terminating,
    object_identity,
    with_creation_marker,
)
from idleshare.domain.usage import PODSET_LABEL
from idleshare.errors import (
    AuthExpiredError,
    ConflictError,
    FieldOwnershipError,
    ForeignObjectError,
    IdleshareError,
    KueueNotInstalledError,
    NamespaceTerminatingError,
    NotFoundError,
    PermanentError,
    ResourceExpiredError,
    RetryableError,
)
from idleshare.names import FIELD_MANAGER
from idleshare.timings import (
    KUBE_REQUEST_TIMEOUT_SECONDS,
    KUBE_WRITE_CONCURRENCY,
    NODE_CATCH_UP_IDLE_SECONDS,
    NODE_CATCH_UP_SECONDS,
)

if TYPE_CHECKING:  # pragma: no cover
    from lightkube import Client

    from idleshare.adapters.eks_auth import EksConnector
    from idleshare.adapters.node_cache import NodeCache

Obj = dict[str, Any]
T = TypeVar("T")

KUEUE_GROUP = kueue_versions.GROUP
DEFAULT_PAGE_SIZE = 500
OWN_ATTEMPTS = 3
"""How often :meth:`LightkubeCluster.create` tries to hand a new object's fields to idleshare's apply entry while
the object moves (Kueue writes a new queue's status at once)."""

_MARKER_FIELDS: dict[str, Any] = {"f:metadata": {"f:annotations": {".": {}, f"f:{CREATED_BY_ANNOTATION}": {}}}}
"""The fieldsV1 of idleshare's creation marker alone: what its create's ``Update`` entry keeps."""

# kind -> (apiVersion of the model: a Kueue kind's is the hub, written in the version the cluster serves, plural,
# namespaced)
KINDS: dict[str, tuple[str, str, bool]] = {
    "Namespace": ("v1", "namespaces", False),
    "ResourceFlavor": (KUEUE_API, "resourceflavors", False),
    "WorkloadPriorityClass": (KUEUE_API, "workloadpriorityclasses", False),
    "Cohort": (KUEUE_API, "cohorts", False),
    "ClusterQueue": (KUEUE_API, "clusterqueues", False),
    "LocalQueue": (KUEUE_API, "localqueues", True),
    "ValidatingAdmissionPolicy": (ADMISSION_API, "validatingadmissionpolicies", False),
    "ValidatingAdmissionPolicyBinding": (ADMISSION_API, "validatingadmissionpolicybindings", False),
}
"""The kinds idleshare writes, in apply (dependency) order."""
assert tuple(KINDS) == KIND_ORDER


# -- the client ---------------------------------------------------------------------------------


@functools.cache
def _resources() -> dict[str, Any]:
    """kind -> lightkube resource class, built once, on first use.

    The Kueue kinds come from ``create_global_resource`` / ``create_namespaced_resource`` (no CRD
    discovery): their objects are plain dicts (lightkube's ``Generic``). Namespace gets such a
    dict-backed class too and Node a projection (:func:`_node_projection`); neither is registered
    in lightkube's global registry (where ``v1``/``Node`` stays the typed model for any other
    user), and the large typed core/v1 models are never imported.
    """
    from lightkube.generic_resource import (
        GenericGlobalResource,
        create_api_info,
    )

    classes: dict[str, Any] = {}

    class Namespace(GenericGlobalResource):
        _api_info = create_api_info("", "v1", "Namespace", "namespaces", verbs=["get", "list", "post"])

    classes["Namespace"] = Namespace
    group, version = ADMISSION_API.split("/")
    verbs = ["get", "list", "post", "patch", "delete"]
    for kind in ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"):
        info = create_api_info(group, version, kind, KINDS[kind][1], verbs=verbs)
        classes[kind] = type(kind, (GenericGlobalResource,), {"_api_info": info})
    classes["Node"] = _node_projection(create_api_info("", "v1", "Node", "nodes", verbs=["list", "watch"]))
    return classes


def _node_projection(api_info: Any) -> Any:
    """A Node resource class that decodes only the fields ``idleshare.parse.nodes`` reads.

    It is a ``msgspec.Struct`` (as lightkube's typed models are), so lightkube decodes each page
    straight into it and msgspec skips everything else (images, managedFields, nodeInfo,
    addresses, capacity, annotations: ~90% of a real node's bytes) without building Python
    objects for it. Leaves are ``Any``: checking them is the node parser's job, which reports a
    bad node by name instead of failing the whole list.
    """
    from lightkube.core.resource import GlobalResource

    projection = _node_fields("Node", "NodeFields")

    class Node(GlobalResource, projection):  # type: ignore[misc, valid-type]
        _api_info = api_info

    return Node


def _optional_struct(name: str, fields: list[tuple[str, Any]]) -> Any:
    """A msgspec struct named ``name`` whose ``(field, type)`` fields are all optional (None when absent, and then
    omitted when turned back into builtins)."""
    import msgspec

    return msgspec.defstruct(name, [(f, t, None) for f, t in fields], omit_defaults=True)


def _node_fields(prefix: str, name: str, *more_metadata: str) -> Any:
    """The struct of what ``idleshare.parse.nodes`` reads of a Node (``metadata.name``, ``.labels``,
    ``.deletionTimestamp``, then ``more_metadata``; ``spec.unschedulable``, ``.taints``; ``status.allocatable``,
    ``.conditions``), every leaf ``Any``: one projection for the list (:func:`_node_projection`) and the watch
    (:func:`_watch_decoders`). Its parts are named ``prefix`` + ``Metadata`` / ``Spec`` / ``Status``."""
    metadata = _optional_struct(
        f"{prefix}Metadata", [(field, Any) for field in ("name", "labels", "deletionTimestamp", *more_metadata)]
    )
    spec = _optional_struct(f"{prefix}Spec", [("unschedulable", Any), ("taints", Any)])
    status = _optional_struct(f"{prefix}Status", [("allocatable", Any), ("conditions", Any)])
    return _optional_struct(name, [("metadata", metadata | None), ("spec", spec | None), ("status", status | None)])


@functools.cache
def _watch_decoders() -> tuple[Callable[[str], Any], Callable[[Any], Obj], Callable[[Any], Any]]:
    """Decoders of a watch stream line, built once: ``(event, node, status)``. The event keeps its object raw
    (``msgspec.Raw``, no copy) until its type says what it is: a Node, decoded into builtins (the
    :func:`_node_projection` fields plus ``metadata.resourceVersion``; a BOOKMARK's object carries only that) or,
    for an ``ERROR`` event, a ``Status``."""
    import msgspec

    node = msgspec.json.Decoder(_node_fields("WatchedNode", "WatchedNode", "resourceVersion")).decode
    event = msgspec.defstruct("WatchEvent", [("type", str), ("object", msgspec.Raw)])
    api_status = msgspec.defstruct(
        "WatchStatus", [("code", int | None, None), ("reason", Any, None), ("message", Any, None)]
    )
    return (
        msgspec.json.Decoder(event).decode,
        lambda raw: msgspec.to_builtins(node(raw)),
        msgspec.json.Decoder(api_status).decode,
    )


@functools.cache
def _managed_decoders() -> tuple[Callable[[bytes], Any], Callable[[Any], dict[str, Any]], Callable[[Any], Any]]:
    """msgspec decoders for :meth:`LightkubeCluster.list_managed`: a list page whose items keep each top-level
    field raw (``msgspec.Raw``: a slice of the response, no Python objects built), an object of raw fields (an
    item's ``metadata``), and a list of such objects or null (its ``managedFields``)."""
    import msgspec

    fields = dict[str, msgspec.Raw]
    meta = msgspec.defstruct(
        "ManagedListMeta", [("continue_", str | None, msgspec.field(default=None, name="continue"))]
    )
    page = msgspec.defstruct("ManagedPage", [("items", list[fields] | None, None), ("metadata", meta | None, None)])
    return (
        msgspec.json.Decoder(page).decode,
        msgspec.json.Decoder(fields).decode,
        msgspec.json.Decoder(list[fields] | None).decode,
    )


@functools.cache
def _status_projections() -> tuple[Callable[[Any], Any], Callable[[Any], Any]]:
    """msgspec decoders of the two things :mod:`idleshare.domain.coexistence` reads of what :func:`_managed_decoders`
    leaves raw, everything else skipped unbuilt: a ClusterQueue's or Cohort's ``status.effectiveQuotas`` (None when
    absent), and whether a ``managedFields`` entry's ``fieldsV1`` owns ``f:status`` / ``f:effectiveQuotas``."""
    import msgspec

    status = msgspec.defstruct("QuotaStatus", [("effectiveQuotas", Any, None)])
    owned = msgspec.defstruct(
        "OwnedStatus", [("effective", msgspec.Raw, msgspec.field(default=None, name="f:effectiveQuotas"))]
    )
    fields = msgspec.defstruct("OwnedFields", [("status", owned | None, msgspec.field(default=None, name="f:status"))])
    decode_status, decode_fields = msgspec.json.Decoder(status).decode, msgspec.json.Decoder(fields).decode

    def effective_quotas(raw: Any) -> Any:
        return getattr(decode_status(raw), "effectiveQuotas", None)

    def owns_effective_quotas(raw: Any) -> bool:
        found = getattr(decode_fields(raw), "status", None)
        return getattr(found, "effective", None) is not None

    return effective_quotas, owns_effective_quotas


_EFFECTIVE_QUOTAS_FIELDS: dict[str, Any] = {"f:status": {"f:effectiveQuotas": {}}}


def _managed_metadata(
    fields: dict[str, Any], decode_entries: Callable[[Any], Any], decode: Callable[[Any], Any]
) -> Obj:
    """An object's ``metadata`` from its raw fields: all of them; of ``managedFields`` the entries of idleshare's
    field manager whole (the one :func:`idleshare.domain.kueue_diff.diff` reads), of the others only ``manager``,
    ``operation`` and ``subresource``, and as ``fieldsV1`` ``status.effectiveQuotas`` if the entry owns it (who
    wrote it: :mod:`idleshare.domain.coexistence`)."""
    meta: Obj = {}
    _, owns_effective_quotas = _status_projections()
    for key, raw in fields.items():
        if key == "managedFields":
            meta[key] = []
            for entry in decode_entries(raw) or ():
                if "manager" in entry and decode(entry["manager"]) == FIELD_MANAGER:
                    meta[key].append({k: decode(v) for k, v in entry.items()})
                    continue
                kept = {k: decode(entry[k]) for k in ("manager", "operation", "subresource") if k in entry}
                if "fieldsV1" in entry and owns_effective_quotas(entry["fieldsV1"]):
                    kept["fieldsV1"] = _EFFECTIVE_QUOTAS_FIELDS
                meta[key].append(kept)
        else:
            meta[key] = decode(raw)
    return meta


@functools.cache
def _workload_reads() -> dict[str, tuple[Any, Callable[[bytes], Any], str | None]]:
    """kind -> (its resource class, a page decoder keeping only what ``idleshare.parse.workloads`` reads, the field
    selector): a DaemonSet's uid, its pod template's placement and requests, a bound pod's node, phase, uid, labels,
    owner references (``apiVersion``, ``kind``, ``uid``, ``controller``: whose it is) and requests. Everything else (images, env, volumes, probes, status conditions, managedFields: most of a pod's
    bytes) is skipped unbuilt by msgspec."""
    import msgspec
    from lightkube.generic_resource import GenericNamespacedResource, create_api_info

    struct = _optional_struct
    container = struct("HeadroomContainer", [("name", Any), ("resources", Any), ("restartPolicy", Any)])
    containers = list[container] | None  # type: ignore[valid-type]
    pod_fields = [("containers", containers), ("initContainers", containers), ("overhead", Any)]
    template_spec = struct(
        "HeadroomTemplateSpec", [("nodeSelector", Any), ("affinity", Any), ("tolerations", Any), *pod_fields]
    )
    ds = struct(
        "HeadroomDaemonSet",
        [
            ("metadata", struct("HeadroomDsMeta", [("name", Any), ("namespace", Any), ("uid", Any)]) | None),
            ("spec", struct("HeadroomDsSpec", [("template", struct("HeadroomTemplate", [("spec", template_spec | None)]) | None)]) | None),
        ],
    )  # fmt: skip
    owner = struct("HeadroomOwner", [("apiVersion", Any), ("kind", Any), ("uid", Any), ("controller", Any)])
    pod = struct(
        "HeadroomPod",
        [
            ("metadata", struct("HeadroomPodMeta", [("name", Any), ("namespace", Any), ("uid", Any), ("labels", Any), ("ownerReferences", list[owner] | None)]) | None),  # type: ignore[valid-type]
            ("spec", struct("HeadroomPodSpec", [("nodeName", Any), *pod_fields]) | None),
            ("status", struct("HeadroomPodStatus", [("phase", Any)]) | None),
        ],
    )  # fmt: skip
    meta = msgspec.defstruct(
        "HeadroomListMeta", [("continue_", str | None, msgspec.field(default=None, name="continue"))]
    )

    def page(item: Any) -> Callable[[bytes], Any]:
        return msgspec.json.Decoder(
            msgspec.defstruct(
                f"{item.__name__}Page", [("items", list[item] | None, None), ("metadata", meta | None, None)]
            )
        ).decode

    class DaemonSet(GenericNamespacedResource):
        _api_info = create_api_info("apps", "v1", "DaemonSet", "daemonsets", verbs=["list", "global_list"])

    class Pod(GenericNamespacedResource):
        _api_info = create_api_info("", "v1", "Pod", "pods", verbs=["list", "global_list"])

    return {
        "DaemonSet": (DaemonSet, page(ds), None),
        "Pod": (Pod, page(pod), BOUND_POD_SELECTOR),
    }


BOUND_POD_SELECTOR = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"
"""The pods headroom reads: bound to a node and not finished (the API server filters them)."""


class _StreamStatus(Exception):
    """A watch stream's ERROR event, shaped as lightkube's ApiError for :meth:`LightkubeCluster._raise_status`."""

    def __init__(self, status: Any) -> None:
        super().__init__(status.message or status.reason or f"HTTP {status.code}")
        self.status = status
        status.details = None


@functools.cache
def _config_map_resource() -> Any:
    """A dict-backed ConfigMap class (``get`` only; not registered globally, as :func:`_resources`' classes)."""
    from lightkube.generic_resource import GenericNamespacedResource, create_api_info

    class ConfigMap(GenericNamespacedResource):
        _api_info = create_api_info("", "v1", "ConfigMap", "configmaps", verbs=["get"])

    return ConfigMap


@functools.cache
def _kueue_resource(kind: str, version: str) -> Any:
    """The lightkube resource class of a Kueue kind in one version (plain dicts), built once per version: the
    Workload (read by the usage sample, never written) and every kind of :data:`KINDS` of Kueue's group."""
    from lightkube.generic_resource import create_global_resource, create_namespaced_resource

    plural, namespaced = ("workloads", True) if kind == "Workload" else KINDS[kind][1:]
    create = create_namespaced_resource if namespaced else create_global_resource
    return create(KUEUE_GROUP, version, kind, plural)


UNBOUND_PODS = "spec.nodeName=,status.phase!=Succeeded,status.phase!=Failed"
"""Pods no node has taken that have not ended (the field selector kube-scheduler's own queue uses, and the ends)."""


@functools.cache
def _unbound_pod_decoder() -> Any:
    """A msgspec decoder of a PodList keeping only what :meth:`LightkubeCluster.list_unbound_pods` returns (types
    built here: msgspec is imported on first use, as for the nodes)."""
    import msgspec

    def struct(name: str, fields: list[tuple[str, Any, Any]]) -> Any:
        return msgspec.defstruct(name, fields, omit_defaults=True)

    owner = struct("Owner", [("uid", str, "")])
    meta = struct("Meta", [("namespace", str, ""), ("name", str, ""), ("uid", str, ""),
                           ("labels", dict[str, str], {}), ("ownerReferences", list[owner], [])])  # type: ignore[valid-type]  # fmt: skip
    condition = struct("Condition", [("type", str, ""), ("status", str, ""), ("reason", str, ""), ("message", str, "")])
    status = struct("Status", [("conditions", list[condition], [])])  # type: ignore[valid-type]
    pod = struct("Pod", [("metadata", meta, msgspec.field(default_factory=meta)),
                         ("status", status, msgspec.field(default_factory=status))])  # fmt: skip
    list_meta = struct("ListMeta", [("continue_", str, msgspec.field(default="", name="continue"))])
    pod_list = struct("PodList", [("items", list[pod], []),  # type: ignore[valid-type]
                                  ("metadata", list_meta, msgspec.field(default_factory=list_meta))])  # fmt: skip
    return msgspec.json.Decoder(pod_list)


def _is_kueue(kind: str) -> bool:
    return kind == "Workload" or KINDS.get(kind, ("",))[0] == KUEUE_API


def _resource(kind: str, api: kueue_versions.KueueApi | None = None) -> Any:
    """The resource class of ``kind``: a Kueue kind in the version ``api`` has it in (required for those)."""
    if _is_kueue(kind):
        if api is None:
            raise ValueError(f"{kind}: a Kueue kind needs the cluster's served versions")
        return _kueue_resource(kind, api.version(kind))
    try:
        return _resources()[kind]
    except KeyError:
        raise ValueError(f"idleshare does not write objects of kind {kind!r}") from None


def _send_pages(
    generic: Any, request: Any, decode: Callable[[bytes], T], continue_of: Callable[[T], str | None]
) -> Iterator[tuple[T, int]]:
    """Each page of a list ``request`` (lightkube's request builder ``generic``; its ``limit`` in ``params``),
    decoded, with its size in bytes: the ``continue`` token of one asks for the next, until a page has none."""
    while True:
        response = generic.send(generic.build_adapter_request(request))
        generic.raise_for_status(response)
        page = decode(response.content)
        yield page, len(response.content)
        token = continue_of(page)
        if not token:
            return
        request.params["continue"] = token


def _continue(page: Any) -> str | None:
    """The ``continue`` token of a page decoded into a struct whose ``metadata`` may be null."""
    return page.metadata.continue_ if page.metadata is not None else None


_WATCH_NODES = "watch nodes"
"""The operation :meth:`LightkubeCluster.watch_nodes`' errors name."""


def _watch_lines(response: Any, *, quiet_ends: bool) -> Iterator[str]:
    """The non-empty lines of a watch stream until the server closes it; with ``quiet_ends``, also (normally) when a
    read times out: the stream was quiet for the idle gap its reads were given, so a backlog is sent."""
    import httpx2

    lines = response.iter_lines()
    while True:
        try:
            line = next(lines)
        except StopIteration:
            return
        except httpx2.ReadTimeout:
            if not quiet_ends:
                raise
            return
        if line.strip():
            yield line


class LightkubeCluster:
    """:class:`~idleshare.adapters.ports.KubeCluster` over one API server, with lightkube.

    ``server``: the API server URL. ``ca_pem``: the cluster CA bundle (PEM); TLS is verified
    against it alone (lightkube writes it to a temporary file once per client); ``None`` uses the
    system trust store (and is what a plain-``http://`` test server needs). ``token``: returns the
    current bearer token (e.g. :meth:`EksConnector.token`, cached there); ``None`` sends no
    Authorization header. ``on_auth_expired``: called on every 401 (e.g.
    :meth:`EksConnector.invalidate`), before the request is sent again with the token ``token``
    then returns, or, on the second 401, before :class:`AuthExpiredError` is raised. ``timeout``:
    seconds for connect, read, write and pool waits of each request.
    ``write_concurrency``: how many writes a recompute sends at once through this adapter
    (:data:`idleshare.timings.KUBE_WRITE_CONCURRENCY`; the adapter is safe to share between threads).

    The lightkube client is built on first use and rebuilt only when the token changes (every
    10 minutes, or after a 401): lightkube fixes the Authorization header of a client at
    construction. The replaced client is not closed, so a ``list_nodes`` iteration still running
    on it finishes its pages; its connections are released when it is garbage-collected.
    """

    def __init__(
        self,
        server: str,
        ca_pem: str | bytes | None = None,
        token: Callable[[], str] | None = None,
        *,
        on_auth_expired: Callable[[], None] | None = None,
        timeout: float = KUBE_REQUEST_TIMEOUT_SECONDS,
        name: str = "",
        write_concurrency: int = KUBE_WRITE_CONCURRENCY,
        node_cache: NodeCache | None = None,
    ) -> None:
        self.server = server
        self.name = name or server
        if isinstance(ca_pem, str):
            ca_pem = ca_pem.encode("ascii")
        self._ca_data = base64.b64encode(ca_pem).decode("ascii") if ca_pem else None
        self._token = token
        self._on_auth_expired = on_auth_expired
        self._timeout = timeout
        self._client: Client | None = None
        self._client_token: str | None = None
        self._client_lock = threading.Lock()
        self._kubeconfig: Any = None  # a lightkube SingleConfig: the client's config instead (from_kubeconfig)
        self._api: kueue_versions.KueueApi | None = None  # the Kueue versions served, read on first use
        self._api_lock = threading.Lock()
        self.read_costs: dict[str, tuple[int, int]] = {}
        """kind -> (requests, bytes) of its last headroom read (:meth:`list_daemonsets`, :meth:`list_bound_pods`)."""
        self.node_cache = node_cache
        """The last node list, kept for the next :meth:`list_nodes` to bring up to date by a watch
        (:mod:`idleshare.adapters.node_cache`); None: every :meth:`list_nodes` lists."""
        self.write_concurrency = max(1, int(write_concurrency))
        """How many writes :func:`idleshare.service.apply.write` sends at once (one shared client: httpx's
        connection pool is thread-safe, and this adapter's only state, the client, is swapped under a lock)."""

    @classmethod
    def from_eks(
        cls,
        connector: EksConnector,
        cluster_name: str,
        *,
        timeout: float = KUBE_REQUEST_TIMEOUT_SECONDS,
        node_cache: NodeCache | None = None,
    ) -> LightkubeCluster:
        """The cluster ``cluster_name`` as EKS describes it, with EKS bearer tokens."""
        endpoint = connector.describe(cluster_name)
        return cls(
            endpoint.endpoint,
            endpoint.ca_pem,
            lambda: connector.token(cluster_name),
            on_auth_expired=lambda: connector.invalidate(cluster_name),
            timeout=timeout,
            name=cluster_name,
            node_cache=node_cache,
        )

    @classmethod
    def from_kubeconfig(
        cls, path: str, context: str | None = None, *, timeout: float = KUBE_REQUEST_TIMEOUT_SECONDS
    ) -> LightkubeCluster:
        """The cluster of a kubeconfig's ``context`` (default: its current one), with that context's credentials
        (a token, a client certificate, or an exec plugin such as ``aws eks get-token``), as lightkube reads them:
        what `idleshare uninstall` connects with. An unreadable file or unknown context is a ``ValueError``."""
        import yaml
        from lightkube import KubeConfig
        from lightkube.core.exceptions import ConfigError

        try:
            found = KubeConfig.from_file(path).get(context_name=context)
        except ConfigError as exc:
            raise ValueError(str(exc)) from None
        except (yaml.YAMLError, RecursionError, UnicodeDecodeError) as exc:
            raise ValueError(f"not a YAML document ({type(exc).__name__})") from None
        except (KeyError, TypeError, AttributeError, IndexError, ValueError) as exc:  # YAML, but not a kubeconfig
            raise ValueError(f"not a kubeconfig ({type(exc).__name__}: {exc})"[:200]) from None
        if found is None:
            raise ValueError(f"no context {context!r}" if context else "no current context")
        cluster = cls(found.cluster.server, timeout=timeout, name=found.context_name)
        cluster._kubeconfig = found
        return cluster

    # -- KubeCluster ------------------------------------------------------------------------

    def list_nodes(self, page_size: int = DEFAULT_PAGE_SIZE) -> Iterator[Obj]:
        """Every Node, read ``page_size`` at a time (``limit``/``continue``), as a dict holding
        only what ``idleshare.parse.nodes.node_from_dict`` reads: ``metadata.name``, ``.labels``,
        ``.deletionTimestamp``, ``spec.unschedulable``, ``.taints``, ``status.allocatable``,
        ``.conditions`` (absent ones omitted). A caller needing more must widen the projection.

        Why a projection: measured on 5,000 real-sized nodes (7.8 KB of JSON each: images,
        managedFields, nodeInfo, ...) served over loopback in pages of 500 and turned into domain
        nodes with ``node_from_dict`` (a shared 2-vCPU container under load: medians of 3 runs,
        ±50% between runs):

        * lightkube's typed ``Node`` model + ``.to_dict()``: 3.5-6.5 s;
        * the full JSON as plain dicts (a dict-backed generic resource): 3-3.7 s for the listing
          alone, 2-5 s with the parser (Python's cyclic GC rescanning millions of fresh dicts
          dominates; pausing the GC around each page brought the listing to ~0.7 s);
        * this projection, decoded by msgspec in one pass: 0.3-1.1 s for the listing, 0.7-0.8 s
          including the parser, with no GC tweak and a fraction of the memory.

        Consistency: the list is sent without ``resourceVersion``, a consistent read (the state
        as of the request, so a change that triggered the recompute is seen). Since Kubernetes
        1.31 the API server serves it from its watch cache once the cache has caught up with etcd
        (``ConsistentListFromCache``, GA in 1.34), and the later pages from a snapshot of the
        cache (``ListFromCacheSnapshot``, beta in 1.34): asking for ``resourceVersion=0`` (any
        cached state, possibly older than the change) would save the server no work and may miss
        the change.
        """
        if page_size < 1:
            raise ValueError("page_size must be positive")
        cache = self.node_cache
        if cache is not None and cache.fresh() and self._caught_up(cache):
            yield from cache.nodes()
            return
        yield from self._listed_nodes(page_size, cache)

    def _caught_up(self, cache: NodeCache) -> bool:
        """Whether the kept node list is brought up to date by a watch from its version (the changes since, applied
        to it); a 410 Gone (the version expired), a timeout or an ERROR event drops it: False, list them all."""
        try:
            for event_type, node in self.watch_nodes(
                cache.version,
                timeout_seconds=NODE_CATCH_UP_SECONDS,
                bookmarks=False,
                idle_seconds=NODE_CATCH_UP_IDLE_SECONDS,
            ):
                cache.apply(event_type, node)
        except IdleshareError:
            cache.drop()
            return False
        return True

    def _listed_nodes(self, page_size: int, cache: NodeCache | None) -> Iterator[Obj]:
        """Every Node, listed page by page (kept in ``cache`` as it goes, when given); a 401 lists again with a fresh
        token, unless a node was already yielded."""
        import msgspec

        to_dict = msgspec.to_builtins
        yielded = False
        for retry in (False, True):
            client = self._lightkube()
            if cache is not None:
                cache.start_list()
            try:
                with self._translated("list nodes"):
                    listing = client.list(_resource("Node"), chunk_size=page_size)
                    for node in listing:
                        yielded = True
                        item = to_dict(node)
                        if cache is not None:
                            cache.listed(item)
                        yield item
                    if cache is not None:
                        cache.list_done(str(getattr(listing, "_resourceVersion", "") or ""))
                return
            except AuthExpiredError:
                if retry or yielded or self._token is None:
                    raise

    def list_nodes_snapshot(
        self, page_size: int = DEFAULT_PAGE_SIZE, transform: Callable[[Obj], Any] | None = None
    ) -> tuple[list[Any], str]:
        """Every Node as :meth:`list_nodes` gives it (each passed through ``transform`` as it is read, when given:
        the node watcher keeps only its view, never the list), and the ``resourceVersion`` of the list: where a
        watch that must miss nothing after this list starts (:meth:`watch_nodes`)."""
        if page_size < 1:
            raise ValueError("page_size must be positive")
        import msgspec

        to_dict = msgspec.to_builtins
        keep: Callable[[Any], Any] = (lambda node: transform(to_dict(node))) if transform else to_dict

        def snapshot(client: Client) -> tuple[list[Any], Any]:
            with self._translated("list nodes"):
                listing = client.list(_resource("Node"), chunk_size=page_size)
                nodes = [keep(node) for node in listing]
                return nodes, listing._resourceVersion  # set by the first page (the property refuses an empty one)

        nodes, version = self._authenticated(snapshot)
        if not version:
            raise RetryableError(
                f"{self.name}: list nodes: the list carried no resourceVersion", operation="list nodes"
            )
        return nodes, str(version)

    def watch_nodes(
        self, resource_version: str, *, timeout_seconds: int, bookmarks: bool = True, idle_seconds: float | None = None
    ) -> Iterator[tuple[str, Obj]]:
        """One watch request on every Node, from ``resource_version``; the API server ends it after
        ``timeout_seconds`` (the client's read timeout is that plus the adapter's timeout, so a server
        that stops talking is noticed).

        Yields ``(type, node)``: ``ADDED`` / ``MODIFIED`` / ``DELETED`` with the node projected as in
        :meth:`list_nodes` plus ``metadata.resourceVersion``, and, with ``bookmarks``, ``BOOKMARK`` with
        ``{"metadata": {"resourceVersion": ...}}`` only (the server's progress notice: resuming from it
        skips nothing). Returns when the server closes the stream. A watch ``ERROR`` event or an HTTP
        error is translated like any other call: an expired ``resource_version`` (410 Gone, as an HTTP
        status or as the stream's ERROR event) raises :class:`ResourceExpiredError`: list again.

        lightkube's own ``Client.watch`` neither asks for bookmarks nor bounds its read timeout, and it
        relists silently on a 410; this method builds the same request with lightkube's request builder
        and decodes each line with msgspec into the node projection.

        ``idle_seconds``: the stream also ends (normally) when the server sends nothing for that long — the backlog
        of a watch from an old version comes at once, so a quiet stream has sent it (:meth:`list_nodes`'s catch-up).
        The response's head may take the usual timeout; ``tests/kube/test_node_cache.py`` fails if the quiet gap
        stops ending the stream (an httpx upgrade that reads the timeout elsewhere).
        """
        if timeout_seconds < 1:
            raise ValueError("timeout_seconds must be positive")
        params = {"timeoutSeconds": str(int(timeout_seconds)), "resourceVersion": resource_version}
        if bookmarks:
            params["allowWatchBookmarks"] = "true"
        opened = functools.partial(
            self._open_watch, params=params, read_timeout=timeout_seconds + self._timeout, idle_seconds=idle_seconds
        )
        response = self._authenticated(opened)  # a 401 comes with the response's head, or not at all
        with self._translated(_WATCH_NODES), closing(response):
            for line in _watch_lines(response, quiet_ends=idle_seconds is not None):
                yield self._watch_event(line)

    def _open_watch(
        self, client: Client, *, params: dict[str, str], read_timeout: float, idle_seconds: float | None
    ) -> Any:
        """The streamed response of a node watch (``params``), its head read within the usual timeout: an HTTP error
        is raised as any call's; its body's reads then wait ``read_timeout``, or ``idle_seconds`` when given."""
        import httpx2

        generic = client._client  # lightkube's request builder and httpx client
        with self._translated(_WATCH_NODES):
            request = generic.prepare_request("list", res=_resource("Node"), watch=True, params=params)
            request.timeout = httpx2.Timeout(self._timeout, read=read_timeout)
            response = generic.send(generic.build_adapter_request(request), stream=True)
            if response.status_code >= 400:
                try:
                    response.read()
                    generic.raise_for_status(response)  # type: ignore[no-untyped-call]
                finally:
                    response.close()
        if idle_seconds is not None:  # the head came within the usual timeout; the body's reads wait this long
            # httpcore reads the request's timeout extension when the body is first read (after the head)
            timeouts = response.request.extensions.get("timeout", {})
            response.request.extensions["timeout"] = {**timeouts, "read": idle_seconds}
        return response

    def _watch_event(self, line: str) -> tuple[str, Obj]:
        """One line of a node watch as ``(type, node)``; an ``ERROR`` event is raised as the status it carries (410
        Gone: :class:`ResourceExpiredError`)."""
        decode_event, decode_node, decode_status = _watch_decoders()
        event = decode_event(line)
        if event.type == "ERROR":
            status = decode_status(event.object)
            self._raise_status(_WATCH_NODES, status.code, _StreamStatus(status))
        return event.type, decode_node(event.object)

    def list_managed(self) -> list[Obj]:
        """Every Namespace and Kueue object labelled ``app.kubernetes.io/managed-by: idleshare``
        (one label-selected list per kind, all namespaces), with ``apiVersion`` and ``kind`` set, as
        :func:`idleshare.domain.kueue_diff.diff` reads them: every field but ``status`` (of a ClusterQueue's or
        Cohort's only ``effectiveQuotas``, when set), and of ``metadata.managedFields`` idleshare's own entries whole,
        another manager's by name only (:func:`_managed_metadata`).

        Why: a ClusterQueue as served is ~35 KB, of which Kueue's status and the ``managedFields`` entry of
        its status writes are ~26 KB (a LocalQueue ~21 KB, mostly the same); at 200 teams that is ~11 MB of
        JSON per recompute. Each page is decoded by msgspec with every top-level field kept raw (no Python
        objects), and only the fields kept are decoded: ~0.1 CPU s instead of ~0.4 for the whole objects.
        """
        found: list[Obj] = []
        for kind in KINDS:
            # a 401 lists this kind again, from its first page; a 404 (its version no longer served) in the version
            # discovery finds then
            def listing(api: kueue_versions.KueueApi, kind: str = kind) -> list[Obj]:
                return self._authenticated(functools.partial(self._list_projected, kind=kind, api=api))

            for obj in self._served(kind, listing) if _is_kueue(kind) else listing(kueue_versions.HUB_ONLY):
                found.append(self._read_up(obj, kind))
        return found

    def list_cluster_queues(self) -> list[Obj]:
        """idleshare's ClusterQueues (labelled ``managed-by: idleshare``), spec and status (Kueue's accounting:
        ``flavorsUsage``, ``flavorsReservation``, the workload counts): read-only, ``list`` on clusterqueues."""

        def listing(api: kueue_versions.KueueApi) -> list[Obj]:
            return self._authenticated(functools.partial(self._list_labelled, kind="ClusterQueue", api=api))

        return [self._read_up(obj, "ClusterQueue") for obj in self._served("ClusterQueue", listing)]

    def list_namespace_names(self, label_selector: str, limit: int) -> list[str]:
        """The names of at most ``limit`` namespaces matching ``label_selector``: one request (its first page)."""

        import msgspec

        def listing(client: Client) -> list[str]:
            generic = client._client
            with self._translated("list Namespace"):
                request = generic.prepare_request(
                    "list", res=_resource("Namespace"), params={"limit": limit, "labelSelector": label_selector}
                )
                response = generic.send(generic.build_adapter_request(request))
                generic.raise_for_status(response)  # type: ignore[no-untyped-call]
                items = msgspec.json.decode(response.content).get("items") or ()
                return [str(i["metadata"]["name"]) for i in items][:limit]

        return self._authenticated(listing)

    def list_cluster_queue_names(self, label_selector: str) -> list[str]:
        """The names of every ClusterQueue matching ``label_selector``, paged, as a server-side Table without the
        objects (``kubectl get clusterqueues``' request): some 100 bytes a queue, not the ~35 KB of one with its
        status. ``list`` on clusterqueues, which the recompute has."""

        import msgspec

        def listing(client: Client, api: kueue_versions.KueueApi) -> list[str]:
            generic = client._client
            names: list[str] = []
            with self._translated("list ClusterQueue names"):
                request = generic.prepare_request(
                    "list",
                    res=_resource("ClusterQueue", api),
                    params={"limit": DEFAULT_PAGE_SIZE, "labelSelector": label_selector, "includeObject": "None"},
                    headers={"Accept": "application/json;as=Table;g=meta.k8s.io;v=v1"},
                )
                tables = _send_pages(
                    generic, request, msgspec.json.decode, lambda table: (table.get("metadata") or {}).get("continue")
                )
                for table, _ in tables:
                    columns = [c.get("name") for c in table.get("columnDefinitions") or ()]
                    at = columns.index("Name") if "Name" in columns else 0
                    names.extend(str(row["cells"][at]) for row in table.get("rows") or ())
                return names

        return self._served("ClusterQueue", lambda api: self._authenticated(functools.partial(listing, api=api)))

    def list_daemonsets(self) -> list[Obj]:
        """Every DaemonSet (``list`` on daemonsets, all namespaces), projected to its pod template's placement and
        requests (:func:`_workload_reads`)."""
        return self._authenticated(functools.partial(self._list_workload, kind="DaemonSet"))

    def list_bound_pods(self) -> list[Obj]:
        """Every pod bound to a node and not finished (``list`` on pods, all namespaces, :data:`BOUND_POD_SELECTOR`,
        pages of ``DEFAULT_PAGE_SIZE``), projected to what headroom reads (:func:`_workload_reads`)."""
        return self._authenticated(functools.partial(self._list_workload, kind="Pod"))

    def _list_workload(self, client: Client, *, kind: str) -> list[Obj]:
        import msgspec

        resource, decode_page, selector = _workload_reads()[kind]
        to_dict = msgspec.to_builtins
        generic = client._client
        params: dict[str, Any] = {"limit": DEFAULT_PAGE_SIZE}
        if selector:
            params["fieldSelector"] = selector
        found: list[Obj] = []
        requests = size = 0
        with self._translated(f"list {kind}{_GRANTED_BY.get(kind, '')}"):
            request = generic.prepare_request("list", res=resource, namespace="*", params=params)
            for page, length in _send_pages(generic, request, decode_page, _continue):
                requests, size = requests + 1, size + length
                found.extend(to_dict(item) for item in page.items or ())
        self.read_costs[kind] = (requests, size)
        return found

    def list_workloads(self) -> list[Obj]:
        """Every Kueue Workload in all namespaces (``list`` on workloads), paged: their pod sets' requests and node
        selectors, their conditions (pending reason, eviction, preemption)."""

        def listing(api: kueue_versions.KueueApi) -> list[Obj]:
            def pages(client: Client) -> list[Obj]:
                with self._translated("list Workload"):
                    items = client.list(_resource("Workload", api), namespace="*", chunk_size=DEFAULT_PAGE_SIZE)
                    return [dict(item) for item in items]

            return self._authenticated(pages)

        return [self._read_up(obj, "Workload") for obj in self._served("Workload", listing)]

    def list_unbound_pods(self) -> list[Obj]:
        """Every pod of a workload Kueue admitted (label :data:`~idleshare.domain.usage.PODSET_LABEL`) that no node
        has taken and that has not ended (field selector :data:`UNBOUND_PODS`), all namespaces (``list`` on pods),
        paged, projected to ``metadata.namespace``, ``.name``, ``.uid``, that label, the owners' uids and the
        ``PodScheduled`` condition: the API server selects them, msgspec decodes nothing else (a pod as served is a
        few KB; its spec and container statuses are most of it)."""
        import msgspec

        decode, to_builtins = _unbound_pod_decoder(), msgspec.to_builtins

        def pages(client: Client) -> list[Obj]:
            generic = client._client  # lightkube's request builder and httpx client, as in _open_watch
            params = {"labelSelector": PODSET_LABEL, "fieldSelector": UNBOUND_PODS, "limit": DEFAULT_PAGE_SIZE}
            found: list[Obj] = []
            with self._translated("list Pod"):
                request = generic.prepare_request("list", res=_workload_reads()["Pod"][0], namespace="*", params=params)
                for page, _ in _send_pages(generic, request, decode.decode, _continue):
                    for pod in page.items:
                        pod.status.conditions = [c for c in pod.status.conditions if c.type == "PodScheduled"]
                        pod.metadata.labels = {k: v for k, v in pod.metadata.labels.items() if k == PODSET_LABEL}
                        found.append(to_builtins(pod))
            return found

        return self._authenticated(pages)

    # -- the Kueue versions this cluster serves ------------------------------------------------

    def kueue_api(self) -> kueue_versions.KueueApi:
        """The ``kueue.x-k8s.io`` versions this cluster serves, per kind (:class:`~idleshare.domain.kueue_versions.
        KueueApi`): read from the API server's discovery on first use and kept for this adapter's life (one per
        cluster, reused by a warm function); read again when a call in a kept version answers 404 (:meth:`_served`).
        None served that idleshare writes: :class:`KueueNotInstalledError`."""
        with self._api_lock:
            if self._api is None:
                self._api = self._discover()
            return self._api

    def served_resources(self) -> dict[str, list[str]]:
        """Discovery: ``{version: [kind, ...]}`` of every version of Kueue's group idleshare knows that the API
        server serves (``GET /apis/kueue.x-k8s.io``, then ``/apis/kueue.x-k8s.io/<version>`` for each; readable by
        every authenticated user: the ``system:discovery`` role). The group not served: {}."""
        try:
            group = self._authenticated(functools.partial(self._get_json, path=f"/apis/{KUEUE_GROUP}"))
        except NotFoundError:
            return {}
        found: dict[str, list[str]] = {}
        for entry in group.get("versions") or ():
            version = entry.get("version") if isinstance(entry, Mapping) else None
            if version not in kueue_versions.KNOWN_VERSIONS:
                continue
            path = f"/apis/{KUEUE_GROUP}/{version}"
            try:
                listing = self._authenticated(functools.partial(self._get_json, path=path))
            except NotFoundError:  # withdrawn between the two reads
                continue
            found[str(version)] = [
                str(r.get("kind"))
                for r in listing.get("resources") or ()
                if isinstance(r, Mapping) and "/" not in str(r.get("name", ""))  # not a subresource (x/status)
            ]
        return found

    def _discover(self) -> kueue_versions.KueueApi:
        try:
            return kueue_versions.kueue_api(self.served_resources())
        except kueue_versions.KueueApiError as exc:
            raise KueueNotInstalledError(f"{self.name}: {exc}", operation="discover Kueue") from None

    def _get_json(self, client: Client, *, path: str) -> dict[str, Any]:
        """One GET of an API path answering a JSON object (discovery)."""
        import msgspec

        generic = client._client  # lightkube's request builder and httpx client, as in _open_watch
        with self._translated(f"get {path}"):
            response = generic.send(generic._client.build_request("GET", path))
            generic.raise_for_status(response)  # type: ignore[no-untyped-call]
            found = msgspec.json.decode(response.content)
        if not isinstance(found, dict):
            raise RetryableError(f"{self.name}: get {path}: not a JSON object", operation=f"get {path}")
        return found

    def _served(self, kind: str, call: Callable[[kueue_versions.KueueApi], T]) -> T:
        """``call(api)`` in the versions kept; when it answers 404 (:class:`NotFoundError`: the version may no longer
        be served, Kueue upgraded or rolled back), discovery is read again and, if ``kind`` is now served in another
        version, ``call`` is made once more in it; else the 404 is raised as it was. A kind not of Kueue's group (the
        admission policy's) has no version to discover: its 404 is raised as it is."""
        if not _is_kueue(kind):
            return call(kueue_versions.HUB_ONLY)
        api = self.kueue_api()
        try:
            return call(api)
        except NotFoundError:
            with self._api_lock:
                if self._api is api:  # nobody read discovery again meanwhile
                    self._api = None
            fresh = self.kueue_api()
            if fresh.version(kind) == api.version(kind):
                raise
        return call(fresh)

    def _read_up(self, obj: Obj, kind: str) -> Obj:
        """A Kueue object as listed, in the hub version (:func:`~idleshare.domain.kueue_versions.up`): what the diff
        compares and the usage sample counts. A version the cluster answered in that idleshare does not read for
        ``kind`` is the API server's fault: :class:`PermanentError` naming it."""
        obj.setdefault("kind", kind)
        if not _is_kueue(kind):
            obj.setdefault("apiVersion", KINDS[kind][0] if kind in KINDS else "v1")
            return obj
        obj.setdefault("apiVersion", self.kueue_api().api_version(kind))
        try:
            return kueue_versions.up(obj)
        except ValueError as exc:
            raise PermanentError(f"{self.name}: list {kind}: {exc}", operation=f"list {kind}") from None

    def _list_projected(self, client: Client, *, kind: str, api: kueue_versions.KueueApi) -> list[Obj]:
        """One kind's objects labelled as idleshare's, page by page, as :meth:`list_managed` returns them."""
        import msgspec

        decode_page, decode_fields, decode_entries = _managed_decoders()
        effective_quotas, _ = _status_projections()
        decode = msgspec.json.decode
        generic = client._client  # lightkube's request builder and httpx client, as in _open_watch
        operation = f"list {kind}"
        found: list[Obj] = []
        with self._translated(operation):
            request = generic.prepare_request(
                "list",
                res=_resource(kind, api),
                namespace="*" if KINDS[kind][2] else None,
                params={"limit": DEFAULT_PAGE_SIZE, "labelSelector": f"{MANAGED_BY_LABEL}={MANAGED_BY}"},
            )
            for page, _ in _send_pages(generic, request, decode_page, _continue):
                for item in page.items or ():
                    obj: Obj = {}
                    for key, raw in item.items():
                        if key == "metadata":
                            obj[key] = _managed_metadata(decode_fields(raw), decode_entries, decode)
                        elif key != "status":
                            obj[key] = decode(raw)
                        elif kind in QUOTA_KINDS and (effective := effective_quotas(raw)) is not None:
                            obj[key] = {"effectiveQuotas": effective}
                    found.append(obj)
        return found

    def _list_labelled(self, client: Client, *, kind: str, api: kueue_versions.KueueApi) -> list[Obj]:
        with self._translated(f"list {kind}"):
            items = client.list(
                _resource(kind, api),
                namespace="*" if KINDS[kind][2] else None,
                labels={MANAGED_BY_LABEL: MANAGED_BY},
                chunk_size=DEFAULT_PAGE_SIZE,
            )
            return [dict(item) for item in items]

    def apply(self, obj: Obj, *, force: bool = False) -> None:
        """Server-side apply of ``obj`` as field manager ``idleshare``: for an object idleshare created
        (:meth:`create`), which the caller has seen carry its creation marker.

        Without ``force``, a field that another manager owns with another value is not taken: the apiserver
        answers 409 and :class:`FieldOwnershipError` names the managers and the fields. A conflict with
        idleshare alone is idleshare's own create still owning the field (its ``Update`` entry, when
        :meth:`create` could not hand it to the apply entry): that apply is sent once more with ``force``, which
        moves those fields to idleshare's apply. A Namespace is never patched (it may not be ours): it goes to
        :meth:`ensure_namespace`.
        """
        kind = obj.get("kind", "")
        if kind == "Namespace":
            self.ensure_namespace(obj)
            return
        self._served(kind, functools.partial(self._apply_in, obj, force=force))

    def _apply_in(self, obj: Obj, api: kueue_versions.KueueApi, *, force: bool) -> None:
        """:meth:`apply` of ``obj`` (hub) written down to ``api``'s version of its kind."""
        res, body = self._written(obj, api)

        def apply(client: Client, forced: bool) -> None:
            with self._translated(f"apply {_describe(obj)}"):
                client.apply(res(body), field_manager=FIELD_MANAGER, force=forced)

        try:
            self._authenticated(functools.partial(apply, forced=force))
        except FieldOwnershipError as exc:
            if force or set(exc.managers) != {FIELD_MANAGER}:
                raise
            self._authenticated(functools.partial(apply, forced=True))

    @staticmethod
    def _written(obj: Obj, api: kueue_versions.KueueApi) -> tuple[Any, Obj]:
        """The resource class and the body of ``obj`` (hub) as written in ``api``
        (:func:`~idleshare.domain.kueue_versions.down`); a hub object that cannot be written down is a
        :class:`PermanentError` naming the field, never sent."""
        kind = str(obj.get("kind", ""))
        try:
            return _resource(kind, api), kueue_versions.down(obj, api)
        except ValueError as exc:
            raise PermanentError(f"write {_describe(obj)}: {exc}", operation=f"write {_describe(obj)}") from None

    def create(self, obj: Obj, *, force: bool = False) -> str:
        """Create ``obj`` with idleshare's creation marker (a POST: it cannot land on an existing object); the uid of
        the object this call created, from the create's answer (what the recompute records: docs/spec.md §3,
        "Ownership"). An object of that name that exists already is never written by this call:
        :class:`ForeignObjectError` says whether it carries the marker (``marked``) and its ``uid``, and the caller,
        who holds the record, decides (a create of its own whose answer was lost, or a copy). One that is being
        deleted answers "" (nothing created; a later recompute creates it anew). A Namespace goes to
        :meth:`ensure_namespace` (an existing one is used as it is; "" either way: namespaces are not recorded).

        The apiserver records a create's fields under an ``Update`` entry of idleshare's manager, which a later
        apply neither removes a field from (a field idleshare stops setting would stay) nor may change without
        a conflict with itself: so the new object's entry is split at once (:meth:`_own_as_applied`) into what an
        apply of ``obj`` would own (an ``Apply`` entry) and the marker (an ``Update`` entry no apply touches).
        ``force`` is unused (a create takes no field from anyone); kept for the callers' one signature.
        """
        kind = obj.get("kind", "")
        if kind == "Namespace":
            self.ensure_namespace(obj)
            return ""
        return self._served(kind, functools.partial(self._create_in, obj))

    def _create_in(self, obj: Obj, api: kueue_versions.KueueApi) -> str:
        """:meth:`create` of ``obj`` (hub) written down to ``api``'s version of its kind."""
        kind = obj.get("kind", "")
        res, written = self._written(obj, api)
        what = _describe(obj)
        body = with_creation_marker(written)

        def create(client: Client) -> Obj:
            with self._translated(f"create {what}"):
                return dict(client.create(res(body), field_manager=FIELD_MANAGER).to_dict())

        try:
            created = self._authenticated(create)
        except ConflictError:  # 409 AlreadyExists: whose is it?
            pass
        else:
            self._own_as_applied(written, created, res)
            return str((created.get("metadata") or {}).get("uid") or "")
        _, namespace, name = object_identity(obj)

        def get(client: Client) -> Obj:
            with self._translated(f"get {what}"):
                found = client.get(res, name, namespace=namespace) if KINDS[kind][2] else client.get(res, name)
                return dict(found.to_dict())

        existing = self._authenticated(get)  # gone meanwhile: NotFoundError, the retry creates it
        if is_terminating(existing):  # one going away is created anew by a later recompute
            return ""
        marked = created_by_idleshare(existing)
        raise ForeignObjectError(
            f"{self.name}: create {what}: it exists and idleshare did not record creating it"
            + (
                f" (it carries the {CREATED_BY_ANNOTATION} annotation: a copy?)"
                if marked
                else f" (no {CREATED_BY_ANNOTATION} annotation)"
            )
            + ": left as it is",
            operation=f"create {what}",
            kind=kind,
            name=name,
            namespace=namespace,
            uid=str((existing.get("metadata") or {}).get("uid") or ""),
            marked=marked,
        )

    def _own_as_applied(self, obj: Obj, created: Obj, res: Any) -> None:
        """Rewrite the just-created object's ``managedFields`` (a JSON patch, only while the object is at the
        version read: another manager's entry written meanwhile, Kueue's status, is never lost): idleshare's
        create entry becomes an ``Apply`` entry owning what applying ``obj`` owns
        (:func:`~idleshare.domain.kueue_diff.fields_applied`) and an ``Update`` entry owning the marker alone; every
        other entry stays. The patch changes no field, so the apiserver records no entry for it. The object
        moved meanwhile: read again and retried (:data:`OWN_ATTEMPTS` in all). ``obj`` is the object as written
        (in the version of ``res``, which the create's fieldsV1 names)."""
        _, namespace, name = object_identity(obj)
        current = created
        for attempt in range(OWN_ATTEMPTS):
            meta = current.get("metadata") or {}
            entries = meta.get("managedFields") or []
            mine = [e for e in entries if e.get("manager") == FIELD_MANAGER and e.get("operation") == "Update"]
            if len(mine) != 1 or not isinstance(mine[0].get("fieldsV1"), Mapping):
                return  # not what a create records (split already?): leave it; an apply's conflict with idleshare
            (entry,) = mine  # alone is then forced (apply)
            if entry["fieldsV1"] == _MARKER_FIELDS:
                return  # already split
            rewritten = [
                {**entry, "operation": "Apply", "fieldsV1": fields_applied(entry["fieldsV1"], obj)},
                {**entry, "fieldsV1": _MARKER_FIELDS},
                *(e for e in entries if e is not entry),
            ]
            patch: list[Obj] = [
                {"op": "test", "path": "/metadata/uid", "value": meta.get("uid")},
                {"op": "test", "path": "/metadata/resourceVersion", "value": meta.get("resourceVersion")},
                {"op": "replace", "path": "/metadata/managedFields", "value": rewritten},
            ]

            def own(client: Client, patch: list[Obj] = patch) -> None:
                from lightkube.types import PatchType

                with self._translated(f"patch managedFields of {_describe(obj)}"):
                    client.patch(
                        res, name, patch, namespace=namespace or None, patch_type=PatchType.JSON,
                        field_manager=FIELD_MANAGER,
                    )  # fmt: skip

            def get(client: Client) -> Obj:
                with self._translated(f"get {_describe(obj)}"):
                    found = client.get(res, name, namespace=namespace) if namespace else client.get(res, name)
                    return dict(found.to_dict())

            try:
                self._authenticated(own)
                return
            except (ConflictError, PermanentError) as exc:  # a failed test (422) or a lost race (409): read again
                if attempt == OWN_ATTEMPTS - 1 or exc.status not in (409, 422):
                    raise
            current = self._authenticated(get)

    def ensure_namespace(self, obj: Obj) -> bool:
        """Create the namespace when it does not exist; True when this call created it.

        An existing namespace is left exactly as it is (no patch, no label added).
        """
        if obj.get("kind", "Namespace") != "Namespace":
            raise ValueError(f"not a Namespace: {_describe(obj)}")
        name = obj["metadata"]["name"]
        res = _resource("Namespace")

        def get(client: Client) -> None:
            with self._translated(f"get Namespace/{name}"):
                client.get(res, name)

        def create(client: Client) -> None:
            with self._translated(f"create Namespace/{name}"):
                client.create(res(obj), field_manager=FIELD_MANAGER)

        try:
            self._authenticated(get)
            return False
        except NotFoundError:
            pass
        try:
            self._authenticated(create)
        except ConflictError:  # created meanwhile by someone else (or by our own first try, refused on the way back)
            return False
        return True

    def delete(self, obj: Obj, *, uid: str | None = None) -> None:
        """Delete ``obj`` by kind, name and namespace; already gone is fine. Never a Namespace. With ``uid`` (what the
        recompute and ``idleshare uninstall`` always send: the uid idleshare recorded creating), the delete carries
        the precondition ``preconditions.uid``: an object of that name with another uid (someone deleted idleshare's
        and made their own) is not deleted, and the apiserver's 409 is :class:`ConflictError`."""
        kind = obj.get("kind", "")
        if kind == "Namespace":
            raise ValueError("idleshare never deletes namespaces: it would delete the team's workloads")
        meta = obj["metadata"]
        options: Obj | None = None
        if uid:
            options = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": uid}}

        def delete(api: kueue_versions.KueueApi) -> None:
            res = _resource(kind, api)

            def send(client: Client) -> None:
                with self._translated(f"delete {_describe(obj)}"):
                    namespace = meta["namespace"] if KINDS[kind][2] else None
                    if options is None:
                        if namespace:
                            client.delete(res, meta["name"], namespace=namespace)
                        else:
                            client.delete(res, meta["name"])
                        return
                    generic = client._client  # lightkube's request builder: its delete sends no DeleteOptions
                    request = generic.prepare_request("delete", res=res, name=meta["name"], namespace=namespace)
                    request.data = options
                    response = generic.send(generic.build_adapter_request(request))
                    generic.raise_for_status(response)  # type: ignore[no-untyped-call]

            self._authenticated(send)

        with suppress(NotFoundError):  # already gone (in the version served now, if it changed)
            self._served(kind, delete)

    def get_managed(self, kind: str, namespace: str, name: str) -> Obj | None:
        """One object of a kind idleshare writes, by identity, as :meth:`list_managed` returns it (no ``status``
        but a ClusterQueue's or Cohort's ``effectiveQuotas``), or None when there is none: how a recorded object
        whose label someone removed is still found (docs/spec.md §3, "Ownership")."""
        if kind == "Namespace" or kind not in KINDS:
            raise ValueError(f"idleshare does not record objects of kind {kind!r}")

        def get(api: kueue_versions.KueueApi) -> Obj:
            res = _resource(kind, api)

            def send(client: Client) -> Obj:
                with self._translated(f"get {kind}/{name}"):
                    found = client.get(res, name, namespace=namespace) if KINDS[kind][2] else client.get(res, name)
                    return dict(found.to_dict())

            return self._authenticated(send)

        try:
            obj = self._read_up(self._served(kind, get), kind)
        except NotFoundError:
            return None
        status = obj.pop("status", None)
        if kind in QUOTA_KINDS and isinstance(status, Mapping) and status.get("effectiveQuotas") is not None:
            obj["status"] = {"effectiveQuotas": status["effectiveQuotas"]}
        obj.setdefault("kind", kind)
        return obj

    def get_config_map(self, namespace: str, name: str) -> dict[str, str]:
        """The ``data`` of one ConfigMap (``{}`` when it has none): read-only, one object by name (idleshare's RBAC
        grants ``get`` on ``kueue-manager-config`` alone). Errors as every call: 404 :class:`NotFoundError`, 403
        :class:`PermanentError`."""
        res = _config_map_resource()

        def get(client: Client) -> dict[str, str]:
            with self._translated(f"get ConfigMap/{namespace}/{name}"):
                obj = client.get(res, name, namespace=namespace)
                data = dict(obj).get("data") or {}
                return {str(k): str(v) for k, v in data.items()}

        return self._authenticated(get)

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    # -- internals ----------------------------------------------------------------------------

    def _authenticated(self, call: Callable[[Client], T]) -> T:
        """``call(client)``; refused with a 401 (the token is already invalidated then), once more with a
        client carrying the token the provider now returns. A second 401 raises :class:`AuthExpiredError`."""
        try:
            return call(self._lightkube())
        except AuthExpiredError:
            if self._token is None:  # no token to renew: the same request would be refused again
                raise
        return call(self._lightkube())

    def _lightkube(self) -> Client:
        with self._client_lock:  # writes run on several threads: one client per token, never two built at once
            token = self._current_token()
            if self._client is None or token != self._client_token:
                self._client = self._build(token)
                self._client_token = token
            return self._client

    def _current_token(self) -> str | None:
        if self._token is None:
            return None
        try:
            return self._token()
        except IdleshareError:
            raise
        except Exception as exc:  # the provider is ours, but keep the adapter's error contract
            raise RetryableError(f"{self.name}: cannot get a bearer token: {exc}", operation="token") from exc

    def _build(self, token: str | None) -> Client:
        import httpx2
        from lightkube import Client, KubeConfig
        from lightkube.config.models import Cluster, User

        config = self._kubeconfig or KubeConfig.from_one(
            cluster=Cluster(server=self.server, certificate_auth_data=self._ca_data),
            user=User(token=token),
        )
        return Client(
            config=config,
            timeout=httpx2.Timeout(self._timeout),
            field_manager=FIELD_MANAGER,
            trust_env=False,  # no proxy / netrc from the environment
        )

    @contextmanager
    def _translated(self, operation: str) -> Iterator[None]:
        import httpx2
        import msgspec
        from lightkube import ApiError

        try:
            yield
        except ApiError as exc:
            self._raise_status(operation, exc.response.status_code if exc.response else exc.status.code, exc)
        except httpx2.HTTPStatusError as exc:  # a response without a JSON Status body
            self._raise_status(operation, exc.response.status_code, exc)
        except KeyError as exc:
            # lightkube reads response.headers["Content-Type"] to decide whether an error response
            # is a Status; a response without that header surfaces as this KeyError.
            if isinstance(exc.__context__, httpx2.HTTPStatusError):
                self._raise_status(operation, exc.__context__.response.status_code, exc.__context__)
            raise
        except httpx2.TimeoutException as exc:
            raise RetryableError(
                f"{self.name}: {operation}: timed out ({type(exc).__name__})", operation=operation
            ) from exc
        except httpx2.HTTPError as exc:  # connection refused / reset, protocol errors, ...
            raise RetryableError(f"{self.name}: {operation}: {type(exc).__name__}: {exc}", operation=operation) from exc
        except msgspec.DecodeError as exc:
            raise RetryableError(f"{self.name}: {operation}: unreadable response: {exc}", operation=operation) from exc

    def _raise_status(self, operation: str, status: int | None, exc: Exception) -> NoReturn:
        message = f"{self.name}: {operation}: HTTP {status}: {_status_message(exc)}"
        error: IdleshareError
        if status == 401:
            if self._on_auth_expired is not None:
                self._on_auth_expired()
            error = AuthExpiredError(message, operation=operation, status=status)
        elif status == 404:
            error = NotFoundError(message, operation=operation, status=status)
        elif status == 409 and (owners := _field_manager_conflicts(exc)):
            managers = tuple(sorted({m for m, _ in owners}))
            fields = tuple(f for _, f in owners)
            error = FieldOwnershipError(
                f"{self.name}: {operation}: fields owned by another field manager "
                f"({', '.join(managers)}): {', '.join(fields)}",
                operation=operation,
                managers=managers,
                fields=fields,
            )
        elif status == 409:
            error = ConflictError(message, operation=operation, status=status)
        elif status == 410:
            error = ResourceExpiredError(message, operation=operation, status=status)
        elif status is not None and (status == 429 or status >= 500):
            error = RetryableError(message, operation=operation, status=status)
        elif status == 403 and (namespace := _terminating_namespace(exc)) is not None:
            error = NamespaceTerminatingError(message, operation=operation, namespace=namespace, status=status)
        else:  # 400, 403, 422, ...
            error = PermanentError(message, operation=operation, status=status)
        raise error from exc


_GRANTED_BY = {"Pod": " (headroom all: infra/k8s/rbac-headroom-all.yaml grants it)"}
"""A list only some clusters' RBAC grants: its refusal says which manifest grants it."""


def _describe(obj: Mapping[str, Any]) -> str:
    kind, namespace, name = object_identity(obj)
    return f"{kind}/{namespace}/{name}" if namespace else f"{kind}/{name}"


_CONFLICT_MANAGER = re.compile(r'conflict with "([^"]+)"')


def _field_manager_conflicts(exc: Exception) -> list[tuple[str, str]]:
    """``[(manager, field)]`` of a server-side apply conflict (Status causes of type FieldManagerConflict,
    messages like ``conflict with "kueue-admin" using kueue.x-k8s.io/v1beta2``)."""
    status = getattr(exc, "status", None)
    causes = getattr(getattr(status, "details", None), "causes", None) or []
    out = []
    for cause in causes:
        if getattr(cause, "reason", None) == "FieldManagerConflict":
            match = _CONFLICT_MANAGER.search(cause.message or "")
            out.append((match.group(1) if match else "?", cause.field or "?"))
    return out


_TERMINATING = re.compile(r"namespace (\S+) because it is being terminated|namespace (\S+) is being terminated")


def _terminating_namespace(exc: Exception) -> str | None:
    """The namespace of a create refused because it is being deleted (the NamespaceLifecycle admission plugin's
    403, whose Status carries a cause of type ``NamespaceTerminating``), else None."""
    status = getattr(exc, "status", None)
    causes = getattr(getattr(status, "details", None), "causes", None) or []
    for cause in causes:
        if getattr(cause, "reason", None) == "NamespaceTerminating":
            text = f"{cause.message or ''} {getattr(status, 'message', '') or ''}"
            match = _TERMINATING.search(text)
            return next((g for g in match.groups() if g), "") if match else ""
    return None


def _status_message(exc: Exception) -> str:
    """The apiserver's Status message plus any field causes it does not already mention."""
    status = getattr(exc, "status", None)
    if status is None:
        response = getattr(exc, "response", None)
        return (response.text[:300] if response is not None else "") or type(exc).__name__
    message = status.message or status.reason or ""
    causes = getattr(status.details, "causes", None) or []
    extra = [f"{c.field}: {c.message}" for c in causes if c.field and c.field not in message]
    return "; ".join([message, *extra]) if extra else message
