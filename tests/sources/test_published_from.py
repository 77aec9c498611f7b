"""`published_from` parsed once into a value; no import cycle
inside sources/."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from feedledger.config import Workspace
from feedledger.model.errors import ConfigError
from feedledger.model.source import PublishedFrom, SourceConfig
from helpers import Cli, MakeSource

SOURCES_DIR = Path(__file__).resolve().parents[2] / "src" / "feedledger" / "sources"


@pytest.mark.parametrize(
    ("text", "kind", "field", "header"),
    [
        ("filename", "filename", None, None),
        ("field:as_of", "field", "as_of", None),
        ("field:meta.published", "field", "meta.published", None),
        ("header:Last-Modified", "header", None, "Last-Modified"),
        ("header:X-Published", "header", None, "X-Published"),
    ],
)
def test_published_from_is_parsed_once_into_a_value(
    text: str, kind: str, field: str | None, header: str | None
) -> None:
    value = PublishedFrom.parse(text)
    assert (value.kind, value.field, value.header) == (kind, field, header)
    assert value.by_filename == (kind == "filename")
    assert str(value) == text  # serialises back to the declaration
    src = SourceConfig(name="s", key=("id",), published_from=text)
    assert src.published_from == value
    assert src.model_dump(mode="json")["published_from"] == text


@pytest.mark.parametrize("text", ["yesterday", "field:", "header:", "header:Bad Name", "x:y"])
def test_a_bad_published_from_is_one_clear_error(text: str) -> None:
    from feedledger.config import make_source

    with pytest.raises(ConfigError) as caught:
        make_source("s", key=("id",), published_from=text)
    message = str(caught.value)
    assert "\n" not in message
    assert f"published_from {text!r} must be 'filename', 'field:NAME'" in message


def test_toml_and_source_list_keep_the_declared_text(
    make_source: MakeSource, workspace: Workspace, cli: Cli
) -> None:
    src = make_source("web", "id", published_from="header:Last-Modified")
    assert src.published_from.header == "Last-Modified"
    make_source("byfield", "a,b", published_from="field:as_of")
    make_source("plain", ("id",))
    toml = workspace.config_path.read_text(encoding="utf-8")
    assert 'published_from = "header:Last-Modified"' in toml
    assert 'published_from = "field:as_of"' in toml
    assert 'published_from = "filename"' in toml
    reloaded = Workspace.load(workspace.config_path)
    assert reloaded.source("byfield").published_from == PublishedFrom("field", "as_of")
    assert reloaded.source("byfield").key == ("a", "b")
    listed = {s["name"]: s["published_from"] for s in cli.json("source", "list")}
    assert listed == {
        "web": "header:Last-Modified",
        "byfield": "field:as_of",
        "plain": "filename",
    }


def test_no_module_inside_sources_imports_the_sources_package() -> None:
    """The package __init__ only re-exports: a module below it that imported
    `feedledger.sources` (at any level, even inside a function) would be a cycle."""
    offenders = []
    for path in sorted(SOURCES_DIR.glob("*.py")):
        if path.name == "__init__.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module == "feedledger.sources":
                offenders.append(f"{path.name}:{node.lineno}")
            if isinstance(node, ast.Import) and any(
                a.name == "feedledger.sources" for a in node.names
            ):
                offenders.append(f"{path.name}:{node.lineno}")
    assert offenders == []
