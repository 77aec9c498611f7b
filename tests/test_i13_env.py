"""Issue 13, the fetch limits, the environment failing, rejected payloads and the demo
install (items 14, 15, 16, 17, 30, 31)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


# -- item 30: `make demo` installs quietly --------------------------------------------------


def test_pyproject_license_is_an_spdx_string_with_a_setuptools_that_reads_it() -> None:
    """A `license = {text = ...}` table makes setuptools >= 77 print a 15-line
    deprecation warning per build step (45 lines under `pip install -q -e .`)."""
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert meta["project"]["license"] == "Apache-2.0"
    requires = meta["build-system"]["requires"]
    setuptools = [r for r in requires if r.startswith("setuptools")]
    assert setuptools, requires
    match = re.fullmatch(r"setuptools>=(\d+)(?:\.\d+)*", setuptools[0])
    assert match is not None and int(match[1]) >= 77, setuptools
    assert "pip install -q" in (ROOT / "Makefile").read_text(encoding="utf-8")
