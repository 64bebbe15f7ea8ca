"""The synthesized stack's description names idleshare's version, read from its one place (``idleshare.__version__``,
which `idleshare --version` and the package metadata read too: tests/unit/test_version.py)."""

from __future__ import annotations

import importlib.metadata

import idleshare


def test_the_templates_description_names_the_version(public):
    # Given the stack as synthesized, Then its Description is idleshare's version, as the package's metadata says it
    description = public.json["Description"]
    assert description == f"idleshare {idleshare.__version__}: lendable GPU pool for EKS / HyperPod + Kueue"
    assert description.split(":")[0] == f"idleshare {importlib.metadata.version('idleshare')}"
