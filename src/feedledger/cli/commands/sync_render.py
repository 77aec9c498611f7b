"""Human output of the destination commands (`reconcile`, `manifest show`, `sync`,
`sync-explain`): lines and Rich tables, never raw Python values. `--json` is rendered
elsewhere (the objects' own `to_json`)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from rich.text import Text

from feedledger.cli.common import out, table
from feedledger.model.destination import is_deletion

SHOWN = 10  # findings listed per kind (all are counted)
FINDINGS = ("missing", "extra", "duplicates", "stale", "wrong_generation", "unresolved")


def key_text(key: Any) -> str:
    """A key as its value (one field) or its fields joined with ', ' (compound)."""
    if isinstance(key, list):
        return ", ".join(str(k) for k in key) if len(key) != 1 else str(key[0])
    return str(key)


def counts_text(outcomes: dict[str, int]) -> str:
    return ", ".join(f"{k} {v:,}" for k, v in outcomes.items())


def _value(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    return str(value)


def reconcile(data: dict[str, Any]) -> None:
    verdict = "complete" if data["complete"] else "NOT complete"
    out.print(
        f"{data['destination']} / {data['manifest']}: {verdict}; population "
        f"{data['population']:,}, outcomes {data['outcomes_total']:,} "
        f"({counts_text(data['outcomes'])}); buckets {data['buckets']:,}, differing "
        f"{data['buckets_differing']:,}"
    )
    for kind in FINDINGS:
        items = data[kind]
        if not items:
            continue
        columns = [c for c in _finding_columns(items) if c != "key"]
        rows = [[key_text(i.get("key")), *(_value(i.get(c)) for c in columns)]
                for i in items[:SHOWN]]  # fmt: skip
        more = f" (first {SHOWN} shown)" if len(items) > SHOWN else ""
        table(f"{kind}: {len(items):,}{more}", ["key", *columns], rows)
    n = data.get("missing_verdicts_count", 0)
    if n:
        shown = data["missing_verdicts"][:SHOWN]
        out.print(
            f"missing verdicts: {n:,} key(s) of the manifest have no recorded outcome "
            f"(repeat `feedledger sync {data['destination']} --manifest {data['manifest']}`): "
            + "; ".join(key_text(k) for k in shown)
            + ("; …" if n > len(shown) else "")
        )


def _finding_columns(items: list[dict[str, Any]]) -> list[str]:
    columns: list[str] = []
    for item in items[:SHOWN]:
        for c in item:
            if c not in columns:
                columns.append(c)
    return columns


def manifest(data: dict[str, Any]) -> None:
    boundary = data["source_boundary"]
    rows = [
        ["manifest", f"{data['name']} ({data['manifest_id']})"],
        ["source", data["source"]],
        ["created at", data["created_at"]],
        ["population", f"{data['population']:,} keys"],
        ["kind", data["kind"]],
        ["transform generation", data["transform_generation"]],
        ["boundary watermark", _value(boundary["watermark_published_at"]) or "(none)"],
        ["boundary payload", _value(boundary["payload_id"]) or "(none)"],
        ["boundary commit sequence", _value(boundary["txn_seq"]) or "(none)"],
        ["known at", boundary["known_at"]],
        ["keys from", data["keys_from"] or "(every key live at creation)"],
    ]
    table(f"manifest {data['name']}", ["field", "value"], rows)


def sync(data: dict[str, Any]) -> None:
    line = f"{data['destination']}: {data['status']}; {counts_text(data['outcomes'])}"
    if data.get("manifest") is None:
        line += f"; live {data['live_written']:,} key(s) written"
    else:
        line += f"; live {data['live_written']:,}"
    out.print(line)


def rate_column(unit: str) -> Any:
    """A Rich progress column: the task's rate in `unit`s a second (blank until known)."""
    from rich.progress import ProgressColumn  # lazy: bars only

    class Rate(ProgressColumn):
        def render(self, task: Any) -> Text:
            speed = task.finished_speed or task.speed
            return Text("" if speed is None else f"{speed:,.1f} {unit}/s", style="cyan")

    return Rate()


def resuming(manifest: str, batch: int, batches: int, done: int, population: int) -> str:
    """The line a resumed rebuild starts with."""
    return (
        f"resuming {manifest} at batch {batch:,} of {batches:,} ({done:,} of "
        f"{population:,} keys already acknowledged)"
    )


class CountLog:
    """Progress of a count of `unit`s as plain lines (stderr not a terminal): one when
    `every_s` seconds have passed since the last one, and at the end, with the rate."""

    def __init__(
        self,
        label: str,
        unit: str,
        every_s: float,
        write: Callable[[str], None],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.label, self.unit, self.every_s, self.write, self.clock = (
            label, unit, every_s, write, clock,
        )  # fmt: skip
        self.started = clock()
        self.last = self.started

    def __call__(self, done: int, total: int, note: str = "") -> None:
        now = self.clock()
        if now - self.last < self.every_s and done < total:
            return
        self.last = now
        took = now - self.started
        share = f" ({100 * done / total:.0f}%)" if total else ""
        rate = f"; {done / took:,.1f} {self.unit}/s" if took > 0 else ""
        self.write(
            f"{self.label}: {done:,} of {total:,} {self.unit}{share}{rate}; {took:.0f} s elapsed"
            + (f"; {note}" if note else "")
        )


class ProgressLog:
    """Rebuild progress as plain lines (stderr not a terminal: a log, a cron mail): one
    line when `every_s` seconds have passed since the last one (and at the end). The
    clock and the writer are parameters (tests)."""

    def __init__(
        self,
        label: str,
        every_s: float,
        write: Callable[[str], None],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.label, self.every_s, self.write, self.clock = label, every_s, write, clock
        self.started = clock()
        self.last = self.started

    def __call__(self, done: int, total: int, lag: float) -> None:
        now = self.clock()
        if now - self.last < self.every_s and done < total:
            return
        self.last = now
        share = f" ({100 * done / total:.0f}%)" if total else ""
        self.write(
            f"{self.label}: {done:,} of {total:,} keys{share}; live lag {lag:.1f} s; "
            f"{now - self.started:.0f} s elapsed"
        )


def explain(data: dict[str, Any]) -> None:
    held = data["held"]
    where = f"{data['destination']} ({data['source']}) key {key_text(data['key'])}"
    if held is None:
        out.print(f"{where}: no row held")
    else:
        state = "document"
        if held["deleted"]:
            state = (
                f"tombstone: deleted after revision {held['revision']}"
                if is_deletion(True, held["content_hash"])
                else "tombstone: left out by the transform"
            )
        out.print(
            f"{where}: holds revision {held['revision']}, generation {held['generation']} "
            f"({state}, content {held['content_hash']}, written {held['written_at']})"
        )
    last = data["last"]
    if last is not None:
        route = "live route" if last["scope"] == "live" else f"rebuild {last['manifest']}"
        inc = last["incoming"]
        out.print(
            f"last verdict: {last['verdict']} ({route}, {last['at']}): incoming revision "
            f"{_value(inc['revision'])}, generation {_value(inc['generation'])}"
            + (f": {last['reason']}" if last["reason"] else "")
        )
    rows = [
        [
            "live" if v["scope"] == "live" else f"manifest {v['manifest']}",
            v["verdict"],
            _value(v["incoming"]["revision"]),
            _value(v["incoming"]["generation"]),
            _value(v["incoming"]["content_hash"]),
            v["at"],
            str(v["attempts"]),
            _value(v["reason"]),
        ]
        for v in data["verdicts"]
    ]
    if rows:
        table(
            "verdicts (latest per route, newest first)",
            ["route", "verdict", "revision", "generation", "content", "at", "attempts", "reason"],
            rows,
        )
