"""``make docs``: the documents' generated sections, rewritten from their one source.

Each section sits between ``<!-- BEGIN generated: <key> ... -->`` and ``<!-- END generated: <key> -->`` in one
document; its text is produced here, never typed:

- ``stack`` in infra/README.md: the deployed stack (functions, roles and grants, triggers, queues, tables, alarms,
  EKS access entries and RBAC groups, outputs) from the synthesized template and infra/k8s/rbac.yaml
  (``infra/stack_doc.py``; checked by tests/infra/test_stack_doc.py);
- ``items`` in docs/architecture.md: the main table's item kinds, ``idleshare.table.ITEMS`` (checked by
  tests/unit/test_items_doc.py, which writes each kind through the store);
- ``queue`` in infra/README.md: the recompute queue's timings, ``idleshare.timings`` (which the stack reads:
  tests/infra/test_infra_stack.py holds the template to it; the section is checked by tests/unit/test_queue_doc.py;
  the other documents link to it).

``python -m devkit.docgen`` rewrites every section; ``--check`` rewrites nothing and exits 1 naming each section
that differs from its source.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from idleshare import table, timings

REPO_ROOT = Path(__file__).resolve().parent.parent


def begin(key: str) -> str:
    return f"<!-- BEGIN generated: {key} (`make docs` writes it; do not edit by hand) -->"


def end(key: str) -> str:
    return f"<!-- END generated: {key} -->"


def section(text: str, key: str) -> str:
    """The body of the generated section ``key`` of a document's ``text`` (without its markers)."""
    start, stop = text.find(begin(key)), text.find(end(key))
    if start < 0 or stop < start:
        raise ValueError(f"no generated section {key!r}: {begin(key)} … {end(key)}")
    return text[start + len(begin(key)) : stop].strip("\n")


def replace(text: str, key: str, body: str) -> str:
    start, stop = text.index(begin(key)), text.index(end(key))
    return text[: start + len(begin(key))] + "\n" + body.strip("\n") + "\n" + text[stop:]


def items() -> str:
    """docs/architecture.md's item table: ``idleshare.table.ITEMS``."""
    rows = [f"| `{k.pk}` | `{k.sk}` | {k.holds} |" for k in table.ITEMS]
    return "\n".join(["| pk | sk | item |", "|---|---|---|", *rows])


def _backoffs() -> str:
    """``2, 4, 8, 16, then 20 s``: each failed receive's delay until the cap."""
    delays: list[int] = []
    n = 1
    while (delay := timings.retry_delay(n)) < timings.RETRY_MAX_SECONDS:
        delays.append(delay)
        n += 1
    return f"{', '.join(map(str, delays))}, then {timings.RETRY_MAX_SECONDS} s"


def _dlq_minutes() -> int:
    return timings.DLQ_AFTER_SECONDS // 60


def queue() -> str:
    """infra/README.md's table of the recompute queue's semantics: ``idleshare.timings``."""
    t = timings
    rows = [
        (
            "a failed record",
            f"handed back by the recompute with `ChangeMessageVisibility` of {_backoffs()} (doubling per receive, "
            "capped)",
            f"the cluster's next recompute runs within {t.RETRY_MAX_SECONDS} s of a transient fault's end; its FIFO "
            "group is never blocked longer",
        ),
        (
            "DLQ",
            f"after `dlq_max_receive_count` receives ({t.DEFAULT_MAX_RECEIVE_COUNT}: {_dlq_minutes()} min of backoffs)",
            f"only a cluster that keeps failing ≥ {_dlq_minutes()} minutes gets there (DLQ alarm)",
        ),
        (
            "visibility timeout",
            f"recompute timeout + {t.TIMEOUT_RETURN_SECONDS} s = {t.QUEUE_VISIBILITY_TIMEOUT_SECONDS} s",
            "Lambda requires ≥ the function's timeout; after a Lambda timeout (or a crash) the batch returns "
            f"{t.TIMEOUT_RETURN_SECONDS} s later",
        ),
        (
            "delivery delay",
            f"{t.QUEUE_DELIVERY_DELAY_SECONDS} s = the router's dedup window",
            "a window's one recompute sees every change of the window",
        ),
        (
            "event source mapping",
            f"batch {t.RECOMPUTE_BATCH_SIZE}, `ReportBatchItemFailures`, maximum concurrency "
            f"`recompute_max_concurrency` ({t.RECOMPUTE_MAX_CONCURRENCY})",
            "only failed records return; the poller never invokes more recomputes at once, so none is throttled (no "
            "reserved concurrency)",
        ),
        (
            "retention",
            f"queue {t.QUEUE_RETENTION_DAYS} days, DLQ {t.DLQ_RETENTION_DAYS} days",
            "a record outlives its time to the DLQ; the DLQ keeps it two weeks",
        ),
        (
            "per-cluster budget",
            f"a cluster's recompute starts only with ≥ {t.RECOMPUTE_BUDGET_SECONDS:g} s of the function left",
            "else its record is handed back, retried at once by the next invocation: never a Lambda timeout that "
            "loses the batch's answer",
        ),
    ]
    return "\n".join(
        ["| what | value | so that |", "| --- | --- | --- |", *(f"| {a} | {b} | {c} |" for a, b, c in rows)]
    )


def stack() -> str:
    from infra.stack_doc import describe

    return describe()


SECTIONS: dict[str, tuple[str, Callable[[], str]]] = {
    "stack": ("infra/README.md", stack),
    "items": ("docs/architecture.md", items),
    "queue": ("infra/README.md", queue),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devkit.docgen", description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="rewrite nothing; exit 1 when a section differs")
    parser.add_argument("keys", nargs="*", help=f"sections, of {', '.join(SECTIONS)} (default: all)")
    args = parser.parse_args(argv)
    if unknown := set(args.keys) - set(SECTIONS):
        parser.error(f"no section {', '.join(sorted(unknown))}")
    stale = []
    for key in args.keys or list(SECTIONS):
        doc, produce = SECTIONS[key]
        path = REPO_ROOT / doc
        text = path.read_text()
        body = produce()
        if section(text, key) == body.strip("\n"):
            continue
        stale.append(f"{doc}: section {key!r}")
        if not args.check:
            path.write_text(replace(text, key, body))
    verb = "differs from its source (run `make docs`)" if args.check else "rewritten"
    for line in stale:
        print(f"docgen: {line} {verb}", file=sys.stderr)
    return 1 if stale and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
