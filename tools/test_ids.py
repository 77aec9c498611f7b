"""Compare a tree's test ids with a baseline, through the rename map of moved tests.

    python tools/test_ids.py BASELINE [--tree DIR] [--renames tools/test_renames.json]

BASELINE lists the old tree's test ids, one a line (`python -m pytest --collect-only -q
tests`). The ids of DIR (default: this checkout) are collected the same way. Each old id
is carried to its new name by tools/test_renames.json, whose keys are old node ids or
their prefixes: a file (`tests/test_x.py`) or a test function (`tests/test_x.py::test_f`,
which also renames its parametrized ids `test_f[...]`); the longest key wins. Prints the
ids lost (in the baseline, renamed, but not collected) and the ids new (collected but in
no renamed baseline id), and exits 1 if any id is lost.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def collect(tree: Path) -> list[str]:
    """The test ids pytest collects in `tree`'s tests/ folder, with `tree`'s src/ first."""
    env = dict(os.environ, PYTHONPATH=str(tree / "src"))
    # --verbosity=-1 (one id a line) whatever -q the tree's addopts already give
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "--verbosity=-1",
         "-p", "no:cacheprovider", "tests"],
        cwd=tree, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    ids = [line.strip() for line in done.stdout.splitlines() if "::" in line]
    if done.returncode != 0 or not ids:
        sys.stderr.write(done.stdout[-4000:] + done.stderr[-4000:])
        raise SystemExit(f"collecting {tree}/tests failed (exit {done.returncode})")
    return ids


def renamed(test_id: str, renames: dict[str, str]) -> str:
    """`test_id` under its new name: the longest key of `renames` that is its file, its
    function (parameters and all) or the whole id, replaced by that key's value."""
    path, _, rest = test_id.partition("::")
    function = rest.split("[", 1)[0]
    for key in (test_id, f"{path}::{function}", path):
        if key in renames:
            return renames[key] + test_id[len(key) :]
    return test_id


def compare(old: list[str], new: list[str], renames: dict[str, str]) -> tuple[list[str], list[str]]:
    """(ids lost, ids new): the renamed old ids not collected (or renamed onto another old
    id's new name), the collected ids no old id was renamed to."""
    collected = set(new)
    expected: dict[str, str] = {}
    lost = []
    for old_id in old:
        new_id = renamed(old_id, renames)
        if new_id not in collected or new_id in expected:
            lost.append(f"{old_id} -> {new_id}")
        expected.setdefault(new_id, old_id)
    added = [test_id for test_id in new if test_id not in expected]
    return sorted(lost), sorted(added)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("baseline", type=Path, help="the old tree's test ids, one a line")
    parser.add_argument("--tree", type=Path, default=ROOT, help="the checkout to collect")
    parser.add_argument(
        "--renames", type=Path, default=ROOT / "tools" / "test_renames.json",
        help="old node id (or file / function prefix) -> new",
    )  # fmt: skip
    args = parser.parse_args(argv)
    old = [line.strip() for line in args.baseline.read_text().splitlines() if "::" in line]
    renames: dict[str, str] = json.loads(args.renames.read_text(encoding="utf-8"))
    new = collect(args.tree.resolve())
    lost, added = compare(old, new, renames)
    for line in lost:
        print(f"lost: {line}")
    for line in added:
        print(f"new: {line}")
    print(
        f"{len(old)} baseline ids, {len(new)} collected, {len(renames)} renames: "
        f"{len(lost)} lost, {len(added)} new"
    )
    return 1 if lost else 0


if __name__ == "__main__":
    raise SystemExit(main())
