"""`idleshare uninstall` on the real stack: it removes, with the operator's kubeconfig, exactly the Kueue objects
idleshare recorded creating (through its own adapter, as a recompute creates them; the record in idleshare's table,
here on moto), and keeps what someone else created beside them — labelled like idleshare's or not, a copy of one of
idleshare's objects among them — and the namespaces (their Jobs); a dry run removes nothing and lists no copy."""

from __future__ import annotations

import json
from pathlib import Path

import boto3
import pytest
from moto import mock_aws

from idleshare.adapters.ports import ClusterRecord
from idleshare.adapters.store import DynamoStore
from idleshare.domain.kueue import KUEUE_API, MANAGED_BY, MANAGED_BY_LABEL
from idleshare.domain.kueue_diff import object_identity
from idleshare.domain.ownership import Record
from idleshare_cli.main import main
from idleshare_cli.plan import plan
from tests.aws_env import create_table, fake_aws_env
from tests.realkube import idleshare_adapter

REPO = Path(__file__).parents[2]
pytestmark = pytest.mark.integration

FOREIGN = [
    {  # labelled as idleshare's, created by someone else: kept
        "apiVersion": KUEUE_API,
        "kind": "ClusterQueue",
        "metadata": {"name": "gitops-clusterqueue", "labels": {MANAGED_BY_LABEL: MANAGED_BY}},
        "spec": {"resourceGroups": []},
    },
    {"apiVersion": KUEUE_API, "kind": "ResourceFlavor", "metadata": {"name": "on-demand"}, "spec": {}},  # not labelled
]


def identity(obj: dict) -> tuple[str, str, str]:
    meta = obj["metadata"]
    return obj["kind"], meta.get("namespace", ""), meta["name"]


def test_uninstall_removes_only_what_idleshare_created_and_says_what_it_removed(kube_stack, kube, capsys):
    # Given one team's objects created by idleshare's adapter, and two objects someone else created
    quotas = json.dumps(json.loads((REPO / "events/examples/quotas.json").read_text())[:1])
    _, objects = plan((REPO / "events/examples/nodes.json").read_bytes(), quotas)
    adapter = idleshare_adapter(kube_stack)
    uids = {object_identity(obj): adapter.create(obj) for obj in objects}
    for obj in FOREIGN:
        kube.create(obj)
    kueue_objects = [o for o in objects if o["kind"] != "Namespace"]
    namespaces = [o for o in objects if o["kind"] == "Namespace"]
    assert kueue_objects and namespaces
    # And a copy of idleshare's ResourceFlavor (kubectl get -o yaml, renamed, kubectl create: label and marker kept;
    # a copied ClusterQueue would name idleshare's flavors, and Kueue would hold them while it does)
    flavor = next(o for o in kueue_objects if o["kind"] == "ResourceFlavor")
    theirs = kube.get("ResourceFlavor", flavor["metadata"]["name"])
    keep = ("name", "labels", "annotations")
    theirs = {**theirs, "metadata": {k: v for k, v in theirs["metadata"].items() if k in keep}}
    theirs.pop("status", None)
    theirs["metadata"]["name"] = "flavor-copy"
    kube.create(theirs)
    # And the record of what idleshare created, in its table (moto: AWS calls only)
    with fake_aws_env(), mock_aws():
        table = create_table(boto3.resource("dynamodb", region_name="us-east-1"))
        store = DynamoStore(table)
        store.put_cluster(ClusterRecord("demo", "demo-eks"))
        store.put_owned("demo", Record(objects={k: v for k, v in uids.items() if v}))
        argv = ["uninstall", "--kubeconfig", str(kube_stack.kubeconfig("admin")), "--format", "json"]
        argv += ["--cluster", "demo", "--table", table.name, "--region", "us-east-1"]
        # When the uninstall runs dry: it names each one it would remove (no copy), and removes nothing
        assert main([*argv, "--dry-run"]) == 0
        dry = json.loads(capsys.readouterr().out)
        assert dry["dryRun"] is True
        listed = {(r["kind"], r.get("namespace", ""), r["name"]) for r in dry["removed"]}
        assert listed == set(map(identity, kueue_objects))
        assert all(kube.get(o["kind"], o["metadata"]["name"], o["metadata"].get("namespace", "")) for o in objects)
        # When it runs: every object idleshare created is gone (Kueue's finalizers done), in the order it printed
        assert main(argv) == 0
        done = json.loads(capsys.readouterr().out)
        assert store.get_owned("demo").objects == {}  # what was removed left the record
    assert done["removed"] == dry["removed"]
    assert (
        done["removed"][0]["kind"] == "ValidatingAdmissionPolicyBinding"
        and done["removed"][-1]["kind"] == "ResourceFlavor"
    )
    for obj in kueue_objects:
        kind, namespace, name = identity(obj)
        kube.wait_for(lambda k=kind, n=name, ns=namespace: kube.get(k, n, ns) is None, f"{kind}/{name} gone")
    # Then the foreign objects and the namespaces are as they were, and named
    for obj in FOREIGN + namespaces:
        kind, namespace, name = identity(obj)
        assert kube.get(kind, name, namespace) is not None, (kind, name)
    assert kube.get("ResourceFlavor", "flavor-copy") is not None  # the copy: kept, named, never listed to remove
    assert [r["name"] for r in dry["keptForeign"]] == ["flavor-copy", "gitops-clusterqueue"]
    assert [r["name"] for r in done["keptForeign"]] == ["flavor-copy", "gitops-clusterqueue"]
    assert [r["name"] for r in done["keptNamespaces"]] == [o["metadata"]["name"] for o in namespaces]


def test_uninstall_with_a_bad_kubeconfig_exits_2_naming_the_flag(tmp_path, capsys):
    (tmp_path / "kubeconfig").write_text("apiVersion: v1\nkind: Config\ncontexts: []\nclusters: []\nusers: []\n")
    record = ["--cluster", "demo", "--table", "idleshare"]
    code = main(["uninstall", "--kubeconfig", str(tmp_path / "kubeconfig"), "--context", "prod", *record])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith(f"idleshare uninstall: --kubeconfig {tmp_path / 'kubeconfig'}: ")
    assert err.count("\n") == 1
    code = main(["uninstall", "--kubeconfig", str(tmp_path / "missing"), *record])
    assert code == 2 and "--kubeconfig" in capsys.readouterr().err
