"""`idleshare plan`: the engine on files: nodes, quotas, scheduler config in; pool, grants, manifests out."""

from __future__ import annotations

from typing import Any

from idleshare.domain.headroom import kueue_owners
from idleshare.domain.kueue import writable_objects
from idleshare.domain.kueue_fit import with_kueue_api
from idleshare.domain.kueue_versions import HUB, HUB_ONLY, down, pinned
from idleshare.domain.model import DaemonSet, Pod, Quota, SchedulerConfig, Settings, Snapshot
from idleshare.domain.pool import PoolResult, compute
from idleshare.domain.usage import WorkloadStatus
from idleshare.parse.nodes import parse_nodes
from idleshare.parse.quotas import parse_quota_files, parse_quotas, parse_scheduler_config
from idleshare.parse.workloads import HEADROOM_KINDS, parse_daemonsets, parse_pods, parse_workloads, split_dump
from idleshare_cli.present import result_json


def plan(
    nodes: bytes | str,
    quotas: bytes | str | list[tuple[str, bytes | str]] | None,
    scheduler_config: bytes | str | None = None,
    settings: Settings | None = None,
    sources: tuple[str, str, str] = ("nodes", "quotas", "scheduler-config"),
    kueue_api: str = HUB,
    daemonsets: bytes | str | None = None,
    pods: bytes | str | None = None,
    workload_sources: tuple[str, ...] = ("daemonsets", "pods", "workloads"),
    workloads: bytes | str | None = None,
) -> tuple[PoolResult, list[dict[str, Any]]]:
    """Parse, compute, and build the objects the recompute would write (one with a name the API server would
    refuse is left out and named in the result's issues); ``quotas`` None: no team has one, the capacity alone; a list: (source, text) per file
    (``plan --quotas`` repeated), one quota per Name and per team across them.
    ``kueue_api``: the version to write them in (:func:`~idleshare.domain.kueue_versions.pinned`; not the hub: the
    result names it, as a cluster's pool does). ``daemonsets`` / ``pods`` / ``workloads``: ``kubectl get
    daemonsets|pods|workloads -A -o json`` (headroom, docs/spec.md §2: on ``all`` a pod is Kueue's only when an
    admitted Workload given owns it); the nodes' file may hold them too
    (``kubectl get nodes,daemonsets,pods,workloads -A -o json``). Raises ``InputError`` naming the bad field."""
    scheduler = (
        parse_scheduler_config(scheduler_config, sources[2]) if scheduler_config is not None else SchedulerConfig()
    )
    node_input: Any = nodes
    found_daemonsets: tuple[DaemonSet, ...] = ()
    found_pods: tuple[Pod, ...] = ()
    found_workloads: tuple[WorkloadStatus, ...] = ()
    head = _head(nodes)
    if any(f'"{kind}"'.encode() in head for kind in HEADROOM_KINDS):  # one dump of nodes, DaemonSets, pods, ...
        import msgspec

        try:
            split = split_dump(msgspec.json.decode(nodes))
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
            split = None  # not JSON: the node parser says where
        if split is not None:
            node_input = split[0]
            found_daemonsets = parse_daemonsets(split[1], sources[0])
            found_pods = parse_pods(split[2], sources[0])
            found_workloads = parse_workloads(split[3], sources[0])
    sources_of = dict(zip(("daemonsets", "pods", "workloads"), workload_sources, strict=False))
    if daemonsets is not None:
        found_daemonsets += parse_daemonsets(daemonsets, sources_of.get("daemonsets", "daemonsets"))
    if pods is not None:
        found_pods += parse_pods(pods, sources_of.get("pods", "pods"))
    if workloads is not None:
        found_workloads += parse_workloads(workloads, sources_of.get("workloads", "workloads"))
    snapshot = Snapshot(
        nodes=parse_nodes(node_input, sources[0]),
        daemonsets=found_daemonsets,
        pods=found_pods,
        kueue_owners=kueue_owners(found_workloads),
        quotas=_quotas(quotas, sources[1]),
        scheduler_config=scheduler,
        settings=settings or Settings(),
    )
    api = HUB_ONLY if kueue_api == HUB else pinned(kueue_api)
    # what the recompute writes: the flavors past this Kueue's limits left out and named, as on a cluster
    result, manifests = writable_objects(compute(snapshot), scheduler, snapshot.settings, api)
    if kueue_api == HUB:
        return result, manifests
    return with_kueue_api(result, manifests, api), [down(m, api) for m in manifests]


def _head(text: bytes | str) -> bytes:
    return text.encode() if isinstance(text, str) else text


def json_bytes(document: Any) -> bytes:
    """``json.dumps(document, indent=2)``, UTF-8 encoded, byte for byte — written by msgspec (~30x faster: at 20k
    nodes the stdlib encoder was most of the command's time). Where the two would differ, the stdlib writes it:
    a string with a character ``json`` escapes and msgspec does not (``ensure_ascii``: non-ASCII, DEL), an integer
    beyond 64 bits. Floats (whose exponents the two spell differently) are not in a plan's output: its numbers
    are integers and its quantities strings (tests/unit/test_plan_output.py)."""
    import msgspec

    try:
        raw = msgspec.json.encode(document)
    except (TypeError, OverflowError):
        raw = b"\x7f"  # not encodable by msgspec: the stdlib's output below
    if not raw.isascii() or b"\x7f" in raw:
        import json

        return json.dumps(document, indent=2).encode()
    return msgspec.json.format(raw, indent=2)


def _quotas(quotas: bytes | str | list[tuple[str, bytes | str]] | None, source: str) -> tuple[Quota, ...]:
    if quotas is None:
        return ()
    return parse_quota_files(quotas) if isinstance(quotas, list) else parse_quotas(quotas, source)


def plan_from_bytes(nodes: bytes, quotas: bytes, scheduler_config: bytes | None = None) -> dict[str, Any]:
    """Everything `idleshare plan --format json` prints, from raw file contents."""
    result, manifests = plan(nodes, quotas, scheduler_config)
    return result_json(result, manifests)
