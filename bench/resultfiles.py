"""Where a benchmark's results go: `bench/results/<bench>-latest.json`, overwritten by
each run and kept in git (the figures bench/README.md quotes), plus a copy stamped
`<bench>-<UTC timestamp>.json` that stays on the machine (git-ignored) for comparing
runs there. Earlier stamped files are in git history (see bench/README.md)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path


def save_results(results_dir: Path, bench: str, text: str, stamp: str | None = None) -> Path:
    """Write `text` as this run's results of `bench`; returns the latest file's path."""
    results_dir.mkdir(parents=True, exist_ok=True)
    stamp = stamp or datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    (results_dir / f"{bench}-{stamp}.json").write_text(text)
    latest = results_dir / f"{bench}-latest.json"
    tmp = latest.with_suffix(".json.tmp")
    tmp.write_text(text)
    tmp.replace(latest)
    return latest
