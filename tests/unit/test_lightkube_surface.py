"""The part of lightkube that is not its public API and that ``adapters/kube.py`` builds raw requests with (watches with
bookmarks, Table lists, paged lists decoded into its own structs, discovery): ``Client._client`` (the request builder,
a ``GenericSyncClient``), its ``prepare_request`` / ``build_adapter_request`` / ``send`` / ``raise_for_status``, and
the httpx2 client under it (``._client.build_request``). lightkube has no public call for a raw request.

Given the installed lightkube, When the adapter builds its client (no request is sent), Then each of those exists and
builds the requests the adapter sends with the adapter's timeout; and pyproject's floor is a lightkube that has them.
1.0.0 is the first on httpx2 and msgspec (which the adapter imports and decodes with; 0.x is on httpx), but it turns the
client's ``httpx2.Timeout`` into a dict (``dataclasses.asdict``) and every connection fails (``TypeError: 'dict' object
cannot be interpreted as an integer``, measured with ``uv run --with lightkube==1.0.0``); 1.0.1 fixed it. A lightkube
that drops one fails here, naming it, instead of in a Lambda.
"""

from __future__ import annotations

import re
import tomllib
from importlib.metadata import version
from pathlib import Path
from typing import Any

import httpx2
import pytest
from lightkube.resources.core_v1 import Node, Pod

from idleshare.adapters.kube import LightkubeCluster
from idleshare.timings import KUBE_REQUEST_TIMEOUT_SECONDS

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"
FLOOR = (1, 0, 1)  # httpx2 + msgspec, and the client timeout kept (see above)


def _builder() -> Any:
    client = LightkubeCluster("https://127.0.0.1:1", None, lambda: "token", name="surface")._lightkube()
    builder = getattr(client, "_client", None)
    assert builder is not None, (
        f"lightkube {version('lightkube')}: Client._client (the request builder adapters/kube.py sends raw "
        "requests with) is gone"
    )
    return builder


@pytest.mark.parametrize("method", ["prepare_request", "build_adapter_request", "send", "raise_for_status"])
def test_the_request_builder_has_what_the_adapter_calls(method: str) -> None:
    assert callable(getattr(_builder(), method, None)), (
        f"lightkube {version('lightkube')}: Client._client.{method} (used by adapters/kube.py) is gone"
    )


def test_a_watch_request_is_built_with_the_adapters_params() -> None:
    builder = _builder()

    request = builder.prepare_request("list", res=Node, watch=True, params={"allowWatchBookmarks": "true"})
    request.params["resourceVersion"] = "42"  # the adapter resumes / pages by setting params on the built request
    sent = builder.build_adapter_request(request)

    assert isinstance(sent, httpx2.Request)
    assert (sent.method, sent.url.path) == ("GET", "/api/v1/nodes")
    assert dict(sent.url.params) == {"watch": "true", "allowWatchBookmarks": "true", "resourceVersion": "42"}


def test_a_list_in_every_namespace_is_built() -> None:
    request = _builder().prepare_request("list", res=Pod, namespace="*", params={"limit": 500})

    assert (request.method, request.url, request.params) == ("GET", "api/v1/pods", {"limit": 500})


def test_a_discovery_get_is_built_by_the_httpx2_client_under_it() -> None:
    http = getattr(_builder(), "_client", None)
    assert isinstance(http, httpx2.Client), (
        f"lightkube {version('lightkube')}: Client._client._client is {type(http).__name__}, not an httpx2.Client "
        "(adapters/kube.py's discovery GET builds its request with it)"
    )

    sent = http.build_request("GET", "/apis/kueue.x-k8s.io")

    assert (sent.method, str(sent.url)) == ("GET", "https://127.0.0.1:1/apis/kueue.x-k8s.io")


def test_the_client_keeps_the_adapters_timeout() -> None:
    http = _builder()._client

    assert isinstance(http.timeout, httpx2.Timeout) and http.timeout.connect == KUBE_REQUEST_TIMEOUT_SECONDS, (
        f"lightkube {version('lightkube')}: the client's timeout is {http.timeout.__dict__}, not the adapter's "
        f"{KUBE_REQUEST_TIMEOUT_SECONDS} s (lightkube 1.0.0's bug: every connection fails)"
    )


def _release(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def test_pyprojects_floor_is_a_lightkube_that_has_them() -> None:
    dependencies = tomllib.loads(PYPROJECT.read_text())["project"]["dependencies"]
    (spec,) = [d for d in dependencies if re.match(r"lightkube\b", d)]
    floor = re.fullmatch(r"lightkube>=([0-9.]+)(,.*)?", spec)

    assert floor is not None, f"pyproject.toml: {spec!r} has no >= floor"
    assert _release(floor.group(1)) >= FLOOR, f"pyproject.toml: {spec} allows a lightkube without what the adapter uses"
    assert _release(version("lightkube")) >= _release(floor.group(1))
