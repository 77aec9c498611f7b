"""No module reaches into another module's private names.

A name starting with one underscore is its module's own business: every module under
src/feedledger is parsed with `ast`, and an import of another feedledger module's
`_name` (`from feedledger.x import _name`) or an attribute use `module._name` of an
imported feedledger module fails the test. Binding a public name under a private alias
(`from feedledger.notify import tables as _notify_tables`) is allowed. A module whose
own name starts with an underscore (`api/_source/`) is private to its package, as
httpx's `_models` are: its package's modules may import it, no other module may.
"""

from __future__ import annotations

import ast
from pathlib import Path

import feedledger

ROOT = Path(feedledger.__file__).parent


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _is_module(dotted: str) -> bool:
    rel = Path(*dotted.split("."))
    return (ROOT.parent / rel).with_suffix(".py").is_file() or (
        ROOT.parent / rel / "__init__.py"
    ).is_file()


def _private_package(dotted: str, here: str) -> str | None:
    """`dotted` when it names a private module (`feedledger.api._source`) that `here`
    is not in the package of; else None."""
    parts = dotted.split(".")
    for i, part in enumerate(parts):
        if _private(part) and _is_module(".".join(parts[: i + 1])):
            package = ".".join(parts[:i])
            if here != package and not here.startswith(package + "."):
                return dotted
    return None


def _absolute(node: ast.ImportFrom, here: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    base = here.split(".")
    base = base if is_package else base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def _offences(path: Path) -> list[str]:
    here = _module_name(path)
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[str] = []
    modules: dict[str, str] = {}  # local name -> the feedledger module it binds
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            origin = _absolute(node, here, path.name == "__init__.py")
            if origin != "feedledger" and not origin.startswith("feedledger."):
                continue
            outside = _private_package(origin, here)
            if outside:
                found.append(f"{here}:{node.lineno} imports {outside}")
            for alias in node.names:
                if _is_module(f"{origin}.{alias.name}") and not _private_package(
                    f"{origin}.{alias.name}", here
                ):
                    modules[alias.asname or alias.name] = f"{origin}.{alias.name}"
                elif _private(alias.name) and origin != here:
                    found.append(f"{here}:{node.lineno} imports {origin}.{alias.name}")
                elif _is_module(f"{origin}.{alias.name}"):
                    modules[alias.asname or alias.name] = f"{origin}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("feedledger.") and alias.asname:
                    modules[alias.asname] = alias.name
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in modules
            and _private(node.attr)
            and modules[node.value.id] != here
        ):
            found.append(f"{here}:{node.lineno} uses {modules[node.value.id]}.{node.attr}")
    return found


def test_no_module_imports_another_modules_private_names() -> None:
    found = [o for path in sorted(ROOT.rglob("*.py")) for o in _offences(path)]
    assert found == []
