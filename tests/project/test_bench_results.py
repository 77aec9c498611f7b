"""A benchmark run overwrites bench/results/<bench>-latest.json (kept in
git) and leaves a stamped copy that git ignores."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

from resultfiles import save_results  # noqa: E402


def test_a_run_overwrites_the_latest_file_and_keeps_a_stamped_copy(tmp_path: Path) -> None:
    first = save_results(tmp_path, "sync", '{"run": 1}\n', stamp="20260101T000000Z")
    second = save_results(tmp_path, "sync", '{"run": 2}\n', stamp="20260102T000000Z")
    assert first == second == tmp_path / "sync-latest.json"
    assert second.read_text() == '{"run": 2}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "sync-20260101T000000Z.json",
        "sync-20260102T000000Z.json",
        "sync-latest.json",
    ]


def test_git_keeps_only_the_latest_file_per_benchmark() -> None:
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")

    def ignored(name: str) -> bool:
        path = f"bench/results/{name}"
        done = subprocess.run(
            ["git", "check-ignore", "--no-index", "-q", path], cwd=ROOT, check=False
        )
        return done.returncode == 0

    assert ignored("sync-20261129T164303Z.json")
    assert not ignored("sync-latest.json")
    tracked = subprocess.run(
        ["git", "ls-files", "bench/results"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    assert tracked and all(name.endswith("-latest.json") for name in tracked)
    benches = [Path(name).name.removesuffix("-latest.json") for name in tracked]
    assert len(benches) == len(set(benches))
