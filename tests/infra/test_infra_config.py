"""The CDK config: validated before synthesis, errors name the field, the app exits 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from idleshare import timings
from idleshare.domain.cluster_settings import ClusterSettings
from idleshare.parse.cluster_settings import settings_json
from infra.config import (
    CONTEXT_CONFIG_FILE,
    CONTEXT_KEY,
    DEFAULT_TOLERATED_TAINT_KEYS,
    EXAMPLE_CONFIG,
    EXAMPLE_MARKER,
    ConfigError,
    load_config,
    parse_config,
    rehearsal_config,
)

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_the_example_config_is_valid_and_public(sample: dict[str, Any]) -> None:
    config = parse_config(sample)

    assert config.clusters and config.vpc is None
    assert tuple(config.tolerated_taint_keys) == DEFAULT_TOLERATED_TAINT_KEYS


def test_cdk_json_as_shipped_names_the_example_which_is_refused_saying_what_to_put_there() -> None:
    # Given cdk.json as cloned: its context names the example config, with its placeholder cluster
    context = json.loads((REPO_ROOT / "cdk.json").read_text())["context"]
    assert CONTEXT_KEY not in context and context[CONTEXT_CONFIG_FILE] == EXAMPLE_CONFIG
    example = json.loads((REPO_ROOT / EXAMPLE_CONFIG).read_text())
    assert ":111111111111:" in example["clusters"][0]["hyperpod_cluster_arn"]
    # When the app loads it (as `cdk synth` / `cdk deploy` run from the root)
    with pytest.raises(ConfigError) as refused:
        load_config(lambda key: str(REPO_ROOT / context[key]) if key == CONTEXT_CONFIG_FILE else context.get(key))
    # Then nothing is synthesized, and the message says what to put where
    message = str(refused.value)
    assert message.startswith(f"not deployable: {EXAMPLE_CONFIG} is the example config")
    for needed in ("clusters", "eks_cluster_name", "hyperpod_cluster_arn", EXAMPLE_MARKER, CONTEXT_CONFIG_FILE):
        assert f"`{needed}`" in message
    # while the example without its marker is a valid config (what the tests and `make deploy-check` synthesize)
    assert rehearsal_config() == {k: v for k, v in example.items() if k != EXAMPLE_MARKER}
    assert parse_config(rehearsal_config()).clusters


def test_defaults_for_a_minimal_config() -> None:
    config = parse_config({"clusters": [{"id": "c1", "eks_cluster_name": "c1"}]})

    assert (config.schedule_rate_minutes, config.history_ttl_days) == (5, 90)
    assert config.history_ttl_days == timings.HISTORY_TTL_DAYS  # the one default the Lambdas and the store read too
    # the default sends a cluster that keeps failing to the DLQ only after 15 minutes
    assert timings.seconds_to_dlq(config.dlq_max_receive_count) >= 15 * 60
    assert 2 <= config.recompute_max_concurrency <= 1000
    assert config.alarm_email is None
    assert json.loads(config.clusters_env()) == [
        {"id": "c1", "eks_cluster_name": "c1", **settings_json(ClusterSettings())}
    ]


def _cluster(**over: Any) -> dict[str, Any]:
    return {"id": "c1", "eks_cluster_name": "c1-eks"} | over


VPC = {
    "vpc_id": "vpc-0123456789abcdef0",
    "subnet_ids": ["subnet-0123456789abcdef0"],
    "security_group_ids": ["sg-0123456789abcdef0"],
}


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({}, "idleshare.clusters"),
        ({"clusters": []}, "idleshare.clusters"),
        ({"clusters": [_cluster(eks_cluster_name="bad name!")]}, "idleshare.clusters.0.eks_cluster_name"),
        ({"clusters": [_cluster(id="UPPER")]}, "idleshare.clusters.0.id"),
        ({"clusters": [_cluster(hyperpod_cluster_arn="arn:aws:eks:us-east-1:1:cluster/x")]}, "hyperpod_cluster_arn"),
        ({"clusters": [_cluster(namespace_prefix="Bad_")]}, "idleshare.clusters.0.namespace_prefix"),
        ({"clusters": [_cluster(borrow_limit_basis="Percent")]}, "idleshare.clusters.0.borrow_limit_basis"),
        ({"clusters": [_cluster(borrow_limit_basis=50)]}, "idleshare.clusters.0.borrow_limit_basis"),
        # issue 35: no namespace of the cluster's own (kube-system, default, openshift-*), no bare namespaces
        *(
            ({"clusters": [_cluster(namespace_prefix=prefix)]}, f"idleshare.clusters.0.namespace_prefix: {why}")
            for prefix, why in (
                ("kube-", "must not start with 'kube-'"),
                ("openshift-", "must not start"),
                ("default", "must not start"),
                ("", "must not be empty"),
                ("p" * 32, "must be at most 31"),
            )
        ),
        ({"clusters": [_cluster(prefix="team-")]}, "idleshare.clusters.0.prefix: Extra inputs are not permitted"),
        ({"clusters": [_cluster(), _cluster(eks_cluster_name="other")]}, "duplicate id: c1"),
        ({"clusters": [_cluster(), _cluster(id="c2")]}, "duplicate eks_cluster_name: c1-eks"),
        ({"clusters": [_cluster()], "schedule_rate_minutes": 0}, "idleshare.schedule_rate_minutes"),
        ({"clusters": [_cluster()], "dlq_max_receive_count": 0}, "idleshare.dlq_max_receive_count"),
        ({"clusters": [_cluster()], "recompute_max_concurrency": 1}, "idleshare.recompute_max_concurrency"),
        ({"clusters": [_cluster()], "recompute_max_concurrency": 1001}, "idleshare.recompute_max_concurrency"),
        ({"clusters": [_cluster()], "alarm_email": "nobody"}, "idleshare.alarm_email"),
        ({"clusters": [_cluster()], "tolerated_taint_keys": ["not a key"]}, "idleshare.tolerated_taint_keys.0"),
        ({"clusters": [_cluster()], "schedule_rate": 5}, "idleshare.schedule_rate: Extra inputs"),
        ({"clusters": [_cluster(vpc=VPC | {"subnet_ids": []})]}, "idleshare.clusters.0.vpc.subnet_ids"),
        ({"clusters": [_cluster(vpc=VPC | {"security_group_ids": ["sg-x"]})]}, "vpc.security_group_ids.0"),
        ({"clusters": [_cluster(vpc=VPC | {"create_vpc_endpoints": True})]}, "route_table_ids is required"),
        (
            {
                "clusters": [
                    _cluster(vpc=VPC),
                    _cluster(id="c2", eks_cluster_name="c2", vpc=VPC | {"vpc_id": "vpc-0123456789abcdef1"}),
                ]
            },
            "must all give the same vpc block",
        ),
    ],
)
def test_invalid_config_names_the_field(raw: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(raw)

    assert field in str(err.value)


def test_a_receive_count_that_reaches_the_dlq_within_15_minutes_is_refused_saying_why() -> None:
    short = timings.min_receive_count() - 1
    assert timings.seconds_to_dlq(short) < 15 * 60

    with pytest.raises(ConfigError) as err:
        parse_config({"clusters": [_cluster()], "dlq_max_receive_count": short})

    message = str(err.value)
    assert "idleshare.dlq_max_receive_count" in message
    assert f"at least {timings.min_receive_count()}" in message and "15 minutes" in message
    assert (
        parse_config({"clusters": [_cluster()], "dlq_max_receive_count": short + 1}).dlq_max_receive_count == short + 1
    )


def test_missing_config_says_where_to_put_it() -> None:
    with pytest.raises(ConfigError, match=r"no `idleshare` object in the cdk\.json context"):
        load_config(lambda key: None)


def test_config_file_from_context(tmp_path: Path) -> None:
    path = tmp_path / "idleshare.json"
    path.write_text(json.dumps({"clusters": [_cluster()], "schedule_rate_minutes": 15}))
    context = {"idleshare:config": str(path)}

    config = load_config(context.get)

    assert config.schedule_rate_minutes == 15


def test_unreadable_config_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read idleshare:config"):
        load_config({"idleshare:config": str(tmp_path / "missing.json")}.get)


def test_app_prints_the_error_and_exits_2_without_traceback(tmp_path: Path) -> None:
    bad = {"idleshare": {"clusters": [{"id": "c1", "eks_cluster_name": "no spaces allowed"}]}}
    env = {
        **os.environ,
        "CDK_CONTEXT_JSON": json.dumps(bad),
        "CDK_OUTDIR": str(tmp_path),
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
    }

    proc = subprocess.run(
        [sys.executable, "-m", "infra.app"], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120
    )

    assert proc.returncode == 2, proc.stderr
    assert "idleshare.clusters.0.eks_cluster_name" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_clusters_node_watch_hold_sets_its_alarm() -> None:
    from infra.constructs.watcher import alarm_threshold

    assert alarm_threshold(40) == timings.WATCHER_ALARM_MINUTES * 40 / 2  # half of what a running watch holds
