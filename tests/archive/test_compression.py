"""The compressed, delta-encoded archive.

Any sequence of payloads, archived compressed (each against its source's latest, a
keyframe every K), reads back byte-identical, through keyframe boundaries, after
`archive compact` of a raw (or half-compressed) archive, and after a SIGKILL at an
injected point of compact; damaged bytes (a flipped bit in a delta or a keyframe, a
missing keyframe, a damaged header) give a clear error naming the object, never data.
The S3 backend and the CLI (`archive compact|verify --json`) end to end.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import stat
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from feedledger.archive import LocalArchive, open_archive
from feedledger.archive.core import BlobArchive
from feedledger.archive.objects import raw_rel, zst_rel
from feedledger.model.errors import FeedledgerError, NotFoundError
from helpers import Cli

DAY = 86_400_000_000
DAY0 = 1_786_000_000_000_000
FETCHED = 1_790_000_000_000_000
NEVER = 1 << 62  # a min_size no payload reaches: an archive that writes raw objects
ZONES = ["R-1", "R-2", "MU-2", "C-1", "I-1"]


def series(seed: int, days: int, rows: int) -> list[bytes]:
    """Daily CSV snapshots: a few rows change, appear or go each day; now and then a
    day re-publishes an earlier day's exact bytes or the layout changes entirely."""
    rnd = random.Random(seed)
    table = {i: f"{rnd.choice(ZONES)},{rnd.randrange(10**6)}" for i in range(rows)}
    header = "id,zone,value"
    out: list[bytes] = []
    for _ in range(days):
        roll = rnd.random()
        if out and roll < 0.1:
            out.append(rnd.choice(out))
            continue
        if roll < 0.2:
            header = rnd.choice(["id,zone,value", "id,value,zone,note", "key;zone;value"])
        for key in rnd.sample(sorted(table), max(1, len(table) // 50)):
            table[key] = f"{rnd.choice(ZONES)},{rnd.randrange(10**6)}"
        for _ in range(rnd.randrange(3)):
            table[max(table, default=0) + 1] = f"{rnd.choice(ZONES)},0"
        if len(table) > 2:
            del table[rnd.choice(sorted(table))]
        body = "".join(f"{k},{v}\n" for k, v in sorted(table.items()))
        out.append(f"{header}\n{body}".encode())
    return out


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def archive_all(archive: BlobArchive, payloads: list[bytes], order: list[int]) -> None:
    for i in order:
        archive.put("larimer", payloads[i], published_at=DAY0 + i * DAY, fetched_at=FETCHED)


def assert_reads_back(root: Path, payloads: list[bytes], rnd: random.Random) -> None:
    """A fresh archive (nothing cached) reads every payload back, in any order."""
    fresh = LocalArchive(root)
    for i in rnd.sample(range(len(payloads)), len(payloads)):
        assert fresh.get(sha(payloads[i])) == payloads[i]
    assert all(item.ok for item in fresh.verify())


def chain_length(archive: BlobArchive, digest: str) -> int:
    stored = archive.objects.stored(digest)
    assert stored is not None
    return stored.depth + 1


def writable(path: Path) -> None:
    path.chmod(path.stat().st_mode | stat.S_IWUSR)


# -- round trips ---------------------------------------------------------------------------


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 10**6),
    days=st.integers(1, 14),
    every=st.integers(1, 5),
    shuffled=st.booleans(),
)
def test_any_sequence_reads_back_byte_identical(
    seed: int, days: int, every: int, shuffled: bool
) -> None:
    payloads = series(seed, days, rows=300)
    rnd = random.Random(seed)
    order = rnd.sample(range(days), days) if shuffled else list(range(days))
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        archive = LocalArchive(root, keyframe_every=lambda _s: every, min_size=0)
        archive_all(archive, payloads, order)
        for data in payloads:
            assert archive.get(sha(data)) == data
            # no read decompresses more than K frames
            assert chain_length(archive, sha(data)) <= every
        # re-archiving identical bytes is a no-op (Invariant 1): no file is written
        before = sorted(p.name for p in root.rglob("*") if p.is_file())
        for i in order:
            ref, created = archive.put(
                "larimer", payloads[i], published_at=DAY0 + i * DAY, fetched_at=FETCHED + 1
            )
            assert not created and ref.fetched_at == FETCHED
        assert sorted(p.name for p in root.rglob("*") if p.is_file()) == before
        assert_reads_back(root, payloads, rnd)


def test_a_source_is_stored_as_keyframes_and_deltas_every_k() -> None:
    payloads = [p for p in series(7, 40, rows=2000)]
    unique = list(dict.fromkeys(payloads))
    with tempfile.TemporaryDirectory() as tmp:
        archive = LocalArchive(Path(tmp))  # the defaults: K = 30, 4 KiB and up compressed
        archive_all(archive, unique, list(range(len(unique))))
        kinds = [archive.objects.stored(sha(d)) for d in unique]
        assert [k.encoding if k else None for k in kinds][:3] == ["keyframe", "delta", "delta"]
        assert [k.depth for k in kinds if k] == [i % 30 for i in range(len(unique))]
        raw = sum(len(d) for d in unique)
        stored = sum(k.stored_size for k in kinds if k)
        assert stored < raw / 5
        assert not list(Path(tmp).rglob("objects/*/*[0-9a-f]"))  # no raw object left
        # a small payload stays raw (a file system block holds it anyway)
        small = b"id,zone\n1,R-1\n"
        archive.put("larimer", small, published_at=DAY0 + 99 * DAY, fetched_at=FETCHED)
        assert (Path(tmp) / raw_rel(sha(small))).read_bytes() == small


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10**6), days=st.integers(1, 12), every=st.integers(1, 4))
def test_compact_converts_a_raw_or_mixed_archive_in_place(seed: int, days: int, every: int) -> None:
    """An archive written before compression (raw objects), here with some payloads
    already compressed by a newer writer in another order: compact converts the rest
    (never into a loop of deltas), everything reads back, a second compact is a no-op."""
    payloads = series(seed, days, rows=300)
    rnd = random.Random(seed)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        old = LocalArchive(root, min_size=NEVER)
        new = LocalArchive(root, keyframe_every=lambda _s: every, min_size=0)
        for i in rnd.sample(range(days), days):
            writer = new if rnd.random() < 0.3 else old
            writer.put("larimer", payloads[i], published_at=DAY0 + i * DAY, fetched_at=FETCHED)
        compactor = LocalArchive(root, keyframe_every=lambda _s: every, min_size=0)
        items = compactor.compact("larimer")
        assert len(items) == days and not [i for i in items if i.status == "bad"]
        assert_reads_back(root, payloads, rnd)
        for data in payloads:
            assert chain_length(compactor, sha(data)) <= max(every, 1) * 2
        again = LocalArchive(root, keyframe_every=lambda _s: every, min_size=0).compact()
        assert {i.status for i in again} <= {"already", "kept_raw", "shared"}


# -- crash safety: a real SIGKILL at an injected point of compact ----------------------------

_COMPACT = (
    "import sys; from pathlib import Path; from feedledger.archive import LocalArchive; "
    "LocalArchive(Path(sys.argv[1]), keyframe_every=lambda s: 3).compact()"
)
_KILL_POINTS = [
    (point, n)
    for point in ("compact_written", "compact_deleted", "after_compact")
    for n in random.Random(17).sample(range(1, 9), 2)
]


def _compact_process(root: Path, fault: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "FEEDLEDGER_FAULT"}
    if fault:
        env["FEEDLEDGER_FAULT"] = fault
    return subprocess.run(
        [sys.executable, "-c", _COMPACT, str(root)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(("point", "n"), _KILL_POINTS)
def test_a_kill_anywhere_in_compact_leaves_every_payload_readable(
    tmp_path: Path, point: str, n: int
) -> None:
    payloads = series(n, 9, rows=400)
    old = LocalArchive(tmp_path, min_size=NEVER)
    archive_all(old, payloads, list(range(len(payloads))))
    killed = _compact_process(tmp_path, f"{point}:{n}:kill")
    assert killed.returncode == -9, killed.stderr
    assert_reads_back(tmp_path, payloads, random.Random(n))
    # a rerun finishes the job: every compressible payload compressed, none left twice
    done = _compact_process(tmp_path, None)
    assert done.returncode == 0, done.stderr
    assert_reads_back(tmp_path, payloads, random.Random(n + 1))
    for data in set(payloads):
        both = [(tmp_path / rel(sha(data))).exists() for rel in (raw_rel, zst_rel)]
        assert both == [False, True]


# -- corruption: a clear error naming the object, never wrong data -------------------------


@pytest.fixture
def chained(tmp_path: Path) -> tuple[LocalArchive, list[bytes]]:
    payloads = list(dict.fromkeys(series(3, 6, rows=500)))
    archive = LocalArchive(tmp_path, keyframe_every=lambda _s: 30)
    archive_all(archive, payloads, list(range(len(payloads))))
    kinds = [archive.objects.stored(sha(d)) for d in payloads]
    assert [k.encoding if k else None for k in kinds] == ["keyframe"] + ["delta"] * (
        len(payloads) - 1
    )
    return archive, payloads


def _flip(path: Path, at: int) -> None:
    """Flip a bit at `at`; a negative `at` counts from the end of the zstd frame's start
    (-1: its middle, -2: its checksum), past the object's own header."""
    writable(path)
    data = bytearray(path.read_bytes())
    frame = 8 + int.from_bytes(data[4:8], "little")
    if at == -1:
        at = frame + (len(data) - frame) // 2
    elif at == -2:
        at = len(data) - 2
    data[at] ^= 0x10
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("where", ["delta frame", "delta checksum", "keyframe", "delta header"])
def test_a_flipped_bit_is_an_error_naming_the_object(
    chained: tuple[LocalArchive, list[bytes]], where: str
) -> None:
    archive, payloads = chained
    target = sha(payloads[-1])
    damaged = sha(payloads[0]) if where == "keyframe" else target
    path = archive.root / zst_rel(damaged)
    _flip(path, {"delta header": 20, "delta checksum": -2}.get(where, -1))
    with pytest.raises(FeedledgerError, match="is corrupt") as caught:
        LocalArchive(archive.root).get(target)
    message = str(caught.value)
    assert str(path) in message and "\n" not in message
    if damaged != target:
        assert f"read for payload {target}" in message
    report = {i.ref.sha256: i for i in LocalArchive(archive.root).verify()}
    assert not report[target].ok and str(path) in (report[target].error or "")


def test_a_missing_keyframe_is_an_error_naming_the_delta_and_the_keyframe(
    chained: tuple[LocalArchive, list[bytes]],
) -> None:
    archive, payloads = chained
    keyframe = sha(payloads[0])
    (archive.root / zst_rel(keyframe)).unlink()
    fresh = LocalArchive(archive.root)
    with pytest.raises(FeedledgerError, match=f"delta against {keyframe}, which is missing"):
        fresh.get(sha(payloads[2]))
    with pytest.raises(NotFoundError):
        fresh.get(keyframe)
    assert [i.ok for i in fresh.verify()] == [False] * len(payloads)


def test_a_delta_naming_another_payload_is_refused(
    chained: tuple[LocalArchive, list[bytes]],
) -> None:
    """An object moved under another payload's name: its header gives it away."""
    archive, payloads = chained
    a, b = (archive.root / zst_rel(sha(p)) for p in payloads[1:3])
    writable(b)
    b.write_bytes(a.read_bytes())
    with pytest.raises(FeedledgerError, match=f"its header names {sha(payloads[1])}"):
        LocalArchive(archive.root).get(sha(payloads[2]))


# -- S3 ------------------------------------------------------------------------------------


def test_s3_round_trip_compact_and_verify(s3_bucket: str) -> None:
    payloads = series(11, 8, rows=400)
    url = f"s3://{s3_bucket}/team/archive"
    old = open_archive(url)
    assert isinstance(old, BlobArchive)
    old.objects.min_size = NEVER
    archive_all(old, payloads[:4], [0, 1, 2, 3])
    new = open_archive(url, keyframe_every=lambda _s: 3)
    assert isinstance(new, BlobArchive)
    for i in range(4, 8):
        new.put("larimer", payloads[i], published_at=DAY0 + i * DAY, fetched_at=FETCHED)
    assert new.objects.stored(sha(payloads[5])).encoding == "delta"  # type: ignore[union-attr]
    items = open_archive(url, keyframe_every=lambda _s: 3).compact("larimer")
    assert {i.status for i in items} <= {"compacted", "already", "shared"}
    fresh = open_archive(url)
    assert [fresh.get(sha(p)) for p in payloads] == payloads
    assert all(i.ok for i in fresh.verify("larimer"))


# -- the CLI and the workspace setting -------------------------------------------------------


def test_cli_compact_and_verify_json(cli: Cli, tmp_path: Path) -> None:
    text = cli.ws.config_path.read_text()
    cli.ws.config_path.write_text(text.replace("[archive]\n", "[archive]\nfull_frame_every = 2\n"))
    payloads = list(dict.fromkeys(series(5, 5, rows=400)))
    old = LocalArchive(cli.ws.archive_root, min_size=NEVER)
    archive_all(old, payloads, list(range(len(payloads))))
    result = cli.json("archive", "compact", "larimer")
    assert result["payloads"] == len(payloads) and result["compacted"] == len(payloads)
    assert result["stored_after"] < result["stored_before"] == result["raw_bytes"]
    assert [i["encoding"] for i in result["items"]][:3] == ["keyframe", "delta", "keyframe"]
    assert set(result["items"][0]) >= {"payload_id", "sha256", "status", "stored_after"}
    again = cli.json("archive", "compact")
    assert again["already"] == len(payloads) and again["compacted"] == 0
    checked = cli.json("archive", "verify")
    assert checked["ok"] == len(payloads) and checked["bad"] == 0
    assert "ok" in cli("archive", "verify", "larimer").stdout

    _flip(cli.ws.archive_root / zst_rel(sha(payloads[1])), -1)
    bad = cli("archive", "verify", "--json", expect=1)
    report: dict[str, Any] = json.loads(bad.stdout)
    assert report["bad"] == 1 and [i["ok"] for i in report["items"]].count(False) == 1


def test_keyframe_every_must_be_a_positive_whole_number(cli: Cli) -> None:
    text = cli.ws.config_path.read_text()
    table = "[archive]\nfull_frame_every = { default = 5, x = 2 }\n"
    cli.ws.config_path.write_text(text.replace("[archive]\n", table))
    from feedledger.config import Workspace

    ws = Workspace.load(cli.ws.config_path)
    assert ws.archive_keyframe_every("x") == 2 and ws.archive_keyframe_every("y") == 5
    cli.ws.config_path.write_text(text.replace("[archive]\n", "[archive]\nfull_frame_every = -1\n"))
    with pytest.raises(FeedledgerError, match="full_frame_every must be a whole number"):
        Workspace.load(cli.ws.config_path).archive_keyframe_every("x")


def test_a_bad_full_frame_every_is_refused_by_every_command(cli: Cli) -> None:
    """Checked when feedledger.toml is loaded, not first when a payload is archived: a
    command that never archives (`source list`) refuses it too, in one line."""
    text = cli.ws.config_path.read_text()
    for bad in ("-1", '"30"', "{ default = 5, x = -2 }"):
        setting = f"[archive]\nfull_frame_every = {bad}\n"
        cli.ws.config_path.write_text(text.replace("[archive]\n", setting))
        refused = cli("source", "list", expect=2)
        assert "full_frame_every must be a whole number" in refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("command", ["compact", "verify"])
def test_archive_compact_and_verify_refuse_an_unknown_source(cli: Cli, command: str) -> None:
    """As `archive list` does: a misspelt source is an error, not an empty report."""
    cli("source", "add", "larimer", "--key", "id")
    refused = cli("archive", command, "larimr", "--json", expect=3)
    assert "unknown source" in refused.stderr and refused.stdout == ""
    assert len(refused.stderr.strip().splitlines()) == 1


def test_ingest_writes_deltas_and_a_backfill_reads_them(cli: Cli, tmp_path: Path) -> None:
    """The ingest path (bytes stored while they are parsed) compresses against the
    source's latest payload; a backfill then applies payloads read back from deltas."""
    rnd = random.Random(5)
    values = {i: rnd.randrange(10**6) for i in range(600)}
    cli("source", "add", "larimer", "--key", "id")
    days = [f"2026-08-0{d}" for d in range(1, 6)]

    def publish(n: int, *verb: str) -> None:
        for key in rnd.sample(sorted(values), 6):
            values[key] = rnd.randrange(10**6)
        body = "".join(f"{k},{v}\n" for k, v in sorted(values.items()))
        path = tmp_path / f"larimer_{days[n]}.csv"
        path.write_text(f"id,value\n{body}")
        cli(*verb, "larimer", str(path), "--published-at", days[n])

    publish(0, "ingest")
    for n in (1, 2, 3):
        publish(n, "archive", "add")
    done = cli.json("backfill", "larimer", "--from", days[1], "--to", days[3])
    assert done["kind"] == "backfill" and done["status"] == "applied", done
    publish(4, "ingest")
    refs = cli.json("archive", "list", "larimer")
    archive = LocalArchive(cli.ws.archive_root)
    kinds = [archive.objects.stored(r["sha256"]) for r in refs]
    assert [k.encoding if k else None for k in kinds] == ["keyframe"] + ["delta"] * 4
    assert cli.json("archive", "verify", "larimer")["ok"] == 5


def test_a_replay_over_a_damaged_payload_retracts_nothing(cli: Cli, tmp_path: Path) -> None:
    """A replay retracts every payload from --from on, then re-applies them from the
    archive. One of them damaged (a flipped bit in a delta, which every later delta of
    its chain needs) refuses the replay before the retraction, naming the payload: the
    versions, the watermark and `asof` stay as they were; repaired, it replays."""
    cli("source", "add", "larimer", "--key", "id")
    days = [f"2026-08-0{d}" for d in range(1, 5)]
    for n, day in enumerate(days):
        body = "".join(f"{i},{i * (n + 1) if i % 50 == 0 else i}\n" for i in range(2000))
        path = tmp_path / f"larimer_{day}.csv"
        path.write_text(f"id,value\n{body}")
        cli("ingest", "larimer", str(path), "--published-at", day)
    refs = cli.json("archive", "list", "larimer")
    delta = cli.ws.archive_root / "objects" / refs[1]["sha256"][:2] / f"{refs[1]['sha256']}.zst"
    assert delta.exists()
    before = (cli.json("history", "larimer", "50", "--all"), cli.json("watermark", "larimer"))
    saved = delta.read_bytes()
    _flip(delta, -1)
    refused = cli("replay", "larimer", "--from", days[1], expect=1)
    line = refused.stderr.strip().splitlines()[-1]  # after the plan's line
    assert line.startswith("error:") and refs[1]["sha256"] in line, line
    assert "retracted nothing" in line
    assert (
        cli.json("history", "larimer", "50", "--all"),
        cli.json("watermark", "larimer"),
    ) == before
    asof = cli.json("asof", "larimer", "50", "--valid", days[3])
    assert asof["version"]["attributes"] == {"id": "50", "value": "200"}
    delta.write_bytes(saved)
    done = cli.json("replay", "larimer", "--from", days[1])
    assert done["status"] == "applied" and done["retracted_payloads"] == 3, done
