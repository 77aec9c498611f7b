"""Every import that stays inside a function says why in a comment.

Imports belong at module level; one that sits inside a function (to keep start-up
cheap, to load a heavy library only on the path that needs it, or to break an import
circle) carries a `#` comment on its own lines, as `# lazy: httpx only when a webhook is
sent`. Every module under src/feedledger (migrations excluded) is parsed with `ast`.
"""

from __future__ import annotations

import ast
import io
import tokenize
from pathlib import Path

import feedledger

ROOT = Path(feedledger.__file__).parent


def _commented_lines(source: str) -> set[int]:
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    return {tok.start[0] for tok in tokens if tok.type == tokenize.COMMENT}


def _silent_imports(path: Path) -> list[str]:
    source = path.read_text(encoding="utf-8")
    commented = _commented_lines(source)
    found = []
    for func in ast.walk(ast.parse(source)):
        if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for node in ast.walk(func):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            lines = range(node.lineno, (node.end_lineno or node.lineno) + 1)
            if not commented.intersection(lines):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def test_every_import_inside_a_function_carries_a_comment() -> None:
    silent = sorted(
        {
            where
            for path in ROOT.rglob("*.py")
            if "migrations" not in path.relative_to(ROOT).parts
            for where in _silent_imports(path)
        }
    )
    assert silent == [], "move to module level, or say why in `# lazy: ...`"
