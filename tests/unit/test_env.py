"""The Lambdas' environment: read once, each malformed variable named."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from idleshare import names
from idleshare.handlers import env as env_module

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def fresh_env(monkeypatch):
    env_module.env.cache_clear()
    monkeypatch.setenv(names.ENV_TABLE_NAME, "idleshare-state")
    yield monkeypatch
    env_module.env.cache_clear()


def test_the_environment_is_read_with_its_defaults(fresh_env):
    fresh_env.setenv(names.ENV_TOLERATED_TAINT_KEYS, " a/b , ,c ")
    fresh_env.delenv(names.ENV_HISTORY_TTL_DAYS, raising=False)
    e = env_module.env()
    assert e.table_name == "idleshare-state" and e.history_ttl_days == 30
    assert e.tolerated_taint_keys == frozenset({"a/b", "c"})


@pytest.mark.parametrize(
    ("variable", "value", "named"),
    [
        (names.ENV_TABLE_NAME, "", names.ENV_TABLE_NAME),
        (names.ENV_HISTORY_TTL_DAYS, "thirty", names.ENV_HISTORY_TTL_DAYS),
        (names.ENV_HISTORY_TTL_DAYS, "0", names.ENV_HISTORY_TTL_DAYS),
        (names.ENV_HISTORY_TTL_DAYS, "3651", names.ENV_HISTORY_TTL_DAYS),
    ],
)
def test_a_malformed_variable_is_named(fresh_env, variable, value, named):
    fresh_env.setenv(variable, value)
    with pytest.raises(env_module.EnvError, match=named):
        env_module.env()


def test_the_routers_first_event_wiring_does_not_load_pydantic():
    # On its first event the router builds its dependencies from the environment (boto3 clients, the
    # store, the queue): none of that may pull pydantic into the router Lambda.
    code = (
        "import os, sys\n"
        f"os.environ.update({{{names.ENV_TABLE_NAME!r}: 'idleshare-state', {names.ENV_QUEUE_URL!r}: 'https://q',"
        f" {names.ENV_EVENT_BUS_NAME!r}: 'idleshare', 'AWS_DEFAULT_REGION': 'us-east-1'}})\n"
        "from idleshare.handlers import router, wiring\n"
        "deps = wiring.dependencies()\n"
        "assert deps.queue is not None and deps.publisher is not None\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pydantic', 'pydantic_core')))\n"
    )
    env = os.environ | {"PYTHONPATH": os.pathsep.join([str(ROOT / "functions"), str(ROOT)])}
    env.pop(names.ENV_CLUSTERS, None)
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
