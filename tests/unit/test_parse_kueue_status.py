"""Kueue's ClusterQueue and Workload as the usage sample reads them (parse/kueue_status.py): one reader each, every
value that does not read named (object, field, problem) and left out, never read as zero."""

from __future__ import annotations

import html
from datetime import UTC, datetime
from typing import Any

from devkit.report import render_usage
from idleshare.domain.usage import derive_usage, sample_document
from idleshare.parse.kueue_status import cluster_queue, workload
from idleshare_cli.report_html import render
from idleshare_cli.usage import table_text
from tests.unit.test_usage import GPU, P5, T0, cq, pool
from tests.unit.test_usage import workload as make_workload


def test_a_cluster_queue_reads_its_quotas_usage_and_counts():
    got = cluster_queue(cq("alpha", {P5: {GPU: (8, 4)}}, {P5: {GPU: ("12", "4")}}, pending=2, admitted=1))
    assert (got.team, got.namespace, got.unreadable) == ("alpha", "hyperpod-ns-alpha", ())
    assert (got.nominal, got.borrowing_limit, got.lending_limit) == ({P5: {GPU: 8}}, {P5: {GPU: 100}}, {P5: {GPU: 4}})
    assert (got.in_use, got.borrowed, got.pending, got.reserving, got.admitted) == (
        {P5: {GPU: 12}}, {P5: {GPU: 4}}, 2, 0, 1)  # fmt: skip


def test_an_unreadable_limit_is_named_and_its_flavor_resource_unknown():
    alpha = cq("alpha", {P5: {GPU: 8}})
    alpha["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["borrowingLimit"] = "-3"
    got = cluster_queue(alpha)
    assert [(u.field, u.problem, u.flavor, u.resource) for u in got.unreadable] == [
        ("spec.resourceGroups[0].flavors[0].resources[0].borrowingLimit", 'negative quantity "-3"', P5, GPU)
    ]


def test_a_cluster_queue_whose_shape_does_not_read_leaves_every_total_unknown():
    # Given beta's ClusterQueue with a flavorsUsage that is not a list: its use is not known, so no total is
    beta: dict[str, Any] = cq("beta", {P5: {GPU: 8}})
    beta["status"]["flavorsUsage"] = "none"
    read = cluster_queue(beta)
    assert not read.readable and [u.field for u in read.unreadable] == ["status.flavorsUsage"]
    alpha = cluster_queue(cq("alpha", {P5: {GPU: 8}}, {P5: {GPU: ("8", "0")}}))
    out = sample_document(derive_usage("c1", [alpha, read], [], pool({P5: 16}, {}), since=T0, until=T0))
    # Then the flavor's totals and alpha's p5 GPUs are left out (not alpha's 8 as the whole use), and it is named
    assert out["flavors"] == {} and out["teams"]["alpha"]["flavors"] == {}
    assert out["unreadable"][0]["object"] == "ClusterQueue/hyperpod-ns-beta-clusterqueue"


def test_a_workload_reads_its_requests_pin_owner_and_conditions():
    wl = make_workload("alpha", "train", 4, flavor=P5, pending=False, preempted_at="2026-12-03T13:57:30Z")
    wl["spec"]["podSets"][0]["count"] = 2
    wl["metadata"]["ownerReferences"] = [{"kind": "Job", "name": "train-job", "uid": "u1"}]
    got = workload(wl)
    assert (got.requests, got.pinned, got.job, got.owner_uids) == ({GPU: 8}, P5, "train-job", ("u1",))
    assert got.conditions["Preempted"].since == datetime(2026, 12, 3, 13, 57, 30, tzinfo=UTC)
    assert got.conditions["QuotaReserved"].status == "True" and got.unreadable == ()


def test_a_workload_request_that_does_not_read_is_named_and_left_out():
    wl = make_workload("alpha", "train", 4)
    wl["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "lots"
    got = workload(wl)
    assert got.requests == {GPU: 4}
    assert [(u.object, u.field, u.problem) for u in got.unreadable] == [
        ("Workload/hyperpod-ns-alpha/train", "spec.podSets[0].template.spec.containers[0].resources.requests['cpu']",
         'invalid quantity "lots"')
    ]  # fmt: skip


def test_what_was_not_read_is_named_by_the_cli_the_html_report_and_the_demo():
    # Given a sample whose only ClusterQueue reports a p5 GPU total that does not read (so no flavor is known)
    alpha = cluster_queue(cq("alpha", {P5: {GPU: 8}}, {P5: {GPU: ("12x", "0")}}))
    out = sample_document(derive_usage("c1", [alpha], [], pool({P5: 16}, {}), since=T0, until=T0))
    named = ("ClusterQueue/hyperpod-ns-alpha-clusterqueue", "status.flavorsUsage[0].resources[0].total")
    problem = 'invalid quantity "12x"'
    assert [(u["object"], u["field"], u["problem"]) for u in out["unreadable"]] == [(*named, problem)]
    # When `idleshare usage`, the HTML report and the demo's step show it, then each names object, field and problem
    text = table_text(out)
    assert "Not read" in text and all(part in text for part in (*named, problem))
    page = render({"cluster": "c1"}, usage=out)
    row = page.split(f'<tr data-unreadable="{html.escape(named[0])}">', 1)[1].split("</tr>", 1)[0]
    assert all(html.escape(part) in row for part in (*named, problem)) and '<section id="not-read">' in page
    demo = "\n".join(render_usage(out))
    assert "not read" in demo and all(part in demo for part in (*named, problem))
