"""A service stood in for on a loopback port: a handler that answers JSON and logs nothing, and the server that
runs it for a block (the cold-start bench's SQS, the coexistence tests' API server)."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class QuietJsonHandler(http.server.BaseHTTPRequestHandler):
    """A request handler whose answers are JSON documents; it writes no access log."""

    def answer_json(self, document: Any, content_type: str = "application/json") -> None:
        body = json.dumps(document).encode()
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@contextmanager
def serving(handler: type[http.server.BaseHTTPRequestHandler]) -> Iterator[str]:
    """``handler`` served on a free loopback port, on threads, for the block: its base URL."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
