"""``make docs``: the documents' generated sections, rewritten from their one source.

Each section sits between ``<!-- BEGIN generated: <key> ... -->`` and ``<!-- END generated: <key> -->`` in one
document; its text is produced here, never typed:

- ``stack`` in infra/README.md: the deployed stack (functions, roles and grants, triggers, queues, tables, alarms,
  EKS access entries and RBAC groups, outputs) from the synthesized template and infra/k8s/rbac.yaml
  (``infra/stack_doc.py``; checked by tests/infra/test_stack_doc.py);
- ``items`` in docs/architecture.md: the main table's item kinds, ``idleshare.table.ITEMS`` (checked by
  tests/unit/test_items_doc.py, which writes each kind through the store).

``python -m devkit.docgen`` rewrites every section; ``--check`` rewrites nothing and exits 1 naming each section
that differs from its source.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from idleshare import table

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


def stack() -> str:
    from infra.stack_doc import describe

    return describe()


SECTIONS: dict[str, tuple[str, Callable[[], str]]] = {
    "stack": ("infra/README.md", stack),
    "items": ("docs/architecture.md", items),
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
