"""The Lambda asset holds only what the functions import (issue 33, deliver 6): every module of the Lambda package
(``functions/idleshare``, what ``infra/bundling.py`` ships) is reachable by imports from a handler of
``names.FUNCTION_ENV`` (the handlers the stack deploys), read statically: every ``import`` and ``from ... import``,
those inside functions included (the lazy ones run on the first call), those under ``if TYPE_CHECKING:`` excluded
(they never run). A module nothing deployed imports belongs to the CLI (``cli/idleshare_cli``), the devkit or
nowhere; one kept for a reason is named in :data:`KEPT` with the reason."""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

from idleshare import names
from infra import bundling

KEPT: dict[str, str] = {}
"""Modules of the Lambda package kept though no handler imports them: module -> why."""


def package_modules(root: Path, package: str) -> dict[str, Path]:
    """Every module of ``package`` under ``root`` by dotted name (a package by its ``__init__.py``)."""
    found = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _statements(node: ast.AST) -> Iterable[ast.AST]:
    """Every node under ``node`` but those only ``if TYPE_CHECKING:`` runs (its ``else`` runs: kept)."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _type_checking(child.test):
            for other in child.orelse:
                yield other
                yield from _statements(other)
            continue
        yield child
        yield from _statements(child)


def imported(module: str, path: Path) -> set[str]:
    """The dotted names ``module`` imports at run time (a ``from a import b`` names ``a`` and ``a.b``: b may be a
    module)."""
    found: set[str] = set()
    for node in _statements(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the module's package
                package = module if path.name == "__init__.py" else module.rpartition(".")[0]
                for _ in range(node.level - 1):
                    package = package.rpartition(".")[0]
                base = f"{package}.{base}" if base else package
            found |= {base} | {f"{base}.{alias.name}" for alias in node.names}
    return found


def reachable(modules: dict[str, Path], entries: Iterable[str]) -> set[str]:
    """The modules of ``modules`` that importing ``entries`` imports (a module's parent packages with it)."""
    seen: set[str] = set()
    todo = list(entries)
    while todo:
        module = todo.pop()
        if module in seen or module not in modules:
            continue
        seen.add(module)
        parts = module.split(".")
        todo += [".".join(parts[:i]) for i in range(1, len(parts))]
        todo += sorted(imported(module, modules[module]))
    return seen


def handler_modules() -> list[str]:
    """The module of every deployed handler (``names.FUNCTION_ENV``: ``idleshare.handlers.router.handler``...)."""
    return sorted({handler.rpartition(".")[0] for handler in names.FUNCTION_ENV})


def test_every_module_of_the_lambda_package_is_imported_by_a_deployed_handler() -> None:
    modules = package_modules(bundling.FUNCTIONS_DIR, bundling.PACKAGE)
    entries = handler_modules()
    assert entries and set(entries) <= set(modules), f"a handler's module is not in the package: {entries}"
    unreachable = sorted(set(modules) - reachable(modules, entries) - set(KEPT))
    assert unreachable == [], (
        f"no deployed handler imports {unreachable}: move a CLI-only module into cli/idleshare_cli, delete dead "
        "code, or name it in KEPT with the reason"
    )
    assert not set(KEPT) - set(modules), f"KEPT names modules that are gone: {sorted(set(KEPT) - set(modules))}"


def test_the_walk_follows_lazy_and_relative_imports_and_skips_type_checking_ones(tmp_path: Path) -> None:
    # Given a package whose handler imports one module inside a function, one relatively, one only for typing
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    for name in ("__init__", "lazy", "typed", "orphan", "sub/__init__", "sub/near"):
        (pkg / f"{name}.py").write_text("")
    (pkg / "handler.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "from .sub import near\n"
        "if TYPE_CHECKING:\n"
        "    from pkg import typed\n"
        "def handler():\n"
        "    import pkg.lazy\n"
    )
    modules = package_modules(tmp_path, "pkg")
    # When the handler's imports are walked
    found = reachable(modules, ["pkg.handler"])
    # Then the lazy, the relative and the parent packages are reached; the typing-only one and the orphan are not
    assert found == {"pkg", "pkg.handler", "pkg.lazy", "pkg.sub", "pkg.sub.near"}
    assert set(modules) - found == {"pkg.typed", "pkg.orphan"}
