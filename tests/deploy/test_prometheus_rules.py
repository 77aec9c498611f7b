"""deploy/prometheus/feedledger-rules.yml: the alert rules the production guide ships.

Every metric an alert's expression selects is one a running `feedledger scheduler`
really serves: the names (and each one's labels) are read from the `/metrics` endpoint
of a real scheduler process that has run a source and sees a destination, once every
family the scheduler's registry declares has samples -- no hand-written list. `up` is
the one name allowed besides: Prometheus's own series per scrape target.
The rules cover what the issue asks to alert on: a source stale, dead letters, a
destination lagging, a scheduler gone.
"""

from __future__ import annotations

import re
import socket
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from feedledger.scheduler.metrics import Metrics
from helpers import Cli
from scheduler import processes

RULES = Path(__file__).resolve().parents[2] / "deploy" / "prometheus" / "feedledger-rules.yml"
# series Prometheus makes itself for every scrape target (not exported by anyone)
PROMETHEUS_OWN = {"up": {"job", "instance"}}


def rules() -> list[dict[str, Any]]:
    doc = yaml.safe_load(RULES.read_text(encoding="utf-8"))
    return [rule for group in doc["groups"] for rule in group["rules"]]


# -- the names in a PromQL expression -----------------------------------------------------

TOKEN = re.compile(
    r"""(?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)
      | (?P<braces>\{(?:[^}"']|"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')*\})
      | (?P<range>\[[^\]]*\])
      | (?P<number>\d[\w.]*)
      | (?P<name>[A-Za-z_:][A-Za-z0-9_:]*)
      | (?P<open>\()
      | (?P<other>\S)""",
    re.VERBOSE,
)
MATCHER = re.compile(
    r"""\s*([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*("(?:[^"\\]|\\.)*"|'[^']*')\s*,?"""
)
AGGREGATIONS = {
    "sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values",
    "bottomk", "topk", "quantile", "limitk", "limit_ratio",
}  # fmt: skip
GROUPING = {"by", "without", "on", "ignoring", "group_left", "group_right"}
OPERATORS = {"and", "or", "unless", "bool", "offset", "atan2"}


@dataclass
class Selectors:
    metrics: list[tuple[str, dict[str, str]]] = field(default_factory=list)  # name, matchers
    grouping: set[str] = field(default_factory=set)  # labels named by by/on/...


def selectors(expr: str) -> Selectors:
    """The metric selectors of `expr` (each name with its label matchers) and the labels
    its `by`/`without`/`on`/`ignoring`/`group_*` clauses name."""
    tokens = [(m.lastgroup, m.group()) for m in TOKEN.finditer(expr)]
    found = Selectors()
    i = 0
    while i < len(tokens):
        kind, text = tokens[i]
        after = tokens[i + 1] if i + 1 < len(tokens) else (None, "")
        if kind == "name" and text in GROUPING:
            if after[0] == "open":  # by (a, b)
                close = next(j for j in range(i + 2, len(tokens)) if tokens[j][1] == ")")
                found.grouping |= {t for k, t in tokens[i + 2 : close] if k == "name"}
                i = close
        elif kind == "name" and after[0] != "open" and text not in AGGREGATIONS | OPERATORS:
            matchers: dict[str, str] = {}
            if after[0] == "braces":
                body = after[1][1:-1]
                parts = MATCHER.findall(body)
                assert "".join(MATCHER.sub("", body).split()) == "", f"unparsed matcher: {body}"
                matchers = {label: value.strip("\"'") for label, _op, value in parts}
                i += 1
            found.metrics.append((text, matchers))
        elif kind == "braces":
            raise AssertionError(f"a selector without a metric name in {expr!r}")
        i += 1
    return found


def test_the_expression_reader_finds_names_labels_and_groupings() -> None:
    got = selectors(
        "(max by (destination, source) (feedledger_destination_lag_seconds) > 3600) unless on "
        '(destination) sum(increase(feedledger_runs_total{outcome="failed", source!~"a|b"}[1h]))'
        ' or time() - up{job="x"} > 300'
    )
    assert got.metrics == [
        ("feedledger_destination_lag_seconds", {}),
        ("feedledger_runs_total", {"outcome": "failed", "source": "a|b"}),
        ("up", {"job": "x"}),
    ]
    assert got.grouping == {"destination", "source"}


# -- the rules file on its own --------------------------------------------------------------


def test_every_rule_is_an_alert_with_a_severity_a_summary_and_a_description() -> None:
    found = rules()
    assert len({r["alert"] for r in found}) == len(found) > 0
    for rule in found:
        assert set(rule) <= {"alert", "expr", "for", "labels", "annotations"}, rule
        assert rule["labels"]["severity"] in {"critical", "warning", "info"}, rule
        assert re.fullmatch(r"\d+[smh]", rule["for"]), rule
        assert {"summary", "description"} <= set(rule["annotations"]), rule
        assert selectors(rule["expr"]).metrics, rule


def test_rules_cover_stale_sources_dead_letters_lagging_destinations_gone_schedulers() -> None:
    named: dict[str, list[dict[str, str]]] = {}
    for rule in rules():
        for name, matchers in selectors(rule["expr"]).metrics:
            named.setdefault(name, []).append(matchers)
    assert "feedledger_source_stale" in named
    assert {"status": "dead"} in named["feedledger_source_notifications"]
    assert "feedledger_destination_lag_seconds" in named
    # gone: its scrape fails (up), or it answers and its loop has stopped ticking
    assert {"job": "feedledger-scheduler"} in named["up"]
    assert "feedledger_scheduler_last_tick_timestamp_seconds" in named


# -- against a running scheduler's /metrics -------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def served(port: int, families: set[str], proc: Any) -> dict[str, set[str]]:
    """The sample names the scheduler's /metrics serves, each with its label names, once
    every family of `families` has samples (a labelled family has none until set)."""
    deadline = time.monotonic() + 120  # a hang deadline, not a timing
    while True:
        assert proc.poll() is None, processes.stderr_of(proc)
        text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
        names: dict[str, set[str]] = {}
        with_samples = set()
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                names.setdefault(sample.name, set()).update(sample.labels)
                with_samples.add(family.name)
        if families <= with_samples:
            return names
        assert time.monotonic() < deadline, f"no samples of {families - with_samples}:\n{text}"
        time.sleep(0.2)


@pytest.fixture
def exported(cli: Cli, tmp_path: Path) -> dict[str, set[str]]:
    """A scheduler process on a workspace with a source it applies and a destination."""
    folder = tmp_path / "feed"
    folder.mkdir()
    today = datetime.now(UTC).date()
    for i, day in enumerate([today - timedelta(days=1), today]):
        (folder / f"alpha_{day}.csv").write_text(f"id,v\n1,{i}\n2,fixed\n")
    cli("source", "add", "alpha", "--key", "id", "--fetch", str(folder))
    cli("ingest", "alpha", str(folder / f"alpha_{today - timedelta(days=1)}.csv"))
    dest = tmp_path / "search.db"
    cli("destination", "add", "search", "--source", "alpha", "--sqlite", str(dest), "--table", "t")
    families = {m.name for m in Metrics().registry.collect()}
    port = free_port()
    proc = processes.spawn(cli.ws.config_path, "--metrics-port", str(port))
    try:
        return served(port, families, proc)
    finally:
        processes.stop([proc])


def test_every_metric_an_alert_rule_selects_is_one_a_running_scheduler_exports(
    exported: dict[str, set[str]],
) -> None:
    known = {**exported, **PROMETHEUS_OWN}
    assert "feedledger_runs_total" in exported  # a counter's sample name, as PromQL sees it
    for rule in rules():
        found = selectors(rule["expr"])
        labels: set[str] = set()
        for name, matchers in found.metrics:
            assert name in known, f"{rule['alert']}: {name} is not exported ({sorted(exported)})"
            assert set(matchers) <= known[name], f"{rule['alert']}: {name} has no {matchers}"
            labels |= known[name]
        assert found.grouping <= labels, f"{rule['alert']}: {found.grouping - labels}"
        for text in rule["annotations"].values():
            used = set(re.findall(r"\$labels\.(\w+)", text))
            assert used <= labels | {"instance", "job"}, f"{rule['alert']}: {used - labels}"
