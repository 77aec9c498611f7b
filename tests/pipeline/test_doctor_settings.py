"""`doctor`'s judgement of PostgreSQL's settings, each at and under its threshold (the
settings as `SHOW` gives them; the real server's sessions:
api/workspace/test_doctor_postgres.py)."""

from __future__ import annotations

from typing import Any

import pytest

from feedledger.ledger import engine as eng
from feedledger.pipeline.doctor import store_checks

GOOD = {
    "work_mem": "64MB",
    "maintenance_work_mem": "512MB",
    "max_wal_size": "4GB",
    "shared_buffers": "4GB",
    "autovacuum": "on",
}


def _judged(monkeypatch: pytest.MonkeyPatch, **shown: str) -> list[tuple[str, str]]:
    values = {**GOOD, **shown}
    monkeypatch.setattr(eng, "settings", lambda engine, names: {n: values[n] for n in names})
    engine: Any = None
    return [(f.subject, f.what) for f in store_checks.check_postgres(engine)]


def test_settings_at_the_advised_values_are_fine(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _judged(monkeypatch) == []
    edge = {"work_mem": "16MB", "maintenance_work_mem": "256MB", "max_wal_size": "2GB"}
    assert _judged(monkeypatch, shared_buffers="256MB", **edge) == []


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("work_mem", "4MB"),
        ("maintenance_work_mem", "64MB"),
        ("max_wal_size", "1GB"),
        ("shared_buffers", "128MB"),
        ("work_mem", "8192kB"),
    ],
)
def test_a_setting_under_its_threshold_is_a_finding(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    assert _judged(monkeypatch, **{name: value}) == [
        (name, f"{name} is {value} (under {store_checks.least_mib(name)}MB)")
    ]


def test_autovacuum_off_is_a_finding(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _judged(monkeypatch, autovacuum="off") == [("autovacuum", "autovacuum is off")]
