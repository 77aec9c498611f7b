"""Archive benchmark (issue 17 target 2): the compressed, delta-encoded archive.

``storage``: gen_parcels.py's daily snapshots archived one by one (the library, in this
process, the archive's defaults: zstd, each day against the day before, a keyframe
every 30) -- raw bytes vs stored bytes over the first 30 days and over all of them,
bytes per payload day, and the archive's write time per day (keyframe days and delta
days apart)::

    python bench/archive_bench.py storage --n 1000000 --days 30
    python bench/archive_bench.py storage --n 100000 --days 365   # a year, fewer rows

``backfill``: whole ``feedledger`` processes in two workspaces that differ only in
``[archive] full_frame_every`` (0: raw objects, as before issue 17; 30: the default)::

    feedledger init; feedledger source add parcels --key parcel_id --format csv
    feedledger ingest parcels day1                                  # first load
    feedledger archive add parcels day2 ... dayD                     # timed per day
    feedledger backfill parcels --from day2 --to dayD --json         # timed, paired
    feedledger ingest parcels dayD+1                                 # timed: a daily ingest

``cache``: the same compressed workspace after the first load and D-2 ``archive add``s,
then, alternately from copies of that state, day D's ``archive add`` and its ``ingest``
(each a new process) with the base cache (``cache/base/``, `archive/basecache.py`),
with it removed (the chain decoded, as before the cache), and in a raw workspace
(``full_frame_every = 0``) built the same way: ``--pairs`` rounds, the order rotated::

    python bench/archive_bench.py cache --n 1000000 --days 29 --pairs 3

The backfill runs alternate raw/compressed (``--pairs`` times), each from the same
copy of the store and state taken before the first. Results: Markdown on stdout, JSON
in ``bench/results/archive-<kind>-latest.json``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from feedledger.archive import LocalArchive
from ingest_bench import (
    BENCH_DIR,
    GEN_SCRIPT,
    RESULTS_DIR,
    RUNS_DIR,
    log,
    machine_info,
    parse_json_output,
    run_measured,
)
from resultfiles import save_results

SOURCE = "parcels"
DAY_US = 86_400_000_000
TARGET_RATIO = 0.03
TARGET_BACKFILL_FACTOR = 1.2


def generate(n: int, days: int, timeout: float, out: Path | None = None) -> list[dict[str, Any]]:
    argv = [sys.executable, GEN_SCRIPT, "--n", n, "--days", days, "--json"]
    argv += ["--out", out.resolve()] if out is not None else []  # the child runs in bench/
    out = parse_json_output(run_measured(argv, BENCH_DIR, timeout).stdout)
    found: list[dict[str, Any]] = out["days"][:days]
    return found


def load_avg() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


# -- storage ---------------------------------------------------------------------------


def storage(n: int, days: list[dict[str, Any]], every: int) -> dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix="archive-storage-", dir=RUNS_DIR))
    archive = LocalArchive(root / "archive", keyframe_every=lambda _s: every)
    rows: list[dict[str, Any]] = []
    try:
        for i, day in enumerate(days):
            data = Path(day["path"]).read_bytes()
            t0 = time.perf_counter()
            sha = archive.put_object(data, SOURCE)
            archive.put(SOURCE, data, published_at=(i + 1) * DAY_US, fetched_at=0, sha256=sha)
            wall = time.perf_counter() - t0
            stored = archive.objects.stored(sha)
            assert stored is not None
            rows.append(
                {
                    "day": i + 1,
                    "raw": len(data),
                    "stored": stored.stored_size,
                    "encoding": stored.encoding,
                    "depth": stored.depth,
                    "write_s": round(wall, 3),
                }
            )
            if (i + 1) % 10 == 0 or i + 1 == len(days):
                log(f"  day {i + 1}: {stored.encoding} {stored.stored_size:,} B, {wall:.2f}s")
        # reading the last 30 days back in order, as a backfill does, against reading the
        # same files raw with their sha256 (what a raw archive's read costs); alternated
        last = [hashlib.sha256(Path(d["path"]).read_bytes()).hexdigest() for d in days[-30:]]
        reads: dict[str, list[tuple[float, float]]] = {"compressed": [], "raw": []}
        for _ in range(2):
            for kind in ("compressed", "raw"):
                t0, c0 = time.perf_counter(), time.process_time()
                fresh = LocalArchive(root / "archive")
                for digest, day in zip(last, days[-30:], strict=True):
                    if kind == "raw":
                        hashlib.sha256(Path(day["path"]).read_bytes()).hexdigest()
                    else:
                        fresh.get(digest)
                wall, cpu = time.perf_counter() - t0, time.process_time() - c0
                reads[kind].append((round(wall, 2), round(cpu, 2)))
        read_s = min(w for w, _ in reads["compressed"])
        # the worst read, and the worst base a new process's write decodes: the payload
        # deepest in its chain, read by a process that has read nothing before
        deepest = max(range(len(rows)), key=lambda i: (rows[i]["depth"], -i))
        data = Path(days[deepest]["path"]).read_bytes()
        t0 = time.perf_counter()
        LocalArchive(root / "archive").get(hashlib.sha256(data).hexdigest())
        cold = {"day": deepest + 1, "depth": rows[deepest]["depth"]}
        cold["seconds"] = round(time.perf_counter() - t0, 2)
    finally:
        shutil.rmtree(root, ignore_errors=True)

    def window(k: int) -> dict[str, Any]:
        part = rows[:k]
        raw, stored = sum(r["raw"] for r in part), sum(r["stored"] for r in part)
        return {
            "days": len(part),
            "raw_bytes": raw,
            "stored_bytes": stored,
            "ratio": round(stored / raw, 5),
            "stored_per_day": stored // len(part),
        }

    def writes(kind: str) -> dict[str, Any]:
        times = [r["write_s"] for r in rows if r["encoding"] == kind]
        sizes = [r["stored"] for r in rows if r["encoding"] == kind]
        if not times:
            return {"count": 0}
        return {
            "count": len(times),
            "median_s": round(statistics.median(times), 3),
            "max_s": max(times),
            "median_bytes": int(statistics.median(sizes)),
        }

    return {
        "n": n,
        "keyframe_every": every,
        "windows": [window(k) for k in sorted({min(30, len(rows)), len(rows)})],
        "keyframe": writes("keyframe"),
        "delta": writes("delta"),
        "read_last_30_s": round(read_s, 2),
        "read_last_30_wall_cpu": reads,
        "cold_read_deepest": cold,
        "days": rows,
        "load_after": load_avg(),
    }


# -- backfill ----------------------------------------------------------------------------


class Workspace:
    def __init__(self, name: str, every: int, timeout: float) -> None:
        self.name, self.timeout = name, timeout
        self.root = Path(tempfile.mkdtemp(prefix=f"archive-{name}-", dir=RUNS_DIR))
        self.exe = str(Path(sys.executable).parent / "feedledger")
        self.run("init")
        config = self.root / "feedledger.toml"
        text = config.read_text().replace("[archive]\n", f"[archive]\nfull_frame_every = {every}\n")
        config.write_text(text)
        self.run("source", "add", SOURCE, "--key", "parcel_id", "--format", "csv")
        self.state = self.root / ".feedledger"
        self.saved = Path(tempfile.mkdtemp(prefix=f"archive-{name}-saved-", dir=RUNS_DIR))

    def run(self, *args: str) -> Any:
        return run_measured([self.exe, *args], self.root, self.timeout)

    def save(self) -> None:
        for entry in self.state.iterdir():
            if entry.name != "archive":
                copy = shutil.copytree if entry.is_dir() else shutil.copy2
                copy(entry, self.saved / entry.name)

    def restore(self) -> None:
        for entry in self.state.iterdir():
            if entry.name != "archive":
                (shutil.rmtree if entry.is_dir() else os.unlink)(entry)
        for entry in self.saved.iterdir():
            copy = shutil.copytree if entry.is_dir() else shutil.copy2
            copy(entry, self.state / entry.name)

    def archive_bytes(self) -> int:
        objects = self.state / "archive" / "objects"
        return sum(p.stat().st_size for p in objects.rglob("*") if p.is_file())

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
        shutil.rmtree(self.saved, ignore_errors=True)


def backfill(days: list[dict[str, Any]], pairs: int, timeout: float) -> dict[str, Any]:
    first, rest, after = days[0], days[1:-1], days[-1]
    spaces = {"raw": Workspace("raw", 0, timeout), "compressed": Workspace("zstd", 30, timeout)}
    out: dict[str, Any] = {}
    try:
        for name, ws in spaces.items():
            ws.run("ingest", SOURCE, first["path"], "--published-at", first["published_at"])
            adds = [
                ws.run("archive", "add", SOURCE, d["path"], "--published-at", d["published_at"])
                for d in rest
            ]
            out[name] = {
                "archive_add_median_s": round(statistics.median(a.wall_s for a in adds), 3),
                "archive_bytes": ws.archive_bytes(),
                "backfill_s": [],
            }
            ws.save()
            log(f"  {name}: archived {len(rest)} days, {ws.archive_bytes():,} B ({load_avg()})")
        lo, hi = rest[0]["published_at"], rest[-1]["published_at"]
        for pair in range(pairs):
            order = list(spaces) if pair % 2 == 0 else list(reversed(spaces))
            for name in order:
                ws = spaces[name]
                ws.restore()
                proc = ws.run("backfill", SOURCE, "--from", lo, "--to", hi, "--json")
                report = parse_json_output(proc.stdout)
                assert len(report["steps"]) == len(rest), report
                out[name]["backfill_s"].append(round(proc.wall_s, 2))
                # CPU seconds (user + sys) too: on a shared machine they move less than wall
                cpu = round(proc.user_s + proc.sys_s, 2)
                out[name].setdefault("backfill_cpu_s", []).append(cpu)
                out[name].setdefault("backfill_maxrss_mib", []).append(proc.maxrss_kib // 1024)
                shown = f"backfill {proc.wall_s:.2f}s, cpu {cpu}s"
                log(f"  pair {pair + 1} {name}: {shown} ({load_avg()})")
        for name in ("raw", "compressed") if pairs % 2 == 0 else ("compressed", "raw"):
            proc = spaces[name].run(
                "ingest", SOURCE, after["path"], "--published-at", after["published_at"]
            )
            out[name]["daily_ingest_s"] = round(proc.wall_s, 2)
            out[name]["daily_ingest_cpu_s"] = round(proc.user_s + proc.sys_s, 2)
            out[name]["daily_ingest_maxrss_mib"] = proc.maxrss_kib // 1024
            log(f"  {name}: daily ingest {proc.wall_s:.2f}s ({load_avg()})")
    finally:
        for ws in spaces.values():
            ws.remove()
    paired = zip(out["compressed"]["backfill_s"], out["raw"]["backfill_s"], strict=True)
    ratios = [c / r for c, r in paired]
    out["backfill_ratio_pairs"] = [round(x, 3) for x in ratios]
    out["backfill_ratio_median"] = round(statistics.median(ratios), 3)
    cpu = zip(out["compressed"]["backfill_cpu_s"], out["raw"]["backfill_cpu_s"], strict=True)
    out["backfill_cpu_ratio_pairs"] = [round(c / r, 3) for c, r in cpu]
    out["load_after"] = load_avg()
    return out


def cache(days: list[dict[str, Any]], pairs: int, timeout: float) -> dict[str, Any]:
    first, rest, target = days[0], days[1:-1], days[-1]
    spaces = {"zstd": Workspace("cache", 30, timeout), "raw": Workspace("raw", 0, timeout)}
    arms = {"no_cache": "zstd", "cache": "zstd", "raw": "raw"}
    out: dict[str, Any] = {verb: {arm: [] for arm in arms} for verb in ("add", "ingest")}
    try:
        for ws in spaces.values():
            ws.run("ingest", SOURCE, first["path"], "--published-at", first["published_at"])
            for d in rest:
                ws.run("archive", "add", SOURCE, d["path"], "--published-at", d["published_at"])
            shutil.copytree(ws.state, ws.saved / "state")
            log(f"  {ws.name}: {len(rest) + 1} days in ({load_avg()})")
        for pair in range(pairs):
            order = list(arms)[pair % 3 :] + list(arms)[: pair % 3]
            for verb in ("add", "ingest"):
                for arm in order:
                    ws = spaces[arms[arm]]
                    shutil.rmtree(ws.state)
                    shutil.copytree(ws.saved / "state", ws.state)
                    if arm == "no_cache":
                        shutil.rmtree(ws.state / "archive" / "cache")
                    args = ("archive", "add") if verb == "add" else ("ingest",)
                    proc = ws.run(*args, SOURCE, target["path"], "--published-at",
                                  target["published_at"])  # fmt: skip
                    cpu = round(proc.user_s + proc.sys_s, 2)
                    out[verb][arm].append((round(proc.wall_s, 2), cpu))
                    log(f"  pair {pair + 1} {verb} {arm}: {proc.wall_s:.2f}s cpu {cpu}s "
                        f"({load_avg()})")  # fmt: skip
    finally:
        for ws in spaces.values():
            ws.remove()
    for verb in ("add", "ingest"):
        for arm in arms:
            runs = out[verb][arm]
            out[verb][f"{arm}_median_wall_s"] = statistics.median(w for w, _ in runs)
            out[verb][f"{arm}_median_cpu_s"] = statistics.median(c for _, c in runs)
    out["load_after"] = load_avg()
    return out


# -- report ------------------------------------------------------------------------------


def markdown(kind: str, result: dict[str, Any]) -> str:
    if kind == "cache":
        rows = ["| day D, a new process | compressed, no cache | compressed, cache | raw |"]
        rows.append("|---|---|---|---|")
        for verb, label in (("add", "archive add"), ("ingest", "daily ingest")):
            r = result[verb]
            rows.append(f"| {label} | {r['no_cache']} | {r['cache']} | {r['raw']} |")
        return "\n".join(rows)
    if kind == "storage":
        lines = [
            f"n = {result['n']:,} parcels a day, keyframe every {result['keyframe_every']}",
            "",
            "| days | raw | stored | stored / raw | stored per payload day |",
            "|---:|---:|---:|---:|---:|",
        ]
        for w in result["windows"]:
            lines.append(
                f"| {w['days']} | {w['raw_bytes'] / 1e6:,.0f} MB | "
                f"{w['stored_bytes'] / 1e6:,.1f} MB | {w['ratio']:.2%} | "
                f"{w['stored_per_day'] / 1e3:,.0f} kB |"
            )
        k, d = result["keyframe"], result["delta"]
        lines.append("")
        lines.append(
            f"write per day: keyframe median {k.get('median_s')} s ({k.get('count')} days), "
            f"delta median {d.get('median_s')} s ({d.get('count')} days); reading the last "
            f"30 days back in order (a new process): {result['read_last_30_s']} s; the "
            f"deepest payload alone (depth {result['cold_read_deepest']['depth']}), a new "
            f"process: {result['cold_read_deepest']['seconds']} s; (wall, cpu) s of reading "
            f"the last 30 days: {result['read_last_30_wall_cpu']}"
        )
        return "\n".join(lines)
    raw, zst = result["raw"], result["compressed"]
    return "\n".join(
        [
            "| archive | bytes | archive add (median) | backfill (s, paired) | daily ingest |",
            "|---|---:|---:|---:|---:|",
            f"| raw | {raw['archive_bytes'] / 1e6:,.0f} MB | {raw['archive_add_median_s']} s | "
            f"{raw['backfill_s']} | {raw.get('daily_ingest_s')} s |",
            f"| compressed | {zst['archive_bytes'] / 1e6:,.1f} MB | "
            f"{zst['archive_add_median_s']} s | {zst['backfill_s']} | "
            f"{zst.get('daily_ingest_s')} s |",
            "",
            f"backfill compressed / raw: {result['backfill_ratio_pairs']} (median "
            f"{result['backfill_ratio_median']}, target <= {TARGET_BACKFILL_FACTOR}); CPU "
            f"seconds compressed / raw: {result['backfill_cpu_ratio_pairs']}; CPU s raw "
            f"{raw['backfill_cpu_s']}, compressed {zst['backfill_cpu_s']}; daily ingest CPU s "
            f"raw {raw.get('daily_ingest_cpu_s')}, compressed {zst.get('daily_ingest_cpu_s')}",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("kind", choices=["storage", "backfill", "cache"])
    p.add_argument("--n", type=int, default=1_000_000, help="parcels a day (%(default)s)")
    p.add_argument("--days", type=int, default=30, help="daily snapshots (%(default)s)")
    p.add_argument("--every", type=int, default=30, help="keyframe every K (%(default)s)")
    p.add_argument("--pairs", type=int, default=2, help="paired backfill runs (%(default)s)")
    p.add_argument("--timeout", type=float, default=3600.0)
    p.add_argument("--data", type=Path, help="gen_parcels.py --out (default: its cache)")
    args = p.parse_args(argv)
    RUNS_DIR.mkdir(parents=True, exist_ok=True)
    log(f"archive_bench {args.kind}: n={args.n} days={args.days} (load {load_avg()})")
    extra = {"backfill": 2, "cache": 1}.get(args.kind, 0)  # the first load and the day after
    days = generate(args.n, args.days + extra, args.timeout, args.data)
    if args.kind == "storage":
        result = storage(args.n, days, args.every)
    elif args.kind == "cache":
        result = cache(days, args.pairs, args.timeout)
    else:
        result = backfill(days, args.pairs, args.timeout)
    result = {
        "kind": args.kind,
        "n": args.n,
        "days": args.days,
        "load_before_after": result.get("load_after"),
        "machine": machine_info(),
        **result,
    }
    tag = f"archive-{args.kind}-{args.n}-{args.days}"
    latest = save_results(RESULTS_DIR, tag, json.dumps(result, indent=2) + "\n")
    print(markdown(args.kind, result))
    log(f"results: {latest}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
