"""Hypothesis strategies the fuzz tests share: any JSON value, near misses, and a real example document with one
member replaced by such a value (or removed)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from tests.builders import LAYOUTS, MIG1, MIG2, MIG3, P5, TRN1, entry, node, quota
from tests.corpus.make_corpus import DELETE, Path_, mutate

EVENTS = Path(__file__).resolve().parents[1] / "events"
NODE_LIST = json.loads((EVENTS / "examples" / "nodes.json").read_text())
# one node of each instance type (the example has 36; the others add nothing but time)
NODES = list({n["metadata"]["labels"].get("node.kubernetes.io/instance-type"): n for n in NODE_LIST["items"]}.values())
json_scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20)
json_values = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=10,
)
# values that get past a type check more often than arbitrary JSON does
near_misses = st.sampled_from(["", "all", "True", "Ready", "aws.sagemaker", "idleshare", "ml.p5.48xlarge", "8", "-1"])
near_misses |= st.sampled_from(["1e400", "NaN", "８", 10**30])
mutation_values = st.one_of(json_values, near_misses, st.just(DELETE))


def paths(doc: Any, path: Path_ = ()) -> Iterator[Path_]:
    """Every member and item of ``doc`` (and the document itself: ``()``)."""
    yield path
    if isinstance(doc, dict):
        for key, value in doc.items():
            yield from paths(value, (*path, key))
    elif isinstance(doc, list):
        for index, value in enumerate(doc):
            yield from paths(value, (*path, index))


def mutations(documents: dict[str, Any]) -> st.SearchStrategy[Any]:
    """One example document with one member replaced by a random value (or removed)."""
    choices = [(name, p) for name, doc in documents.items() for p in paths(doc)]
    return st.builds(
        lambda choice, value: mutate(documents[choice[0]], choice[1], value), st.sampled_from(choices), mutation_values
    )


# -- a mixed-MIG fleet and teams with absolute borrow caps (the pool's properties) --------------------------------
@st.composite
def mixed_fleet(draw, min_size=1):
    """p5 nodes of random MIG layouts (and some trn1), random eligibility."""
    n = draw(st.integers(min_size, 12))
    out = []
    for i in range(n):
        if draw(st.integers(0, 5)) == 0:
            out.append(node(f"trn-{i}", TRN1, ready=draw(st.booleans())))
        else:
            alloc = dict(LAYOUTS[draw(st.sampled_from(sorted(LAYOUTS)))])
            ready, cordoned = draw(st.integers(0, 4)) > 0, draw(st.integers(0, 5)) == 0
            out.append(node(f"p5-{i}", P5, allocatable=alloc, ready=ready, unschedulable=cordoned))
    return out


@st.composite
def cap_entry(draw, flavor):
    options = {
        "count": st.integers(0, 2),
        "accelerators": st.integers(0, 40),
        "vcpu": st.fractions(min_value=0, max_value=500, max_denominator=1000),
        "memory_gib": st.integers(0, 5000),
        "partition": st.tuples(st.sampled_from([MIG3, MIG1, MIG2]), st.integers(0, 40)),
    }
    return entry(flavor, **{field: draw(values) for field, values in options.items() if draw(st.booleans())})


@st.composite
def teams_with_caps(draw):
    out = []
    for t in range(draw(st.integers(1, 4))):
        own = tuple(draw(st.lists(cap_entry(P5), max_size=1)))  # any entry is also a valid quota entry
        caps = tuple(draw(cap_entry(f)) for f in draw(st.lists(st.sampled_from([P5, TRN1]), unique=True)))
        out.append(quota(f"t{t}", *own, borrow=draw(st.integers(0, 300)), absolute=caps))
    return out
