"""The notify, subscriber, destination, manifest, sync, reconcile,
health and scheduler commands are a face over the public API -- their modules import
only `feedledger.api`, `feedledger.model`, `feedledger.cli` (and the scheduler command
its sibling face `feedledger.scheduler`), have their commands listed by name on cli/app.py's
groups (which import them lazily), and carry no per-command error guard."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

CLI = Path(__file__).resolve().parents[2] / "src" / "feedledger" / "cli" / "commands"
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
    assert wrong == [], f"cli/commands/{module}.py imports {wrong}"


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
    assert not any(
        isinstance(n, ast.Assign)
        and isinstance(n.value, ast.Call)
        and isinstance(n.value.func, ast.Attribute)
        and n.value.func.attr == "Typer"
        for n in tree.body
    ), "sub-groups live in cli/app.py"
    if module != "sync_render":
        listed = _listed_on_app_groups(f"feedledger.cli.commands.{module}")
        assert listed, f"cli/commands/{module}.py's commands are listed on cli/app.py's groups"
        assert listed <= {f.name for f in functions}, f"cli/commands/{module}.py"


def _listed_on_app_groups(module: str) -> set[str]:
    """The functions of `module` that cli/app.py's groups list as commands."""
    import typer.main

    from feedledger.cli.app import app

    listed: set[str] = set()
    groups = [typer.main.get_command(app)]
    while groups:
        group = groups.pop()
        for target in getattr(group, "lazy_commands", {}).values():
            name, function = target.split(":")
            if name == module:
                listed.add(function)
        groups += [g for g in getattr(group, "commands", {}).values() if hasattr(g, "commands")]
    return listed
