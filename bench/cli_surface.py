"""The CLI's surface as one text file, to diff a tree before and after a change.

    PYTHONPATH=/tmp/old/src .venv/bin/python bench/cli_surface.py old.txt
    PYTHONPATH=$PWD/src .venv/bin/python bench/cli_surface.py new.txt
    diff old.txt new.txt        # empty: the --help texts and the outputs did not change

It measures the feedledger that the running interpreter imports (PYTHONPATH picks the
tree) and writes, in a fixed order:

1. the `--help` text of the root and of every group and command in the command tree
   (walked through click's `list_commands`/`get_command`, so lazily loaded commands are
   found too), a group called without a command, `--version`, and a few usage errors
   (an unknown command, a missing argument, an unknown option);
2. a small deterministic workspace in a temporary folder (init, sources, CSV ingests
   with fixed `--published-at` dates, an archived payload, a gap, a freeze, a backfill
   and a replay, a retraction, a held run and its review, a subscriber and its outbox, a
   destination, a sync and a manifest, the demo) and every command that takes `--json`,
   with and without it: each command's exit code, stdout and stderr.

Every command runs as its own process (`python -m feedledger ...`) with TERM=dumb,
NO_COLOR=1, TZ=UTC and COLUMNS=100 (400 for the workspace's commands: their tables are
never wrapped or cut, so an id or a time is whole and its placeholder exact). Values
that change from run to run are replaced by placeholders: run ids (whole or their first
8 characters) and other random ids by `<id N>` (numbered by first appearance: the same
id, the same placeholder), times of the clock (transaction times, `started_at`) by
`<now>`, the temporary folder by `<tmp>`, durations, rates and process ids by `<n>`,
dates near the day the run started by `<today-N>`. Source f's calendar is relative to
that day, so two runs compare only if neither crossed midnight UTC (a run takes about
10 minutes on an idle machine).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ENV_DROP = ("FEEDLEDGER_CONFIG", "FEEDLEDGER_PROFILE", "FEEDLEDGER_TIMING", "FEEDLEDGER_DEBUG")
HELP_COLUMNS = 100
# the workspace's commands print tables at their natural width (no cell wrapped or cut,
# so a run id or a time is whole on one line and its placeholder is exact)
TABLE_COLUMNS = 400


def command_tree() -> list[list[str]]:
    """Every command and group path below the root (the root is `[]`), depth first in
    the order `--help` lists them."""
    import typer.main

    from feedledger.cli.main import app

    root = typer.main.get_command(app)
    paths: list[list[str]] = []

    def walk(cmd: Any, path: list[str], parent: Any) -> None:
        paths.append(path)
        ctx = cmd.context_class(cmd, info_name=path[-1] if path else "feedledger", parent=parent)
        if not hasattr(cmd, "list_commands"):
            return
        for name in cmd.list_commands(ctx):
            sub = cmd.get_command(ctx, name)
            if sub is not None and not sub.hidden:
                walk(sub, [*path, name], ctx)

    walk(root, [], None)
    return paths


class Runner:
    """Runs `python -m feedledger ARGS` in `cwd` and records the normalised result."""

    def __init__(self, tmp: Path, columns: int) -> None:
        self.tmp = tmp
        env = {k: v for k, v in os.environ.items() if k not in ENV_DROP}
        env.update(COLUMNS=str(columns), LINES="40", TERM="dumb", NO_COLOR="1", TZ="UTC")
        env.pop("FORCE_COLOR", None)
        self.env = env

    def run(self, args: Sequence[str], cwd: Path | None = None) -> tuple[int, str, str]:
        done = subprocess.run(
            [sys.executable, "-m", "feedledger", *args],
            capture_output=True,
            text=True,
            cwd=cwd or self.tmp,
            env=self.env,
            timeout=300,
            check=False,
        )
        return done.returncode, done.stdout, done.stderr


def record(args: Sequence[str], result: tuple[int, str, str]) -> str:
    code, out, err = result
    text = f"$ feedledger {' '.join(args)}\n[exit {code}]\n{out}"
    if not out.endswith("\n") and out:
        text += "\n[no newline at end of stdout]\n"
    if err:
        text += "[stderr]\n" + err
        if not err.endswith("\n"):
            text += "\n[no newline at end of stderr]\n"
    return text + "\n"


def help_section(runner: Runner, jobs: int) -> Iterator[str]:
    paths = command_tree()
    calls = [[*p, "--help"] for p in paths]
    groups = [p for p in paths if p and _is_group(p, paths)]
    calls += [[], *groups]  # a group without a command shows its help
    calls += [
        ["--version"],
        ["snapsot"],  # an unknown command (with a suggestion)
        ["source", "ad"],
        ["no-such-command"],
        ["ingest"],  # a missing argument
        ["--bogus"],
        ["history", "p", "--bogus"],
    ]
    with ThreadPoolExecutor(jobs) as pool:
        results = list(pool.map(runner.run, calls))
    yield f"# command tree: {len(paths)} commands and groups\n"
    for path in paths:
        yield "  " * len(path) + (path[-1] if path else "feedledger") + "\n"
    yield "\n"
    for args, result in zip(calls, results, strict=True):
        yield record(args, result)


def _is_group(path: list[str], paths: list[list[str]]) -> bool:
    return any(len(p) > len(path) and p[: len(path)] == path for p in paths)


def write_csv(path: Path, rows: list[list[str]]) -> Path:
    path.write_text("\n".join(",".join(r) for r in rows) + "\n", encoding="utf-8")
    return path


HEADER = ["id", "zoning", "area"]
DAY1 = [HEADER, ["1", "R1", "10"], ["2", "R2", "20"], ["3", "C1", "30"], ["4", "C2", "40"]]
DAY1B = [HEADER, ["1", "R1", "11"], ["2", "R2", "20"], ["3", "C1", "30"], ["4", "C2", "40"]]
DAY2 = [HEADER, ["1", "R1", "10"], ["2", "R3", "20"], ["3", "C1", "30"], ["5", "MU", "50"]]
DAY4 = [HEADER, ["1", "R1", "11"], ["2", "R3", "20"], ["5", "MU", "50"], ["6", "I1", "60"]]


# the day the run started: the fetching source's files are dated from it, and the
# normalisation writes dates near it as `<today-N>` (a run across midnight UTC differs)
TODAY = datetime.now(UTC).date()


def days_ago(n: int) -> str:
    """A date relative to today (the fetching source's publications must be recent)."""
    return str(TODAY - timedelta(days=n))


def workspace_section(runner: Runner, out: list[str]) -> None:
    """The scenario: each step is one process; the ids it needs later are read back from
    `--json` output. Source p is fed by hand (fixed dates in 2024), f fetches from a
    folder of dated files (recent dates), h holds a run for review."""
    import json

    ws = runner.tmp / "ws"
    ws.mkdir()
    feed = runner.tmp / "feed"
    feed.mkdir()
    drops = runner.tmp / "drops"
    drops.mkdir()

    def step(*args: str, cwd: Path | None = None) -> tuple[int, str, str]:
        result = runner.run(args, cwd=cwd or ws)
        out.append(record(args, result))
        return result

    def both(*args: str) -> Any:
        """The command without, then with --json; the JSON parsed (None if it failed)."""
        step(*args)
        return as_json(step(*args, "--json"))

    def as_json(result: tuple[int, str, str]) -> Any:
        code, text, _ = result
        try:
            return json.loads(text) if code == 0 else None
        except ValueError:
            return None

    def run_ids(source: str) -> list[str]:
        runs = as_json(runner.run(["runs", source, "--json"], cwd=ws)) or []
        return [r["run_id"] for r in runs]

    def show_file(path: Path) -> None:
        text = path.read_text(encoding="utf-8") if path.exists() else "(absent)\n"
        out.append(f"[{path.relative_to(runner.tmp)}]\n{text}\n")

    a1 = write_csv(drops / "p_2024-03-01.csv", DAY1)
    a1b = write_csv(drops / "p_2024-03-01b.csv", DAY1B)
    a2 = write_csv(drops / "p_2024-03-02.csv", DAY2)
    a4 = write_csv(drops / "p_2024-03-04.csv", DAY4)
    for n, rows in ((4, DAY1), (3, DAY2), (2, DAY2), (1, DAY4)):
        write_csv(feed / f"f_{days_ago(n)}.csv", rows)

    # the workspace and its sources
    step("init", "--json")
    step("init")  # again: refused
    both("db", "current")
    both("db", "upgrade")
    step("source", "add", "p", "--key", "id", "--json")
    step("source", "add", "f", "--key", "id", "--fetch", str(feed))
    step(
        *("source", "add", "h", "--key", "id", "--hold-factor", "1.5", "--hold-min-changes"),
        *("1", "--mass-delete-threshold", "0.9", "--json"),
    )
    step("source", "add", "bad", "--key", "id", "--cadence", "sometimes")  # refused
    step("source", "add", "p", "--key", "id")  # exists
    both("source", "list")

    # source p: ingests by hand
    step("ingest", "p", str(a1), "--published-at", "2024-03-01")
    step("ingest", "p", str(a1), "--published-at", "2024-03-01", "--json")  # already applied
    step("ingest", "p", str(a2), "--published-at", "2024-03-02", "--json")
    step("ingest", "p", str(a4), "--published-at", "2024-03-04")
    step("ingest", "p", str(a4), "--published-at", "2099-01-01")  # in the future: refused
    step("ingest", "nope", str(a4), "--published-at", "2024-03-05")  # no such source
    step("ingest", "p", str(drops / "none.csv"), "--published-at", "2024-03-05")  # no file
    p_runs = run_ids("p")
    both("runs", "p")
    for rid in p_runs[:2]:
        both("changes", "--run", rid)
    both("watermark", "p")
    both("verify", "p")
    both("history", "p", "2")
    both("history", "p", "4", "--all")
    both("history", "p", "3", "--with-gaps")
    both("asof", "p", "2", "--valid", "2024-03-01")
    both("asof", "p", "2", "--valid", "2024-03-03")
    both("asof", "p", "4", "--valid", "2024-03-03")
    both("asof", "p", "2", "--valid", "2024-03-03", "--known-at", "2024-03-01")
    both("asof", "p", "99", "--valid", "2024-03-03")
    for fmt in ("csv", "jsonl", "json"):
        step("snapshot", "p", "--valid", "2024-03-03", "--format", fmt, "-o", "-")
    step("snapshot", "p", "--valid", "2024-03-03", "-o", "snap.csv")
    show_file(ws / "snap.csv")

    # gaps, freeze, thaw, assess
    step("gap", "add", "p", "--from", "2024-03-03", "--to", "2024-03-03", "--reason", "outage")
    step("gap", "add", "p", "--from", "2024-03-05", "--to", "2024-03-06", "--reason", "x", "--json")
    step("gap", "add", "p", "--from", "2024-03-01", "--to", "2024-03-02", "--reason", "observed")
    both("gaps", "p")
    both("gaps", "p", "--all")
    both("history", "p", "3", "--with-gaps")
    both("freeze", "p", "--reason", "checking")
    step("ingest", "p", str(a4), "--published-at", "2024-03-08")  # frozen: refused
    both("thaw", "p")
    both("assess", "p", "--from", "2024-03-01", "--to", "2024-03-08", "--no-fetch")

    # the archive
    both("archive", "list", "p")
    step("archive", "add", "p", str(a1b), "--published-at", "2024-03-09", "--json")
    step("archive", "add", "p", str(a2), "--published-at", "2024-03-10")
    both("archive", "list", "p", "--from", "2024-03-02")
    both("archive", "list", "p", "--rejected")
    both("archive", "verify")
    both("archive", "compact", "p")
    both("archive", "reindex")
    both("assess", "p", "--from", "2024-03-08", "--to", "2024-03-10", "--no-fetch")
    both("backfill", "p", "--from", "2024-03-09", "--to", "2024-03-09", "--no-fetch")
    both("replay", "p", "--from", "2024-03-10")
    both("runs", "p")

    # source f, fetched from a folder of dated files
    both("assess", "f", "--from", days_ago(5), "--to", days_ago(1))
    step("backfill", "f", "--from", days_ago(4), "--to", days_ago(3), "--json")
    step("backfill", "f", "--from", days_ago(4), "--to", days_ago(3))  # nothing to do
    step("run", "f", "--json")  # the newer ones, as one backfill run
    step("run", "f")  # nothing new
    step("run", "p")  # no --fetch
    both("runs", "f")
    both("history", "f", "2", "--all")
    both("watermark", "f")

    # source h: a run held for review
    step("ingest", "h", str(a1), "--published-at", "2024-03-01", "--json")
    step("ingest", "h", str(a1b), "--published-at", "2024-03-02")
    held = as_json(step("ingest", "h", str(a4), "--published-at", "2024-03-04", "--json"))
    both("runs", "h")
    held_id = (held or {}).get("run_id")
    if held_id:
        both("asof", "h", "6", "--valid", "2024-03-05")
        step("review", held_id)
        step("review", held_id, "--release", "--json")
        step("review", held_id, "--release")  # no longer held

    # notifications
    both("notify", "status")
    step("subscriber", "add", "s", "--file", str(runner.tmp / "s.jsonl"), "--sources", "p")
    step("subscriber", "add", "t", "--file", str(runner.tmp / "t.jsonl"), "--json")
    step("subscriber", "add", "s", "--file", str(runner.tmp / "s.jsonl"))  # exists
    both("subscriber", "list")
    step("ingest", "p", str(a1), "--published-at", "2024-03-11", "--json")
    both("notify", "status")
    step("notify", "dispatch", "--once", "--json")
    step("notify", "dispatch", "--once")
    both("notify", "retry")
    if p_runs:
        step("notify", "correction", p_runs[0], "--message", "wrong zoning", "--json")
        step("notify", "correction", p_runs[1], "--message", "wrong area")
    step("notify", "dispatch", "--once")
    show_file(runner.tmp / "s.jsonl")
    show_file(runner.tmp / "t.jsonl")

    # retraction
    p_runs = run_ids("p")
    if len(p_runs) >= 2:
        step("retract", p_runs[-1])
        step("retract", p_runs[-1], "--json")  # again: nothing standing
        step("retract", p_runs[-2], "--json")
        both("history", "p", "1", "--all")
        both("notify", "status")
        both("runs", "p")

    # destinations, manifests, sync
    dest = str(runner.tmp / "dest.db")
    step("destination", "add", "d", "--source", "p", "--sqlite", dest, "--table", "parcels")
    step("destination", "add", "e", "--source", "f", "--sqlite", dest, "--table", "f", "--json")
    step("destination", "add", "d", "--source", "p", "--sqlite", dest, "--table", "x")  # exists
    both("destination", "list")
    both("sync", "d", "--live", "--once")
    step("sync", "d")  # neither --live nor --manifest
    step("manifest", "create", "m", "--source", "p")
    step("manifest", "create", "m2", "--source", "f", "--json")
    both("manifest", "show", "m")
    both("manifest", "list")
    both("sync", "d", "--manifest", "m")
    both("sync-explain", "d", "2")
    both("sync-explain", "d", "99")
    both("reconcile", "d", "--manifest", "m")
    step("sync", "e", "--live", "--once", "--json")
    both("reconcile", "e", "--manifest", "m2")
    step("destination", "remove", "e")
    both("destination", "list")

    # the others
    both("health", "--at", "2024-03-05T12:00:00Z")
    both("health", "p", "--at", "2024-03-12T12:00:00Z")
    step("scheduler", "--once", "--no-dispatch")
    step("subscriber", "remove", "t")
    step("subscriber", "remove", "s", "--json")
    step("source", "remove", "h")
    both("source", "list")

    # the demo (its own workspace)
    demo = runner.tmp / "demo"
    step("demo", "--dir", str(demo), cwd=runner.tmp)
    demo_config = str(demo / "feedledger.toml")
    both("--config", demo_config, "runs", "larimer")
    both("--config", demo_config, "history", "zoning", "0714-22-1")


UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
# a date, optionally with a time of day, seconds, a fraction and an offset
TIMESTAMP = re.compile(
    r"(\d{4}-\d{2}-\d{2})(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?"
)
LOCAL_PORT = re.compile(r"\b(127\.0\.0\.1|localhost):\d{2,5}\b")
# durations and process ids, in JSON and in text ("... (0.19 s)")
VOLATILE_NUMBER = re.compile(
    r'("(?:seconds|duration_s|elapsed_s|holder_pid|pid|oldest_pending_age_s)": )[0-9.]+'
    r"|(\()[0-9.]+( s\))"
)
MESSAGE_ID = re.compile(r"\bmsg_[0-9a-f]{32}\b")
# a refused payload's file: its sha256's first 16 characters and a random suffix
REJECTED_FILE = re.compile(r"(/rejected/[^/\s\"]+/[0-9a-f]{16})-[0-9a-f]{8}\b")
# rates and elapsed times in progress lines ("0.2 payloads/s; 6 s elapsed")
PROGRESS = re.compile(r"\b[0-9.]+( \w+/s\b|( s)? elapsed| s\b(?=;|$))", re.M)
# random ids other than run ids: the 16 hex digits of a manifest's id...
HEX16_ID = re.compile(r'"\w*_id": "([0-9a-f]{16})"')


def normalise(text: str, tmp: Path) -> str:
    """Placeholders for what changes from run to run (see the module docstring)."""
    text = text.replace(str(tmp.resolve()), "<tmp>").replace(str(tmp), "<tmp>")
    text = text.replace(str(Path(sys.executable).parent), "<bin>")
    uuids = re.findall(UUID, text)
    short = {u[:8]: u for u in uuids}
    others = "|".join(sorted(set(HEX16_ID.findall(text))))
    numbers: dict[str, int] = {}

    def ident(match: re.Match[str]) -> str:
        token = match.group(0)
        full = token if len(token) in (16, 36) else short[token[:8]]
        cut = "…" if token.endswith("…") else ""
        return f"<id {numbers.setdefault(full, len(numbers) + 1)}>{cut}"

    # a whole id, or the first 8 characters of one (tables), perhaps cut further on (…)
    patterns = [UUID]
    if short:
        prefixes = "|".join(map(re.escape, short))
        patterns.append(rf"(?<![0-9a-f])(?:{prefixes})(?:[0-9a-f-]*…|(?![0-9a-f-]))")
    if others:
        patterns.append(rf"(?<![0-9a-f])(?:{others})(?![0-9a-f])")
    text = re.sub("|".join(patterns), ident, text)
    near = {str(TODAY + timedelta(days=d)): d for d in range(-40, 2)}

    def stamp(match: re.Match[str]) -> str:
        """A time of the clock (a date near today with a time of day) is `<now>`; a date
        near today (the fetching source's publications, perhaps at 00:00) is
        `<today-N>` followed by the rest."""
        whole, day = match.group(0), match.group(1)
        if day not in near:
            return whole
        rest = whole[len(day) :]
        if rest and not re.match(r"[T ]00:00(?::00(?:\.0+)?)?(?:Z|[+-]00:?00)?$", rest):
            return "<now>"
        return f"<today{near[day]:+d}>{rest}".replace("+0>", ">")

    text = TIMESTAMP.sub(stamp, text)
    text = VOLATILE_NUMBER.sub(lambda m: f"{m.group(1) or m.group(2)}<n>{m.group(3) or ''}", text)
    text = MESSAGE_ID.sub("msg_<id>", text)
    text = REJECTED_FILE.sub(r"\1-<id>", text)
    text = PROGRESS.sub(r"<n>\1", text)
    return LOCAL_PORT.sub(r"\1:<port>", text)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="the file to write")
    parser.add_argument("--only", choices=("help", "workspace"), help="one section only")
    parser.add_argument("--jobs", type=int, default=4, help="--help processes at once")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = parser.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="fl-surface-"))
    try:
        parts: list[str] = []
        if args.only in (None, "help"):
            parts += help_section(Runner(tmp, HELP_COLUMNS), args.jobs)
        if args.only in (None, "workspace"):
            workspace_section(Runner(tmp, TABLE_COLUMNS), parts)
    finally:
        args.out.write_text(normalise("".join(parts), tmp), encoding="utf-8")
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
