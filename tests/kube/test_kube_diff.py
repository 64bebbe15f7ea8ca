"""docs/spec.md §3: the objects idleshare builds are in sync with what the real apiserver stores after defaulting
(CRD defaults, Kueue's mutating webhook) — so an unchanged pool sends nothing."""

from __future__ import annotations

from devkit.kube.client import Kube
from idleshare.domain.kueue_diff import diff
from tests.builders import CLUSTER, QUOTAS, objects
from tests.kube.dryrun import dry_run_apply, ensure_namespace


def test_the_domain_objects_are_in_sync_with_what_the_apiserver_stores_after_defaulting(kube: Kube) -> None:
    # Given every object idleshare builds, as the real apiserver would store it (a dry-run apply)
    _, desired = objects(CLUSTER, QUOTAS)
    for o in desired:
        if o["kind"] == "Namespace":
            ensure_namespace(kube, o["metadata"]["name"])
    current = [dry_run_apply(kube, o) if o["kind"] != "Namespace" else o for o in desired]
    assert any(c["spec"] != d["spec"] for c, d in zip(current, desired, strict=True) if "spec" in d)  # defaulted
    # When diffing
    to_apply, to_delete = diff(desired, current)
    # Then nothing is sent
    assert to_apply == [] and to_delete == []
