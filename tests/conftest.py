"""Fixtures every suite may use: the real Kubernetes + Kueue stack (see ``tests/realkube.py``)."""

from tests.realkube import (  # noqa: F401 - fixtures and the failure-log hook
    idleshare_cluster,
    kube,
    kube_admin,
    kube_stack,
    pytest_runtest_makereport,
)
