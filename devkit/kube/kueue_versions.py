"""The Kueue versions the real stack can run, and what differs between them: the one table everything reads.

The default is the Kueue ``devkit/kube/go.mod`` pins (built with Kubernetes and etcd from that one module set);
each other version has its own module set in ``devkit/kube/kueue/<version>/`` (``go.mod``, ``go.sum``,
``tools.go``: Kueue's own ``k8s.io`` pins — Kueue 0.12 needs the 0.32 libraries and cannot share Kubernetes 1.36's
module), built by ``bash devkit/kube/build.sh --kueue <version>`` and run against the default's kube-apiserver
(v1.36.3: it serves every CRD of each of them). ``python -m devkit.kube.kueue_versions`` lists the versions, the
default first (what ``make compat`` loops over).

Facts per version, each read from that version's module (``config/components/crd/bases``, ``apis/config``,
``pkg/features``): ``served`` is held to the running stack's discovery by ``tests/compat`` (its stack case), the
Configuration by the manager starting at all (it refuses an unknown field), the modules by
``tests/unit/test_compat_table.py``:

* ``served``: the ``kueue.x-k8s.io`` versions its CRDs serve; ``api`` the newest one serving every kind
  idleshare writes, ``cohort_api`` the Cohort's (v1alpha1 on 0.12);
* ``config_api``: the ``config.kueue.x-k8s.io`` version of the manager's Configuration the stack writes
  (``v1beta1`` turns fair sharing on with ``fairSharing.enable``; ``v1beta2`` with the section's presence);
* ``feature_gates``: the manager's ``--feature-gates`` (``VisibilityOnDemand=false``: no visibility API server,
  whose APIService the stack does not register; the gate exists in every version here).
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
GROUP = "kueue.x-k8s.io"
ENV = "IDLESHARE_KUEUE_VERSION"
"""The environment variable that picks the Kueue the test suites' stack runs (default: :data:`DEFAULT`)."""


@dataclass(frozen=True)
class KueueVersion:
    version: str
    served: tuple[str, ...]
    api: str
    cohort_api: str
    config_api: str
    feature_gates: tuple[str, ...] = ("VisibilityOnDemand=false",)

    @property
    def api_version(self) -> str:
        """``kueue.x-k8s.io/<api>``: what the stack's own probes and hand-written objects use."""
        return f"{GROUP}/{self.api}"

    def api_version_of(self, kind: str) -> str:
        return f"{GROUP}/{self.cohort_api if kind == 'Cohort' else self.api}"

    @property
    def module(self) -> Path:
        """The directory whose ``go.mod`` pins this version."""
        return HERE if self.version == DEFAULT else HERE / "kueue" / self.version

    @property
    def fair_sharing_switch(self) -> dict[str, bool]:
        """What the Configuration's ``fairSharing`` section needs besides the strategies to turn fair sharing on."""
        return {"enable": True} if self.config_api == "v1beta1" else {}


def _default() -> str:
    match = re.search(r"^\s*sigs\.k8s\.io/kueue (v\S+)", (HERE / "go.mod").read_text(), re.MULTILINE)
    if match is None:
        raise RuntimeError(f"{HERE / 'go.mod'} requires no sigs.k8s.io/kueue")
    return match.group(1)


DEFAULT = _default()
"""The Kueue ``devkit/kube/go.mod`` pins: what the stack runs unless told otherwise."""

_V1BETA2 = {"served": ("v1beta1", "v1beta2"), "api": "v1beta2", "cohort_api": "v1beta2", "config_api": "v1beta2"}
VERSIONS: dict[str, KueueVersion] = {
    v.version: v
    for v in (
        KueueVersion("v0.12.3", ("v1alpha1", "v1beta1"), "v1beta1", "v1alpha1", "v1beta1"),
        KueueVersion("v0.14.0", ("v1beta1",), "v1beta1", "v1beta1", "v1beta1"),
        KueueVersion("v0.16.1", **_V1BETA2),  # type: ignore[arg-type]
        KueueVersion("v0.18.2", **_V1BETA2),  # type: ignore[arg-type]
        KueueVersion("v0.19.2", **_V1BETA2),  # type: ignore[arg-type]
    )
}
"""Every Kueue the stack can run, oldest first."""


class UnknownKueueVersion(ValueError):
    pass


def get(version: str | None = None) -> KueueVersion:
    """The version's facts (``None``: :data:`ENV`, else :data:`DEFAULT`); an unknown one names the known ones."""
    wanted = version or os.environ.get(ENV) or DEFAULT
    if wanted not in VERSIONS:
        source = "" if version else f" (from {ENV})"
        raise UnknownKueueVersion(
            f"Kueue {wanted!r}{source} is not one the stack can run: one of {', '.join(VERSIONS)} (devkit/kube/kueue_versions.py)"
        )
    return VERSIONS[wanted]


def ordered() -> list[str]:
    """The versions, the default first (``make compat`` runs it first: its stack is built already)."""
    return [DEFAULT, *(v for v in VERSIONS if v != DEFAULT)]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args == ["--default"]:
        print(DEFAULT)
    else:
        print(" ".join(ordered()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
