"""An ingest stores its payload's object raw (durable before the ledger sees the
payload), then compresses it beside the payload's transaction (archive/settle.py). A
kill -9 between the two leaves a raw object that `archive verify` passes, and the
rerun, the source's next ingest or `archive compact` compresses it."""

from __future__ import annotations

import random
import signal
from pathlib import Path

import pytest

from feedledger.archive import LocalArchive
from feedledger.faults import ENV as FAULT_ENV
from helpers import Cli

DAYS = ["2026-08-01", "2026-08-02", "2026-08-03"]


def _payloads(tmp_path: Path) -> list[Path]:
    """Three daily snapshots of 600 rows, a few changed each day (deltas, not raw)."""
    rnd = random.Random(11)
    values = {i: rnd.randrange(10**6) for i in range(600)}
    files = []
    for day in DAYS:
        for key in rnd.sample(sorted(values), 6):
            values[key] = rnd.randrange(10**6)
        path = tmp_path / f"larimer_{day}.csv"
        path.write_text("id,value\n" + "".join(f"{k},{v}\n" for k, v in sorted(values.items())))
        files.append(path)
    return files


def _stored(cli: Cli) -> dict[str, tuple[bool, bool]]:
    """Each payload's (raw object present, compressed object present), by date."""
    objects = cli.ws.archive_root / "objects"
    found = {}
    for ref in cli.json("archive", "list", "larimer"):
        sha = ref["sha256"]
        raw = objects / sha[:2] / sha
        found[ref["published_at"][:10]] = (raw.exists(), raw.with_suffix(".zst").exists())
    return found


def _ingest(cli: Cli, path: Path, day: str) -> None:
    cli("ingest", "larimer", str(path), "--published-at", day)


def test_an_ingest_leaves_only_compressed_objects(cli: Cli, tmp_path: Path) -> None:
    files = _payloads(tmp_path)
    cli("source", "add", "larimer", "--key", "id")
    for path, day in zip(files, DAYS, strict=True):
        _ingest(cli, path, day)
    assert _stored(cli) == dict.fromkeys(DAYS, (False, True))
    archive = LocalArchive(cli.ws.archive_root)
    refs = cli.json("archive", "list", "larimer")
    kinds = [archive.objects.stored(r["sha256"]) for r in refs]
    assert [k.encoding if k else None for k in kinds] == ["keyframe", "delta", "delta"]
    # the source's base cache holds the latest payload, for the next delta
    cached = [p.name for p in (cli.ws.archive_root / "cache" / "base" / "larimer").iterdir()]
    assert cached == [refs[-1]["sha256"]]
    assert cli.json("archive", "verify", "larimer")["ok"] == 3


@pytest.mark.parametrize("point", ["before_settle", "settle_written"])
@pytest.mark.parametrize("then", ["rerun", "next_day", "compact"])
def test_a_kill_before_compressing_leaves_a_valid_raw_object_compressed_later(
    cli: Cli, tmp_path: Path, point: str, then: str
) -> None:
    files = _payloads(tmp_path)
    cli("source", "add", "larimer", "--key", "id")
    _ingest(cli, files[0], DAYS[0])

    argv = ("ingest", "larimer", str(files[1]), "--published-at", DAYS[1])
    killed = cli.proc(*argv, env={FAULT_ENV: f"{point}:kill"})
    assert killed.returncode == -signal.SIGKILL, (killed.returncode, killed.stderr)
    # the payload is archived: raw (and, past `settle_written`, compressed as well)
    assert _stored(cli) == {DAYS[0]: (False, True), DAYS[1]: (True, point == "settle_written")}
    checked = cli.json("archive", "verify", "larimer")
    assert (checked["ok"], checked["bad"]) == (2, 0), checked

    if then == "rerun":
        cli.proc(*argv)  # applies the payload, or finds it applied: compresses it either way
        expected = dict.fromkeys(DAYS[:2], (False, True))
    elif then == "next_day":
        _ingest(cli, files[2], DAYS[2])  # compresses the payload before its own
        expected = dict.fromkeys(DAYS, (False, True))
    else:
        cli("archive", "compact", "larimer")
        expected = dict.fromkeys(DAYS[:2], (False, True))
    assert _stored(cli) == expected
    checked = cli.json("archive", "verify", "larimer")
    assert (checked["ok"], checked["bad"]) == (len(expected), 0), checked
    archive = LocalArchive(cli.ws.archive_root)
    day2 = next(
        r for r in cli.json("archive", "list", "larimer") if r["published_at"][:10] == DAYS[1]
    )
    stored = archive.objects.stored(day2["sha256"])
    assert stored is not None and stored.encoding == "delta"
    assert archive.get(day2["sha256"]) == files[1].read_bytes()
