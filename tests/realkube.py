"""Fixtures for the real Kubernetes + Kueue stack (:mod:`devkit.kube.stack`), shared by every suite.

- ``kube_stack`` (session, one per xdist worker): etcd + kube-apiserver + the Kueue manager on 127.0.0.1,
  built by ``devkit/kube/build.sh`` if they are not cached yet, stopped by PID at the end of the session. The
  Kueue is ``$IDLESHARE_KUEUE_VERSION`` (one of :data:`devkit.kube.kueue_versions.VERSIONS`), else the pinned
  default: ``make compat`` runs ``tests/compat`` once per version.
- ``kube_admin`` (session): :class:`devkit.kube.client.Kube` as ``system:masters``.
- ``kube`` (function): the admin client on an empty cluster (nodes, Kueue objects and team namespaces of
  earlier tests removed first).
- ``idleshare_cluster`` (function): idleshare's own adapter (:class:`LightkubeCluster`) as the restricted
  ``idleshare-recompute`` group that ``infra/k8s/rbac.yaml`` grants, with the bearer token through the
  same code path as the EKS token.

A failing test that used the stack gets a report section with the tail of each process's log (the full
logs stay in pytest's temporary directory). The stack is never skipped: when it cannot be built or
started, the tests that need it fail with the reason.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devkit.kube import kueue_versions
from devkit.kube.client import Kube
from devkit.kube.stack import KubeStack, StackError, ensure_built
from idleshare import names
from idleshare.adapters.kube import LightkubeCluster

LOG_TAIL_LINES = 60
WATCHER_TOKEN = "idleshare-test-node-watcher-token"
"""A bearer token of the node watcher's group (``names.K8S_WATCHER_GROUP``), which only infra/k8s/rbac.yaml's
watcher ClusterRole grants anything: the node watcher's own identity, as its EKS access entry maps it."""
_STACKS: list[KubeStack] = []


@pytest.fixture(scope="session")
def kube_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeStack]:
    try:
        version = kueue_versions.get().version
        stack = KubeStack(
            tmp_path_factory.mktemp("kube-stack"),
            ensure_built(version),
            extra_tokens={
                "stranger-token": ("stranger", ("some-other-group",)),
                WATCHER_TOKEN: ("idleshare-node-watcher", (names.K8S_WATCHER_GROUP,)),
            },
            kueue_version=version,
        ).start()
    except (StackError, kueue_versions.UnknownKueueVersion) as exc:
        pytest.fail(f"the real Kubernetes/Kueue stack could not start: {exc}", pytrace=False)
    _STACKS.append(stack)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    print(f"\n[{worker}] {stack.describe()}")
    try:
        yield stack
    finally:
        _STACKS.remove(stack)
        stack.stop()


@pytest.fixture(scope="session")
def kube_admin(kube_stack: KubeStack) -> Iterator[Kube]:
    client = Kube.admin(kube_stack)
    yield client
    client.close()


@pytest.fixture
def kube(kube_admin: Kube) -> Kube:
    kube_admin.reset()
    return kube_admin


@pytest.fixture
def idleshare_cluster(kube_stack: KubeStack, kube: Kube) -> Iterator[LightkubeCluster]:
    cluster = idleshare_adapter(kube_stack)
    yield cluster
    cluster.close()


def idleshare_adapter(stack: KubeStack, *, timeout: float = 30.0, **kwargs: Any) -> LightkubeCluster:
    """idleshare's adapter on ``stack`` as its own user (TLS verified against the stack's CA)."""
    return LightkubeCluster(
        stack.server, stack.ca_pem, lambda: stack.idleshare_token, timeout=timeout, name="local", **kwargs
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if report.failed and _STACKS and "kube_stack" in getattr(item, "fixturenames", ()):
        for stack in _STACKS:
            for name, log in stack.logs.items():
                tail = _tail(log, LOG_TAIL_LINES)
                report.sections.append((f"{name} log (last {LOG_TAIL_LINES} lines of {log})", tail))
    return report


def _tail(path: Path, lines: int) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError as exc:
        return f"(unreadable: {exc})"
