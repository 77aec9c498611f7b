"""Gzip/zip payloads read transparently, CSV delimiter and text
encoding options. Store tests run on SQLite and PostgreSQL (`cli` fixture)."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import zipfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import select

from feedledger.config import make_source
from feedledger.formats import read_observations
from feedledger.ledger.encoding import Decoder
from feedledger.ledger.schema import metadata
from feedledger.ledger.store import Store
from feedledger.model.errors import BadPayloadError
from helpers import Cli

DAY1, DAY2 = "2026-08-01", "2026-08-02"
CONFIG, BAD_PAYLOAD = 2, 4

PAYLOADS: dict[str, tuple[bytes, bytes]] = {
    "csv": (
        b"id,zoning,note\n1,R1,caf\xc3\xa9\n2,C2,\n3,A1,x\n",
        b"id,zoning,note\n1,R1,caf\xc3\xa9\n2,C3,\n4,A1,y\n",
    ),
    "jsonl": (
        b'{"id":1,"zoning":"R1","n":1.50}\n{"id":2,"zoning":"C2"}\n{"id":3,"zoning":"A1"}\n',
        b'{"id":1,"zoning":"R1","n":1.50}\n{"id":2,"zoning":"C3"}\n{"id":4,"zoning":"A1"}\n',
    ),
    "json": (
        b'[{"id":1,"zoning":"R1"},{"id":2,"zoning":"C2"},{"id":3,"zoning":"A1"}]',
        b'[{"id":1,"zoning":"R1"},{"id":2,"zoning":"C3"},{"id":4,"zoning":"A1"}]',
    ),
}


def gz(data: bytes) -> bytes:
    return gzip.compress(data, mtime=0)


def zipped(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buf.getvalue()


def history(cli: Cli, source: str) -> list[tuple[Any, ...]]:
    """The source's versions, without what differs by run (ids, transaction times)."""
    table = metadata.tables["versions"]
    store = Store(cli.ws.store_url)
    try:
        with store.engine.connect() as conn:
            stmt = (
                select(
                    table.c.key,
                    table.c.valid_from,
                    table.c.deleted,
                    table.c.change,
                    table.c.content_hash,
                    table.c.attributes,
                    table.c.fields_id,
                )
                .where(table.c.source == source)
                .order_by(table.c.key, table.c.valid_from)
            )
            decode = Decoder(conn)  # stored texts are compact
            return [(*row[:5], decode.text(row[6], row[5])) for row in conn.execute(stmt)]
    finally:
        store.close()


def ingest(cli: Cli, tmp_path: Path, source: str, name: str, data: bytes, day: str) -> Any:
    path = tmp_path / name
    path.write_bytes(data)
    return cli.json("ingest", source, str(path), "--published-at", day)


def refused(cli: Cli, tmp_path: Path, source: str, name: str, data: bytes, code: int) -> str:
    """Refused with `code`, one error line naming source and payload, the bytes kept as
    published (sha256 of the compressed bytes) and noted under rejected/."""
    path = tmp_path / name
    path.write_bytes(data)
    result = cli("ingest", source, str(path), "--published-at", DAY1, expect=code)
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert f"'{source}'" in lines[0] and name in lines[0], lines[0]
    sha = hashlib.sha256(data).hexdigest()
    objects = cli.ws.archive_root / "objects"
    assert any(p.read_bytes() == data for p in objects.rglob(sha)), "bytes kept"
    assert any((cli.ws.archive_root / "rejected" / source).glob("*.json"))
    assert history(cli, source) == []
    return lines[0]


@pytest.mark.parametrize("fmt", sorted(PAYLOADS))
def test_gz_and_zip_ingest_like_the_plain_payload(cli: Cli, tmp_path: Path, fmt: str) -> None:
    for name in ("plain", "gz", "zip"):
        cli("source", "add", f"{fmt}-{name}", "--key", "id", "--format", fmt)
    for day, data in zip((DAY1, DAY2), PAYLOADS[fmt], strict=True):
        ingest(cli, tmp_path, f"{fmt}-plain", f"p_{day}.{fmt}", data, day)
        # detected by magic bytes, not by name: the gzip file has no .gz suffix
        out = ingest(cli, tmp_path, f"{fmt}-gz", f"g_{day}.{fmt}", gz(data), day)
        assert out["status"] == "applied"
        ingest(cli, tmp_path, f"{fmt}-zip", f"z_{day}.zip", zipped({f"d.{fmt}": data}), day)
    plain = history(cli, f"{fmt}-plain")
    assert len(plain) >= 5
    assert history(cli, f"{fmt}-gz") == plain
    assert history(cli, f"{fmt}-zip") == plain
    # the archive keeps the bytes as published, addressed by their sha256
    packed = gz(PAYLOADS[fmt][0])
    sha = hashlib.sha256(packed).hexdigest()
    found = list((cli.ws.archive_root / "objects").rglob(sha))
    assert found and found[0].read_bytes() == packed


def test_multi_member_zip_is_refused_naming_members(cli: Cli, tmp_path: Path) -> None:
    cli("source", "add", "multi", "--key", "id")
    data = zipped({"a.csv": b"id\n1\n", "b.csv": b"id\n2\n"})
    message = refused(cli, tmp_path, "multi", "two.zip", data, BAD_PAYLOAD)
    assert "2 files" in message and "a.csv" in message and "b.csv" in message


def test_truncated_gz_is_refused_and_kept(cli: Cli, tmp_path: Path) -> None:
    cli("source", "add", "cut", "--key", "id")
    data = gz(b"id,zoning\n" + b"".join(b"%d,R%d\n" % (i, i) for i in range(2000)))
    message = refused(cli, tmp_path, "cut", "cut.csv.gz", data[: len(data) // 2], BAD_PAYLOAD)
    assert "truncated gzip" in message


def test_corrupt_zip_is_refused_and_kept(cli: Cli, tmp_path: Path) -> None:
    cli("source", "add", "cutzip", "--key", "id")
    data = zipped({"a.csv": b"id,zoning\n" + b"1,R1\n" * 500})
    message = refused(cli, tmp_path, "cutzip", "cut.zip", data[:60], BAD_PAYLOAD)
    assert "zip payload" in message


@pytest.mark.parametrize("wrap", ["gz", "zip"])
def test_decompression_bomb_is_refused(cli: Cli, tmp_path: Path, wrap: str) -> None:
    cli("source", "add", f"bomb-{wrap}", "--key", "id", "--max-payload-bytes", "100000")
    body = b"id,zoning\n1," + b"R" * 1_000_000 + b"\n"
    data = gz(body) if wrap == "gz" else zipped({"a.csv": body})
    assert len(data) < 100_000
    message = refused(cli, tmp_path, f"bomb-{wrap}", f"bomb.{wrap}", data, BAD_PAYLOAD)
    assert "max_payload_bytes of 100,000 bytes" in message


@pytest.mark.parametrize(("option", "sep"), [(";", b";"), ("tab", b"\t"), ("\\t", b"\t")])
def test_delimited_csv_is_read_as_columns(
    cli: Cli, tmp_path: Path, option: str, sep: bytes
) -> None:
    data = sep.join([b"id", b"zoning"]) + b"\n" + sep.join([b"1", b"R1"]) + b"\n"
    cli("source", "add", "semi", "--key", "id", "--csv-delimiter", option)
    assert ingest(cli, tmp_path, "semi", "s.csv", data, DAY1)["added"] == 1
    [(*_, attributes)] = history(cli, "semi")
    assert json.loads(attributes) == {"id": "1", "zoning": "R1"}
    listed = cli.json("source", "list")
    assert listed[0]["csv_delimiter"] == sep.decode()


def test_semicolon_csv_without_the_option_keeps_todays_behaviour(cli: Cli, tmp_path: Path) -> None:
    cli("source", "add", "semi", "--key", "id;zoning")
    data = b"id;zoning\n1;R1\n"
    assert ingest(cli, tmp_path, "semi", "s.csv", data, DAY1)["added"] == 1
    [(*_, attributes)] = history(cli, "semi")
    assert json.loads(attributes) == {"id;zoning": "1;R1"}


@pytest.mark.parametrize("encoding", ["latin-1", "cp1252", "utf-16"])
def test_encoded_csv_is_decoded(cli: Cli, tmp_path: Path, encoding: str) -> None:
    cli("source", "add", "enc", "--key", "id", "--encoding", encoding)
    data = "id,name\n1,café\n".encode(encoding)
    assert ingest(cli, tmp_path, "enc", "e.csv", data, DAY1)["added"] == 1
    [(*_, attributes)] = history(cli, "enc")
    assert json.loads(attributes) == {"id": "1", "name": "café"}


def test_byte_invalid_in_the_encoding_names_its_offset(cli: Cli, tmp_path: Path) -> None:
    cli("source", "add", "ascii", "--key", "id", "--encoding", "ascii")
    message = refused(cli, tmp_path, "ascii", "a.csv", b"id,name\n1,caf\xe9\n", BAD_PAYLOAD)
    assert "invalid ascii at byte 13 (line 2)" in message


def test_latin1_bytes_without_the_option_keep_the_utf8_error(cli: Cli, tmp_path: Path) -> None:
    cli("source", "add", "plain", "--key", "id")
    message = refused(cli, tmp_path, "plain", "a.csv", gz(b"id,name\n1,caf\xe9\n"), BAD_PAYLOAD)
    assert "invalid UTF-8 at byte 13" in message


@pytest.mark.parametrize(
    ("option", "value", "fragment"),
    [
        ("--csv-delimiter", ";;", "csv_delimiter"),
        ("--csv-delimiter", "a", "csv_delimiter"),
        ("--csv-delimiter", '"', "csv_delimiter"),
        ("--csv-delimiter", "é", "csv_delimiter"),
        ("--encoding", "klingon", "encoding"),
        ("--encoding", "base64", "encoding"),
    ],
)
def test_bad_option_values_are_config_errors(
    cli: Cli, option: str, value: str, fragment: str
) -> None:
    result = cli("source", "add", "bad", "--key", "id", option, value, expect=CONFIG)
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and fragment in lines[0] and "Traceback" not in result.stderr
    assert not cli.json("source", "list")


# -- property: gz(payload) and zip(payload) read as payload ------------------------------

_TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), max_size=8)
_ROWS = st.lists(
    st.tuples(st.integers(0, 10**6), _TEXT, _TEXT),
    min_size=1,
    max_size=20,
    unique_by=lambda r: r[0],
)


def _csv(rows: list[tuple[int, str, str]]) -> bytes:
    import csv

    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["id", "a", "b"])
    writer.writerows(rows)
    return buf.getvalue().encode("utf-8")


def _jsonl(rows: list[tuple[int, str, str]]) -> bytes:
    lines = [json.dumps({"id": i, "a": a, "b": b}, ensure_ascii=False) for i, a, b in rows]
    return ("\n".join(lines) + "\n").encode("utf-8")


def _read(data: bytes, fmt: str) -> tuple[Any, ...]:
    src = make_source("prop", key=("id",), format=fmt)
    try:
        obs = read_observations(data, src, label="p")
    except BadPayloadError as exc:
        return ("error", exc.problem)
    return (obs.frame.to_dicts(), obs.attributes(obs.frame["idx"]).to_list())


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=_ROWS, fmt=st.sampled_from(["csv", "jsonl"]))
def test_compressed_payload_reads_as_the_payload(
    rows: list[tuple[int, str, str]], fmt: str
) -> None:
    data = _csv(rows) if fmt == "csv" else _jsonl(rows)
    expected = _read(data, fmt)
    assert _read(gz(data), fmt) == expected
    assert _read(zipped({f"x.{fmt}": data}), fmt) == expected


def test_concatenated_gzip_members_and_macos_zip_entries(cli: Cli, tmp_path: Path) -> None:
    """gzip reads concatenated members as one stream; a zip's folder entries and the
    `__MACOSX/` resource forks macOS's archiver adds are not counted as members."""
    cli("source", "add", "cat", "--key", "id")
    data = gz(b"id,zoning\n1,R1\n") + gz(b"2,C2\n")
    assert ingest(cli, tmp_path, "cat", "c.csv.gz", data, DAY1)["added"] == 2
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as archive:
        archive.writestr("export/", b"")
        archive.writestr("export/c.csv", b"id,zoning\n1,R1\n2,C3\n")
        archive.writestr("__MACOSX/export/._c.csv", b"\x00\x05\x16\x07")
    out = ingest(cli, tmp_path, "cat", "c.zip", buf.getvalue(), DAY2)
    assert out["status"] == "applied" and out["changed"] == 1


def test_corrupt_gzip_crc_is_refused(cli: Cli, tmp_path: Path) -> None:
    cli("source", "add", "crc", "--key", "id")
    data = bytearray(gz(b"id,zoning\n1,R1\n"))
    data[-8] ^= 0xFF  # the CRC32 in the trailer
    message = refused(cli, tmp_path, "crc", "crc.csv.gz", bytes(data), BAD_PAYLOAD)
    assert "corrupt gzip payload" in message


def test_run_fetches_dated_gz_files(cli: Cli, tmp_path: Path) -> None:
    """`run` over a folder of dated .csv.gz files: the dates come from the names, the
    content from inside the gzip."""
    folder = tmp_path / "exports"
    folder.mkdir()
    (folder / f"parcels_{DAY1}.csv.gz").write_bytes(gz(b"id,zoning\n1,R1\n2,C2\n"))
    cli("source", "add", "dated", "--key", "id", "--fetch", str(folder))
    cli("run", "dated")
    assert [row[0] for row in history(cli, "dated")] == ['["1"]', '["2"]']
