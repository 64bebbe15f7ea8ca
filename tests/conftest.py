"""Fixtures every suite may use: the real Kubernetes + Kueue stack (see ``tests/realkube.py``) and a fault proxy in front of it."""

from tests.kube.fixtures import proxied_kube  # noqa: F401 - the real cluster behind a recording fault proxy
from tests.realkube import (  # noqa: F401 - fixtures and the failure-log hook
    idleshare_cluster,
    kube,
    kube_admin,
    kube_stack,
    pytest_runtest_makereport,
)
