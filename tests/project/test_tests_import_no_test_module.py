"""No test module imports another test module.

A test module's helpers and fixtures that other test modules use live in a non-test
module of its folder (`tests/pipeline/backfill_scenario.py`) or in the folder's
`conftest.py`: importing a test module runs its module-level code a second time under
another name and lets pytest collect what it imported. Every `tests/**/test_*.py` is
parsed with `ast`; an import (at any depth) of a module whose last dotted part starts
with `test_` fails the test.
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def _imported_modules(tree: ast.AST) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.module:
                found.append((node.lineno, node.module))
            # `from pipeline import test_backfill`
            found += [(node.lineno, f"{node.module or ''}.{a.name}") for a in node.names]
    return found


def test_no_test_module_imports_another_test_module() -> None:
    offenders = []
    for path in sorted(TESTS.rglob("test_*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for line, module in _imported_modules(tree):
            if module.rsplit(".", 1)[-1].startswith("test_"):
                offenders.append(f"{path.relative_to(TESTS)}:{line} imports {module}")
    assert not offenders, "\n".join(offenders)
