"""A loopback kube-apiserver simulator for tests: the REST subset idleshare (lightkube) and kubectl use.

Served (JSON only):

* discovery: ``/version``, ``/api``, ``/api/v1``, ``/apis``, ``/apis/<group>``, ``/apis/<group>/<v>``
  (legacy discovery; clients asking for aggregated discovery fall back to it), and an OpenAPI v3
  index + per group-version documents (enough for kubectl to know the server validates fields, so
  ``kubectl apply --server-side`` works with default flags). ``/openapi/v2`` is 404.
* resources: core v1 ``nodes`` and ``namespaces`` (cluster-scoped), and every CRD of
  ``KUEUE_CRDS_DIR`` (ClusterQueue, Cohort, ResourceFlavor, WorkloadPriorityClass cluster-scoped;
  LocalQueue namespaced), in every served version (no conversion webhook: the storage version
  is v1beta2 and a v1beta1 request only sees ``apiVersion`` rewritten, as with bare CRDs).
* verbs: list (``limit``/``continue``, ``labelSelector`` equality- and set-based,
  ``fieldSelector`` on ``metadata.name``/``metadata.namespace``), get, create (POST), update (PUT,
  optimistic concurrency on ``resourceVersion``), server-side apply (PATCH
  ``application/apply-patch+yaml``, YAML or JSON body, ``fieldManager`` required, ``force``), JSON
  merge patch (``application/merge-patch+json``; strategic merge patch is accepted for core kinds
  only, 415 for custom resources as on a real apiserver), delete and deletecollection.

Object metadata: a global ``resourceVersion`` counter, ``uid``, ``creationTimestamp``,
``generation`` (custom resources: bumped when anything but metadata/status changes), namespaces get
the ``kubernetes.io/metadata.name`` label, ``status`` is ignored on writes to CRs with a status
subresource, ``metadata.finalizers`` delay deletion (``deletionTimestamp`` is set; the object goes
once they are removed). Writes that change nothing (same content, same field ownership) do not
bump ``resourceVersion``.

Kueue objects are defaulted and validated with :mod:`devkit.kubesim.crds` (schema + CEL, *not* the
webhook rules): failures are 422 ``Invalid`` Status bodies with ``causes``. Unknown fields follow the
``fieldValidation`` query parameter: ``Strict`` → 400, ``Warn`` → pruned with a ``Warning`` header,
``Ignore`` → pruned; when the parameter is absent the simulator behaves as ``Strict`` (a real
apiserver defaults to ``Warn``; unknown fields are always a bug in idleshare).

Server-side apply field ownership (a documented approximation of structured-merge-diff): a
*field path* is a top-level key of ``spec`` (``.spec.resourceGroups``), any other top-level key but
``metadata``/``status``/``apiVersion``/``kind`` (``.value``), or a single label/annotation key
(``.metadata.labels.<k>``); ``metadata.finalizers`` and ``ownerReferences`` are atomic paths.
Each manager owns a set of paths (shown in ``metadata.managedFields`` as FieldsV1). An apply by
manager M of paths P conflicts (409, ``FieldManagerConflict`` causes) on every p in P owned by
another manager whose current value differs from the applied one, unless ``force=true``, which
transfers ownership. Applied values replace the whole value at their path (nested structures are
not merged); paths M owned before but no longer applies are removed when nobody else owns them.
Non-apply writes (create, update, merge patch) take ownership of the paths they change, without
conflicts, for the manager named by ``fieldManager`` or the User-Agent's product token.

Test hooks: :class:`KubeSimulator` methods ``seed_nodes``, ``set_node``, ``delete_node``,
``put``, ``objects``, ``get``, ``set_status``, ``requests``/``count``/``clear_requests``,
``inject``, ``inject_timeout``, ``clear_faults``, ``outage``/``restore``, ``require_token``, and
``write_kubeconfig``. Optional TLS with a CA generated at start (``ca_pem``, ``ca_file``).
"""

from __future__ import annotations

import base64
import contextlib
import copy
import datetime as _dt
import http.server
import json
import re
import secrets
import socket
import ssl
import tempfile
import threading
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import yaml

from devkit.kubesim import crds as _crds

__all__ = ["ApiError", "Fault", "KubeSimulator", "RequestRecord", "ResourceType"]

KUBE_VERSION = {
    "major": "1",
    "minor": "32",
    "gitVersion": "v1.32.0-idleshare-sim",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2025-01-01T00:00:00Z",
    "goVersion": "go1.23.0",
    "compiler": "gc",
    "platform": "linux/amd64",
}
DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
_MAX_BODY = 8 * 1024 * 1024
_PATCH_TYPES = {
    "application/apply-patch+yaml": "apply",
    "application/apply-patch+cbor": "unsupported",
    "application/merge-patch+json": "merge",
    "application/strategic-merge-patch+json": "strategic",
    "application/json-patch+json": "json",
}


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# --------------------------------------------------------------------------------------------------
# Resource types
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ResourceType:
    group: str
    versions: tuple[str, ...]
    storage_version: str
    plural: str
    singular: str
    kind: str
    list_kind: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    crd: dict[str, _crds.CRDVersion] = field(default_factory=dict)  # version -> CRD (custom resources)
    status_subresource: bool = False
    deprecated_versions: dict[str, str] = field(default_factory=dict)

    @property
    def key(self) -> tuple[str, str]:
        return (self.group, self.plural)

    @property
    def group_resource(self) -> str:
        """``clusterqueues.kueue.x-k8s.io`` / ``nodes`` as in apiserver messages."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def group_kind(self) -> str:
        return f"{self.kind}.{self.group}" if self.group else self.kind

    def api_version(self, version: str | None = None) -> str:
        v = version or self.storage_version
        return f"{self.group}/{v}" if self.group else v

    @property
    def is_custom(self) -> bool:
        return bool(self.crd)


CORE_TYPES = (
    ResourceType("", ("v1",), "v1", "nodes", "node", "Node", "NodeList", False, ("no",), status_subresource=True),
    ResourceType(
        "",
        ("v1",),
        "v1",
        "namespaces",
        "namespace",
        "Namespace",
        "NamespaceList",
        False,
        ("ns",),
        status_subresource=True,
    ),
)
_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update"]


def _crd_types(crd_set: _crds.CRDSet) -> list[ResourceType]:
    out = []
    for (group, plural), by_version in sorted(crd_set.by_plural.items()):
        served = {v: cv for v, cv in by_version.items() if cv.served}
        if not served:
            continue
        storage = next((v for v, cv in served.items() if cv.storage), sorted(served)[-1])
        cv = served[storage]
        out.append(
            ResourceType(
                group=group,
                versions=tuple(sorted(served, reverse=True)),
                storage_version=storage,
                plural=plural,
                singular=cv.singular,
                kind=cv.kind,
                list_kind=cv.list_kind,
                namespaced=cv.namespaced,
                short_names=cv.short_names,
                crd=served,
                status_subresource="status" in cv.subresources,
                deprecated_versions={
                    v: (c.deprecation_warning or f"{group}/{v} {cv.kind} is deprecated")
                    for v, c in served.items()
                    if c.deprecated
                },
            )
        )
    return out


# --------------------------------------------------------------------------------------------------
# Errors and Status bodies
# --------------------------------------------------------------------------------------------------


class ApiError(Exception):
    def __init__(self, code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code, self.reason, self.message, self.details = code, reason, message, details

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details is not None:
            body["details"] = self.details
        return body


def status_body(code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    return ApiError(code, reason, message, details).status()


_REASON_BY_CODE = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    410: "Expired",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    502: "BadGateway",
    503: "ServiceUnavailable",
    504: "Timeout",
}


def _not_found(rt: ResourceType, name: str) -> ApiError:
    return ApiError(
        404, "NotFound", f'{rt.group_resource} "{name}" not found', {"name": name, "group": rt.group, "kind": rt.plural}
    )


def _namespace_not_found(ns: str) -> ApiError:
    return ApiError(404, "NotFound", f'namespaces "{ns}" not found', {"name": ns, "kind": "namespaces"})


def _invalid(rt: ResourceType, name: str, errors: list[_crds.FieldError]) -> ApiError:
    texts = [str(e) for e in errors]
    joined = texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"
    causes = [{"reason": e.type, "message": e.body(), "field": e.field} for e in errors]
    return ApiError(
        422,
        "Invalid",
        f'{rt.group_kind} "{name}" is invalid: {joined}',
        {"name": name, "group": rt.group, "kind": rt.kind, "causes": causes},
    )


# --------------------------------------------------------------------------------------------------
# Selectors
# --------------------------------------------------------------------------------------------------


def _split_top(s: str) -> list[str]:
    parts, depth, cur = [], 0, ""
    for ch in s:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    return [p.strip() for p in parts if p.strip()]


def parse_label_selector(selector: str) -> list[tuple[str, str, list[str]]]:
    """``k=v,k2!=v2,k3,!k4,k5 in (a,b),k6 notin (c)`` → requirements; raises ValueError."""
    reqs: list[tuple[str, str, list[str]]] = []
    for part in _split_top(selector):
        m = re.fullmatch(r"(\S+)\s+(in|notin)\s+\(([^)]*)\)", part)
        if m:
            reqs.append((m.group(1), m.group(2), [v.strip() for v in m.group(3).split(",") if v.strip()]))
            continue
        m = re.fullmatch(r"([^=!\s]+)\s*(==|=|!=)\s*([^=!\s]*)", part)
        if m:
            reqs.append((m.group(1), "!=" if m.group(2) == "!=" else "=", [m.group(3)]))
            continue
        m = re.fullmatch(r"!\s*([^=!\s]+)", part)
        if m:
            reqs.append((m.group(1), "!", []))
            continue
        if re.fullmatch(r"[^=!\s(),]+", part):
            reqs.append((part, "exists", []))
            continue
        raise ValueError(f"unable to parse requirement: {part!r}")
    for key, _, values in reqs:
        errs = _crds.is_qualified_name(key)
        errs += [m for v in values for m in _crds.is_valid_label_value(v)]
        if errs:
            raise ValueError(f"invalid label selector {selector!r}: {'; '.join(errs)}")
    return reqs


def label_selector_matches(reqs: list[tuple[str, str, list[str]]], labels: dict[str, str]) -> bool:
    for key, op, values in reqs:
        present = key in labels
        val = labels.get(key)
        if op == "=":
            ok = present and val == values[0]
        elif op == "!=":
            ok = not present or val != values[0]
        elif op == "in":
            ok = present and val in values
        elif op == "notin":
            ok = not present or val not in values
        else:
            ok = present if op == "exists" else not present
        if not ok:
            return False
    return True


def _parse_field_selector(selector: str) -> list[tuple[str, bool, str]]:
    out = []
    for part in _split_top(selector):
        m = re.fullmatch(r"([\w.]+)\s*(==|=|!=)\s*(.*)", part)
        if not m or m.group(1) not in ("metadata.name", "metadata.namespace"):
            raise ValueError(f'"{part}" is not a known field selector: only "metadata.name", "metadata.namespace"')
        out.append((m.group(1), m.group(2) != "!=", m.group(3)))
    return out


# --------------------------------------------------------------------------------------------------
# Field ownership helpers (see the module docstring)
# --------------------------------------------------------------------------------------------------

Path_ = tuple[str, ...]


def _field_paths(obj: dict[str, Any]) -> dict[Path_, Any]:
    paths: dict[Path_, Any] = {}
    for k, v in obj.items():
        if k in ("apiVersion", "kind", "status"):
            continue
        if k == "metadata":
            meta = v if isinstance(v, dict) else {}
            for mk in ("labels", "annotations"):
                for lk, lv in (meta.get(mk) or {}).items():
                    paths[("metadata", mk, lk)] = lv
            for mk in ("finalizers", "ownerReferences"):
                if meta.get(mk) is not None:
                    paths[("metadata", mk)] = meta[mk]
            continue
        if k == "spec" and isinstance(v, dict):
            for sk, sv in v.items():
                paths[("spec", sk)] = sv
            if not v:
                paths[("spec",)] = v
        else:
            paths[(k,)] = v
    return paths


def _get_path(obj: dict[str, Any], path: Path_) -> Any:
    cur: Any = obj
    for p in path:
        if not isinstance(cur, dict) or p not in cur:
            return _MISSING
        cur = cur[p]
    return cur


def _set_path(obj: dict[str, Any], path: Path_, value: Any) -> None:
    cur = obj
    for p in path[:-1]:
        cur = cur.setdefault(p, {})
    cur[path[-1]] = copy.deepcopy(value)


def _del_path(obj: dict[str, Any], path: Path_) -> None:
    parents = []
    cur: Any = obj
    for p in path[:-1]:
        if not isinstance(cur, dict) or p not in cur:
            return
        parents.append((cur, p))
        cur = cur[p]
    if isinstance(cur, dict):
        cur.pop(path[-1], None)
    # drop now-empty label/annotation maps
    for parent, key in reversed(parents):
        if key in ("labels", "annotations") and parent.get(key) == {}:
            del parent[key]


def _path_str(path: Path_) -> str:
    return "." + ".".join(path)


def _fields_v1(paths: Iterable[Path_]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for path in sorted(paths):
        cur = out
        for p in path:
            cur = cur.setdefault(f"f:{p}", {})
    return out


_MISSING = object()


def _merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            result.pop(k, None)
        else:
            result[k] = _merge_patch(result.get(k), v)
    return result


def _prune(value: Any, schema: dict[str, Any], path: str, removed: list[str]) -> Any:
    if isinstance(value, dict):
        if schema.get("x-kubernetes-preserve-unknown-fields"):
            return value
        props = schema.get("properties") or {}
        addl = schema.get("additionalProperties")
        out = {}
        for k, v in value.items():
            p = f"{path}.{k}" if path else k
            if k in props:
                out[k] = _prune(v, props[k], p, removed)
            elif isinstance(addl, dict):
                out[k] = _prune(v, addl, p, removed)
            elif addl is True:
                out[k] = v
            else:
                removed.append(p)
        return out
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [_prune(v, schema["items"], f"{path}[{i}]", removed) for i, v in enumerate(value)]
    return value


# --------------------------------------------------------------------------------------------------
# Records and faults
# --------------------------------------------------------------------------------------------------


@dataclass
class RequestRecord:
    method: str
    path: str
    query: dict[str, str]
    content_type: str | None = None
    status: int | None = None
    user_agent: str | None = None


@dataclass
class Fault:
    method: str | None
    path_regex: str | None
    status: int | None = 500
    times: int | None = 1  # None: until cleared
    delay: float = 0.0
    body: dict[str, Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    drop_connection: bool = False
    hits: int = 0

    def matches(self, method: str, path: str) -> bool:
        if self.times is not None and self.hits >= self.times:
            return False
        if self.method and self.method.upper() != method:
            return False
        return not (self.path_regex and not re.search(self.path_regex, path))


# --------------------------------------------------------------------------------------------------
# The simulator
# --------------------------------------------------------------------------------------------------


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    sim: KubeSimulator


class _Drop(Exception):
    pass


class KubeSimulator:
    """A kube-apiserver stand-in on 127.0.0.1 (random port). Use as a context manager or start/stop."""

    def __init__(
        self,
        *,
        tls: bool = False,
        token: str | None = None,
        crds_directory: str | Path | None = None,
        default_field_validation: str = "Strict",
        namespaces: Iterable[str] = DEFAULT_NAMESPACES,
    ) -> None:
        self.tls = tls
        self._token = token
        self.default_field_validation = default_field_validation
        self.crd_set = _crds.load_crds(crds_directory)
        self.types: list[ResourceType] = [*CORE_TYPES, *_crd_types(self.crd_set)]
        self._lock = threading.RLock()
        self._rv = 0
        self._store: dict[tuple[str, str], dict[tuple[str, str], dict[str, Any]]] = {rt.key: {} for rt in self.types}
        self._owners: dict[tuple[str, str, str, str], dict[str, dict[str, Any]]] = {}
        self._faults: list[Fault] = []
        self._requests: list[RequestRecord] = []
        self._outage: str | None = None
        self._stop = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._port = 0
        self._tmp = tempfile.TemporaryDirectory(prefix="kube-sim-")
        self.ca_pem: str | None = None
        self.ca_file: Path | None = None
        self._ssl_ctx: ssl.SSLContext | None = None
        for ns in namespaces:
            self.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> KubeSimulator:
        if self.tls and self._ssl_ctx is None:
            self._ssl_ctx = self._make_tls()
        self._stop.clear()
        self._bind(self._port)
        return self

    def _bind(self, port: int) -> None:
        server = _Server(("127.0.0.1", port), _Handler)
        server.sim = self
        if self._ssl_ctx is not None:
            server.socket = self._ssl_ctx.wrap_socket(server.socket, server_side=True)
        self._port = server.server_address[1]
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()

    def _unbind(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def stop(self) -> None:
        self._stop.set()  # wakes handlers sleeping in inject_timeout
        self._unbind()
        self._tmp.cleanup()

    def __enter__(self) -> KubeSimulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        return self._port

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self._port}"

    def _make_tls(self) -> ssl.SSLContext:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID

        now = _dt.datetime.now(_dt.UTC)
        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-sim-ca")])
        ca_cert = (
            x509.CertificateBuilder()
            .subject_name(ca_name)
            .issuer_name(ca_name)
            .public_key(ca_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - _dt.timedelta(minutes=5))
            .not_valid_after(now + _dt.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256())
        )
        key = ec.generate_private_key(ec.SECP256R1())
        import ipaddress

        cert = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]))
            .issuer_name(ca_name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - _dt.timedelta(minutes=5))
            .not_valid_after(now + _dt.timedelta(days=1))
            .add_extension(
                x509.SubjectAlternativeName(
                    [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
                ),
                critical=False,
            )
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256())
        )
        d = Path(self._tmp.name)
        self.ca_pem = ca_cert.public_bytes(serialization.Encoding.PEM).decode()
        self.ca_file = d / "ca.crt"
        self.ca_file.write_text(self.ca_pem)
        (d / "tls.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        (d / "tls.key").write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(d / "tls.crt", d / "tls.key")
        return ctx

    def write_kubeconfig(
        self,
        path: str | Path,
        *,
        token: str | None = None,
        namespace: str | None = None,
        context: str = "kube-sim",
    ) -> Path:
        """A kubeconfig for this simulator (``token`` defaults to the required token, if any)."""
        cluster: dict[str, Any] = {"server": self.url}
        if self.ca_pem:
            cluster["certificate-authority-data"] = base64.b64encode(self.ca_pem.encode()).decode()
        user: dict[str, Any] = {}
        tok = token if token is not None else self._token
        if tok:
            user["token"] = tok
        ctx: dict[str, Any] = {"cluster": context, "user": context}
        if namespace:
            ctx["namespace"] = namespace
        cfg = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": context, "cluster": cluster}],
            "users": [{"name": context, "user": user}],
            "contexts": [{"name": context, "context": ctx}],
            "current-context": context,
            "preferences": {},
        }
        p = Path(path)
        p.write_text(yaml.safe_dump(cfg, sort_keys=False))
        return p

    # ------------------------------------------------------------------ test hooks

    def require_token(self, token: str | None) -> None:
        """Demand ``Authorization: Bearer <token>`` (401 otherwise); ``None`` disables the check."""
        self._token = token

    def inject(
        self,
        method: str | None = None,
        path_regex: str | None = None,
        status: int = 500,
        times: int | None = 1,
        *,
        body: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        message: str | None = None,
        drop_connection: bool = False,
    ) -> Fault:
        """Answer the next ``times`` matching requests (``None``: all until cleared) with ``status``
        and a Status body (or ``body``), or close the connection without answering."""
        if body is None and not drop_connection:
            reason = _REASON_BY_CODE.get(status, "InternalError")
            msg = message or (
                "Internal error occurred: injected fault" if status >= 500 else f"injected {reason} ({status})"
            )
            body = status_body(status, reason, msg)
            if status == 429 and headers is None:
                headers = {"Retry-After": "1"}
        fault = Fault(method, path_regex, status, times, 0.0, body, dict(headers or {}), drop_connection)
        with self._lock:
            self._faults.append(fault)
        return fault

    def inject_timeout(
        self, method: str | None = None, path_regex: str | None = None, seconds: float = 5.0, times: int | None = 1
    ) -> Fault:
        """Delay matching requests by ``seconds`` (longer than the client's timeout), then answer."""
        fault = Fault(method, path_regex, None, times, seconds)
        with self._lock:
            self._faults.append(fault)
        return fault

    def clear_faults(self) -> None:
        with self._lock:
            self._faults.clear()

    def outage(self, mode: str = "refuse") -> None:
        """``refuse``: the port is closed (connection refused); ``503``: every request gets 503."""
        if mode not in ("refuse", "503"):
            raise ValueError("mode is 'refuse' or '503'")
        self._outage = mode
        if mode == "refuse":
            self._unbind()

    def restore(self) -> None:
        """End an outage (rebinding the same port)."""
        if self._outage == "refuse" and self._server is None:
            deadline = time.monotonic() + 5
            while True:
                try:
                    self._bind(self._port)
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.05)
        self._outage = None

    @property
    def requests(self) -> list[RequestRecord]:
        with self._lock:
            return list(self._requests)

    def clear_requests(self) -> None:
        with self._lock:
            self._requests.clear()

    def count(self, method: str | None = None, path_regex: str | None = None) -> int:
        return sum(
            1
            for r in self.requests
            if (method is None or r.method == method.upper()) and (path_regex is None or re.search(path_regex, r.path))
        )

    def resource_type(self, kind_or_plural: str) -> ResourceType:
        k = kind_or_plural.lower()
        for rt in self.types:
            if k in (rt.kind.lower(), rt.plural, rt.singular, *rt.short_names):
                return rt
        raise KeyError(kind_or_plural)

    def objects(self, kind: str, namespace: str | None = None) -> list[dict[str, Any]]:
        """Stored objects of a kind (``ClusterQueue``, ``clusterqueues``, ``Node``...), sorted by key."""
        rt = self.resource_type(kind)
        with self._lock:
            return [
                copy.deepcopy(o)
                for (ns, _), o in sorted(self._store[rt.key].items())
                if namespace is None or ns == namespace
            ]

    def get(self, kind: str, name: str, namespace: str = "") -> dict[str, Any] | None:
        rt = self.resource_type(kind)
        with self._lock:
            obj = self._store[rt.key].get((namespace if rt.namespaced else "", name))
            return copy.deepcopy(obj) if obj else None

    def put(self, obj: dict[str, Any], *, validate: bool = True) -> dict[str, Any]:
        """Store ``obj`` directly (create or replace, no field manager), validating Kueue kinds."""
        rt = self.resource_type(obj["kind"])
        meta = obj.get("metadata") or {}
        ns = meta.get("namespace", "") if rt.namespaced else ""
        with self._lock:
            existing = self._store[rt.key].get((ns, meta["name"]))
            new = copy.deepcopy(obj)
            new["apiVersion"] = rt.api_version()
            if rt.is_custom and validate:
                errs = _crds.validation_errors(new, crds=self.crd_set)
                if errs:
                    raise _invalid(rt, meta["name"], errs)
                new = _crds.apply_defaults(new, self.crd_set)
            return copy.deepcopy(self._commit(rt, ns, meta["name"], existing, new, owners=None))

    def seed_nodes(self, nodes: list[dict[str, Any]] | dict[str, Any] | str | Path) -> None:
        """Replace every node: a list of Node dicts, a NodeList dict, or a path to NodeList JSON/YAML."""
        if isinstance(nodes, str | Path):
            nodes = yaml.safe_load(Path(nodes).read_text())
        items = nodes.get("items", []) if isinstance(nodes, dict) else nodes
        rt = self.resource_type("nodes")
        with self._lock:
            for key in list(self._store[rt.key]):
                self._remove(rt, *key)
            for node in items:
                self.set_node(node)

    def set_node(self, node: dict[str, Any]) -> dict[str, Any]:
        node = copy.deepcopy(node)
        node.setdefault("apiVersion", "v1")
        node.setdefault("kind", "Node")
        return self.put(node, validate=False)

    def delete_node(self, name: str) -> None:
        rt = self.resource_type("nodes")
        with self._lock:
            if ("", name) not in self._store[rt.key]:
                raise KeyError(name)
            self._remove(rt, "", name)

    def set_status(self, kind: str, name: str, status: dict[str, Any], namespace: str = "") -> dict[str, Any]:
        rt = self.resource_type(kind)
        ns = namespace if rt.namespaced else ""
        with self._lock:
            cur = self._store[rt.key][(ns, name)]
            new = copy.deepcopy(cur)
            new["status"] = copy.deepcopy(status)
            return copy.deepcopy(self._commit(rt, ns, name, cur, new, owners=None))

    # ------------------------------------------------------------------ storage internals

    def _next_rv(self) -> str:
        self._rv += 1
        return str(self._rv)

    def _remove(self, rt: ResourceType, ns: str, name: str) -> None:
        self._store[rt.key].pop((ns, name), None)
        self._owners.pop((rt.group, rt.plural, ns, name), None)
        self._next_rv()
        if rt.kind == "Namespace":  # namespace deletion removes its content (no Terminating phase)
            for other in self.types:
                if other.namespaced:
                    for key in [k for k in self._store[other.key] if k[0] == name]:
                        self._remove(other, *key)

    def _render_managed_fields(self, rt: ResourceType, owners: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
        out = []
        for manager, entry in sorted(owners.items()):
            if not entry["paths"]:
                continue
            out.append(
                {
                    "manager": manager,
                    "operation": entry["operation"],
                    "apiVersion": entry["apiVersion"],
                    "time": entry["time"],
                    "fieldsType": "FieldsV1",
                    "fieldsV1": _fields_v1(entry["paths"]),
                }
            )
        return out

    def _commit(
        self,
        rt: ResourceType,
        ns: str,
        name: str,
        existing: dict[str, Any] | None,
        new: dict[str, Any],
        owners: dict[str, dict[str, Any]] | None,
    ) -> dict[str, Any]:
        """Store ``new`` (system metadata filled in); a no-op when nothing changed."""
        okey = (rt.group, rt.plural, ns, name)
        new = copy.deepcopy(new)
        new["apiVersion"] = rt.api_version()
        new["kind"] = rt.kind
        meta = new.setdefault("metadata", {})
        meta["name"] = name
        if rt.namespaced:
            meta["namespace"] = ns
        else:
            meta.pop("namespace", None)
        if rt.kind == "Namespace":
            meta.setdefault("labels", {})["kubernetes.io/metadata.name"] = name
            new.setdefault("spec", {"finalizers": ["kubernetes"]})
            new.setdefault("status", {"phase": "Active"})
        old_owners = self._owners.get(okey, {})
        owners = owners if owners is not None else old_owners
        for k in ("uid", "creationTimestamp", "resourceVersion", "generation", "managedFields", "selfLink"):
            meta.pop(k, None)
        if existing is not None:
            emeta = existing["metadata"]
            for k in ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds"):
                if k in emeta:
                    meta[k] = emeta[k]
            if rt.status_subresource and rt.is_custom and "status" in existing and "status" not in new:
                new["status"] = copy.deepcopy(existing["status"])
            comparable_old = self._strip_system(existing)
            comparable_new = self._strip_system(new)
            owners_same = {m: e["paths"] for m, e in old_owners.items() if e["paths"]} == {
                m: e["paths"] for m, e in owners.items() if e["paths"]
            }
            if comparable_old == comparable_new and owners_same:
                return existing
            spec_changed = {k: v for k, v in comparable_old.items() if k not in ("metadata", "status")} != {
                k: v for k, v in comparable_new.items() if k not in ("metadata", "status")
            }
            generation = existing["metadata"].get("generation")
            if generation is not None:
                meta["generation"] = generation + (1 if spec_changed else 0)
        else:
            meta["uid"] = str(uuid.uuid4())
            meta["creationTimestamp"] = _now()
            if rt.is_custom:
                meta["generation"] = 1
        meta["resourceVersion"] = self._next_rv()
        self._owners[okey] = owners
        managed = self._render_managed_fields(rt, owners)
        if managed:
            meta["managedFields"] = managed
        # finalizers gone on an object being deleted: it disappears now
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            self._remove(rt, ns, name)
            return new
        self._store[rt.key][(ns, name)] = new
        return new

    @staticmethod
    def _strip_system(obj: dict[str, Any]) -> dict[str, Any]:
        o = copy.deepcopy(obj)
        for k in ("resourceVersion", "managedFields", "generation", "uid", "creationTimestamp", "selfLink"):
            o.get("metadata", {}).pop(k, None)
        o.pop("apiVersion", None)
        return o

    # ------------------------------------------------------------------ request handling

    def _record(self, rec: RequestRecord) -> None:
        with self._lock:
            self._requests.append(rec)

    def _match_fault(self, method: str, path: str) -> Fault | None:
        with self._lock:
            for f in self._faults:
                if f.matches(method, path):
                    f.hits += 1
                    return f
        return None

    def handle(
        self, method: str, raw_path: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, Any, dict[str, str]]:
        """Route one request; returns (status code, JSON-able body, extra headers)."""
        parts = urlsplit(raw_path)
        path = parts.path.rstrip("/") or "/"
        query = {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
        if self._token is not None and headers.get("authorization", "") != f"Bearer {self._token}":
            raise ApiError(401, "Unauthorized", "Unauthorized")
        if method == "GET":
            doc = self._discovery(path)
            if doc is not None:
                return 200, doc, {}
        if path.startswith("/openapi/"):
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        route = self._route(path)
        if route is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        rt, version, ns, name, sub = route
        if rt.namespaced and ns is None and name is not None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if sub not in (None, "status"):
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if query.get("watch") in ("true", "1"):
            raise ApiError(405, "MethodNotAllowed", "watch is not supported by the simulator")
        warnings: dict[str, str] = {}
        if version in rt.deprecated_versions:
            warnings["Warning"] = f'299 - "{rt.deprecated_versions[version]}"'
        with self._lock:
            if name is None:
                if method == "GET":
                    return 200, self._list(rt, version, ns, query), warnings
                if method == "POST":
                    code, obj, h = self._create(rt, version, ns, query, headers, body)
                    return code, obj, {**warnings, **h}
                if method == "DELETE":
                    return 200, self._delete_collection(rt, version, ns, query), warnings
                raise ApiError(405, "MethodNotAllowed", f"the server does not allow this method on {rt.plural}")
            if method == "GET":
                return 200, self._out(rt, version, self._get(rt, ns or "", name)), warnings
            if method == "PUT":
                code, obj, h = self._update(rt, version, ns or "", name, query, headers, body, sub)
                return code, obj, {**warnings, **h}
            if method == "PATCH":
                code, obj, h = self._patch(rt, version, ns or "", name, query, headers, body, sub)
                return code, obj, {**warnings, **h}
            if method == "DELETE":
                return 200, self._delete(rt, version, ns or "", name, body), warnings
        raise ApiError(405, "MethodNotAllowed", f"the server does not allow this method on {rt.plural}")

    # -------- discovery

    def _discovery(self, path: str) -> Any:
        if path == "/version":
            return KUBE_VERSION
        if path == "/api":
            return {
                "kind": "APIVersions",
                "versions": ["v1"],
                "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": f"127.0.0.1:{self.port}"}],
            }
        if path == "/api/v1":
            return self._resource_list("", "v1")
        groups = self._groups()
        if path == "/apis":
            return {"kind": "APIGroupList", "apiVersion": "v1", "groups": list(groups.values())}
        m = re.fullmatch(r"/apis/([^/]+)", path)
        if m and m.group(1) in groups:
            return {"kind": "APIGroup", "apiVersion": "v1", **groups[m.group(1)]}
        m = re.fullmatch(r"/apis/([^/]+)/([^/]+)", path)
        if (
            m
            and m.group(1) in groups
            and any(rt.group == m.group(1) and m.group(2) in rt.versions for rt in self.types)
        ):
            return self._resource_list(m.group(1), m.group(2))
        if path == "/openapi/v3":
            gvs = {("", "v1")} | {(rt.group, v) for rt in self.types if rt.group for v in rt.versions}
            out = {}
            for g, v in sorted(gvs):
                key = f"apis/{g}/{v}" if g else f"api/{v}"
                out[key] = {"serverRelativeURL": f"/openapi/v3/{key}?hash={g or 'core'}{v}"}
            return {"paths": out}
        m = re.fullmatch(r"/openapi/v3/(?:api/(v1)|apis/([^/]+)/([^/]+))", path)
        if m:
            group, version = (m.group(2) or ""), (m.group(1) or m.group(3))
            if any(rt.group == group and version in rt.versions for rt in self.types):
                return self._openapi_v3(group, version)
        return None

    def _groups(self) -> dict[str, dict[str, Any]]:
        groups: dict[str, dict[str, Any]] = {}
        for rt in self.types:
            if not rt.group:
                continue
            g = groups.setdefault(
                rt.group,
                {
                    "name": rt.group,
                    "versions": [],
                    "preferredVersion": {"groupVersion": rt.api_version(), "version": rt.storage_version},
                },
            )
            for v in rt.versions:
                gv = {"groupVersion": f"{rt.group}/{v}", "version": v}
                if gv not in g["versions"]:
                    g["versions"].append(gv)
        return groups

    def _resource_list(self, group: str, version: str) -> dict[str, Any]:
        resources = []
        for rt in self.types:
            if rt.group != group or version not in rt.versions:
                continue
            entry = {
                "name": rt.plural,
                "singularName": rt.singular,
                "namespaced": rt.namespaced,
                "kind": rt.kind,
                "verbs": _VERBS,
                "storageVersionHash": base64.b64encode(rt.group_resource.encode()).decode()[:12],
            }
            if rt.short_names:
                entry["shortNames"] = list(rt.short_names)
            resources.append(entry)
            if rt.status_subresource:
                resources.append(
                    {
                        "name": f"{rt.plural}/status",
                        "singularName": "",
                        "namespaced": rt.namespaced,
                        "kind": rt.kind,
                        "verbs": ["get", "patch", "update"],
                    }
                )
        return {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": f"{group}/{version}" if group else version,
            "resources": resources,
        }

    def _openapi_v3(self, group: str, version: str) -> dict[str, Any]:
        params = [
            {"name": n, "in": "query", "schema": {"type": t}, "uniqueItems": True}
            for n, t in (
                ("dryRun", "string"),
                ("fieldManager", "string"),
                ("fieldValidation", "string"),
                ("force", "boolean"),
            )
        ]
        paths: dict[str, Any] = {}
        schemas: dict[str, Any] = {}
        for rt in self.types:
            if rt.group != group or version not in rt.versions:
                continue
            gvk = {"group": group, "version": version, "kind": rt.kind}
            prefix = f"/apis/{group}/{version}" if group else f"/api/{version}"
            ns_part = "/namespaces/{namespace}" if rt.namespaced else ""
            schema_name = (
                ".".join(reversed(group.split("."))) + f".{version}.{rt.kind}"
                if group
                else f"io.k8s.api.core.v1.{rt.kind}"
            )
            ref = {"$ref": f"#/components/schemas/{schema_name}"}
            response = {"200": {"description": "OK", "content": {"application/json": {"schema": ref}}}}
            op = {
                "x-kubernetes-group-version-kind": gvk,
                "parameters": params,
                "responses": response,
            }
            paths[f"{prefix}{ns_part}/{rt.plural}/{{name}}"] = {
                "get": {**op, "operationId": f"read{rt.kind}", "x-kubernetes-action": "get", "parameters": []},
                "put": {**op, "operationId": f"replace{rt.kind}", "x-kubernetes-action": "put"},
                "patch": {**op, "operationId": f"patch{rt.kind}", "x-kubernetes-action": "patch"},
                "delete": {**op, "operationId": f"delete{rt.kind}", "x-kubernetes-action": "delete", "parameters": []},
            }
            paths[f"{prefix}{ns_part}/{rt.plural}"] = {
                "get": {**op, "operationId": f"list{rt.kind}", "x-kubernetes-action": "list", "parameters": []},
                "post": {**op, "operationId": f"create{rt.kind}", "x-kubernetes-action": "post"},
            }
            if rt.is_custom:
                schema = copy.deepcopy(rt.crd[version].schema)
            else:
                schema = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
            schema["x-kubernetes-group-version-kind"] = [gvk]
            schemas[schema_name] = schema
        return {
            "openapi": "3.0.0",
            "info": {"title": "Kubernetes", "version": KUBE_VERSION["gitVersion"]},
            "paths": paths,
            "components": {"schemas": schemas},
        }

    # -------- routing

    def _route(self, path: str) -> tuple[ResourceType, str, str | None, str | None, str | None] | None:
        m = re.fullmatch(r"/api/(v1)(/.*)", path)
        group = ""
        if m:
            version, rest = m.group(1), m.group(2)
        else:
            m = re.fullmatch(r"/apis/([^/]+)/([^/]+)(/.*)", path)
            if not m:
                return None
            group, version, rest = m.group(1), m.group(2), m.group(3)
        segs = rest.strip("/").split("/")
        ns: str | None = None
        if len(segs) >= 3 and segs[0] == "namespaces":
            ns, segs = segs[1], segs[2:]
        plural = segs[0]
        name = segs[1] if len(segs) > 1 else None
        sub = segs[2] if len(segs) > 2 else None
        if len(segs) > 3:
            return None
        for rt in self.types:
            if rt.group == group and rt.plural == plural and version in rt.versions:
                if ns is not None and not rt.namespaced:
                    return None
                return rt, version, ns, name, sub
        return None

    # -------- helpers

    def _out(self, rt: ResourceType, version: str, obj: dict[str, Any]) -> dict[str, Any]:
        out = copy.deepcopy(obj)
        out["apiVersion"] = rt.api_version(version)
        return out

    def _get(self, rt: ResourceType, ns: str, name: str) -> dict[str, Any]:
        obj = self._store[rt.key].get((ns if rt.namespaced else "", name))
        if obj is None:
            raise _not_found(rt, name)
        return obj

    def _require_namespace(self, rt: ResourceType, ns: str | None) -> str:
        if not rt.namespaced:
            return ""
        if not ns:
            raise ApiError(400, "BadRequest", "the namespace of the object must be set")
        if ("", ns) not in self._store[("", "namespaces")]:
            raise _namespace_not_found(ns)
        return ns

    @staticmethod
    def _parse_body(body: bytes, content_type: str) -> dict[str, Any]:
        try:
            text = body.decode("utf-8")
            obj = yaml.safe_load(text) if "yaml" in content_type else json.loads(text)
        except (UnicodeDecodeError, ValueError, yaml.YAMLError) as e:
            raise ApiError(400, "BadRequest", f"error decoding request body: {e}") from e
        if not isinstance(obj, dict):
            raise ApiError(400, "BadRequest", "the request body must be a JSON/YAML object")
        return obj

    @staticmethod
    def _manager(query: dict[str, str], headers: dict[str, str]) -> str:
        if query.get("fieldManager"):
            return query["fieldManager"]
        ua = headers.get("user-agent") or "unknown"
        return ua.split("/")[0] or "unknown"

    def _check_kind(self, rt: ResourceType, version: str, obj: dict[str, Any]) -> None:
        api_version, kind = obj.get("apiVersion"), obj.get("kind")
        if not api_version or not kind:
            raise ApiError(400, "BadRequest", "Object 'Kind' or 'apiVersion' is missing in the request body")
        if kind != rt.kind or api_version != rt.api_version(version):
            raise ApiError(
                400,
                "BadRequest",
                f"the API version in the data ({api_version}) does not match the expected API version "
                f"({rt.api_version(version)})"
                if kind == rt.kind
                else f"the kind in the data ({kind}) does not match the expected kind ({rt.kind})",
            )

    def _admit(
        self,
        rt: ResourceType,
        version: str,
        name: str,
        obj: dict[str, Any],
        old: dict[str, Any] | None,
        query: dict[str, str],
    ) -> tuple[dict[str, Any], dict[str, str]]:
        """Default, handle unknown fields per fieldValidation, validate; returns (object, headers)."""
        headers: dict[str, str] = {}
        if rt.kind == "Namespace":
            errs = _crds.is_dns1123_label(name)
            if errs:
                raise ApiError(
                    422,
                    "Invalid",
                    f'Namespace "{name}" is invalid: metadata.name: Invalid value: "{name}": {errs[0]}',
                    {
                        "name": name,
                        "kind": "Namespace",
                        "causes": [{"reason": "FieldValueInvalid", "message": errs[0], "field": "metadata.name"}],
                    },
                )
        if not rt.is_custom:
            return obj, headers
        mode = query.get("fieldValidation") or self.default_field_validation
        if mode not in ("Strict", "Warn", "Ignore"):
            raise ApiError(400, "BadRequest", f'fieldValidation must be one of "Ignore", "Warn", "Strict": {mode}')
        cv = rt.crd[version]
        obj = copy.deepcopy(obj)
        if rt.status_subresource:
            obj.pop("status", None)
        old_in = copy.deepcopy(old) if old is not None else None
        if old_in is not None:
            old_in["apiVersion"] = rt.api_version(version)
        errs = _crds.validation_errors(obj, old_in, crds=self.crd_set)
        unknown = [e for e in errs if e.unknown_field]
        if unknown:
            if mode == "Strict":
                fields = ", ".join(f'unknown field "{e.field}"' for e in unknown)
                raise ApiError(
                    400,
                    "BadRequest",
                    f'{rt.kind} in version "{version}" cannot be handled as a {rt.kind}: strict decoding error: {fields}',
                )
            removed: list[str] = []
            meta = obj.pop("metadata", {})
            obj = _prune(obj, cv.schema, "", removed)
            obj["metadata"] = {k: v for k, v in meta.items() if k in _crds._OBJECT_META_FIELDS}
            if mode == "Warn":
                headers["Warning"] = ", ".join(f'299 - "unknown field \\"{e.field}\\""' for e in unknown)
            errs = [e for e in errs if not e.unknown_field]
        if errs:
            raise _invalid(rt, name, errs)
        defaulted = _crds.apply_defaults(obj, self.crd_set)
        defaulted["apiVersion"] = rt.api_version()
        return defaulted, headers

    # -------- verbs

    def _list(self, rt: ResourceType, version: str, ns: str | None, query: dict[str, str]) -> dict[str, Any]:
        try:
            label_reqs = parse_label_selector(query.get("labelSelector", ""))
            field_reqs = _parse_field_selector(query.get("fieldSelector", ""))
        except ValueError as e:
            raise ApiError(400, "BadRequest", str(e)) from e
        items = []
        for (ons, oname), obj in sorted(self._store[rt.key].items()):
            if ns is not None and ons != ns:
                continue
            if not label_selector_matches(label_reqs, obj["metadata"].get("labels") or {}):
                continue
            values = {"metadata.name": oname, "metadata.namespace": ons}
            if not all((values[f] == v) == eq for f, eq, v in field_reqs):
                continue
            items.append(((ons, oname), obj))
        start = 0
        if query.get("continue"):
            try:
                token = json.loads(base64.urlsafe_b64decode(query["continue"].encode()))
                after = tuple(token["after"])
            except (ValueError, KeyError, TypeError) as e:
                raise ApiError(
                    400, "BadRequest", "continue key is not valid: incorrect encoded start resourceVersion"
                ) from e
            start = next((i for i, (k, _) in enumerate(items) if k > after), len(items))
        meta: dict[str, Any] = {"resourceVersion": str(self._rv)}
        limit = int(query["limit"]) if query.get("limit", "").isdigit() and int(query["limit"]) > 0 else None
        page = items[start:]
        if limit is not None and len(page) > limit:
            page = page[:limit]
            last_key = page[-1][0]
            meta["continue"] = base64.urlsafe_b64encode(
                json.dumps({"after": list(last_key), "rv": self._rv}).encode()
            ).decode()
            meta["remainingItemCount"] = len(items) - start - limit
        return {
            "kind": rt.list_kind,
            "apiVersion": rt.api_version(version),
            "metadata": meta,
            "items": [self._out(rt, version, o) for _, o in page],
        }

    def _create(
        self,
        rt: ResourceType,
        version: str,
        ns: str | None,
        query: dict[str, str],
        headers: dict[str, str],
        body: bytes,
    ) -> tuple[int, dict[str, Any], dict[str, str]]:
        obj = self._parse_body(body, headers.get("content-type", "application/json"))
        self._check_kind(rt, version, obj)
        meta = obj.setdefault("metadata", {})
        if rt.namespaced:
            body_ns = meta.get("namespace")
            if body_ns and ns and body_ns != ns:
                raise ApiError(
                    400,
                    "BadRequest",
                    "the namespace of the provided object does not match the namespace sent on the request",
                )
            ns = ns or body_ns
        ns = self._require_namespace(rt, ns)
        if meta.get("resourceVersion"):
            raise ApiError(400, "BadRequest", "resourceVersion should not be set on objects to be created")
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + secrets.token_hex(3)[:5]
        name = meta.get("name")
        if not name:
            raise _invalid(
                rt, "", [_crds.FieldError("metadata.name", "FieldValueRequired", "name or generateName is required")]
            )
        if (ns, name) in self._store[rt.key]:
            raise ApiError(
                409,
                "AlreadyExists",
                f'{rt.group_resource} "{name}" already exists',
                {"name": name, "group": rt.group, "kind": rt.plural},
            )
        if rt.namespaced:
            meta["namespace"] = ns
        new, h = self._admit(rt, version, name, obj, None, query)
        if query.get("dryRun") == "All":
            return 201, self._out(rt, version, new), h
        manager = self._manager(query, headers)
        owners = {
            manager: {
                "operation": "Update",
                "apiVersion": rt.api_version(version),
                "time": _now(),
                "paths": set(_field_paths(obj)),
            }
        }
        stored = self._commit(rt, ns, name, None, new, owners)
        return 201, self._out(rt, version, stored), h

    def _update(
        self,
        rt: ResourceType,
        version: str,
        ns: str,
        name: str,
        query: dict[str, str],
        headers: dict[str, str],
        body: bytes,
        sub: str | None,
    ) -> tuple[int, dict[str, Any], dict[str, str]]:
        obj = self._parse_body(body, headers.get("content-type", "application/json"))
        self._check_kind(rt, version, obj)
        ns = self._require_namespace(rt, ns)
        meta = obj.setdefault("metadata", {})
        if meta.get("name") != name:
            raise ApiError(
                400,
                "BadRequest",
                f"the name of the object ({meta.get('name')}) does not match the name on the URL ({name})",
            )
        existing = self._get(rt, ns, name)
        rv = meta.get("resourceVersion")
        if not rv and rt.is_custom:
            raise _invalid(
                rt,
                name,
                [
                    _crds.FieldError(
                        "metadata.resourceVersion", "FieldValueInvalid", "must be specified for an update", 0
                    )
                ],
            )
        if rv and rv != existing["metadata"]["resourceVersion"]:
            raise self._conflict(rt, name)
        if sub == "status":
            new = copy.deepcopy(existing)
            new["status"] = obj.get("status")
            return 200, self._out(rt, version, self._commit(rt, ns, name, existing, new, None)), {}
        return self._write(rt, version, ns, name, existing, obj, query, headers)

    def _conflict(self, rt: ResourceType, name: str) -> ApiError:
        return ApiError(
            409,
            "Conflict",
            f'Operation cannot be fulfilled on {rt.group_resource} "{name}": the object has been modified; '
            "please apply your changes to the latest version and try again",
            {"name": name, "group": rt.group, "kind": rt.plural},
        )

    def _write(
        self,
        rt: ResourceType,
        version: str,
        ns: str,
        name: str,
        existing: dict[str, Any],
        obj: dict[str, Any],
        query: dict[str, str],
        headers: dict[str, str],
    ) -> tuple[int, dict[str, Any], dict[str, str]]:
        """A non-apply write (update / merge patch): ownership of changed paths moves to the manager."""
        if rt.namespaced:
            obj.setdefault("metadata", {})["namespace"] = ns
        new, h = self._admit(rt, version, name, obj, existing, query)
        if query.get("dryRun") == "All":
            return 200, self._out(rt, version, new), h
        manager = self._manager(query, headers)
        old_paths, new_paths = _field_paths(existing), _field_paths(new)
        changed = {p for p, v in new_paths.items() if old_paths.get(p, _MISSING) != v} | (
            set(old_paths) - set(new_paths)
        )
        owners = self._transfer(rt, ns, name, manager, changed, set(new_paths), "Update", version)
        stored = self._commit(rt, ns, name, existing, new, owners)
        return 200, self._out(rt, version, stored), h

    def _transfer(
        self,
        rt: ResourceType,
        ns: str,
        name: str,
        manager: str,
        taken: set[Path_],
        present: set[Path_],
        operation: str,
        version: str,
        replace: set[Path_] | None = None,
    ) -> dict[str, dict[str, Any]]:
        owners = copy.deepcopy(self._owners.get((rt.group, rt.plural, ns, name), {}))
        for m, entry in owners.items():
            if m != manager:
                entry["paths"] = (entry["paths"] - taken) & present
        entry = owners.get(manager)
        paths = set(replace) if replace is not None else ((entry["paths"] if entry else set()) | taken) & present
        if entry is None or entry["paths"] != paths or entry["operation"] != operation:
            owners[manager] = {
                "operation": operation,
                "apiVersion": rt.api_version(version),
                "time": _now(),
                "paths": paths,
            }
        return {m: e for m, e in owners.items() if e["paths"] or m == manager}

    def _patch(
        self,
        rt: ResourceType,
        version: str,
        ns: str,
        name: str,
        query: dict[str, str],
        headers: dict[str, str],
        body: bytes,
        sub: str | None,
    ) -> tuple[int, dict[str, Any], dict[str, str]]:
        ctype = (headers.get("content-type") or "").split(";")[0].strip()
        kind = _PATCH_TYPES.get(ctype)
        if kind is None or kind in ("unsupported", "json") or (kind == "strategic" and rt.is_custom):
            raise ApiError(
                415,
                "UnsupportedMediaType",
                f"the body of the request was in an unknown format - accepted media types include: "
                f'application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml ("{ctype}")',
            )
        if kind == "apply":
            return self._apply(rt, version, ns, name, query, headers, body)
        ns = self._require_namespace(rt, ns)
        patch = self._parse_body(body, "application/json")
        existing = self._get(rt, ns, name)
        rv = (patch.get("metadata") or {}).get("resourceVersion")
        if rv and rv != existing["metadata"]["resourceVersion"]:
            raise self._conflict(rt, name)
        current = self._out(rt, version, existing)
        merged = _merge_patch(current, patch)
        if sub == "status":
            new = copy.deepcopy(existing)
            new["status"] = merged.get("status")
            return 200, self._out(rt, version, self._commit(rt, ns, name, existing, new, None)), {}
        for k in ("managedFields", "resourceVersion", "generation", "uid", "creationTimestamp"):
            merged["metadata"].pop(k, None)
        return self._write(rt, version, ns, name, existing, merged, query, headers)

    def _apply(
        self,
        rt: ResourceType,
        version: str,
        ns: str,
        name: str,
        query: dict[str, str],
        headers: dict[str, str],
        body: bytes,
    ) -> tuple[int, dict[str, Any], dict[str, str]]:
        manager = query.get("fieldManager")
        if not manager:
            raise ApiError(
                422,
                "Invalid",
                'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch',
                {
                    "group": "meta.k8s.io",
                    "kind": "PatchOptions",
                    "causes": [
                        {
                            "reason": "FieldValueRequired",
                            "message": "Required value: is required for apply patch",
                            "field": "fieldManager",
                        }
                    ],
                },
            )
        force = query.get("force") in ("true", "1")
        applied = self._parse_body(body, "application/apply-patch+yaml")
        self._check_kind(rt, version, applied)
        ns = self._require_namespace(rt, ns)
        ameta = applied.setdefault("metadata", {})
        if ameta.get("name") != name:
            raise ApiError(
                400,
                "BadRequest",
                f"the name of the object ({ameta.get('name')}) does not match the name on the URL ({name})",
            )
        if rt.namespaced and ameta.get("namespace") not in (None, ns):
            raise ApiError(
                400,
                "BadRequest",
                "the namespace of the provided object does not match the namespace sent on the request",
            )
        if ameta.get("managedFields") is not None:
            raise ApiError(400, "BadRequest", "metadata.managedFields must be nil")
        for k in ("uid", "creationTimestamp", "generation", "selfLink"):
            ameta.pop(k, None)
        existing = self._store[rt.key].get((ns, name))
        rv = ameta.pop("resourceVersion", None)
        if rv and (existing is None or rv != existing["metadata"]["resourceVersion"]):
            raise self._conflict(rt, name)
        if rt.status_subresource and rt.is_custom:
            applied.pop("status", None)
        applied_paths = _field_paths(applied)
        okey = (rt.group, rt.plural, ns, name)
        owners = self._owners.get(okey, {}) if existing is not None else {}
        # conflicts: compare the applied values, as the schema would default them, with the live ones
        if existing is not None and not force:
            candidate = copy.deepcopy(existing)
            for p, v in applied_paths.items():
                _set_path(candidate, p, v)
            if rt.is_custom:
                candidate = _crds.apply_defaults(candidate, self.crd_set)
            conflicts: dict[str, list[Path_]] = {}
            for p in applied_paths:
                if _get_path(candidate, p) == _get_path(existing, p):
                    continue
                for m, entry in owners.items():
                    if m != manager and p in entry["paths"]:
                        conflicts.setdefault(m, []).append(p)
            if conflicts:
                raise self._apply_conflict(rt, name, version, conflicts)
        # merge
        if existing is None:
            new: dict[str, Any] = {"apiVersion": rt.api_version(version), "kind": rt.kind, "metadata": {"name": name}}
            if rt.namespaced:
                new["metadata"]["namespace"] = ns
        else:
            new = self._out(rt, version, existing)
            for k in ("managedFields", "resourceVersion", "generation"):
                new["metadata"].pop(k, None)
        prev = owners.get(manager, {}).get("paths", set())
        others = set().union(*(e["paths"] for m, e in owners.items() if m != manager)) if owners else set()
        if force:
            others -= set(applied_paths)
        for p in prev - set(applied_paths) - others:
            _del_path(new, p)
        for p, v in applied_paths.items():
            if p == ("spec",):
                new.setdefault("spec", {})
            else:
                _set_path(new, p, v)
        adm, h = self._admit(rt, version, name, new, existing, query)
        if query.get("dryRun") == "All":
            return (201 if existing is None else 200), self._out(rt, version, adm), h
        present = set(_field_paths(adm))
        if existing is None:
            new_owners = {
                manager: {
                    "operation": "Apply",
                    "apiVersion": rt.api_version(version),
                    "time": _now(),
                    "paths": set(applied_paths),
                }
            }
        else:  # without force, equal values are co-owned; with force, ownership moves to the applier
            taken = set(applied_paths) if force else set()
            everything = present | set(applied_paths)
            new_owners = self._transfer(
                rt, ns, name, manager, taken, everything, "Apply", version, replace=set(applied_paths)
            )
        stored = self._commit(rt, ns, name, existing, adm, new_owners)
        return (201 if existing is None else 200), self._out(rt, version, stored), h

    def _apply_conflict(self, rt: ResourceType, name: str, version: str, conflicts: dict[str, list[Path_]]) -> ApiError:
        total = sum(len(v) for v in conflicts.values())
        causes, lines = [], []
        for m, paths in sorted(conflicts.items()):
            for p in paths:
                causes.append(
                    {"reason": "FieldManagerConflict", "message": f'conflict with "{m}"', "field": _path_str(p)}
                )
            if len(paths) == 1:
                lines.append(f'conflict with "{m}" using {rt.api_version(version)}: {_path_str(paths[0])}')
            else:
                lines.append(
                    f'conflicts with "{m}" using {rt.api_version(version)}:\n'
                    + "\n".join(f"- {_path_str(p)}" for p in paths)
                )
        plural = "conflict" if total == 1 else "conflicts"
        return ApiError(
            409,
            "Conflict",
            f"Apply failed with {total} {plural}: " + "\n".join(lines),
            {"name": name, "group": rt.group, "kind": rt.plural, "causes": causes},
        )

    def _delete(self, rt: ResourceType, version: str, ns: str, name: str, body: bytes) -> dict[str, Any]:
        ns = self._require_namespace(rt, ns) if rt.namespaced else ""
        existing = self._get(rt, ns, name)
        if body.strip():
            opts = self._parse_body(body, "application/json")
            pre = opts.get("preconditions") or {}
            emeta = existing["metadata"]
            if (pre.get("uid") and pre["uid"] != emeta["uid"]) or (
                pre.get("resourceVersion") and pre["resourceVersion"] != emeta["resourceVersion"]
            ):
                raise ApiError(
                    409,
                    "Conflict",
                    f'Operation cannot be fulfilled on {rt.group_resource} "{name}": Precondition failed',
                    {"name": name, "group": rt.group, "kind": rt.plural},
                )
        if existing["metadata"].get("finalizers") and rt.kind != "Namespace":
            if existing["metadata"].get("deletionTimestamp"):
                return self._out(rt, version, existing)
            new = copy.deepcopy(existing)
            new["metadata"]["deletionTimestamp"] = _now()
            new["metadata"]["deletionGracePeriodSeconds"] = 0
            return self._out(rt, version, self._commit(rt, ns, name, existing, new, None))
        self._remove(rt, ns, name)
        return self._out(rt, version, existing)

    def _delete_collection(
        self, rt: ResourceType, version: str, ns: str | None, query: dict[str, str]
    ) -> dict[str, Any]:
        listed = self._list(rt, version, ns, {k: v for k, v in query.items() if k not in ("limit", "continue")})
        for item in listed["items"]:
            self._delete(rt, version, item["metadata"].get("namespace", ""), item["metadata"]["name"], b"")
        return listed


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _serve(self) -> None:
        sim = self.server.sim
        method = self.command
        parts = urlsplit(self.path)
        headers = {k.lower(): v for k, v in self.headers.items()}
        length = int(headers.get("content-length") or 0)
        if length > _MAX_BODY:
            self._send(413, status_body(413, "RequestEntityTooLarge", "request entity too large"), {})
            return
        body = self.rfile.read(length) if length else b""
        rec = RequestRecord(
            method,
            parts.path,
            {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()},
            headers.get("content-type"),
            None,
            headers.get("user-agent"),
        )
        sim._record(rec)
        try:
            if sim._outage == "refuse":  # a kept-alive connection accepted before the outage
                raise _Drop
            if sim._outage == "503":
                raise ApiError(503, "ServiceUnavailable", "the server is currently unable to handle the request")
            fault = sim._match_fault(method, parts.path)
            if fault is not None:
                if fault.delay:
                    sim._stop.wait(fault.delay)
                if fault.drop_connection:
                    raise _Drop
                if fault.status is not None:
                    rec.status = fault.status
                    self._send(fault.status, fault.body, fault.headers)
                    return
            code, obj, extra = sim.handle(method, self.path, headers, body)
        except _Drop:
            rec.status = 0
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)
            return
        except ApiError as e:
            code, obj, extra = e.code, e.status(), {}
        except Exception as e:  # a simulator bug: surface it as a 500 with the exception text
            code, obj, extra = 500, status_body(500, "InternalError", f"simulator error: {e!r}"), {}
        rec.status = code
        self._send(code, obj, extra)

    def _send(self, code: int, obj: Any, headers: dict[str, str]) -> None:
        data = json.dumps(obj).encode() if obj is not None else b""
        try:
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Cache-Control", "no-cache, private")
            for k, v in headers.items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
            self.close_connection = True

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve
