"""What keeps the handlers' cold start light, checked without timing anything: which modules an import
loads (no pydantic in the router: its events are msgspec Structs, not Powertools' parser models), the lazily
built tracer, and the cold-start benchmark's own code at a tiny size."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.bench import bench_coldstart
from tests.bench import bench_common as bc

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("aws_xray_sdk", "aws_lambda_powertools.utilities.parser", "lightkube", "idleshare.service.recompute")


def loaded_after_import(module: str) -> set[str]:
    code = f"import sys, json\nimport {module}\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    return set(json.loads(out.stdout))


@pytest.mark.parametrize("module", ["idleshare.handlers.router", "idleshare.handlers.recompute"])
def test_a_handler_import_loads_boto3_but_none_of_the_heavy_lazy_parts(module: str) -> None:
    # Given a fresh interpreter, When the handler module is imported
    loaded = loaded_after_import(module)
    # Then boto3 (needed by every invocation) is there, and the lazily loaded parts are not
    assert "boto3" in loaded
    assert sorted(m for m in loaded if m.startswith(HEAVY)) == []


def test_the_router_neither_imports_nor_parses_with_pydantic() -> None:
    code = (
        "import sys\n"
        "import idleshare.handlers.router\n"
        "from idleshare.parse import events\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pydantic', 'pydantic_core')))\n"
        "events.parse_event({'source': 'aws.scheduler', 'detail-type': 'Scheduled Recompute'})\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pydantic', 'pydantic_core')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    # Given a fresh router, Then pydantic is not loaded; When an event is parsed, Then it still is not
    assert out.stdout.split() == ["[]", "[]"]


def test_the_tracer_is_built_on_the_first_invocation(monkeypatch: pytest.MonkeyPatch) -> None:
    from idleshare.runtime.observability import LazyTracer

    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "1")
    tracer = LazyTracer(service="test")
    calls = []

    @tracer.capture_lambda_handler
    def handler(event: dict, context: object) -> dict:
        calls.append(event)
        return {"ok": event["n"]}

    # Given a wrapped handler, Then no Tracer exists yet
    assert not tracer.built and handler.__name__ == "handler"
    # When it is invoked twice, Then the Tracer is built once and the handler's results pass through
    assert handler({"n": 1}, None) == {"ok": 1}
    assert tracer.built
    built = tracer.get()
    assert handler({"n": 2}, None) == {"ok": 2} and tracer.get() is built
    assert [c["n"] for c in calls] == [1, 2]
    assert tracer.service == "test"  # attributes are the real Tracer's


def test_the_import_timer_measures_a_module_and_the_floor_in_one_child() -> None:
    # When the benchmark times a tiny module, Then it reports boto3 alone and boto3 + the module
    (b_cpu, b_wall), (m_cpu, m_wall) = bench_coldstart.import_ms("json", bench_coldstart.child_env("source", ""))
    assert 0 < b_cpu <= m_cpu and 0 < b_wall <= m_wall


def test_the_rows_check_targets_in_pyc_mode_only() -> None:
    # Given a router at 1.6x boto3 in both modes and a recompute at 1.9x
    imports = {
        mode: {
            "boto3": (100.0, 200.0),
            "idleshare.handlers.router": (160.0, 320.0),
            "idleshare.handlers.recompute": (190.0, 380.0),
        }
        for mode in ("pyc", "source")
    }
    first = {"router": {"import": 320.0, "first": 70.0, "warm": 10.0}}
    rows = bench_coldstart.rows(imports, first)
    by = {r.what: r for r in rows}
    # Then the router misses its 1.5x target, the recompute meets its 2x, and source mode checks nothing
    assert by["import router (pyc)"].ok is False and by["import router (pyc)"].ratio == pytest.approx(1.6)
    assert by["import recompute (pyc)"].ok is True
    assert by["import router (source)"].ok is None
    assert by["router: 1st call extra (pyc, wall)"].ratio == pytest.approx(60 / 200)
    assert [r.what for r in rows if r.ok is False] == ["import router (pyc)"]
    assert "MISSED" in bc.table(rows)
