"""The notify, subscriber, destination, manifest, sync, reconcile,
health and scheduler commands are a face over the public API -- their modules import
only `feedledger.api`, `feedledger.model`, `feedledger.cli` (and the scheduler command
its sibling face `feedledger.scheduler`), register their commands with module-level
decorators on cli/app.py's groups, and carry no per-command error guard."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

CLI = Path(__file__).resolve().parents[2] / "src" / "feedledger" / "cli"
MODULES = ("notify_cmds", "sync_cmds", "sync_render", "scheduler_cmds")
ALLOWED = ("feedledger.api", "feedledger.model", "feedledger.cli")


def _imports(tree: ast.Module) -> list[str]:
    names: list[str] = []
    for node in ast.walk(tree):  # function-local imports too
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return names


@pytest.mark.parametrize("module", MODULES)
def test_cli_module_imports_only_the_api(module: str) -> None:
    tree = ast.parse((CLI / f"{module}.py").read_text(encoding="utf-8"))
    allowed = ALLOWED + (("feedledger.scheduler",) if module == "scheduler_cmds" else ())
    ours = [n for n in _imports(tree) if n == "feedledger" or n.startswith("feedledger.")]
    wrong = [n for n in ours if not any(n == a or n.startswith(a + ".") for a in allowed)]
    assert wrong == [], f"cli/{module}.py imports {wrong}"


@pytest.mark.parametrize("module", MODULES)
def test_commands_registered_on_the_app_groups(module: str) -> None:
    tree = ast.parse((CLI / f"{module}.py").read_text(encoding="utf-8"))
    functions = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    assert "register" not in {f.name for f in functions}
    for f in functions:
        for deco in f.decorator_list:
            assert not (isinstance(deco, ast.Name) and deco.id == "guarded"), f.name
            if isinstance(deco, ast.Call) and isinstance(deco.func, ast.Attribute):
                group = deco.func.value
                assert isinstance(group, ast.Name) and deco.func.attr == "command", f.name
    groups = {
        a.name
        for n in tree.body
        if isinstance(n, ast.ImportFrom) and n.module == "feedledger.cli.app"
        for a in n.names
    }
    assert not any(
        isinstance(n, ast.Assign)
        and isinstance(n.value, ast.Call)
        and isinstance(n.value.func, ast.Attribute)
        and n.value.func.attr == "Typer"
        for n in tree.body
    ), "sub-groups live in cli/app.py"
    if module != "sync_render":
        assert groups, f"cli/{module}.py registers on cli/app.py's groups"
