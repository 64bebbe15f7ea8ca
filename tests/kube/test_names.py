"""idleshare's name check (``naming.object_name_problems``) against the real kube-apiserver and Kueue (issue 35):
each desired object it passes is taken, each name rule of the API server's it refuses the server refuses too, and
the rules that are idleshare's own (the cluster's namespaces, names a Job must put in a label) are the only ones the
server would let through."""

from __future__ import annotations

from typing import Any

import pytest

from devkit.kube.client import Kube
from idleshare.domain.naming import object_name_problems
from tests.builders import BAD_NAMES, GOOD_OBJECTS, spoiled
from tests.kube.dryrun import ensure_namespace, refusal


@pytest.fixture
def server(kube_admin: Kube) -> Kube:
    """The admin client on an emptied stack (a dry run of a name that exists would be an update of another test's
    object), with the teams' namespaces the LocalQueues live in (dry runs store nothing else)."""
    kube_admin.reset()
    for obj in GOOD_OBJECTS:
        if obj["kind"] == "Namespace":
            ensure_namespace(kube_admin, obj["metadata"]["name"])
    return kube_admin


def test_every_object_the_check_passes_the_server_takes(server: Kube) -> None:
    taken = {f"{o['kind']}/{o['metadata']['name']}": refusal(server, o) for o in GOOD_OBJECTS}
    assert {name: why for name, why in taken.items() if why} == {}
    assert [o for o in GOOD_OBJECTS if object_name_problems(o)] == []


@pytest.mark.parametrize(("kind", "path", "value", "field", "api"), BAD_NAMES, ids=lambda v: str(v)[:24])
def test_each_name_the_check_refuses_the_server_refuses_unless_the_rule_is_idleshares(
    server: Kube, kind: str, path: tuple[Any, ...], value: Any, field: str, api: bool
) -> None:
    obj = spoiled(kind, path, value)
    assert object_name_problems(obj)  # idleshare never sends it
    refused = refusal(server, obj)
    assert bool(refused) is api, refused  # API rows: the server's own rule; the others: idleshare's, stricter
