"""``make deploy-check``: rehearse ``cdk deploy`` without an AWS account.

1. Synthesizes the app exactly as ``npx cdk deploy`` does (``cdk.json``'s app command, real local bundling),
   in a shell whose PATH lacks the directory ``make`` installed ``uv`` into — a user's new shell.
2. Checks what a first deploy needs that synth alone does not show:
   - every EKS access entry maps the role of a function that talks to Kubernetes to a group that
     ``infra/k8s/rbac.yaml`` binds a ClusterRole to;
   - each function has exactly its own variables (``names.FUNCTION_ENV``), every one resolving (a literal,
     or a Ref / GetAtt of a resource of the template);
   - the cluster registry custom resource is served by the registrar with the same clusters, after its policy;
   - every alarm has an action (an SNS topic of the template);
   - the asset holds every handler module.
3. Imports every handler from the asset on Python 3.12 (``infra/runtime_check.py``), printing cold import times.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

from idleshare import names
from infra.config import CONTEXT_CONFIG_FILE, rehearsal_config
from infra.constructs.eks_access import rbac_text
from infra.constructs.registry import RESOURCE_TYPE

REPO_ROOT = Path(__file__).resolve().parent.parent
POWERTOOLS_ENV = {"POWERTOOLS_SERVICE_NAME", "POWERTOOLS_METRICS_NAMESPACE"}
SYSTEM_DIRS = {"/usr/local/bin", "/usr/bin", "/bin", "/usr/local/sbin", "/usr/sbin", "/sbin"}


def fresh_shell_path() -> str:
    """PATH without the directory of ``uv`` (unless it is a system directory a new shell has anyway)."""
    uv = shutil.which("uv")
    drop = {str(Path(uv).parent)} - SYSTEM_DIRS if uv else set()
    drop.add(str(Path.home() / ".local" / "bin"))
    return os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep) if p and p not in drop)


def synth(out: Path) -> None:
    env = {
        **os.environ,
        "PATH": fresh_shell_path(),
        # what `cdk deploy` takes from the credentials; synth needs no account, the env-agnostic stack neither
        "CDK_DEFAULT_ACCOUNT": os.environ.get("CDK_DEFAULT_ACCOUNT", "111111111111"),
        "CDK_DEFAULT_REGION": os.environ.get("CDK_DEFAULT_REGION", "us-east-1"),
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    for var in ("VIRTUAL_ENV", "UV_PROJECT_ENVIRONMENT"):
        env.pop(var, None)
    config = out.parent / "rehearsal.config.json"  # the example's placeholder cluster, which cdk.json's refuses
    config.write_text(json.dumps(rehearsal_config()))
    cmd = ["npx", "--no-install", "cdk", "synth", "--quiet", "--no-notices", "--no-version-reporting", "-o", str(out)]
    cmd += ["-c", f"{CONTEXT_CONFIG_FILE}={config}"]
    proc = subprocess.run(cmd, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        raise SystemExit(f"deploy-check: `{' '.join(cmd)}` failed ({proc.returncode}):\n{proc.stderr[-4000:]}")


# ------------------------------------------------------------------------------------------------ checks


def _resources(template: dict[str, Any], type_: str) -> dict[str, dict[str, Any]]:
    return {k: r for k, r in template["Resources"].items() if r["Type"] == type_}


def _target(value: Any) -> str | None:
    if isinstance(value, dict) and set(value) == {"Ref"}:
        return str(value["Ref"])
    if isinstance(value, dict) and set(value) == {"Fn::GetAtt"}:
        return str(value["Fn::GetAtt"][0])
    return None


KUBE_HANDLERS = (names.RECOMPUTE_HANDLER, names.WATCHER_HANDLER)
"""The functions that talk to Kubernetes, each through an access entry of its own role."""


def rbac_findings(template: dict[str, Any], manifest: str) -> list[str]:
    docs = [d for d in yaml.safe_load_all(manifest) if d]
    roles = {
        (d["kind"], d["metadata"].get("namespace"), d["metadata"]["name"])
        for d in docs
        if d["kind"] in ("ClusterRole", "Role")
    }
    bindings = [d for d in docs if d["kind"] in ("ClusterRoleBinding", "RoleBinding")]
    if not any(kind == "ClusterRole" for kind, _, _ in roles) or not bindings:
        return ["rbac.yaml: a ClusterRole and a ClusterRoleBinding are required"]
    findings = []
    for binding in bindings:
        ref = binding["roleRef"]
        # a ClusterRoleBinding's role is a ClusterRole; a RoleBinding's a Role of its namespace (or a ClusterRole)
        namespace = binding["metadata"].get("namespace") if ref.get("kind") == "Role" else None
        if (ref.get("kind"), namespace, ref.get("name")) not in roles:
            findings.append(
                f"rbac.yaml: binding {binding['metadata']['name']!r} refers to {ref.get('kind')} {ref.get('name')!r}, "
                "which is not a role of the manifest"
            )
    groups = {s["name"] for b in bindings for s in b.get("subjects", []) if s.get("kind") == "Group"}
    kube_functions = {
        k
        for k, f in _resources(template, "AWS::Lambda::Function").items()
        if f["Properties"].get("Handler") in KUBE_HANDLERS
    }
    kube_roles = {_target(template["Resources"][k]["Properties"]["Role"]) for k in kube_functions}
    entries = _resources(template, "AWS::EKS::AccessEntry")
    if not entries:
        findings.append("no EKS access entry: the recompute role could not reach any cluster")
    for logical_id, entry in entries.items():
        props = entry["Properties"]
        for group in props.get("KubernetesGroups", []):
            if group not in groups:
                findings.append(f"{logical_id}: group {group!r} is not bound by rbac.yaml (binds {sorted(groups)})")
        if not props.get("KubernetesGroups"):
            findings.append(f"{logical_id}: no Kubernetes group: rbac.yaml grants it nothing")
        if _target(props.get("PrincipalArn")) not in kube_roles:
            findings.append(f"{logical_id}: the principal is not the role of a function that talks to Kubernetes")
        if props.get("Type", "STANDARD") != "STANDARD":
            findings.append(f"{logical_id}: type {props.get('Type')!r} (STANDARD maps groups)")
    return findings


def environment_findings(template: dict[str, Any]) -> list[str]:
    findings = []
    resources = template["Resources"]
    for logical_id, fn in _resources(template, "AWS::Lambda::Function").items():
        handler = fn["Properties"].get("Handler")
        wanted = names.FUNCTION_ENV.get(handler)
        if wanted is None:
            findings.append(f"{logical_id}: handler {handler!r} has no entry in names.FUNCTION_ENV")
            continue
        variables = fn["Properties"].get("Environment", {}).get("Variables", {})
        own = set(variables) - POWERTOOLS_ENV
        for var in sorted(set(wanted) - own):
            findings.append(f"{logical_id} ({handler}): {var} missing")
        for var in sorted(own - set(wanted)):
            findings.append(f"{logical_id} ({handler}): {var} is not this function's configuration")
        for var, value in variables.items():
            if isinstance(value, str):
                if "${Token[" in value:
                    findings.append(f"{logical_id}: {var} is an unresolved CDK token {value!r}")
                elif not value and var != names.ENV_TOLERATED_TAINT_KEYS:
                    findings.append(f"{logical_id}: {var} is empty")
            elif _target(value) not in resources:
                findings.append(f"{logical_id}: {var} = {json.dumps(value)} resolves to no resource of the stack")
    return findings


def registry_findings(template: dict[str, Any]) -> list[str]:
    found = _resources(template, RESOURCE_TYPE)
    if len(found) != 1:
        return [f"expected one {RESOURCE_TYPE}, found {len(found)}: nothing would register the clusters"]
    logical_id, resource = next(iter(found.items()))
    fn_id = _target(resource["Properties"].get("ServiceToken"))
    fn = template["Resources"].get(fn_id or "", {})
    if fn.get("Properties", {}).get("Handler") != names.REGISTRAR_HANDLER:
        return [f"{logical_id}: not served by the registrar function"]
    findings = []
    clusters = fn["Properties"].get("Environment", {}).get("Variables", {}).get(names.ENV_CLUSTERS)
    if resource["Properties"].get("Clusters") != clusters:
        findings.append(f"{logical_id}: Clusters differ from the registrar's {names.ENV_CLUSTERS}")
    role = _target(fn["Properties"].get("Role"))
    policies = {
        k for k, p in _resources(template, "AWS::IAM::Policy").items() if role in map(_target, p["Properties"]["Roles"])
    }
    if not policies <= set(resource.get("DependsOn", [])):
        findings.append(f"{logical_id}: may run before the registrar's policy is attached")
    return findings


def alarm_findings(template: dict[str, Any]) -> list[str]:
    topics = set(_resources(template, "AWS::SNS::Topic"))
    findings = []
    alarms = _resources(template, "AWS::CloudWatch::Alarm")
    if not alarms:
        findings.append("no alarm")
    for logical_id, alarm in alarms.items():
        actions = alarm["Properties"].get("AlarmActions") or []
        if not actions:
            findings.append(f"{logical_id}: no alarm action (nobody would hear of it)")
        findings += [
            f"{logical_id}: action {json.dumps(a)} is not a topic of the stack"
            for a in actions
            if _target(a) not in topics
        ]
    return findings


def asset_findings(template: dict[str, Any], cdk_out: Path) -> list[str]:
    assets = json.loads((cdk_out / f"{names.STACK_NAME}.assets.json").read_text())["files"]
    findings = []
    for logical_id, fn in _resources(template, "AWS::Lambda::Function").items():
        handler = fn["Properties"]["Handler"]
        key = fn["Properties"]["Code"].get("S3Key", "")
        asset = assets.get(str(key).removesuffix(".zip"))
        if asset is None:
            findings.append(f"{logical_id}: code is not one of the stack's file assets")
            continue
        module = Path(cdk_out / asset["source"]["path"], *handler.split(".")[:-1]).with_suffix(".py")
        if not module.is_file():
            findings.append(f"{logical_id}: {handler}: {module.relative_to(cdk_out)} is not in the asset")
    return findings


def findings(template: dict[str, Any], manifest: str) -> list[str]:
    return (
        rbac_findings(template, manifest)
        + environment_findings(template)
        + registry_findings(template)
        + alarm_findings(template)
    )


def main() -> int:
    from infra.runtime_check import RuntimeCheckError, check_runtime

    with tempfile.TemporaryDirectory(prefix="idleshare-deploy-check-") as tmp:
        out = Path(tmp) / "cdk.out"
        synth(out)
        template = json.loads((out / f"{names.STACK_NAME}.template.json").read_text())
        problems = findings(template, rbac_text()) + asset_findings(template, out)
        functions = len(_resources(template, "AWS::Lambda::Function"))
        alarms = len(_resources(template, "AWS::CloudWatch::Alarm"))
        entries = len(_resources(template, "AWS::EKS::AccessEntry"))
        print(
            f"deploy-check: `npx cdk synth` without uv on PATH: ok; {functions} functions with their own variables, "
            f"{entries} access entries bound by rbac.yaml, {alarms} alarms with actions"
        )
    try:
        report = check_runtime()
    except RuntimeCheckError as exc:
        problems.append(str(exc))
    else:
        print("\n".join(report.lines()))
        problems += report.problems
    for problem in problems:
        print(f"deploy-check: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
