"""A recording, fault-injecting HTTP proxy in front of the real kube-apiserver, for the faults a real server
cannot be made to produce on demand: a 5xx or 429 on the third request, a request that hangs, a connection
dropped mid-answer, an outage halfway through an apply.

Clients talk plain HTTP to the proxy on 127.0.0.1; it forwards every request, unchanged (the client's own
``Authorization`` header included, so RBAC still applies to the client's identity), over TLS to the
apiserver, verified against the stack's CA, and streams the answer back (watches included). What is not
faulted is the real server's answer, byte for byte.

Hooks (the names the old simulator had): :meth:`inject`, :meth:`inject_timeout`, :meth:`clear_faults`,
:meth:`outage` / :meth:`restore`, :attr:`requests`, :meth:`count`, :meth:`clear_requests`.
"""

from __future__ import annotations

import contextlib
import http.client
import http.server
import json
import re
import socket
import ssl
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

_HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade", "host"}
)
_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    409: "Conflict",
    410: "Expired",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


def status_body(code: int, reason: str | None = None, message: str | None = None) -> dict[str, Any]:
    """A ``v1 Status`` failure body, as the apiserver writes one."""
    reason = reason or _REASONS.get(code, "InternalError")
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message or f"injected {reason} ({code})",
        "reason": reason,
        "code": code,
    }


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
        if self.method and self.method.upper() != method.upper():
            return False
        return not (self.path_regex and not re.search(self.path_regex, path))


class FaultProxy:
    """``FaultProxy(upstream, ca_file).start()``; ``.url`` is what clients use instead of the apiserver's."""

    def __init__(self, upstream: str, ca_file: str | Path, *, port: int = 0, default_token: str | None = None) -> None:
        """``default_token``: the bearer token to forward requests that carry none with — kubectl (client-go)
        never sends its token over plain HTTP, so a kubectl pointed at the proxy is otherwise anonymous."""
        parts = urlsplit(upstream)
        self._default_token = default_token
        self._host, self._port_up = parts.hostname or "127.0.0.1", parts.port or 443
        self._ssl = ssl.create_default_context(cafile=str(ca_file))
        self._lock = threading.Lock()
        self._faults: list[Fault] = []
        self._requests: list[RequestRecord] = []
        self._outage: str | None = None
        self._server: http.server.ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._port = port

    # -- lifecycle ------------------------------------------------------------------------------------

    def start(self) -> FaultProxy:
        self._bind(self._port)
        return self

    def stop(self) -> None:
        self._unbind()

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        return self._port

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._port}"

    # -- hooks ----------------------------------------------------------------------------------------

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
        """Answer the next ``times`` matching requests (``None``: all until cleared) with ``status`` and a
        Status body (or ``body``) instead of forwarding them, or close the connection without answering."""
        if body is None and not drop_connection:
            body = status_body(
                status, message=message or ("Internal error occurred: injected fault" if status >= 500 else None)
            )
            if status == 429 and headers is None:
                headers = {"Retry-After": "1"}
        fault = Fault(method, path_regex, status, times, 0.0, body, dict(headers or {}), drop_connection)
        with self._lock:
            self._faults.append(fault)
        return fault

    def inject_timeout(
        self, method: str | None = None, path_regex: str | None = None, seconds: float = 5.0, times: int | None = 1
    ) -> Fault:
        """Hold matching requests ``seconds`` (longer than the client's timeout), then forward them."""
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
        """End an outage (the same port again)."""
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

    # -- internals ------------------------------------------------------------------------------------

    def _bind(self, port: int) -> None:
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                proxy._handle(self)

            do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_GET

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

        server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
        server.daemon_threads = True
        self._server = server
        self._port = server.server_address[1]
        self._thread = threading.Thread(target=server.serve_forever, name="kube-fault-proxy", daemon=True)
        self._thread.start()

    def _unbind(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()

    def _fault_for(self, method: str, path: str) -> Fault | None:
        with self._lock:
            for fault in self._faults:
                if fault.matches(method, path):
                    fault.hits += 1
                    return fault
        return None

    def _handle(self, h: http.server.BaseHTTPRequestHandler) -> None:
        split = urlsplit(h.path)
        record = RequestRecord(
            method=h.command,
            path=split.path,
            query=dict(parse_qsl(split.query)),
            content_type=h.headers.get("Content-Type"),
            user_agent=h.headers.get("User-Agent"),
        )
        with self._lock:
            self._requests.append(record)
        length = int(h.headers.get("Content-Length") or 0)
        body = h.rfile.read(length) if length else None
        if self._outage == "refuse" or self._server is None:  # a keep-alive connection from before the outage
            record.status = None
            with contextlib.suppress(OSError):
                h.connection.shutdown(socket.SHUT_RDWR)
            h.close_connection = True
            return
        if self._outage == "503":
            record.status = 503
            self._answer(h, 503, status_body(503, message="the server is currently unable to handle the request"))
            return
        fault = self._fault_for(h.command, split.path)
        if fault is not None and fault.delay:
            time.sleep(fault.delay)
            if self._server is None:  # stopped (or refusing) meanwhile: never forward into a later test
                h.close_connection = True
                return
        elif fault is not None:
            if fault.drop_connection:
                record.status = None
                with contextlib.suppress(OSError):
                    h.connection.shutdown(socket.SHUT_RDWR)
                h.close_connection = True
                return
            record.status = fault.status
            self._answer(h, fault.status or 500, fault.body, fault.headers)
            return
        self._forward(h, body, record)

    def _answer(
        self, h: http.server.BaseHTTPRequestHandler, status: int, body: Any, headers: dict[str, str] | None = None
    ) -> None:
        data = json.dumps(body).encode() if body is not None else b""
        h.send_response(status)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            h.send_header(k, v)
        h.end_headers()
        with contextlib.suppress(OSError):
            h.wfile.write(data)

    def _forward(self, h: http.server.BaseHTTPRequestHandler, body: bytes | None, record: RequestRecord) -> None:
        upstream = http.client.HTTPSConnection(self._host, self._port_up, context=self._ssl, timeout=120)
        try:
            headers = {k: v for k, v in h.headers.items() if k.lower() not in _HOP_BY_HOP}
            if self._default_token and not any(k.lower() == "authorization" for k in headers):
                headers["Authorization"] = f"Bearer {self._default_token}"
            upstream.request(h.command, h.path, body=body, headers=headers)
            resp = upstream.getresponse()
            record.status = resp.status
            h.send_response(resp.status)
            streamed = resp.getheader("Content-Length") is None
            for k, v in resp.getheaders():
                if k.lower() not in _HOP_BY_HOP:
                    h.send_header(k, v)
            if streamed:
                h.send_header("Transfer-Encoding", "chunked")
            h.end_headers()
            while True:
                chunk = resp.read1(65536) if streamed else resp.read(65536)
                if not chunk:
                    break
                if streamed:
                    h.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                    h.wfile.flush()
                else:
                    h.wfile.write(chunk)
            if streamed:
                h.wfile.write(b"0\r\n\r\n")
        except OSError:
            h.close_connection = True
        finally:
            upstream.close()
