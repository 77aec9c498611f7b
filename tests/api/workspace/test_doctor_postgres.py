"""`Ledger.doctor` judges PostgreSQL's settings as the store's sessions see them: one
below its threshold is a finding naming the setting and the statement that raises it;
one at the advised value is not (PostgreSQL only: SQLite has no such settings)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import feedledger as fl
from feedledger.config import Workspace
from helpers import backend_store, migrate

AT = datetime(2026, 8, 2, tzinfo=UTC)


def _doctor_with(tmp_path: Path, session: str) -> list[tuple[str, str, str, str]]:
    """The postgres_settings findings on a store whose sessions start with `session`
    (libpq's `options`, e.g. "-cwork_mem%3D1MB")."""
    with backend_store("postgresql", tmp_path) as url:
        url = url.replace("options=", f"options={session}%20", 1)
        ws = Workspace.create(tmp_path / "ws", store_url=url, archive=None)
        migrate(ws.store_url)
        with fl.open(ws.config_path) as led:
            report = led.doctor(at=AT, skip=["disk"])
    check = {c.check: c for c in report.checks}["postgres_settings"]
    assert check.status in ("ok", "findings")
    return [(f.code, f.subject, f.what, f.fix) for f in report.findings]


def test_a_postgres_setting_below_its_threshold_is_found(tmp_path: Path) -> None:
    found = _doctor_with(tmp_path, "-cwork_mem%3D1MB")
    assert (
        "postgres_setting",
        "work_mem",
        "work_mem is 1MB (under 16MB)",
        "ALTER SYSTEM SET work_mem = '64MB', then reload PostgreSQL's configuration "
        "(pg_reload_conf())",
    ) in found


def test_settings_at_the_advised_values_are_not_found(tmp_path: Path) -> None:
    found = _doctor_with(tmp_path, "-cwork_mem%3D64MB%20-cmaintenance_work_mem%3D512MB")
    subjects = {subject for _code, subject, *_ in found}
    assert not subjects & {"work_mem", "maintenance_work_mem"}
    assert {code for code, *_ in found} <= {"postgres_setting"}  # the server's own only
