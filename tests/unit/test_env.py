"""The Lambdas' settings: one model, each function's own variables, each missing or malformed one named."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from idleshare import names, timings
from idleshare.adapters.ports import ClusterRecord
from idleshare.domain.cluster_settings import ClusterSettings
from idleshare.domain.model import BorrowLimitBasis
from idleshare.runtime import env as env_module

ROOT = Path(__file__).resolve().parents[2]
DEMO = {"id": "demo", "eks_cluster_name": "demo-eks"}
FULL = {
    names.ENV_TABLE_NAME: "idleshare-state",
    names.ENV_IDEMPOTENCY_TABLE_NAME: "idleshare-idem",
    names.ENV_QUEUE_URL: "https://sqs.us-east-1.amazonaws.com/1/q.fifo",
    names.ENV_EVENT_BUS_NAME: "idleshare",
    names.ENV_HISTORY_TTL_DAYS: "90",
    names.ENV_TOLERATED_TAINT_KEYS: " a/b , ,c ",
    names.ENV_CLUSTERS: json.dumps([DEMO, {"id": "c2", "eks_cluster_name": "e2", "field_ownership": "Take"}]),
}


def own(handler: str) -> dict[str, str]:
    return {k: FULL[k] for k in names.FUNCTION_ENV[handler]}


def test_the_settings_model_reads_every_variable() -> None:
    s = env_module.read(FULL)
    got = (s.table_name, s.idempotency_table_name, s.event_bus_name, s.history_ttl_days, s.tolerated_taint_keys)
    assert got == ("idleshare-state", "idleshare-idem", "idleshare", 90, frozenset({"a/b", "c"}))
    clusters = [
        (c.cluster_id, c.eks_cluster_name, c.settings.namespace_prefix, c.settings.field_ownership) for c in s.clusters
    ]
    assert clusters == [("demo", "demo-eks", "hyperpod-ns-", "Respect"), ("c2", "e2", "hyperpod-ns-", "Take")]
    assert (
        env_module.read({}).history_ttl_days == timings.HISTORY_TTL_DAYS
        and env_module.read({}).tolerated_taint_keys is None
    )
    assert env_module.read({names.ENV_TOLERATED_TAINT_KEYS: ""}).tolerated_taint_keys == frozenset()


def test_the_clusters_variable_is_what_the_cdk_app_writes_read_back_as_equal() -> None:
    clusters = (
        ClusterRecord("demo", "demo-eks", None, ClusterSettings(borrow_limit_basis=BorrowLimitBasis.POOL)),
        ClusterRecord("c2", "e2", "arn:aws:sagemaker:us-east-1:111122223333:cluster/abc", ClusterSettings()),
    )
    assert env_module.parse_clusters(env_module.clusters_json(clusters)) == clusters


@pytest.mark.parametrize("handler", sorted(names.FUNCTION_ENV))
def test_each_function_starts_with_its_own_variables_only(handler: str) -> None:
    assert env_module.settings(own(handler), handler=handler).table_name == "idleshare-state"


@pytest.mark.parametrize(
    ("handler", "missing"), [(h, var) for h, variables in sorted(names.FUNCTION_ENV.items()) for var in variables]
)
def test_a_missing_variable_is_named_with_the_function(handler: str, missing: str) -> None:
    environ = own(handler)
    del environ[missing]
    with pytest.raises(env_module.EnvError, match=rf"{missing}: required by the {handler} function"):
        env_module.settings(environ, handler=handler)


@pytest.mark.parametrize(
    ("variable", "value", "named"),
    [
        (names.ENV_TABLE_NAME, "ab", names.ENV_TABLE_NAME),
        (names.ENV_HISTORY_TTL_DAYS, "thirty", names.ENV_HISTORY_TTL_DAYS),
        (names.ENV_HISTORY_TTL_DAYS, "0", names.ENV_HISTORY_TTL_DAYS),
        (names.ENV_HISTORY_TTL_DAYS, "3651", names.ENV_HISTORY_TTL_DAYS),
        (names.ENV_CLUSTERS, "[", names.ENV_CLUSTERS + ": not JSON"),
        (names.ENV_CLUSTERS, "[]", names.ENV_CLUSTERS + ": a non-empty JSON list"),
        (names.ENV_CLUSTERS, '[{"id": "demo"}]', rf"{names.ENV_CLUSTERS}\[0\].eks_cluster_name"),
        (names.ENV_CLUSTERS, '[{"id": 7, "eks_cluster_name": "x"}]', rf"{names.ENV_CLUSTERS}\[0\].id"),
        (
            names.ENV_CLUSTERS,
            json.dumps([DEMO | {"prefix": "x-"}]),
            rf"{names.ENV_CLUSTERS}\[0\].prefix: unknown setting",
        ),
        (
            names.ENV_CLUSTERS,
            json.dumps([DEMO | {"field_ownership": "Fight"}]),
            r"\[0\]\.field_ownership: must be one of Respect, Take \(got 'Fight'\)",
        ),
        (
            names.ENV_CLUSTERS,
            json.dumps([DEMO, DEMO | {"id": "c2", "eks_cluster_name": "e2", "borrow_limit_basis": "Percent"}]),
            r"IDLESHARE_CLUSTERS\[1\]\.borrow_limit_basis: must be one of Quota, Pool \(got 'Percent'\)",
        ),
        # issue 35: the prefix starts every team's namespace: never the cluster's own, never bare namespaces
        *(
            (
                names.ENV_CLUSTERS,
                json.dumps([DEMO | {"namespace_prefix": prefix}]),
                rf"\.namespace_prefix: {why}",
            )
            for prefix, why in (
                ("kube-", "must not start with 'kube-'"),
                ("openshift-", "must not start"),
                ("default", "must not start"),
                ("", "must not be empty"),
                ("Team_", "must start with a-z"),
            )
        ),
    ],
)
def test_a_malformed_variable_is_named(variable: str, value: str, named: str) -> None:
    with pytest.raises(env_module.EnvError, match=named):
        env_module.settings(FULL | {variable: value}, handler=names.REGISTRAR_HANDLER)


def _cold_start(handler: str, environ: dict[str, str], code: str = "") -> subprocess.CompletedProcess[str]:
    """A new Python process as Lambda starts it (``_HANDLER`` set), importing the handler's module or running ``code``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("IDLESHARE_")} | environ | {"_HANDLER": handler}
    env |= {"AWS_DEFAULT_REGION": "us-east-1", "PYTHONPATH": os.pathsep.join([str(ROOT / "functions"), str(ROOT)])}
    code = code or f"import {handler.rsplit('.', 1)[0]}"
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)


def test_a_lambda_without_its_configuration_fails_at_cold_start_naming_it_and_the_router_loads_no_pydantic() -> None:
    # the handler module's import checks the function's variables: an init error
    environ = own(names.ROUTER_HANDLER)
    del environ[names.ENV_QUEUE_URL]
    proc = _cold_start(names.ROUTER_HANDLER, environ)
    assert proc.returncode == 1
    assert f"EnvError: {names.ENV_QUEUE_URL}: required by the {names.ROUTER_HANDLER} function" in proc.stderr
    assert _cold_start(names.ROUTER_HANDLER, own(names.ROUTER_HANDLER)).returncode == 0
    # on its first event the router builds its dependencies from the environment (boto3 clients, the store, the
    # queue): none of that may pull pydantic into the router Lambda
    code = (
        "import sys\n"
        "from idleshare.handlers import router\n"
        "from idleshare.runtime import wiring\n"
        "deps = wiring.dependencies()\n"
        "assert deps.queue is not None and deps.publisher is None\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pydantic', 'pydantic_core')))\n"
    )
    out = _cold_start(names.ROUTER_HANDLER, own(names.ROUTER_HANDLER), code)
    assert (out.returncode, out.stdout.strip()) == (0, "[]"), out.stderr
