"""Fixtures every suite may use: the real Kubernetes + Kueue stack (see ``tests/realkube.py``), a fault proxy in
front of it, the router on fakes and what the handlers log."""

import io
from collections.abc import Iterator

import pytest

from idleshare.runtime import wiring
from tests.fakes import router_dependencies
from tests.kube.fixtures import proxied_kube  # noqa: F401 - the real cluster behind a recording fault proxy
from tests.realkube import (  # noqa: F401 - fixtures and the failure-log hook
    idleshare_cluster,
    kube,
    kube_admin,
    kube_stack,
    pytest_runtest_makereport,
)


@pytest.fixture
def router_deps() -> Iterator[wiring.Dependencies]:
    """The router's fake dependencies, installed (:func:`tests.fakes.router_dependencies`)."""
    with router_dependencies() as deps:
        yield deps


@pytest.fixture
def logs() -> Iterator[io.StringIO]:
    """What the handlers' logger writes (JSON lines)."""
    from idleshare.runtime.observability import logger  # not at collection: it reads the environment

    stream = io.StringIO()
    # swapped, not setStream(): that flushes the stream it replaces, which may be closed (a test's captured stdout,
    # when the logger was made in a test with capsys; xdist's order decides which test that is)
    handler = logger.registered_handler
    old, handler.stream = handler.stream, stream
    yield stream
    handler.stream = old
