"""Rolling upgrades with real processes (docs/upgrading.md): a scheduler of this
release keeps a backfill's lease (held after its first payload by a fault pause) while
`db upgrade` of the NEXT release runs. The next release is this source tree copied to a
temporary folder with one more migration (`next_release`) -- genuinely other code, run
from its own PYTHONPATH, as an operator would install it beside the old one.

Compatible migration (its floor keeps this release): the upgrade goes ahead while the
lease is held, and the older scheduler finishes its backfill on the new schema, each
payload applied once. Incompatible (its floor is itself): the upgrade is refused, one
line, exit 7, nothing changed (also with --json and --wait); once the older scheduler
has let go it goes ahead, and the older scheduler stops itself at its next tick (exit
8), one started now refuses at once, the new release runs. On SQLite and PostgreSQL."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import sqlalchemy as sa

import feedledger
from feedledger.faults import ENV as FAULT_ENV
from feedledger.ledger import engine as eng
from feedledger.ledger.schema import applications, leases, payloads
from feedledger.model.timeutil import parse_instant, to_us
from helpers import Cli
from scheduler import processes

DAYS = 5
NEXT = "next_release"
MIGRATION = '''"""The next release's one migration (tests/scheduler/test_rolling_upgrade.py)."""

import sqlalchemy as sa
from alembic import op

revision = {next!r}
down_revision = {head!r}
branch_labels = None
depends_on = None
floor = {floor!r}


def upgrade() -> None:
    op.create_table("next_release", sa.Column("n", sa.Integer, primary_key=True))
    op.execute("UPDATE schema_floor SET floor = '" + floor + "'")


def downgrade() -> None:
    op.drop_table("next_release")
'''


def next_release(tmp: Path, floor: str) -> Path:
    """This release's code with one more migration whose floor is `floor`: the folder
    to put on PYTHONPATH."""
    root = tmp / "next-release"
    package = root / "feedledger"
    shutil.copytree(
        Path(feedledger.__file__).parent, package, ignore=shutil.ignore_patterns("__pycache__")
    )
    (package / "ledger/migrations/versions" / f"{NEXT}.py").write_text(
        MIGRATION.format(next=NEXT, head=eng.HEAD, floor=floor), encoding="utf-8"
    )
    engine_py = package / "ledger/engine.py"
    text = engine_py.read_text(encoding="utf-8")
    assert "\nHEAD = REVISIONS[-1]\n" in text
    engine_py.write_text(
        text.replace(
            "\nHEAD = REVISIONS[-1]\n",
            f"\nREVISIONS = (*REVISIONS, {NEXT!r})\nHEAD = REVISIONS[-1]\n",
        ),
        encoding="utf-8",
    )
    return root


def run_next(root: Path, cli: Cli, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "feedledger", "--config", str(cli.ws.config_path), *args],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(root)},
        timeout=300,
        check=False,
    )


def days() -> list[date]:
    today = datetime.now(UTC).date()
    return [today - timedelta(days=DAYS - 1 - i) for i in range(DAYS)]


def publish(cli: Cli, feed: Path) -> None:
    """Source `slow`: the publisher has DAYS daily files, the ledger the first."""
    folder = feed / "slow"
    folder.mkdir(parents=True)
    for i, day in enumerate(days()):
        (folder / f"slow_{day}.csv").write_text(f"id,v\n1,v{i}\n2,fixed\n")
    cli("source", "add", "slow", "--key", "id", "--fetch", str(folder))
    cli("ingest", "slow", str(folder / f"slow_{days()[0]}.csv"))


def store_read(cli: Cli, sql: str) -> list[tuple[object, ...]]:
    engine = eng.make_engine(cli.ws.store_url, create=False)
    try:
        with engine.connect() as conn:
            return [tuple(r) for r in conn.execute(sa.text(sql))]
    finally:
        engine.dispose()


def lease_schema(cli: Cli) -> str | None:
    """The schema of the release holding `slow`'s lease (None: free)."""
    for holder, schema in store_read(
        cli, "SELECT holder, holder_schema FROM leases WHERE source = 'slow'"
    ):
        if holder is not None and schema is not None and str(schema).endswith(f" {holder}"):
            return str(schema).partition(" ")[0]
    return None


def caught_up(cli: Cli) -> bool:
    """`slow` at its newest publication, its backfill finished and its lease free."""
    newest = to_us(parse_instant(days()[-1].isoformat(), "UTC"))
    return (
        store_read(cli, "SELECT published_at FROM watermarks WHERE source = 'slow'") == [(newest,)]
        and not store_read(cli, "SELECT run_id FROM runs WHERE status = 'running'")
        and lease_schema(cli) is None
    )


def applied_once(cli: Cli) -> None:
    assert leases.name and payloads.name and applications.name  # the tables read
    ids = [p for (p,) in store_read(cli, "SELECT payload_id FROM payloads")]
    used = [p for (p,) in store_read(cli, "SELECT payload_id FROM applications")]
    assert len(ids) == DAYS and sorted(used) == sorted(ids)  # every payload, once


def paused_older(cli: Cli, tmp: Path) -> tuple[subprocess.Popen[str], Path]:
    """A scheduler of this release, held after the first payload of its backfill with
    `slow`'s lease (until the returned file exists)."""
    resume = tmp / "resume"
    older = processes.spawn(
        cli.ws.config_path,
        env={
            FAULT_ENV: "after_payload:1:pause",
            "FEEDLEDGER_FAULT_PAUSE_S": "900",
            "FEEDLEDGER_FAULT_RESUME": str(resume),
        },
    )
    processes.wait_until(
        lambda: (
            lease_schema(cli) == eng.HEAD
            and len(store_read(cli, "SELECT payload_id FROM applications")) == 2
        ),
        [older],
        what="the older scheduler holding the lease after its first payload",
    )
    return older, resume


def test_a_compatible_upgrade_goes_ahead_beside_an_older_scheduler(
    cli: Cli, tmp_path: Path
) -> None:
    publish(cli, tmp_path / "feed")
    (floor,) = store_read(cli, "SELECT floor FROM schema_floor")[0]
    root = next_release(tmp_path, str(floor))
    older, resume = paused_older(cli, tmp_path)
    try:
        done = run_next(root, cli, "db", "upgrade", "--json")
        assert done.returncode == 0, done.stderr
        assert lease_schema(cli) == eng.HEAD  # went ahead while the lease was held
        assert store_read(cli, "SELECT version_num FROM alembic_version") == [(NEXT,)]
        resume.touch()
        processes.wait_until(lambda: caught_up(cli), [older], what="the backfill on 'slow'")
    finally:
        resume.touch()
        (log,) = processes.stop([older])
    applied_once(cli)
    assert not [e for e in log if e["event"] == "error"]
    runs = store_read(cli, "SELECT kind, status FROM runs WHERE source = 'slow' ORDER BY kind")
    assert ("backfill", "succeeded") in runs and all(s == "succeeded" for _k, s in runs)


def test_an_incompatible_upgrade_waits_for_older_schedulers_which_then_stop(
    cli: Cli, tmp_path: Path
) -> None:
    publish(cli, tmp_path / "feed")
    root = next_release(tmp_path, NEXT)
    older, resume = paused_older(cli, tmp_path)
    try:
        refused = run_next(root, cli, "db", "upgrade")
        assert refused.returncode == 7, refused.stderr
        line = refused.stderr.strip()
        assert "\n" not in line and "nothing was changed" in line, line
        assert f"schema {NEXT} or newer" in line and "slow (" in line and eng.HEAD in line
        quiet = run_next(root, cli, "db", "upgrade", "--json")
        assert quiet.returncode == 7 and quiet.stdout == "" and "slow (" in quiet.stderr
        waited = run_next(root, cli, "db", "upgrade", "--wait", "1")
        assert waited.returncode == 7 and "after waiting 1 s" in waited.stderr, waited.stderr
        assert store_read(cli, "SELECT version_num FROM alembic_version") == [(eng.HEAD,)]
        resume.touch()  # the older scheduler finishes its backfill and lets go
        done = run_next(root, cli, "db", "upgrade", "--wait", "300")
        assert done.returncode == 0, done.stderr
        log = processes.ended(older, 8)  # its next tick: the schema is past it
    finally:
        resume.touch()
        if older.poll() is None:
            processes.stop([older])
    assert caught_up(cli)
    applied_once(cli)
    stopping = [e for e in log if e["event"] == "error" and e.get("stopping")]
    assert len(stopping) == 1 and f"schema {NEXT} or newer" in stopping[0]["error"]
    started = cli.proc("scheduler", "--once")  # an older one started now
    assert started.returncode == 8 and f"schema {NEXT} or newer" in started.stderr
    assert len(started.stderr.strip().splitlines()) == 1, started.stderr
    newer = processes.spawn(cli.ws.config_path, env={"PYTHONPATH": str(root)})
    (new_log,) = processes.stop([newer])
    assert not [e for e in new_log if e["event"] == "error"]
    applied_once(cli)
