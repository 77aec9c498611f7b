"""The demo moved from feedledger.api.demo to feedledger.demo (a face, not part of the
API): the old documented names still answer, for one release, with a DeprecationWarning;
the API itself never imports the demo."""

from __future__ import annotations

import subprocess
import sys

import pytest


def test_the_old_names_answer_the_new_objects_with_a_warning() -> None:
    import feedledger.api.demo as old
    import feedledger.demo as new

    for name in ("MOVED", "PARCEL", "ROTATED", "SOURCE", "ZONING", "Demo", "ZoningDemo"):
        with pytest.warns(DeprecationWarning, match=f"feedledger.demo.{name}"):
            assert getattr(old, name) is getattr(new, name)
    with pytest.warns(DeprecationWarning, match="moved to feedledger.demo.build_demo"):
        assert old.build_demo is new.build_demo
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = old.no_such_name


def test_the_api_loads_no_demo_module() -> None:
    code = (
        "import sys, feedledger as fl, feedledger.api.demo\n"
        "_ = (fl.open, fl.Ledger, fl.Source, fl.Ingested)\n"
        "print(sorted(m for m in sys.modules if m.startswith('feedledger.demo')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "[]"
