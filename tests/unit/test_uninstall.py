"""What `idleshare uninstall` removes (the pure sorting, :func:`idleshare_cli.removal.plan_removal`, and the
service over a fake cluster): only objects carrying idleshare's creation marker, LocalQueues first and
ResourceFlavors last; never a namespace; an object labelled as idleshare's without the marker is kept and named."""

from __future__ import annotations

from pathlib import Path

from idleshare.domain.kueue import KIND_ORDER
from idleshare.domain.kueue_diff import object_identity, with_creation_marker
from idleshare_cli.plan import plan
from idleshare_cli.removal import plan_removal, uninstall

REPO = Path(__file__).parents[2]


def created() -> list[dict]:
    """The example cluster's objects as idleshare creates them (with its marker)."""
    _, objects = plan(
        (REPO / "events/examples/nodes.json").read_bytes(), (REPO / "events/examples/quotas.json").read_bytes()
    )
    return [with_creation_marker(o) for o in objects]


class Cluster:
    """The two calls an uninstall makes, recorded."""

    def __init__(self, objects: list[dict]) -> None:
        self.objects, self.deleted = objects, []

    def list_managed(self) -> list[dict]:
        return list(self.objects)

    def delete(self, obj: dict) -> None:
        self.deleted.append(object_identity(obj))


def test_only_marked_kueue_objects_are_removed_last_dependency_first_and_namespaces_never():
    # Given idleshare's objects and one labelled like them that someone else created (no marker)
    ours = created()
    foreign = {**ours[-1], "metadata": {**ours[-1]["metadata"], "name": "gitops-queue", "annotations": {}}}
    removal = plan_removal([foreign, *reversed(ours)])
    # Then every Kueue object of ours is removed, in reverse apply order; the namespaces and the foreign one kept
    kinds = [o["kind"] for o in removal.removed]
    assert sorted(map(object_identity, removal.removed)) == sorted(
        object_identity(o) for o in ours if o["kind"] != "Namespace"
    )
    assert kinds == sorted(kinds, key=lambda k: -KIND_ORDER.index(k)) and kinds[0] == "LocalQueue"
    assert {o["kind"] for o in removal.namespaces} == {"Namespace"} and len(removal.namespaces) == len(
        [o for o in ours if o["kind"] == "Namespace"]
    )
    assert removal.foreign == [foreign]


def test_a_dry_run_deletes_nothing_and_a_run_deletes_exactly_what_it_names():
    cluster = Cluster(created())
    planned = uninstall(cluster, dry_run=True)
    assert planned.removed and cluster.deleted == []
    done = uninstall(cluster)
    assert (
        cluster.deleted == [object_identity(o) for o in done.removed] == [object_identity(o) for o in planned.removed]
    )


def test_the_uninstall_lines_operations_md_shows_are_command_lines_the_cli_accepts():
    from idleshare_cli.main import build_parser

    docs = (REPO / "docs/operations.md").read_text()
    lines = [line.split("#")[0] for line in docs.splitlines() if line.startswith("./idleshare uninstall")]
    assert len(lines) == 2 and "--dry-run" in lines[0]
    for line in lines:
        words = line.replace("[--context <name>]", "--context prod").split()[1:]
        args = build_parser().parse_args(words)
        assert (args.kubeconfig, args.context, args.dry_run) == ("~/.kube/config", "prod", "--dry-run" in words)
