"""The deployed stack, described once: rendered from the synthesized template and ``infra/k8s/rbac.yaml``.

``infra/README.md``'s "What is deployed" holds this module's output between its ``stack`` markers (``make docs``
rewrites it: ``devkit/docgen.py``; ``tests/infra/test_stack_doc.py`` fails when the section and a fresh synth differ).
Every other document links there instead of restating a function, a grant, an alarm or an access entry.

The template is the example config's (``infra/config.example.json``) with a ``vpc`` block on its cluster, so the
functions that run in the cluster's VPC show; its cluster id, EKS name and VPC ids print as placeholders.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

REPO_ROOT = Path(__file__).resolve().parent.parent
DOC = REPO_ROOT / "infra" / "README.md"
PATH_METADATA = "aws:cdk:path"
PLACEHOLDER_VPC = {
    "vpc_id": "vpc-0a1b2c3d4e5f60718",
    "subnet_ids": ["subnet-0a1b2c3d4e5f60711", "subnet-0a1b2c3d4e5f60722"],
    "security_group_ids": ["sg-0a1b2c3d4e5f60733"],
}


def doc_config() -> dict[str, Any]:
    """The config the description is synthesized from: the example's, its cluster given a ``vpc``."""
    from infra.config import rehearsal_config

    raw = rehearsal_config()
    raw["clusters"][0]["vpc"] = dict(PLACEHOLDER_VPC)
    return raw


@contextmanager
def _env_agnostic() -> Iterator[None]:
    """Without the CLI's account and region, so the template is the same on every machine."""
    saved = {k: os.environ.pop(k) for k in ("CDK_DEFAULT_ACCOUNT", "CDK_DEFAULT_REGION") if k in os.environ}
    try:
        yield
    finally:
        os.environ.update(saved)


def synthesize(raw: dict[str, Any] | None = None) -> dict[str, Any]:
    """The template of ``raw`` (default :func:`doc_config`), synthesized in-process with the stub asset and each
    resource's construct path (``aws:cdk:path``, as ``cdk synth`` writes it)."""
    from aws_cdk import App
    from aws_cdk.assertions import Template

    from infra.app import build_app
    from infra.config import CONTEXT_STUB_ASSET, parse_config

    with _env_agnostic(), tempfile.TemporaryDirectory(prefix="idleshare-stack-doc-") as out:
        app = App(outdir=out, context={CONTEXT_STUB_ASSET: "true", "aws:cdk:enable-path-metadata": True})
        stack = build_app(app, config=parse_config(raw or doc_config()), nag=False)
        template: dict[str, Any] = Template.from_stack(stack).to_json()
    return template


# ------------------------------------------------------------------------------------------ reading the template


class _Reader:
    def __init__(self, template: dict[str, Any]) -> None:
        self.resources: dict[str, dict[str, Any]] = template["Resources"]
        self.outputs: dict[str, dict[str, Any]] = template.get("Outputs", {})
        self.names = {k: _name(k, r) for k, r in self.resources.items()}

    def of(self, type_: str) -> list[tuple[str, dict[str, Any]]]:
        """(name, properties) of each resource of ``type_``, by name."""
        found = [(self.names[k], r.get("Properties", {})) for k, r in self.resources.items() if r["Type"] == type_]
        return sorted(found, key=lambda item: item[0])

    def value(self, v: Any) -> str:
        """A template value as a reader would say it: a resource by its construct path, a pseudo parameter as
        ``${AWS::Region}``, a join joined."""
        if isinstance(v, str):
            return v
        if isinstance(v, dict) and "Ref" in v:
            ref = str(v["Ref"])
            return f"${{{ref}}}" if ref.startswith("AWS::") else self.names.get(ref, ref)
        if isinstance(v, dict) and "Fn::GetAtt" in v:
            return self.names.get(v["Fn::GetAtt"][0], v["Fn::GetAtt"][0])
        if isinstance(v, dict) and "Fn::Join" in v:
            sep, parts = v["Fn::Join"]
            return str(sep).join(self.value(p) for p in parts)
        if isinstance(v, list):
            return ", ".join(self.value(x) for x in v)
        return json.dumps(v, sort_keys=True)


def _name(logical_id: str, resource: dict[str, Any]) -> str:
    """A resource's construct path below the stack, without CDK's trailing ``Resource`` / ``Default``."""
    path = resource.get("Metadata", {}).get(PATH_METADATA)
    if not path:
        return logical_id
    parts = str(path).split("/")[1:]
    while len(parts) > 1 and parts[-1] in ("Resource", "Default"):
        parts.pop()
    return "/".join(parts)


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _code(text: Any) -> str:
    return f"`{text}`"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]


def _short_policy(arn: str) -> str:
    return arn.rsplit("/", 1)[-1] if ":iam::aws:policy/" in arn else arn


# ------------------------------------------------------------------------------------------ the sections


def _functions(r: _Reader) -> list[str]:
    invoked: dict[str, list[str]] = {}

    def by(target: Any, what: str) -> None:
        invoked.setdefault(r.value(target), []).append(what)

    for _, props in r.of("AWS::Lambda::EventSourceMapping"):
        by(props["FunctionName"], f"{r.value(props['EventSourceArn'])} (event source mapping)")
    for name, props in r.of("AWS::Events::Rule"):
        for target in props.get("Targets", []):
            by(target["Arn"], f"rule {name}")
    for name, props in r.of("AWS::Scheduler::Schedule"):
        by(props["Target"]["Arn"], f"schedule {name}")
    for name, props in r.of("AWS::Lambda::Permission"):
        if props.get("Principal") == "apigateway.amazonaws.com":
            by(props["FunctionName"], f"API {name.split('/Default', 1)[0]}")
    for logical_id, res in r.resources.items():
        if res["Type"].startswith("Custom::"):
            by(res["Properties"]["ServiceToken"], f"custom resource {r.names[logical_id]} ({res['Type']})")
    rows = []
    for name, props in r.of("AWS::Lambda::Function"):
        rows.append(
            [
                name,
                _code(props["Handler"]),
                f"{props['Runtime']} {', '.join(props.get('Architectures', ['x86_64']))}",
                f"{props.get('Timeout', 3)} s",
                f"{props.get('MemorySize', 128)} MB",
                "yes" if "VpcConfig" in props else "no",
                r.value(props["Role"]),
                "; ".join(sorted(set(invoked.get(name, [])))) or "—",
            ]
        )
    header = ["function", "handler", "runtime", "timeout", "memory", "in the VPC", "role", "invoked by"]
    return _table(header, rows)


def _roles(r: _Reader) -> list[str]:
    statements: dict[str, list[dict[str, Any]]] = {}
    for logical_id, res in r.resources.items():
        props = res.get("Properties", {})
        if res["Type"] in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
            for role in props.get("Roles", []):
                statements.setdefault(r.value(role), []).extend(_as_list(props["PolicyDocument"]["Statement"]))
        elif res["Type"] == "AWS::IAM::Role":
            for policy in props.get("Policies", []):
                statements.setdefault(r.names[logical_id], []).extend(_as_list(policy["PolicyDocument"]["Statement"]))
    rows = []
    for name, props in r.of("AWS::IAM::Role"):
        principal = props["AssumeRolePolicyDocument"]["Statement"][0]["Principal"]
        assumed = ", ".join(_as_list(principal.get("Service", principal)))
        managed = [_short_policy(r.value(a)) for a in props.get("ManagedPolicyArns", [])]
        grants = [(", ".join(_as_list(s["Action"])), s) for s in statements.get(name, [])]
        first = [name, assumed]
        if managed:
            rows.append([*first, "managed policy", ", ".join(managed), ""])
            first = ["", ""]
        for actions, s in grants:
            effect = "" if s.get("Effect") == "Allow" else f"{s.get('Effect')} "
            condition = json.dumps(s["Condition"], sort_keys=True) if "Condition" in s else ""
            resources = "<br>".join(r.value(x) for x in _as_list(s["Resource"]))
            rows.append([*first, effect + _code(actions), resources, _code(condition) if condition else ""])
            first = ["", ""]
    return _table(["role", "assumed by", "actions", "on", "condition"], rows)


def _wildcards(template: dict[str, Any]) -> str:
    """The identity policies' actions holding a ``*``, as a list to print ("" when none)."""
    documents = []
    for res in template["Resources"].values():
        props = res.get("Properties", {})
        if res["Type"] in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
            documents.append(props["PolicyDocument"])
        elif res["Type"] == "AWS::IAM::Role":
            documents += [p["PolicyDocument"] for p in props.get("Policies", [])]
    actions = {a for d in documents for s in _as_list(d["Statement"]) for a in _as_list(s.get("Action", []))}
    return ", ".join(sorted(f"`{a}`" for a in actions if "*" in a))


def _queues(r: _Reader) -> list[str]:
    rows = []
    for name, props in r.of("AWS::SQS::Queue"):
        redrive = props.get("RedrivePolicy")
        dlq = (
            f"{r.value(redrive['deadLetterTargetArn'])} after {redrive['maxReceiveCount']} receives" if redrive else ""
        )
        rows.append(
            [
                name,
                "FIFO" if props.get("FifoQueue") else "standard",
                f"{props.get('VisibilityTimeout', 30)} s",
                f"{props.get('DelaySeconds', 0)} s",
                f"{props.get('MessageRetentionPeriod', 345600) // 86400} days",
                dlq or "—",
                "SQS-managed SSE" if props.get("SqsManagedSseEnabled") else "none",
            ]
        )
    out = _table(["queue", "type", "visibility timeout", "delay", "retention", "dead letters", "encryption"], rows)
    mappings = [
        [
            r.value(p["EventSourceArn"]),
            r.value(p["FunctionName"]),
            str(p.get("BatchSize", "")),
            str(p.get("ScalingConfig", {}).get("MaximumConcurrency", "—")),
            ", ".join(p.get("FunctionResponseTypes", [])) or "—",
        ]
        for _, p in r.of("AWS::Lambda::EventSourceMapping")
    ]
    header = ["event source mapping: queue", "function", "batch", "maximum concurrency", "responses"]
    return [*out, "", *_table(header, mappings)]


def _triggers(r: _Reader) -> list[str]:
    rows = []
    for name, props in r.of("AWS::Events::Rule"):
        pattern = props.get("EventPattern", {})
        for target in props.get("Targets", []):
            retry = target.get("RetryPolicy")
            rows.append(
                [
                    f"rule {name}",
                    r.value(props.get("EventBusName", "default")),
                    f"{', '.join(pattern.get('source', []))}: {', '.join(pattern.get('detail-type', []))}",
                    r.value(target["Arn"]),
                    (
                        f"{retry['MaximumRetryAttempts']} retries in {retry['MaximumEventAgeInSeconds']} s"
                        if retry
                        else ""
                    )
                    + (f"; then {r.value(target['DeadLetterConfig']['Arn'])}" if "DeadLetterConfig" in target else ""),
                ]
            )
    for name, props in r.of("AWS::Scheduler::Schedule"):
        target = props["Target"]
        retry = target.get("RetryPolicy", {})
        rows.append(
            [
                f"schedule {name}",
                props["ScheduleExpression"],
                _code(target.get("Input", "")),
                r.value(target["Arn"]),
                f"{retry.get('MaximumRetryAttempts', 185)} retries",
            ]
        )
    for name, props in r.of("AWS::Events::Archive"):
        days = props.get("RetentionDays", 0)
        pattern = ", ".join(props.get("EventPattern", {}).get("source", []))
        rows.append(
            [f"archive {name}", r.value(props["SourceArn"]), pattern, "replay", f"{days} days" if days else "forever"]
        )
    return _table(["trigger", "bus / schedule", "events", "target", "retries"], rows)


def _tables(r: _Reader) -> list[str]:
    rows = []
    for logical_id, res in sorted(r.resources.items(), key=lambda kv: r.names[kv[0]]):
        if res["Type"] != "AWS::DynamoDB::Table":
            continue
        props = res["Properties"]
        keys = ", ".join(f"{k['AttributeName']} ({k['KeyType']})" for k in props["KeySchema"])
        ttl = props.get("TimeToLiveSpecification", {})
        rows.append(
            [
                r.names[logical_id],
                keys,
                _code(ttl["AttributeName"]) if ttl.get("Enabled") else "—",
                props.get("BillingMode", "PROVISIONED"),
                "on" if props.get("PointInTimeRecoverySpecification", {}).get("PointInTimeRecoveryEnabled") else "off",
                res.get("DeletionPolicy", "Delete"),
            ]
        )
    return _table(["table", "keys", "TTL", "billing", "PITR", "on stack delete"], rows)


_COMPARE = {
    "GreaterThanOrEqualToThreshold": "≥",
    "GreaterThanThreshold": ">",
    "LessThanThreshold": "<",
    "LessThanOrEqualToThreshold": "≤",
}


def _alarms(r: _Reader) -> list[str]:
    rows = []
    for name, props in r.of("AWS::CloudWatch::Alarm"):
        if "Metrics" in props:
            query = next(m for m in props["Metrics"] if m.get("ReturnData", True))
            metric, period = _code(query["Expression"]), query.get("Period", 60)
        else:
            dims = ", ".join(f"{d['Name']}={r.value(d['Value'])}" for d in props.get("Dimensions", []))
            metric = f"{props['Namespace']} {_code(props['MetricName'])} {props['Statistic']} ({dims})"
            period = props["Period"]
        periods = props["EvaluationPeriods"]
        datapoints = props.get("DatapointsToAlarm", periods)
        threshold = props["Threshold"]
        rows.append(
            [
                name.rsplit("/", 1)[-1],
                metric,
                f"{_COMPARE[props['ComparisonOperator']]} {threshold:g} in {datapoints} of {periods} × {period} s",
                props.get("TreatMissingData", "missing"),
                ", ".join(r.value(a) for a in props.get("AlarmActions", [])) or "—",
            ]
        )
    return _table(["alarm", "metric", "fires when", "missing data", "notifies"], sorted(rows))


def _rule_text(rule: dict[str, Any]) -> str:
    groups = [g or "core" for g in rule.get("apiGroups", [])]
    names = f" ({', '.join(rule['resourceNames'])})" if rule.get("resourceNames") else ""
    resources = ", ".join(f"{g}/{res}" if g != "core" else res for g in groups for res in rule.get("resources", []))
    return f"{resources}{names}: {', '.join(rule.get('verbs', []))}"


def _access(r: _Reader, manifest: str) -> list[str]:
    docs = [d for d in yaml.safe_load_all(manifest) if d]
    # a role by what a binding names: a ClusterRole by name, a Role by name in the binding's namespace
    all_roles = {
        (d["kind"], d["metadata"].get("namespace"), d["metadata"]["name"]): d
        for d in docs
        if d["kind"] in ("ClusterRole", "Role")
    }
    bound: dict[str, list[tuple[str, str | None, str]]] = {}
    for binding in (d for d in docs if d["kind"] in ("ClusterRoleBinding", "RoleBinding")):
        ref = binding["roleRef"]
        namespace = binding["metadata"].get("namespace") if ref["kind"] == "Role" else None
        for subject in binding.get("subjects", []):
            if subject.get("kind") == "Group":
                bound.setdefault(subject["name"], []).append((ref["kind"], namespace, ref["name"]))

    def where(key: tuple[str, str | None, str]) -> str:
        return f" in {key[1]}" if key[1] else ""

    rows = []
    for name, props in r.of("AWS::EKS::AccessEntry"):
        for group in props.get("KubernetesGroups", []):
            keys = bound.get(group, [])
            roles = [f"{key[2]}{where(key)}" for key in keys]
            rules = [_rule_text(rule) + where(key) for key in keys for rule in all_roles.get(key, {}).get("rules", [])]
            rows.append(
                [
                    name,
                    r.value(props["ClusterName"]),
                    r.value(props["PrincipalArn"]),
                    props.get("Type", "STANDARD"),
                    _code(group),
                    ", ".join(_code(x) for x in roles) or "**none: rbac.yaml binds no ClusterRole to it**",
                    "<br>".join(rules),
                ]
            )
    header = ["access entry", "cluster", "principal", "type", "group", "roles (infra/k8s/rbac*.yaml)", "may"]
    return _table(header, rows)


def _outputs(r: _Reader) -> list[str]:
    rows = [[_code(k), r.value(o["Value"]), o.get("Description", "")] for k, o in sorted(r.outputs.items())]
    return _table(["output", "value", "what"], rows)


def describe() -> str:
    """The section for the stack as the code synthesizes it now, with the RBAC manifest as it is now."""
    from infra.constructs.eks_access import rbac_text

    return render(synthesize(), rbac_text())


def render(template: dict[str, Any], manifest: str, *, raw: dict[str, Any] | None = None) -> str:
    """The section's text, from ``template`` (synthesized from ``raw``, default :func:`doc_config`) and the RBAC
    ``manifest``; the config's cluster id, EKS name and VPC ids as placeholders."""
    raw = raw or doc_config()
    r = _Reader(template)
    parts = [
        ("Functions", "Each function's role is its own; its grants are below.", _functions(r)),
        (
            "Roles and their grants",
            "Every statement of every role the stack creates (identity policies)"
            + ("; no wildcard action." if not _wildcards(template) else f"; wildcard actions: {_wildcards(template)}."),
            _roles(r),
        ),
        ("Triggers", "Rules, schedules and the archive (replay: docs/operations.md, Replaying events).", _triggers(r)),
        ("Queues", "", _queues(r)),
        ("Tables", "The items the main table holds: docs/architecture.md, DynamoDB items.", _tables(r)),
        ("Alarms", "What each means and what to do: docs/operations.md, Alarms.", _alarms(r)),
        (
            "EKS access entries and RBAC groups",
            "One access entry per cluster and function that talks to Kubernetes; `kubectl apply -f "
            "infra/k8s/rbac.yaml` grants each group its roles, and on a cluster whose headroom is `all` "
            "`infra/k8s/rbac-headroom-all.yaml` the recompute's `idleshare-recompute-headroom-all`.",
            _access(r, manifest),
        ),
        ("Outputs", "", _outputs(r)),
    ]
    lines = [
        "Synthesized from `infra/config.example.json` with a `vpc` block on its cluster `<c>` (EKS cluster `<eks>`);"
        " per-cluster resources repeat for each configured cluster, and without a `vpc` no function runs in a VPC.",
    ]
    for title, note, table in parts:
        lines += ["", f"#### {title}", ""] + ([note, ""] if note else []) + table
    return _placeholders("\n".join(lines), raw)


def _placeholders(text: str, raw: dict[str, Any]) -> str:
    cluster = raw["clusters"][0]
    swaps = [(cluster["eks_cluster_name"], "<eks>"), (cluster["id"], "<c>")]
    vpc = cluster.get("vpc", {})
    swaps += [(vpc.get("vpc_id", ""), "<vpc>")]
    swaps += [(s, "<subnet>") for s in vpc.get("subnet_ids", [])]
    swaps += [(s, "<security group>") for s in vpc.get("security_group_ids", [])]
    for old, new in swaps:
        if old:
            text = text.replace(old, new)
    return text
