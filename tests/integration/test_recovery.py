"""Recovery in seconds: for each fault class, the time from the fault's end until the right
``borrowingLimit`` is in the ClusterQueue, on the real stack with the deployed queue's semantics
(``tests/integration/recovery.py``), is at most the coalescing window + 30 s; nothing reaches the DLQ; the
generation's event is published exactly once. ``IDLESHARE_RECOVERY_TABLE=path`` writes the measured table (JSON)
for ``make bench``."""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from pathlib import Path

import pytest

from tests.integration.recovery import BOUND_SECONDS, faults, measure
from tests.integration.test_pipeline import harness  # noqa: F401  (fixture)

pytestmark = pytest.mark.integration

FAULTS = {f.name: f for f in faults()}


@pytest.mark.parametrize("name", list(FAULTS))
def test_a_cluster_recovers_within_the_window_plus_30_s_of_the_faults_end(harness, name):  # noqa: F811
    # Given a converged cluster, When a fault lasts a minute while a node goes away, and then ends
    fault = faults()[list(FAULTS).index(name)]
    recovery = measure(harness, fault)
    table = os.environ.get("IDLESHARE_RECOVERY_TABLE")
    if table:
        with Path(table).open("a") as out:
            out.write(json.dumps(asdict(recovery)) + "\n")
    # Then the right limit is in Kueue within the bound, the record never reached the DLQ, and the generation's
    # event was published once
    assert recovery.seconds <= BOUND_SECONDS, recovery
    assert recovery.dead_lettered == 0, recovery
    assert recovery.published == 1, recovery
    if not fault.ends_itself:  # the queue kept retrying during the fault (backoff, not the visibility timeout)
        assert recovery.attempts_during_fault >= 3, recovery
