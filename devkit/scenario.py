"""Scenarios: a cluster fixture, quotas, and a timeline of steps with expectations (events/README.md).

``load(path)`` parses and checks a scenario file (JSON or YAML) or a plain event file, raising
``InputError`` naming the file and the field. ``run(scenario)`` plays it on :class:`devkit.embedded.Embedded`
and returns one :class:`StepReport` per step: the pool, each team's limits and the bound that set them,
the Kueue objects that changed, and the expectations that did not hold.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import re
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from devkit.embedded import NODE_CHANGES, ClusterSpec, Embedded, canonical_change
from idleshare.domain.cluster_settings import SettingError
from idleshare.domain.model import BorrowLimitBasis, Settings
from idleshare.domain.model import is_accelerator as is_accelerator  # devkit/report.py
from idleshare.domain.naming import cluster_queue_name, is_dns_label, priority_class_name
from idleshare.parse.cluster_settings import SETTINGS, read_settings
from idleshare.parse.errors import FieldError, InputError
from idleshare_cli.present import short_resource

REPO = Path(__file__).resolve().parents[1]
DEFAULT_NODES = REPO / "events" / "examples" / "nodes.json"

SHORT = {
    "gpu": "nvidia.com/gpu",
    "neuron": "aws.amazon.com/neurondevice",
    "neurondevice": "aws.amazon.com/neurondevice",
    "efa": "vpc.amazonaws.com/efa",
}
ACTIONS = (
    "event",
    "events",
    "putQuota",
    "updateQuota",
    "deleteQuota",
    "schedulerConfig",
    "cordon",
    "uncordon",
    "node",
    "nodeHealth",
    "recalculate",
    "submit",
    "finish",
)
TEAM_FIELDS = ("nominal", "borrowingLimit", "lendingLimit", "bound")
EXPECT_KEYS = (
    "unallocated",
    "cohort",
    "excludedNodes",
    "teams",
    "dropped",
    "changed",
    "routed",
    "workloads",
    "workloadCounts",
    "borrowed",
)
SCENARIO_SETTINGS = {re.sub(r"_(\w)", lambda m: m.group(1).upper(), name): name for name in SETTINGS}
"""A scenario's cluster settings, each a top-level key in camelCase (``borrowLimitBasis``, ``headroom``, ...): read
by the one schema of them (``parse/cluster_settings``) as the CDK config's are."""
WORKLOAD_STATES = ("Admitted", "Pending", "Preempted", "Finished")
WATCHED_KINDS = ("cordon", "uncordon", "node", "nodeHealth", "event", "events")
"""Steps after which the node watcher takes a pass (the others change no node)."""
STEP_KEYS = ("title", "expect", *ACTIONS)
TOP_KEYS = (
    "name",
    "description",
    "cluster",
    *SCENARIO_SETTINGS,
    "nodes",
    "quotas",
    "schedulerConfig",
    "steps",
)


def full_resource(name: str) -> str:
    if name in SHORT:
        return SHORT[name]
    if name.startswith("mig-"):
        return f"nvidia.com/{name}"
    return name


# -- the model ---------------------------------------------------------------------------------------


@dataclass
class Step:
    title: str
    kind: str  # one of ACTIONS
    arg: Any
    expect: dict[str, Any] = field(default_factory=dict)
    where: str = ""


@dataclass
class Scenario:
    source: str
    name: str
    cluster: ClusterSpec
    nodes: dict[str, Any]
    quotas: list[dict[str, Any]]
    scheduler_config: dict[str, Any] | None
    steps: list[Step]
    description: str = ""

    def event_entries(self) -> list[tuple[str, dict[str, Any]]]:
        """(step title, event) of every explicit event step: what ``--bus`` puts on a bus."""
        out = []
        for step in self.steps:
            if step.kind == "event":
                out.append((step.title, step.arg))
            elif step.kind == "events":
                out += [(step.title, e) for e in step.arg]
        return out


# -- loading -----------------------------------------------------------------------------------------


MAX_FILE_BYTES = 16 * 2**20
"""A scenario, event, nodes, quotas or scheduler-config file is at most this big (events/examples/nodes.json: 0.7 MB)."""
MAX_LOAD_BYTES = 64 * 2**20
"""Everything one scenario reads: its file and every file it names (a file named twice counts twice)."""


class _NoAliases(yaml.SafeLoader):
    """YAML's safe loader without anchors and aliases: scenarios need none, and nested aliases expand
    exponentially (557 bytes took 6 GB and 69 s)."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            mark = event.start_mark
            raise _AliasRefused(f"line {mark.line + 1} column {mark.column + 1}")
        return super().compose_node(parent, index)


class _AliasRefused(Exception):
    pass


class Reader:
    """Reads the files of one scenario within :data:`MAX_FILE_BYTES` each and :data:`MAX_LOAD_BYTES` in all;
    YAML without anchors or aliases. Every refusal is an ``InputError`` naming the file (and the line)."""

    def __init__(self) -> None:
        self.spent = 0

    def read(self, path: Path, source: str) -> Any:
        try:
            with path.open("rb") as f:
                data = f.read(MAX_FILE_BYTES + 1)
        except OSError as exc:
            raise InputError(source, [FieldError("", f"cannot read: {exc.strerror or exc}")]) from None
        if len(data) > MAX_FILE_BYTES:
            raise InputError(source, [FieldError("", f"the file is over {MAX_FILE_BYTES} bytes (at most that)")])
        self.spent += len(data)
        if self.spent > MAX_LOAD_BYTES:
            why = f"the scenario and the files it names are over {MAX_LOAD_BYTES} bytes in all"
            raise InputError(source, [FieldError("", why)])
        kind = "YAML" if path.suffix in (".yaml", ".yml") else "JSON"
        try:
            text = data.decode("utf-8-sig")
            if kind == "YAML":
                return yaml.load(text, Loader=_NoAliases)
            return json.loads(text)
        except _AliasRefused as exc:
            why = f"{exc}: YAML anchors and aliases (&, *, <<) are not accepted in a scenario; write the value out"
            raise InputError(source, [FieldError("", why)]) from None
        except Exception as exc:  # UnicodeDecodeError / json.JSONDecodeError / yaml.YAMLError / RecursionError
            hint = "" if path.suffix in (".json", ".yaml", ".yml") else " (a scenario is .yaml, an event file .json)"
            raise InputError(source, [FieldError("", f"not valid {kind}{hint}: {exc}")]) from None

    def ref(self, value: Any, base: Path, source: str, loc: str) -> tuple[Any, str]:
        """An inline value, or the parsed content of the file it names (relative to the scenario, then the repo)."""
        if not isinstance(value, str):
            return value, source
        for candidate in (base / value, REPO / value):
            try:
                found = candidate.is_file()
            except (OSError, ValueError):  # a name too long, a NUL
                found = False
            if found:
                return self.read(candidate, value), value
        raise InputError(source, [FieldError(loc, f"no such file {value!r}")])


def read_document(path: str | Path) -> Any:
    """One scenario or event file, decoded (:class:`Reader`)."""
    return Reader().read(Path(path), str(path))


def is_event(doc: Any) -> bool:
    return isinstance(doc, dict) and ("detail-type" in doc or "detail_type" in doc) and "steps" not in doc


def load(path: str | Path) -> Scenario:
    """A scenario file, or a plain event file (one event, or a JSON array of events) as a one-step scenario."""
    p = Path(path)
    source = str(path)
    reader = Reader()
    doc = reader.read(p, source)
    if isinstance(doc, list) and doc and all(is_event(e) for e in doc):
        doc = {"steps": [{"title": f"{p.name}[{i}]", "event": e} for i, e in enumerate(doc)]}
    elif is_event(doc) or (isinstance(doc, dict) and "source" in doc and "steps" not in doc):
        doc = {"steps": [{"title": p.name, "event": doc}]}
    if not isinstance(doc, dict):
        raise InputError(source, [FieldError("", "a scenario must be an object with `steps` (or an event)")])
    return parse(doc, source, p.parent, reader)


def parse(doc: Mapping[str, Any], source: str, base: Path = REPO, reader: Reader | None = None) -> Scenario:
    from idleshare.parse.events import parse_event
    from idleshare.parse.nodes import parse_nodes
    from idleshare.parse.quotas import parse_quotas, parse_scheduler_config, quota_documents

    _ref = (reader or Reader()).ref
    errors: list[FieldError] = []
    for key in doc:
        if key not in TOP_KEYS:
            errors.append(FieldError(str(key), f"unknown field (one of {', '.join(TOP_KEYS)})"))
    cluster = ClusterSpec()
    raw_cluster = doc.get("cluster") or {}
    if not isinstance(raw_cluster, dict):
        errors.append(FieldError("cluster", "must be an object {id, eksClusterName, hyperpodClusterArn}"))
    else:
        for key in raw_cluster:
            if key not in ("id", "eksClusterName", "hyperpodClusterArn"):
                errors.append(FieldError(f"cluster.{key}", "unknown field (id, eksClusterName, hyperpodClusterArn)"))
        cluster = ClusterSpec(
            cluster_id=str(raw_cluster.get("id", cluster.cluster_id)),
            eks_cluster_name=str(raw_cluster.get("eksClusterName", cluster.eks_cluster_name)),
            hyperpod_cluster_arn=str(raw_cluster.get("hyperpodClusterArn", cluster.hyperpod_cluster_arn)),
        )
    # the cluster's settings (docs/spec.md §2-§3): its BorrowLimit basis, its headroom, ...
    given = {name: doc[key] for key, name in SCENARIO_SETTINGS.items() if key in doc}
    try:
        cluster = dataclasses.replace(cluster, settings=read_settings(given))
    except SettingError as exc:
        key = next((k for k, name in SCENARIO_SETTINGS.items() if name == exc.setting), exc.setting)
        errors.append(FieldError(key, exc.problem))
    if errors:
        raise InputError(source, errors)

    nodes_doc, nodes_src = _ref(doc.get("nodes", str(DEFAULT_NODES)), base, source, "nodes")
    if isinstance(nodes_doc, list):
        nodes_doc = {"apiVersion": "v1", "kind": "List", "items": nodes_doc}
    parse_nodes(json.dumps(nodes_doc), nodes_src if nodes_src != source else f"{source}: nodes")
    quotas_doc, quotas_src = _ref(doc.get("quotas", []), base, source, "quotas")
    # every form `idleshare plan --quotas` reads (the AWS CLI's list-compute-quotas output among them), by its reader
    quotas_doc = quota_documents(
        json.loads(json.dumps(quotas_doc, default=str)), quotas_src if quotas_src != source else f"{source}: quotas"
    )
    sc_doc = None
    if doc.get("schedulerConfig") is not None:
        sc_doc, sc_src = _ref(doc["schedulerConfig"], base, source, "schedulerConfig")
        parse_scheduler_config(json.dumps(sc_doc), sc_src if sc_src != source else f"{source}: schedulerConfig")

    refs = NodeRefs(nodes_doc)
    # the SchedulerConfig as each step sees it (a schedulerConfig step merges into it): its priority classes
    current_sc = scheduler_body(sc_doc)
    raw_steps = doc.get("steps")
    if not isinstance(raw_steps, list) or not raw_steps:
        raise InputError(source, [FieldError("steps", "must be a non-empty list")])
    steps = []
    for i, raw in enumerate(raw_steps):
        where = f"steps[{i}]"
        if not isinstance(raw, dict):
            raise InputError(source, [FieldError(where, "must be an object")])
        unknown = [k for k in raw if k not in STEP_KEYS]
        if unknown:
            raise InputError(
                source, [FieldError(f"{where}.{unknown[0]}", f"unknown field (one of {', '.join(STEP_KEYS)})")]
            )
        actions = [k for k in ACTIONS if k in raw]
        if len(actions) != 1:
            raise InputError(
                source,
                [FieldError(where, f"needs exactly one action of {', '.join(ACTIONS)} (found {actions or 'none'})")],
            )
        kind = actions[0]
        arg = raw[kind]
        loc = f"{where}.{kind}"
        if kind in ("event", "events"):
            items = arg if kind == "events" else [arg]
            if not isinstance(items, list) or not items:
                raise InputError(source, [FieldError(loc, "must be a non-empty list of events")])
            loaded = []
            for j, item in enumerate(items):
                ev_loc = f"{loc}[{j}]" if kind == "events" else loc
                event, ev_src = _ref(item, base, source, ev_loc)
                try:
                    parse_event(event, ev_src if ev_src != source else f"{source}: {ev_loc}")
                except InputError as exc:
                    if ev_src != source:
                        raise
                    raise InputError(
                        source, [FieldError(f"{ev_loc}.{e.loc}".rstrip("."), e.message) for e in exc.errors]
                    ) from None
                loaded.append(_resolve_event_nodes(event, refs))
            arg = loaded if kind == "events" else loaded[0]
        elif kind in ("putQuota", "updateQuota"):
            arg, _ = _ref(arg, base, source, loc)
            if not isinstance(arg, dict) or not isinstance(arg.get("Name"), str):
                raise InputError(source, [FieldError(f"{loc}.Name", "a quota (or merge patch) needs its Name")])
            if kind == "putQuota":
                parse_quotas(json.dumps([arg]), f"{source}: {loc}")
        elif kind == "deleteQuota":
            if not isinstance(arg, str) or not arg:
                raise InputError(source, [FieldError(loc, "must be the quota's Name")])
        elif kind == "schedulerConfig":
            arg, _ = _ref(arg, base, source, loc)
            if not isinstance(arg, dict):
                raise InputError(
                    source, [FieldError(loc, "must be a SchedulerConfig object (merged into the current)")]
                )
            current_sc = _merge(current_sc, scheduler_body(arg))
        elif kind in ("cordon", "uncordon"):
            arg = {"name": refs.resolve(arg, source, loc), "change": kind}
        elif kind == "node":
            if not isinstance(arg, dict) or canonical_change(str(arg.get("change", ""))) is None:
                raise InputError(source, [FieldError(f"{loc}.change", f"must be one of {', '.join(NODE_CHANGES)}")])
            arg = {"name": refs.resolve(arg.get("name"), source, f"{loc}.name"), "change": str(arg["change"])}
        elif kind == "nodeHealth":
            if not isinstance(arg, dict) or not isinstance(arg.get("status"), str):
                raise InputError(
                    source, [FieldError(f"{loc}.status", "needs the HealthStatus (e.g. Unhealthy, Schedulable)")]
                )
            arg = {
                "name": refs.resolve(arg.get("node"), source, f"{loc}.node"),
                "status": arg["status"],
                "repairAction": str(arg.get("repairAction", "None")),
            }
        elif kind == "submit":
            arg = _parse_submit(arg, source, loc, priority_class_names(current_sc))
        elif kind == "finish":
            names = arg if isinstance(arg, list) else [arg]
            if not names or not all(isinstance(n, str) and n for n in names):
                raise InputError(source, [FieldError(loc, "must be a workload name or a list of them")])
            arg = names
        expect = raw.get("expect") or {}
        _check_expect(expect, source, f"{where}.expect", refs)
        if "excludedNodes" in expect:
            expect = {
                **expect,
                "excludedNodes": {
                    refs.resolve(k, source, f"{where}.expect.excludedNodes"): v
                    for k, v in expect["excludedNodes"].items()
                },
            }
        steps.append(Step(str(raw.get("title") or f"step {i + 1}"), kind, arg, expect, where))
    return Scenario(
        source=source,
        name=str(doc.get("name") or Path(source).stem),
        description=str(doc.get("description") or ""),
        cluster=cluster,
        nodes=nodes_doc,
        quotas=quotas_doc,
        scheduler_config=sc_doc,
        steps=steps,
    )


def scheduler_body(doc: Any) -> dict[str, Any]:
    """The SchedulerConfig itself, bare or wrapped as ``{SchedulerConfig: …}`` (as the store keeps it)."""
    if not isinstance(doc, dict):
        return {}
    inner = doc.get("SchedulerConfig", doc)
    return dict(inner) if isinstance(inner, dict) else {}


def priority_class_names(scheduler_config: Mapping[str, Any]) -> list[str]:
    """The ``Name`` of every priority class the SchedulerConfig lists, in its order."""
    classes = scheduler_config.get("PriorityClasses")
    if not isinstance(classes, list):
        return []
    return [c["Name"] for c in classes if isinstance(c, dict) and isinstance(c.get("Name"), str)]


SUBMIT_FIELDS = ("team", "name", "requests", "count", "instanceType", "priorityClass")


def _parse_submit(arg: Any, source: str, loc: str, priority_classes: list[str]) -> list[dict[str, Any]]:
    """``submit``: one Job or a list, each ``{team, name, requests: {gpu: 8, cpu: 4}, count: 1,
    instanceType: ml.p5.48xlarge, priorityClass: inference}``: ``instanceType`` the node selector a job pins its
    instance type with, ``priorityClass`` the ``Name`` of one of the SchedulerConfig's PriorityClasses as the step
    sees it (``priority_classes``); both optional."""
    items = arg if isinstance(arg, list) else [arg]
    out = []
    for j, item in enumerate(items):
        at = f"{loc}[{j}]" if isinstance(arg, list) else loc
        if not isinstance(item, dict):
            raise InputError(source, [FieldError(at, "must be {team, name, requests, count}")])
        unknown = [k for k in item if k not in SUBMIT_FIELDS]
        if unknown:
            raise InputError(source, [FieldError(f"{at}.{unknown[0]}", f"unknown field ({', '.join(SUBMIT_FIELDS)})")])
        if "instanceType" in item and (not isinstance(item["instanceType"], str) or not item["instanceType"]):
            raise InputError(
                source, [FieldError(f"{at}.instanceType", "must be an instance type, e.g. ml.p5.48xlarge")]
            )
        if "priorityClass" in item:
            _check_priority_class(item["priorityClass"], priority_classes, source, f"{at}.priorityClass")
        for key in ("team", "name"):
            if not isinstance(item.get(key), str) or not item[key]:
                raise InputError(source, [FieldError(f"{at}.{key}", "required: a non-empty string")])
        if not is_dns_label(item["name"]):
            raise InputError(
                source,
                [FieldError(f"{at}.name", "must be a Job name: lower-case letters, digits and '-', at most 63")],
            )
        requests = item.get("requests")
        if not isinstance(requests, dict) or not requests:
            raise InputError(source, [FieldError(f"{at}.requests", "required: resource -> quantity, e.g. {gpu: 8}")])
        for r, v in requests.items():
            _number(v, source, f"{at}.requests.{r}")
        count = item.get("count", 1)
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            raise InputError(source, [FieldError(f"{at}.count", "must be a whole number of pods, at least 1")])
        out.append(
            {
                "team": item["team"],
                "name": item["name"],
                "requests": {full_resource(str(r)): str(v) for r, v in requests.items()},
                "count": count,
                **({"instanceType": item["instanceType"]} if "instanceType" in item else {}),
                **({"priorityClass": item["priorityClass"]} if "priorityClass" in item else {}),
            }
        )
    return out


def _check_priority_class(value: Any, known: list[str], source: str, loc: str) -> None:
    """A priority class is named as the SchedulerConfig names it; the Job carries the WorkloadPriorityClass
    idleshare writes for it."""
    listed = f"its PriorityClasses: {', '.join(known)}" if known else "it lists no PriorityClasses"
    if not isinstance(value, str) or not value:
        raise InputError(
            source, [FieldError(loc, f"must be the Name of one of the SchedulerConfig's priority classes ({listed})")]
        )
    if value in known:
        return
    hint = ""
    objects = {priority_class_name(k): k for k in known}
    if value in objects:
        hint = f"; {value!r} is the WorkloadPriorityClass idleshare writes for {objects[value]!r}: name the class"
    raise InputError(
        source, [FieldError(loc, f"no priority class {value!r} in the SchedulerConfig at this step ({listed}){hint}")]
    )


class NodeRefs:
    """Node references in scenarios: a node name, or ``<instance type>#<n>`` (the n-th node of that type in
    the fixture's order, from 0) — names of generated fixtures are unreadable hashes."""

    def __init__(self, nodes_doc: Mapping[str, Any]) -> None:
        self.names: set[str] = set()
        self.by_type: dict[str, list[str]] = {}
        for node in nodes_doc.get("items", []):
            meta = node.get("metadata") or {}
            name = meta.get("name")
            self.names.add(name)
            itype = (meta.get("labels") or {}).get("node.kubernetes.io/instance-type")
            self.by_type.setdefault(itype, []).append(name)

    def aliases(self) -> dict[str, str]:
        """node name -> ``<instance type>#<n>``."""
        return {name: f"{t}#{i}" for t, names in self.by_type.items() if t for i, name in enumerate(names)}

    def resolve(self, ref: Any, source: str, loc: str, *, must_exist: bool = False) -> str:
        if not isinstance(ref, str) or not ref:
            raise InputError(source, [FieldError(loc, "must name a node (its name or <instance type>#<n>)")])
        if "#" in ref:
            itype, _, index = ref.rpartition("#")
            names = self.by_type.get(itype, [])
            if not index.isdigit() or int(index) >= len(names):
                raise InputError(
                    source, [FieldError(loc, f"{ref!r}: the cluster has {len(names)} nodes of type {itype!r}")]
                )
            return names[int(index)]
        if must_exist and ref not in self.names:
            raise InputError(source, [FieldError(loc, f"no node {ref!r} in the cluster fixture")])
        return ref


def _resolve_event_nodes(event: dict[str, Any], refs: NodeRefs) -> dict[str, Any]:
    """``<type>#<n>`` in a Node Changed's ``node`` or a health event's ``InstanceId`` -> the real name / id."""
    event = copy.deepcopy(event)
    detail = event.get("detail") if isinstance(event.get("detail"), dict) else {}
    for key in ("node", "InstanceId"):
        value = detail.get(key)
        if isinstance(value, str) and "#" in value:
            name = refs.resolve(value, "event", key)
            detail[key] = name.removeprefix("hyperpod-") if key == "InstanceId" else name
    return event


def _check_expect(expect: Any, source: str, loc: str, refs: NodeRefs) -> None:
    if not isinstance(expect, dict):
        raise InputError(source, [FieldError(loc, "must be an object")])
    for key, value in expect.items():
        if key not in EXPECT_KEYS:
            raise InputError(
                source, [FieldError(f"{loc}.{key}", f"unknown expectation (one of {', '.join(EXPECT_KEYS)})")]
            )
        if key in ("unallocated", "cohort"):
            _table(value, source, f"{loc}.{key}", lambda v, at: _number(v, source, at))
        elif key == "teams":
            if not isinstance(value, dict):
                raise InputError(source, [FieldError(f"{loc}.teams", "must map team -> flavor -> resource -> fields")])
            for team, flavors in value.items():

                def check(v: Any, at: str) -> None:
                    if not isinstance(v, dict) or not v:
                        raise InputError(source, [FieldError(at, f"must be an object of {', '.join(TEAM_FIELDS)}")])
                    for f, x in v.items():
                        if f not in TEAM_FIELDS:
                            raise InputError(
                                source, [FieldError(f"{at}.{f}", f"unknown field (one of {', '.join(TEAM_FIELDS)})")]
                            )
                        if f != "bound":
                            _number(x, source, f"{at}.{f}")

                _table(flavors, source, f"{loc}.teams.{team}", check)
        elif key == "excludedNodes":
            if not isinstance(value, dict):
                raise InputError(
                    source, [FieldError(f"{loc}.excludedNodes", "must map node -> reason (every excluded node)")]
                )
        elif key == "workloads":
            if not isinstance(value, dict) or any(v not in WORKLOAD_STATES for v in value.values()):
                raise InputError(
                    source,
                    [FieldError(f"{loc}.workloads", f"must map workload -> one of {', '.join(WORKLOAD_STATES)}")],
                )
        elif key == "workloadCounts":
            if not isinstance(value, dict):
                raise InputError(source, [FieldError(f"{loc}.workloadCounts", "must map team -> state -> count")])
            for team, counts in value.items():
                at = f"{loc}.workloadCounts.{team}"
                if not isinstance(counts, dict) or not counts:
                    raise InputError(
                        source, [FieldError(at, f"must map state ({', '.join(WORKLOAD_STATES)}) -> count")]
                    )
                for state, n in counts.items():
                    if state not in WORKLOAD_STATES:
                        raise InputError(
                            source,
                            [FieldError(f"{at}.{state}", f"unknown state (one of {', '.join(WORKLOAD_STATES)})")],
                        )
                    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
                        raise InputError(source, [FieldError(f"{at}.{state}", "must be a whole number, 0 or more")])
        elif key == "borrowed":
            if not isinstance(value, dict):
                raise InputError(
                    source, [FieldError(f"{loc}.borrowed", "must map team -> flavor -> resource -> quantity")]
                )
            for team, flavors in value.items():
                _table(flavors, source, f"{loc}.borrowed.{team}", lambda v, at: _number(v, source, at))
        elif key in ("changed", "routed") and not isinstance(value, bool):
            raise InputError(source, [FieldError(f"{loc}.{key}", "must be true or false")])


def _table(value: Any, source: str, loc: str, leaf: Callable[[Any, str], None]) -> None:
    if not isinstance(value, dict):
        raise InputError(source, [FieldError(loc, "must map flavor -> resource -> value")])
    for flavor, per in value.items():
        if not isinstance(per, dict):
            raise InputError(source, [FieldError(f"{loc}.{flavor}", "must map resource -> value")])
        for r, v in per.items():
            leaf(v, f"{loc}.{flavor}.{r}")


def _number(value: Any, source: str, loc: str) -> Any:
    from idleshare.parse.nodes import parse_quantity_value

    try:
        return parse_quantity_value(
            str(value) if isinstance(value, int | float) and not isinstance(value, bool) else value
        )
    except ValueError as exc:
        raise InputError(source, [FieldError(loc, str(exc))]) from None


# -- running -----------------------------------------------------------------------------------------


@dataclass
class StepReport:
    index: int
    title: str
    action: str
    events: list[str] = field(default_factory=list)
    routed: list[str] = field(default_factory=list)
    dropped: str | None = None
    cluster_changes: list[str] = field(default_factory=list)
    generation: int = 0
    changed: bool = False
    pool: dict[str, Any] = field(default_factory=dict)
    kueue_changes: list[dict[str, Any]] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    mismatches: list[str] = field(default_factory=list)
    checked: int = 0
    workloads: list[dict[str, Any]] = field(default_factory=list)
    """What Kueue decided, after the step: ``{team, name, state, reason, message[, priorityClass]}`` for every
    submitted Job."""
    borrowed: dict[str, dict[str, dict[str, str]]] = field(default_factory=dict)
    """``{team: {flavor: {resource: quantity}}}`` borrowed from the cohort (the ClusterQueues' status)."""
    fair_sharing: dict[str, Any] = field(default_factory=dict)
    """Why Kueue shared so (:attr:`devkit.kube.workloads.Observed.fair_sharing`): the cohort's lendable resources,
    each team's weight and the dominant resource share Kueue reports."""
    usage: dict[str, Any] = field(default_factory=dict)
    """The usage sample the deployed node watcher would take after the step (``GET /clusters/{c}/usage``'s shape):
    per flavor capacity, in use, borrowed, idle; per team in use, borrowed, lent; idle while pending."""

    def to_json(self) -> dict[str, Any]:
        return {
            "step": self.index,
            "title": self.title,
            "action": self.action,
            "events": self.events,
            "routed": self.routed,
            "dropped": self.dropped,
            "clusterChanges": self.cluster_changes,
            "generation": self.generation,
            "changed": self.changed,
            "pool": self.pool,
            "kueueChanges": self.kueue_changes,
            "failures": self.failures,
            "workloads": self.workloads,
            "borrowed": self.borrowed,
            "fairSharing": self.fair_sharing,
            "usage": self.usage,
            "expectations": {"checked": self.checked, "mismatches": self.mismatches},
        }


def _event(cluster: ClusterSpec, detail_type: str, detail: dict[str, Any], source: str = "idleshare") -> dict[str, Any]:
    region = cluster.hyperpod_cluster_arn.split(":")[3] if cluster.hyperpod_cluster_arn.count(":") >= 5 else "us-west-2"
    account = (
        cluster.hyperpod_cluster_arn.split(":")[4] if cluster.hyperpod_cluster_arn.count(":") >= 5 else "111122223333"
    )
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": detail_type,
        "source": source,
        "account": account,
        "time": "2026-01-01T00:00:00Z",
        "region": region,
        "resources": [cluster.hyperpod_cluster_arn] if source == "aws.sagemaker" else [],
        "detail": detail,
    }


def _merge(target: Any, patch: Any) -> Any:
    """JSON merge patch (RFC 7386): objects merge, null deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = _merge(out.get(k), v)
    return out


class Runner:
    """Plays a scenario on embedded services, step by step."""

    def __init__(self, scenario: Scenario, stack: Embedded) -> None:
        self.s = scenario
        self.stack = stack
        self.before = stack.kueue_objects()
        self.previous_generation = 0
        self.aliases = NodeRefs(scenario.nodes).aliases()
        from devkit.kube.workloads import Workloads

        self.workloads = Workloads(getattr(stack, "sim", None), source=scenario.source)
        self.cluster_changes: list[str] = []

    def _node(self, name: str) -> str:
        return f"{self.aliases[name]} ({name})" if name in self.aliases else name

    def operator_events(self, step: Step) -> tuple[str, list[dict[str, Any]]]:
        """Do an operator action's store change; the events AWS / idleshare would emit for it."""
        from idleshare.errors import IdleshareError
        from idleshare.parse.quotas import parse_quotas, parse_scheduler_config

        c, store, cid = self.s.cluster, self.stack.store, self.s.cluster.cluster_id
        kind, arg = step.kind, step.arg
        try:
            if kind == "event":
                return "event", [arg]
            if kind == "events":
                return f"{len(arg)} events", list(arg)
            if kind in ("putQuota", "updateQuota"):
                current = store.get_quota(cid, arg["Name"])
                body = arg if kind == "putQuota" else _merge(current.body if current else {}, arg)
                parse_quotas(json.dumps([body], default=str), f"{self.s.source}: {step.where}.{kind}")
                if current is None:
                    if kind == "updateQuota":
                        raise InputError(
                            self.s.source,
                            [FieldError(f"{step.where}.updateQuota.Name", f"no quota {arg['Name']!r} to update")],
                        )
                    store.create_quota(cid, body)
                else:
                    store.update_quota(cid, arg["Name"], body, target_version=current.version)
                what = f"{kind} {arg['Name']}"
                return what, [_event(c, "Compute Quota Changed", {"cluster": cid, "quotaName": arg["Name"]})]
            if kind == "deleteQuota":
                store.delete_quota(cid, arg)
                return f"deleteQuota {arg}", [_event(c, "Compute Quota Changed", {"cluster": cid, "quotaName": arg})]
            if kind == "schedulerConfig":
                current = store.get_scheduler_config(cid)
                merged = _merge(scheduler_body(current.body if current else None), scheduler_body(arg))
                parse_scheduler_config(json.dumps(merged), f"{self.s.source}: {step.where}.schedulerConfig")
                store.put_scheduler_config(cid, {"SchedulerConfig": merged}, current.version if current else None)
                what = "schedulerConfig " + ", ".join(f"{k}={v}" for k, v in sorted(arg.items()))
                return what, [_event(c, "Scheduler Config Changed", {"cluster": cid})]
            if kind in ("cordon", "uncordon", "node"):
                # as an admin or a kubelet would: on the cluster only; the node watcher tells idleshare
                self.cluster_changes.append(self.stack.change_node(arg["name"], arg["change"]))
                return f"{arg['change']} {self._node(arg['name'])}", []
            if kind == "nodeHealth":
                detail = {
                    "ClusterName": c.hyperpod_cluster_arn.rsplit("/", 1)[-1],
                    "ClusterArn": c.hyperpod_cluster_arn,
                    "InstanceId": arg["name"].removeprefix("hyperpod-"),
                    "Tags": {},
                    "HealthSummary": {
                        "HealthStatus": arg["status"],
                        "HealthStatusReason": "replayed by idleshare",
                        "RepairAction": arg["repairAction"],
                    },
                }
                what = f"node health {self._node(arg['name'])}: {arg['status']}"
                return what, [_event(c, "SageMaker HyperPod Cluster Node Health Event", detail, "aws.sagemaker")]
            if kind == "recalculate":
                return "recalculate", [_event(c, "Recalculation Requested", {"cluster": cid, "reason": "scenario"})]
            if kind == "submit":  # teams submit work to Kueue directly: no event reaches idleshare
                self.workloads.submit(arg)
                return "submit " + ", ".join(
                    f"{w['name']} ({w['team']}" + (f", {w['priorityClass']}" if "priorityClass" in w else "") + ")"
                    for w in arg
                ), []
            if kind == "finish":
                self.workloads.finish(arg)
                return "finish " + ", ".join(arg), []
        except IdleshareError as exc:
            raise InputError(self.s.source, [FieldError(f"{step.where}.{kind}", str(exc))]) from None
        raise AssertionError(kind)

    def step(self, index: int, step: Step) -> StepReport:
        stack = self.stack
        stack.tick()
        self.cluster_changes: list[str] = []
        what, events = self.operator_events(step)
        report = StepReport(index, step.title, what)
        report.cluster_changes += self.cluster_changes
        for event in events:
            report.events.append(str(event.get("detail-type")))
            delivery = stack.deliver(event)
            report.routed += [c for c in delivery.routed if c not in report.routed]
            report.dropped = report.dropped or delivery.dropped
            if delivery.cluster_change:
                report.cluster_changes.append(delivery.cluster_change)
            report.failures += delivery.failures
        if step.kind in WATCHED_KINDS:  # the node watcher sees what changed on the cluster
            watched = stack.watch()
            report.events += watched.events
            report.routed += [c for c in watched.routed if c not in report.routed]
            report.failures += watched.failures
        record = stack.store.get_pool(self.s.cluster.cluster_id)
        report.generation = record.generation if record else 0
        report.changed = report.generation != self.previous_generation
        self.previous_generation = report.generation
        report.pool = record.pool if record else {}
        after = stack.kueue_objects()
        report.kueue_changes = kueue_changes(self.before, after)
        self.before = after
        observed = self.workloads.observe()
        report.workloads, report.borrowed, report.fair_sharing = (
            observed.workloads,
            observed.borrowed,
            observed.fair_sharing,
        )
        report.usage = self.sample_usage()
        report.mismatches, report.checked = check(step.expect, report, after, self.s)
        return report

    def sample_usage(self) -> dict[str, Any]:
        """One usage sample of the cluster, taken and kept as the deployed node watcher takes it each minute (the
        embedded store's history), read back as the usage route answers it; {} when it could not be taken."""
        from datetime import UTC, datetime, timedelta

        from idleshare.service.usage import document_of, sample_usage

        now = datetime.now(UTC).replace(microsecond=0)
        last = getattr(self, "_sampled_at", None)
        if last is not None and now <= last:
            now = last + timedelta(seconds=1)
        self._sampled_at = now
        if getattr(self, "_usage_reader", None) is None:  # as the deployed watcher reads it: its own RBAC only
            self._usage_reader = self.stack.sim.watcher_adapter()
        outcome = sample_usage(self.s.cluster.cluster_id, self._usage_reader, self.stack.store, now=now)
        return dict(document_of(outcome) or {})


def run(
    scenario: Scenario,
    *,
    on_step: Callable[[StepReport], None] | None = None,
    stack: Embedded | None = None,
) -> list[StepReport]:
    """Play every step on ``stack``, or on a new :class:`Embedded` (the real kube-apiserver + Kueue of
    :mod:`devkit.kube.stack`); ``on_step`` sees each report as soon as it is ready."""
    reports: list[StepReport] = []

    def play(embedded: Embedded) -> None:
        for q in scenario.quotas:
            embedded.store.create_quota(scenario.cluster.cluster_id, q)
        if scenario.scheduler_config is not None:
            body = scenario.scheduler_config
            embedded.store.put_scheduler_config(
                scenario.cluster.cluster_id, body if "SchedulerConfig" in body else {"SchedulerConfig": body}
            )
        runner = Runner(scenario, embedded)
        for i, step in enumerate(scenario.steps, start=1):
            report = runner.step(i, step)
            reports.append(report)
            if on_step is not None:
                on_step(report)

    if stack is not None:
        play(stack)
    else:
        with Embedded(scenario.nodes, cluster=scenario.cluster) as embedded:
            play(embedded)
    return reports


# -- what changed in the cluster ------------------------------------------------------------------------


def _flatten(obj: Any, prefix: str = "") -> dict[str, Any]:
    """Leaf paths of an object's spec; resource groups as ``<flavor>/<resource>.<field>``."""
    out: dict[str, Any] = {}
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k == "resourceGroups" and isinstance(v, list):
                for group in v:
                    for flavor in group.get("flavors", []):
                        for res in flavor.get("resources", []):
                            for fk, fv in res.items():
                                if fk != "name":
                                    out[f"{flavor['name']}/{short_resource(res['name'])}.{fk}"] = fv
                continue
            out.update(_flatten(v, f"{prefix}{k}."))
    elif isinstance(obj, list):
        out[prefix.rstrip(".")] = json.dumps(obj, sort_keys=True)
    else:
        out[prefix.rstrip(".")] = obj
    return out


def _content(obj: Mapping[str, Any]) -> dict[str, Any]:
    body = {k: v for k, v in obj.items() if k not in ("metadata", "status", "apiVersion", "kind")}
    return _flatten(body)


def kueue_changes(
    before: Mapping[tuple[str, str, str], Any], after: Mapping[tuple[str, str, str], Any]
) -> list[dict[str, Any]]:
    """created / updated (with the changed fields: path, old, new) / deleted, in a stable order."""
    out: list[dict[str, Any]] = []
    for key in sorted(set(before) | set(after)):
        kind, ns, name = key
        ref = {"kind": kind, "name": name} | ({"namespace": ns} if ns else {})
        if key not in before:
            out.append({"op": "created", **ref})
        elif key not in after:
            out.append({"op": "deleted", **ref})
        else:
            old, new = _content(before[key]), _content(after[key])
            fields = [
                {"field": p, "old": old.get(p), "new": new.get(p)}
                for p in sorted(set(old) | set(new))
                if old.get(p) != new.get(p)
            ]
            if fields:
                out.append({"op": "updated", **ref, "fields": fields})
    return out


# -- expectations --------------------------------------------------------------------------------------


def _q(value: Any) -> Any:
    from idleshare.parse.nodes import parse_quantity_value

    if value is None:
        return 0
    try:
        return parse_quantity_value(str(value) if isinstance(value, int | float) else value)
    except ValueError:
        return value


def _cq_value(
    objects: Mapping[tuple[str, str, str], Any], kind: str, name: str, flavor: str, resource: str, fld: str
) -> Any:
    obj = objects.get((kind, "", name))
    if obj is None:
        return None
    for group in obj.get("spec", {}).get("resourceGroups", []):
        for f in group.get("flavors", []):
            if f.get("name") == flavor:
                for r in f.get("resources", []):
                    if r.get("name") == resource:
                        return r.get(fld)
    return None


def bound_of(pool: Mapping[str, Any], team: str, flavor: str, resource: str) -> str | None:
    grant = pool.get("teams", {}).get(team)
    if grant is None:
        return None
    why = grant.get("why", {}).get(flavor, {}).get(resource)
    if why is not None:
        return str(why["bound"])
    if grant.get("activationState") == "Disabled":
        return "disabled"
    if grant.get("strategy") != "LendAndBorrow":
        return "strategy"
    # nothing to explain (no pool, no quota, no cap, limit 0): on the Pool basis the pool set it; on the Quota basis
    # the percentage of the quota did when the type is in the team's quota (the pool does not matter there: idle
    # sharing switched off must not turn it into "not in quota"), else the type is outside the quota
    bases = {
        d.get("basis")
        for g in pool.get("teams", {}).values()
        for per in g.get("why", {}).values()
        for d in per.values()
    }
    if str(BorrowLimitBasis.POOL) in bases:
        return "pool"
    in_quota = (
        flavor in (grant.get("nominal") or {}) or (grant.get("bounds") or {}).get(flavor) == "percentage of quota"
    )
    return "percentage of quota" if in_quota else "not in quota"


def check(
    expect: Mapping[str, Any], report: StepReport, objects: Mapping[tuple[str, str, str], Any], s: Scenario
) -> tuple[list[str], int]:
    """Every expectation that does not hold, as ``what: expected X, got Y``; and how many were checked."""
    bad: list[str] = []
    n = 0
    pool = report.pool

    def compare(what: str, want: Any, got: Any, quantity: bool = True) -> None:
        nonlocal n
        n += 1
        ok = (_q(want) == _q(got)) if quantity else (str(want) == str(got))
        if not ok:
            bad.append(f"{what}: expected {want}, got {got if got is not None else '(none)'}")

    states = {w["name"]: w["state"] for w in report.workloads}
    for name, want in (expect.get("workloads") or {}).items():
        compare(f"workload {name}", want, states.get(name), quantity=False)
    for team, counts in (expect.get("workloadCounts") or {}).items():
        # exact: a state the expectation leaves out is expected to have no workload of the team
        for state in WORKLOAD_STATES:
            named = [w["name"] for w in report.workloads if w["team"] == team and w["state"] == state]
            n += 1
            if len(named) != counts.get(state, 0):
                bad.append(
                    f"team {team} {state} workloads: expected {counts.get(state, 0)}, got {len(named)}"
                    + (f" ({', '.join(named)})" if named else "")
                )
    for team, flavors in (expect.get("borrowed") or {}).items():
        for flavor, per in flavors.items():
            for r, want in per.items():
                got = report.borrowed.get(team, {}).get(flavor, {}).get(full_resource(r), "0")
                compare(f"team {team} borrows {flavor}/{r}", want, got)
    for flavor, per in (expect.get("unallocated") or {}).items():
        for r, want in per.items():
            got = (
                pool.get("unallocated", {})
                .get(flavor, {})
                .get(full_resource(r), "0" if flavor in pool.get("flavors", []) else None)
            )
            compare(f"unallocated {flavor}/{r}", want, got)
    for flavor, per in (expect.get("cohort") or {}).items():
        for r, want in per.items():
            compare(
                f"Cohort {Settings().cohort_name} {flavor}/{r} nominalQuota",
                want,
                _cq_value(objects, "Cohort", Settings().cohort_name, flavor, full_resource(r), "nominalQuota"),
            )
    for team, flavors in (expect.get("teams") or {}).items():
        cq = cluster_queue_name(team, Settings())
        for flavor, per in flavors.items():
            for r, fields in per.items():
                res = full_resource(r)
                for fld, want in fields.items():
                    if fld == "bound":
                        compare(
                            f"team {team} {flavor}/{r} bound", want, bound_of(pool, team, flavor, res), quantity=False
                        )
                    else:
                        key = "nominalQuota" if fld == "nominal" else fld
                        compare(
                            f"team {team} {flavor}/{r} {fld}",
                            want,
                            _cq_value(objects, "ClusterQueue", cq, flavor, res, key),
                        )
    if "excludedNodes" in expect:
        n += 1
        want_x = {k: str(v) for k, v in expect["excludedNodes"].items()}
        got_x = pool.get("excludedNodes", {})
        if want_x != got_x:
            missing = {k: v for k, v in want_x.items() if got_x.get(k) != v}
            extra = {k: v for k, v in got_x.items() if k not in want_x}
            bad.append(
                f"excludedNodes: expected but not so {missing or '{}'}; excluded but not expected {extra or '{}'}"
            )
    if "dropped" in expect:
        compare("router dropped", expect["dropped"], report.dropped, quantity=False)
    if "routed" in expect:
        compare("routed to the cluster", expect["routed"], bool(report.routed), quantity=False)
    if "changed" in expect:
        compare("a new generation", expect["changed"], report.changed, quantity=False)
    return bad, n
