"""The CLI's start-up: which modules a `feedledger` process loads before it does any work.

Every command pays for what `feedledger.cli.main` imports, so the heavy libraries
(pydantic, Polars, Arrow, SQLAlchemy, the GIS and server stacks...) are imported inside
the calls that use them, and `import feedledger` loads the public API's names on first
use (PEP 562). These tests check the module lists, never a time: a regression shows as
a library in the list, whatever the machine's speed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import feedledger
from helpers import Cli, write_csv

# third-party packages no command needs before it runs (and `--help` never needs)
HEAVY = (
    "adbc_driver_manager",
    "alembic",
    "fastapi",
    "httpx",
    "numba",
    "numpy",
    "polars",
    "psycopg",
    "pyarrow",
    "pydantic",
    "pyogrio",
    "s3fs",
    "shapely",
    "sqlalchemy",
    "starlette",
    "tomlkit",
    "uvicorn",
    "zstandard",
)

_REPORT = (
    "import json, sys\n"
    "tops = {m.split('.')[0] for m in sys.modules}\n"
    "ours = sorted(m for m in sys.modules if m.startswith('feedledger.'))\n"
    "print(json.dumps({'heavy': sorted(tops & set(HEAVY)), 'ours': ours}))\n"
)


def _loaded(code: str, cwd: Path | None = None) -> dict[str, list[str]]:
    """Run `code` in a fresh interpreter, then report which heavy packages and which
    feedledger modules it loaded."""
    script = f"HEAVY = {HEAVY!r}\n{code}\n{_REPORT}"
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report: dict[str, list[str]] = json.loads(done.stdout.strip().splitlines()[-1])
    return report


def test_import_feedledger_loads_no_module_of_its_own() -> None:
    loaded = _loaded("import feedledger")
    assert loaded == {"heavy": [], "ours": []}


def test_cli_help_loads_only_the_command_tree(tmp_path: Path) -> None:
    """`feedledger --help` (the whole command tree, as `main()` builds it): the CLI's own
    modules and the light model types, no API module and no heavy library."""
    code = (
        "import contextlib, io\n"
        "from feedledger.cli.main import app\n"
        "with contextlib.redirect_stdout(io.StringIO()) as text:\n"
        "    try:\n"
        "        app(['--help'], prog_name='feedledger')\n"
        "    except SystemExit as exc:\n"
        "        assert exc.code == 0, exc.code\n"
        "assert 'snapshot' in text.getvalue()\n"
    )
    loaded = _loaded(code, cwd=tmp_path)
    assert loaded["heavy"] == []
    layers = {".".join(m.split(".")[:2]) for m in loaded["ours"]}
    assert layers <= {"feedledger.cli", "feedledger.model"}, sorted(layers)
    assert "feedledger.model.source" not in loaded["ours"]  # pydantic's models


def test_a_csv_snapshot_loads_no_archive_reader_or_gis_library(cli: Cli, tmp_path: Path) -> None:
    """`feedledger snapshot` reads the store only: the archive's modules, the payload
    readers and the GIS libraries stay unloaded (the whole command, run as `main()`
    runs it, on the test's backend)."""
    cli("source", "add", "p", "--key", "id")
    payload = write_csv(tmp_path / "p_2026-08-01.csv", ["id", "zoning"], [["1", "R1"]])
    cli("ingest", "p", str(payload), "--published-at", "2026-08-01")
    out = tmp_path / "snap.csv"
    args = ["--config", str(cli.ws.config_path), "snapshot", "p", "--valid", "2026-08-02"]
    code = (
        "from feedledger.cli.main import app\n"
        "try:\n"
        f"    app({[*args, '-o', str(out)]!r}, prog_name='feedledger')\n"
        "except SystemExit as exc:\n"
        "    assert exc.code == 0, exc.code\n"
    )
    loaded = _loaded(code)
    assert out.read_text(encoding="utf-8").splitlines()[1:] == ["1,R1"]
    assert not {"pyogrio", "shapely", "s3fs", "fastapi", "uvicorn"} & set(loaded["heavy"])
    for prefix in ("feedledger.archive", "feedledger.formats.readers", "feedledger.sources"):
        assert not [m for m in loaded["ours"] if m.startswith(prefix)], prefix


def test_a_csv_ingest_loads_no_gis_module_or_library(cli: Cli, tmp_path: Path) -> None:
    """`feedledger ingest` of a CSV payload: the GIS readers (`formats.spatial.geo_reader`,
    `formats.spatial.geoparquet`, `formats.spatial.gis`) and their libraries (shapely, pyogrio) stay
    unloaded; they cost a 1M-parcel daily ingest ~0.1-0.3 s of import before the parse
    (bench/README.md, "Stop 26")."""
    cli("source", "add", "p", "--key", "id")
    payload = write_csv(tmp_path / "p_2026-08-01.csv", ["id", "zoning"], [["1", "R1"]])
    args = ["--config", str(cli.ws.config_path), "ingest", "p", str(payload)]
    code = (
        "from feedledger.cli.main import app\n"
        "try:\n"
        f"    app({[*args, '--published-at', '2026-08-01']!r}, prog_name='feedledger')\n"
        "except SystemExit as exc:\n"
        "    assert exc.code == 0, exc.code\n"
    )
    loaded = _loaded(code)
    assert cli.json("history", "p", "1")[0]["attributes"] == {"id": "1", "zoning": "R1"}
    assert "feedledger.formats.readers" in loaded["ours"]  # (it did read the payload)
    assert not {"pyogrio", "shapely"} & set(loaded["heavy"])
    gis = (
        "feedledger.formats.spatial.geo_reader",
        "feedledger.formats.spatial.geoparquet",
        "feedledger.formats.spatial.gis",
    )
    assert not set(gis) & set(loaded["ours"])


def test_the_payload_readers_load_after_the_archive_has_the_bytes() -> None:
    """`pipeline.intake.ingest` does not import the readers (polars) at its own import: `ingest`
    does, once the archive is hashing and compressing the bytes on another core."""
    loaded = _loaded("import feedledger.pipeline.intake.ingest")
    assert "polars" not in loaded["heavy"]
    assert "feedledger.formats.readers" not in loaded["ours"]


def test_public_api_names_resolve_to_their_modules() -> None:
    """`fl.<name>` is the object its module defines, for every name in `__all__`, and
    `from feedledger import *` binds them all."""
    import importlib

    exports: dict[str, tuple[str, ...]] = feedledger._EXPORTS
    listed = {name for names in exports.values() for name in names}
    assert listed | {"__version__"} == set(feedledger.__all__)
    for module, names in exports.items():
        defined = importlib.import_module(module)
        for name in names:
            assert getattr(feedledger, name) is getattr(defined, name), name
    assert set(feedledger.__all__) <= set(dir(feedledger))
    namespace: dict[str, object] = {}
    exec("from feedledger import *", namespace)
    assert set(feedledger.__all__) <= set(namespace)


def test_an_unknown_name_is_an_attribute_error_and_submodules_still_import() -> None:
    import pytest

    with pytest.raises(AttributeError, match="no_such_name"):
        _ = feedledger.no_such_name  # type: ignore[attr-defined]
    from feedledger import config  # a submodule, not an exported name

    assert config.CONFIG_NAME == "feedledger.toml"


def _plugin_lookups(env_value: str | None) -> int:
    """How often pydantic scanned the installed entry points for plugins while a fresh
    `feedledger` process (its entry module imported first) built its models."""
    import os

    code = (
        "import feedledger.cli.main\n"
        "import pydantic.plugin._loader as loader\n"
        "calls = []\n"
        "real = loader.entry_points\n"
        "loader.entry_points = lambda **kw: calls.append(kw) or real(**kw)\n"
        "import feedledger.model.source\n"
        "print(len(calls))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYDANTIC_DISABLE_PLUGINS"}
    if env_value is not None:
        env["PYDANTIC_DISABLE_PLUGINS"] = env_value
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return int(done.stdout.strip().splitlines()[-1])


def test_a_feedledger_process_asks_pydantic_for_no_plugins_unless_the_user_says() -> None:
    """The entry-point scan (every installed distribution's metadata) is skipped in a
    `feedledger` process (cli/process.py); the user's own setting wins."""
    assert _plugin_lookups(None) == 0
    assert _plugin_lookups("") == 1  # empty: every plugin looked for, as pydantic does
