"""Pytest fixtures for the Kubernetes simulator.

Use from a test module or conftest with ``from tests.kube.fixtures import kube_sim, kubeconfig``
(or ``pytest_plugins = ["tests.kube.fixtures"]`` in a top-level conftest).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from devkit.kubesim.simulator import KubeSimulator

__all__ = ["kube_sim", "kube_sim_tls", "kubeconfig", "make_kubeconfig", "make_node"]


def make_node(
    name: str,
    instance_type: str | None = "ml.p5.48xlarge",
    *,
    allocatable: dict[str, str] | None = None,
    ready: bool = True,
    labels: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    unschedulable: bool = False,
) -> dict[str, Any]:
    """A minimal but realistic core/v1 Node."""
    alloc = allocatable or {"cpu": "191450m", "memory": "2027264Mi", "nvidia.com/gpu": "8", "pods": "737"}
    node_labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux"}
    if instance_type:
        node_labels["node.kubernetes.io/instance-type"] = instance_type
    node_labels.update(labels or {})
    node: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": node_labels},
        "spec": {},
        "status": {
            "allocatable": copy.deepcopy(alloc),
            "capacity": copy.deepcopy(alloc),
            "conditions": [{"type": "Ready", "status": "True" if ready else "False", "reason": "KubeletReady"}],
        },
    }
    if taints:
        node["spec"]["taints"] = taints
    if unschedulable:
        node["spec"]["unschedulable"] = True
    return node


@pytest.fixture
def kube_sim() -> Iterator[KubeSimulator]:
    """A started plain-HTTP simulator, stopped after the test."""
    sim = KubeSimulator().start()
    try:
        yield sim
    finally:
        sim.stop()


@pytest.fixture
def kube_sim_tls() -> Iterator[KubeSimulator]:
    """A started HTTPS simulator (``.ca_pem`` / ``.ca_file`` verify it), stopped after the test."""
    sim = KubeSimulator(tls=True).start()
    try:
        yield sim
    finally:
        sim.stop()


@pytest.fixture
def make_kubeconfig(tmp_path: Path) -> Callable[..., Path]:
    """``make_kubeconfig(sim, token=None, namespace=None) -> Path`` writing into the test's tmp dir."""
    counter = iter(range(1_000_000))

    def _make(sim: KubeSimulator, **kwargs: Any) -> Path:
        return sim.write_kubeconfig(tmp_path / f"kubeconfig-{next(counter)}", **kwargs)

    return _make


@pytest.fixture
def kubeconfig(kube_sim: KubeSimulator, tmp_path: Path) -> Path:
    """A kubeconfig file pointing at ``kube_sim``."""
    return kube_sim.write_kubeconfig(tmp_path / "kubeconfig")
