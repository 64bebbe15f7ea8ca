"""`python -m devkit.kube.stack` stops its whole stack on SIGTERM and on SIGINT: etcd, kube-apiserver, the Kueue manager,
kube-scheduler and kube-controller-manager run in sessions of their own (a terminal's Ctrl-C reaches only the
module), so a signal the module did not handle left every one of them running. On the real stack binaries."""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from devkit.kube import stack

REPO = Path(__file__).parents[2]
STARTED = "export KUBECONFIG="


def _stat(pid: int) -> tuple[int, str, str] | None:
    """(parent pid, state, start time) of a live process, None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = text[text.rindex(")") + 2 :].split()
    return int(fields[1]), fields[0], fields[19]


def _name(pid: int) -> str:
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode(errors="replace").rsplit("/", 1)[-1]
    return "?"


def descendants(root: int) -> dict[tuple[int, str], str]:
    """Every live process under ``root``: {(pid, start time): its program's name}."""
    parents: dict[int, list[int]] = {}
    started: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (st := _stat(int(entry.name))) is not None:
            parents.setdefault(st[0], []).append(int(entry.name))
            started[int(entry.name)] = st[2]
    found: dict[tuple[int, str], str] = {}
    todo = list(parents.get(root, []))
    while todo:
        pid = todo.pop()
        found[(pid, started[pid])] = _name(pid)
        todo += parents.get(pid, [])
    return found


def alive(processes: dict[tuple[int, str], str]) -> dict[tuple[int, str], str]:
    """Those still running (the same process: same pid and start time, not a zombie)."""
    out = {}
    for (pid, start), name in processes.items():
        st = _stat(pid)
        if st is not None and st[2] == start and st[1] != "Z":
            out[(pid, start)] = name
    return out


def wait_started(proc: subprocess.Popen[str], timeout: float) -> None:
    """Until the module prints how to reach its stack (its output read by a thread: a pipe's buffered lines are
    invisible to select)."""
    lines: queue.Queue[str] = queue.Queue()
    assert proc.stdout is not None
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout or ()], daemon=True).start()
    seen = ""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        with contextlib.suppress(queue.Empty):
            line = lines.get(timeout=1.0)
            seen += line
            if line.startswith(STARTED):
                return
    raise AssertionError(f"the stack did not start in {timeout:.0f} s (exit {proc.poll()}):\n{seen}")


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_to_the_module_stops_every_process_of_the_stack(signum):
    # Given the module running the real stack (its binaries built: `make kube-stack`)
    assert stack.built() is not None, "the stack's binaries are not built: run `make kube-stack`"
    proc = subprocess.Popen(
        [sys.executable, "-m", "devkit.kube.stack"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    children: dict[tuple[int, str], str] = {}
    try:
        with contextlib.suppress(AssertionError):
            wait_started(proc, timeout=240)
        children = descendants(proc.pid)  # whether or not it started: the finally ends what it left
        assert proc.poll() is None and len(children) >= 5, f"the stack did not start: {children}"
        names = set(children.values())
        assert {"etcd", "kube-apiserver"} <= names and any("kueue" in n or n == "manager" for n in names), names
        # When the module is sent the signal
        os.kill(proc.pid, signum)
        code = proc.wait(timeout=90)
        # Then every process of its stack has ended, and it exits 0
        assert alive(children) == {}
        assert code == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
        for pid, _start in alive(children):  # what the test started and the module left: ended by its pid
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
