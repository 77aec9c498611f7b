"""The tantivy destination's own guarantees, against the traps tantivy sets: a term
delete on a hyphenated id under the default tokenizer matches nothing (keys are stored
`raw`), the writer's context manager commits even after an exception (a failed batch
must leave nothing), uncommitted documents vanish on a crash (kill -9 of a real
process), one writer at a time (a second one waits, or fails with one clear line),
reads never wait for the writer, tombstones survive restarts and merges, and the
guard's verdicts equal the SQL table's for any history (property)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
import tantivy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from feedledger.faults import ENV as FAULT_ENV
from feedledger.faults import InjectedFailure
from feedledger.model.destination import Destination
from feedledger.model.errors import ConfigError, StoreUnavailableError
from feedledger.sync.kinds import open_target, tantivy_index
from feedledger.sync.kinds.tantivy_search import search
from feedledger.sync.transform import Doc, content_hash
from sync.tantivy_index import stored

SRC = str(Path(__file__).resolve().parents[2] / "src")
HANG_S = 120  # a generous deadline: only a hang trips it


def dest(path: Path) -> Destination:
    return Destination("d", "s", "tantivy", str(path), "documents", text_fields=("zone",))


def doc(key: str, rev: int, zone: str | None = "residential", rank: int = 1) -> Doc:
    body = None if zone is None else json.dumps({"id": key, "zone": zone})
    return Doc(json.dumps([key]), rev, f"M-{rank}", rank, content_hash(body), zone is None, body)


def opened(path: Path) -> Any:
    t = open_target(dest(path))
    t.ensure()
    return t


def docs_for(path: Path, key: str) -> list[dict[str, Any]]:
    return [d for d in stored(str(path), None) if d["fl_key"] == [json.dumps([key])]]


def test_a_hyphenated_id_is_deleted_by_its_term_only_under_the_raw_tokenizer(
    tmp_path: Path,
) -> None:
    # the trap, in tantivy itself: the default tokenizer splits "A-1" into words
    sb = tantivy.SchemaBuilder()
    sb.add_text_field("id", stored=True)
    (tmp_path / "plain").mkdir()
    plain = tantivy.Index(sb.build(), path=str(tmp_path / "plain"))
    w = plain.writer(num_threads=1)
    w.add_document(tantivy.Document(id='["A-1"]'))
    w.commit()
    w.delete_documents_by_term("id", '["A-1"]')
    w.commit()
    w.wait_merging_threads()
    plain.reload()
    assert plain.searcher().num_docs == 1  # nothing was deleted
    # the destination replaces and deletes hyphenated keys: one document per key
    t = opened(tmp_path / "ix")
    assert t.write([doc("A-1", 1), doc("B-2-c", 1)])[0].verdict == "accepted"
    assert t.write([doc("A-1", 2, "commercial")])[0].verdict == "accepted"
    assert [d["fl_revision"] for d in docs_for(tmp_path / "ix", "A-1")] == [[2]]
    assert t.write([doc("A-1", 3, None)])[0].verdict == "accepted"
    held = docs_for(tmp_path / "ix", "A-1")
    assert [(d["fl_revision"], d["fl_deleted"]) for d in held] == [([3], [1])]
    t.close()


def test_the_writers_context_manager_commits_after_an_exception_so_a_batch_rolls_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the trap, in tantivy itself: `with writer:` commits on exit, exception or not
    sb = tantivy.SchemaBuilder()
    sb.add_text_field("id", stored=True, tokenizer_name="raw")
    (tmp_path / "plain").mkdir()
    plain = tantivy.Index(sb.build(), path=str(tmp_path / "plain"))
    with pytest.raises(RuntimeError), plain.writer(num_threads=1) as w:
        w.add_document(tantivy.Document(id="x"))
        raise RuntimeError("a failure half-way")
    plain.reload()
    assert plain.searcher().num_docs == 1  # committed anyway
    # the destination's batch failing after its write, before its commit: nothing of it
    t = opened(tmp_path / "ix")
    t.write([doc("a", 1)])
    monkeypatch.setenv(FAULT_ENV, "destination_staged")
    with pytest.raises(InjectedFailure):
        t.write([doc("a", 2, "commercial"), doc("b", 1)])
    monkeypatch.delenv(FAULT_ENV)
    assert [r[:2] for r in t.rows()] == [('["a"]', 1)]
    assert t.write([doc("b", 1)])[0].verdict == "accepted"  # the lock was released
    t.close()


_WRITE_AND_DIE = """
import json, sys
from feedledger.model.destination import Destination
from feedledger.sync.kinds import open_target
from feedledger.sync.transform import Doc, content_hash
t = open_target(Destination("d", "s", "tantivy", sys.argv[1], "documents", text_fields=("zone",)))
t.ensure()
body = json.dumps({"id": "n", "zone": "new"})
docs = [Doc(json.dumps([f"n-{i}"]), 1, "M-1", 1, content_hash(body), False, body)
        for i in range(500)]
t.write(docs)
"""


def test_uncommitted_documents_vanish_when_the_writer_is_killed(tmp_path: Path) -> None:
    t = opened(tmp_path / "ix")
    t.write([doc("a", 1)])
    env = {**os.environ, "PYTHONPATH": SRC, FAULT_ENV: "destination_staged:kill"}
    proc = subprocess.run([sys.executable, "-c", _WRITE_AND_DIE, str(tmp_path / "ix")],
                          env=env, capture_output=True, text=True, timeout=HANG_S)  # fmt: skip
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert [r[0] for r in t.rows()] == ['["a"]']  # none of the 500
    assert t.write([doc("b", 1)])[0].verdict == "accepted"  # the dead writer's lock is free
    t.close()


_HOLD = """
import os, sys, time, tantivy
index = tantivy.Index.open(sys.argv[1])
writer = index.writer(num_threads=1)
writer.add_document(tantivy.Document(fl_key='["uncommitted"]', fl_deleted=0, zone="residential"))
open(sys.argv[2], "w").close()
while not os.path.exists(sys.argv[3]):
    time.sleep(0.02)
writer.rollback()
writer.wait_merging_threads()
"""


class Holder:
    """Another process holding the index's writer (with an uncommitted document)."""

    def __init__(self, path: Path, tmp: Path) -> None:
        self.ready, self.release = tmp / "ready", tmp / "release"
        args = [sys.executable, "-c", _HOLD, str(path), str(self.ready), str(self.release)]
        self.proc = subprocess.Popen(args)
        for _ in range(HANG_S * 50):
            if self.ready.exists() or self.proc.poll() is not None:
                break
            threading.Event().wait(0.02)
        assert self.ready.exists(), "the holder never took the writer"

    def let_go(self) -> None:
        self.release.touch()
        assert self.proc.wait(timeout=HANG_S) == 0


def test_a_second_writer_waits_for_the_lock_or_fails_with_one_clear_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    t = opened(tmp_path / "ix")
    t.write([doc("a", 1)])
    holder = Holder(tmp_path / "ix", tmp_path)
    try:
        monkeypatch.setattr(tantivy_index, "LOCK_WAIT_S", 0.3)
        with pytest.raises(StoreUnavailableError, match="locked by another writer"):
            t.write([doc("b", 1)])
        monkeypatch.setattr(tantivy_index, "LOCK_WAIT_S", float(HANG_S))
        threading.Timer(0.5, holder.release.touch).start()
        assert t.write([doc("b", 1)])[0].verdict == "accepted"  # waited, then wrote
    finally:
        holder.let_go()
    assert [r[0] for r in t.rows()] == ['["a"]', '["b"]']
    t.close()


def test_reads_never_wait_for_the_writer(tmp_path: Path) -> None:
    t = opened(tmp_path / "ix")
    t.write([doc("a", 1), doc("b", 1, "commercial")])
    holder = Holder(tmp_path / "ix", tmp_path)
    got: dict[str, Any] = {}

    def read() -> None:
        got["search"] = search(dest(tmp_path / "ix"), "zone:residential", 10)
        got["rows"] = t.rows()
        got["sums"] = t.bucket_sums([('["a"]', '["z"]')])

    try:
        reader = threading.Thread(target=read)
        reader.start()
        reader.join(HANG_S)
        assert not reader.is_alive(), "a read waited for the writer"
    finally:
        holder.let_go()
    assert [h["key"] for h in got["search"]["hits"]] == [["a"]]  # the last commit only
    assert [r[0] for r in got["rows"]] == ['["a"]', '["b"]']
    assert got["sums"] == [(2, 2, 2, 0)]
    t.close()


def test_tombstones_survive_restarts_and_merges(tmp_path: Path) -> None:
    t = opened(tmp_path / "ix")
    t.write([doc("gone", 5), doc("kept", 1)])
    t.write([doc("gone", 6, None)])
    t.close()
    for i in range(24):  # commits enough for tantivy's merge policy to merge segments
        t = opened(tmp_path / "ix")
        t.write([doc(f"k{i:02d}-{j}", 1) for j in range(3)])
        t.close()
    index = tantivy.Index.open(str(tmp_path / "ix"))
    index.reload()
    assert index.searcher().num_segments < 26  # merged
    t = opened(tmp_path / "ix")  # a restart
    late = t.write([doc("gone", 6, "residential")])[0]  # its own revision, undeleted
    assert late.verdict == "superseded" and "deletion guard" in (late.reason or "")
    held = t.held([json.dumps(["gone"])])
    assert held is not None and held[1] == 6 and held[4] is True
    assert search(dest(tmp_path / "ix"), "residential", 100)["total"] == 1 + 24 * 3
    t.close()


KEYS = ["a-1", "b-2"]
STEP = st.tuples(st.sampled_from(KEYS), st.integers(1, 6), st.booleans(), st.integers(1, 3),
                 st.sampled_from(["x", "y"]))  # fmt: skip


@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(steps=st.lists(st.lists(STEP, min_size=1, max_size=3), min_size=1, max_size=6))
def test_the_guard_decides_as_in_a_table_for_any_history(
    tmp_path_factory: pytest.TempPathFactory, steps: list[list[tuple[str, int, bool, int, str]]]
) -> None:
    here = tmp_path_factory.mktemp("guard")
    index = opened(here / "ix")
    table = open_target(Destination("d", "s", "sqlite", str(here / "t.db"), "docs"))
    table.ensure()
    try:
        for batch in steps:
            unique = {k: (k, r, gone, rank, z) for k, r, gone, rank, z in batch}
            docs = [doc(k, r, None if gone else z, rank) for k, r, gone, rank, z in unique.values()]
            got = [(v.key, v.verdict, v.reason) for v in index.write(docs)]
            want = [(v.key, v.verdict, v.reason) for v in table.write(docs)]
            assert got == want
        assert index.rows() == [tuple(r) for r in table.rows()]
    finally:
        index.close()
        table.close()


def test_a_folder_that_is_not_its_index_is_refused_in_one_line(tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match="is not a tantivy index"):
        opened(other)
    opened(tmp_path / "ix").close()
    fewer = Destination("d", "s", "tantivy", str(tmp_path / "ix"), "documents",
                        text_fields=("zone", "owner"))  # fmt: skip
    with pytest.raises(ConfigError, match="has no text field owner"):
        open_target(fewer).ensure()


def test_without_declared_text_fields_every_string_member_is_searched(tmp_path: Path) -> None:
    plain = Destination("d", "s", "tantivy", str(tmp_path / "ix"), "documents")
    t = open_target(plain)
    t.ensure()
    body = json.dumps({"id": "a-1", "owner": "Ada Lovelace", "acres": 2})
    t.write([Doc(json.dumps(["a-1"]), 1, "M-1", 1, content_hash(body), False, body)])
    t.close()
    assert [h["key"] for h in search(plain, "lovelace", 5)["hits"]] == [["a-1"]]
    assert search(plain, "fl_text:ada", 5)["total"] == 1
