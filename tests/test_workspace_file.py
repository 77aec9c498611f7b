"""feedledger.toml: read by every command with the standard library's `tomllib`, written
(`source add`, `source remove`) with tomlkit so that a person's comments and layout stay;
a file with a mistake in it is refused by every command in one line naming the line.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from feedledger.cli.main import app
from feedledger.config import Workspace, make_source
from feedledger.model.errors import ConfigError

HAND_WRITTEN = textwrap.dedent(
    """\
    # our county's feeds -- ask Dana before changing the store
    [store]
    url = "sqlite:///.feedledger/ledger.db"  # the one on the shared disk

    [archive]
    path = ".feedledger/archive"
    full_frame_every = { default = 30, parcels = 7 }

    [sources.parcels]
    # the assessor's nightly export
    format = "csv"
    key = ["parcel_id"]
    kind = "snapshot"
    """
)


def _write(folder: Path, text: str) -> Path:
    path = folder / "feedledger.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_hand_written_file_is_read_and_its_comments_survive_source_add_and_remove(
    tmp_path: Path,
) -> None:
    path = _write(tmp_path, HAND_WRITTEN)
    ws = Workspace.load(path)
    assert list(ws.sources) == ["parcels"] and ws.sources["parcels"].key == ("parcel_id",)
    assert ws.archive_keyframe_every("parcels") == 7 and ws.archive_keyframe_every("x") == 30
    ws.add_source(make_source("zoning", format="csv", key=["zone_id"], kind="snapshot"))
    ws.remove_source("parcels")
    ws.add_source(make_source("roads", format="jsonl", key=["road_id"], kind="changes"))
    text = path.read_text(encoding="utf-8")
    for kept in ("# our county's feeds", "# the one on the shared disk", "parcels = 7"):
        assert kept in text
    assert "[sources.parcels]" not in text
    again = Workspace.load(path)
    assert list(again.sources) == ["zoning", "roads"]
    assert again.sources == ws.sources


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("[store\nurl = 1\n", "line 1"),
        ('[sources.a]\nformat = "csv"\nformat = "json"\n', "line 3"),
        ('[store]\nurl = "x"\n[store]\nurl = "y"\n', "line 3"),
        ("[archive]\npath = .feedledger\n", "line 2"),
    ],
)
def test_a_file_with_a_mistake_is_refused_naming_its_line(
    tmp_path: Path, text: str, words: str
) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        Workspace.load(path)
    message = str(caught.value)
    assert "is not valid TOML" in message and words in message, message
    result = CliRunner().invoke(app, ["--config", str(path), "source", "list"])
    assert result.exit_code != 0
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines and "is not valid TOML" in lines[0] and words in lines[0], result.stderr


@pytest.mark.parametrize(
    "text",
    [
        '[sources.a]\nformat = "csv"\nformat = "json"\n',
        "[store]\n[store]\n",
        "[archive]\nfull_frame_every = { a = 1, a = 2 }\n",
        "a.b = 1\na.b = 2\n",
    ],
)
def test_a_repeated_key_or_table_is_named_as_such(tmp_path: Path, text: str) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        Workspace.load(path)
    assert caught.value.hint is not None and "appear once" in caught.value.hint


def test_reading_the_file_does_not_load_tomlkit(tmp_path: Path) -> None:
    path = _write(tmp_path, HAND_WRITTEN)
    code = (
        "import sys; from pathlib import Path; from feedledger.config import Workspace; "
        f"ws = Workspace.load(Path({str(path)!r})); assert ws.sources; "
        "print('tomlkit' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


names = st.from_regex(r"[a-z][a-z0-9_]{0,12}", fullmatch=True)


@settings(max_examples=40, deadline=None)
@given(
    sources=st.dictionaries(
        names,
        st.tuples(
            st.sampled_from(["csv", "json", "jsonl", "parquet"]),
            st.lists(names, min_size=1, max_size=3, unique=True),
            st.sampled_from(["snapshot", "changes"]),
            st.one_of(st.none(), st.text(min_size=1, max_size=30)),  # a revision field
        ),
        max_size=6,
    )
)
def test_what_tomlkit_writes_tomllib_reads_back_the_same(
    tmp_path_factory: pytest.TempPathFactory,
    sources: dict[str, tuple[str, list[str], str, str | None]],
) -> None:
    folder = tmp_path_factory.mktemp("ws")
    ws = Workspace.create(folder, store_url=None, archive=None)
    for name, (fmt, key, kind, revision) in sources.items():
        extra = {"revision": revision} if revision is not None else {}
        ws.add_source(make_source(name, format=fmt, key=key, kind=kind, **extra))
    assert Workspace.load(folder / "feedledger.toml").sources == ws.sources
