"""deploy/systemd/*.service: the unit examples of the production guide name real
commands and options. Each unit's ExecStart is split as systemd splits it (its
specifiers filled in with an example instance) and parsed by the CLI's own command
tree (tests/command_lines.py): an unknown command or option, a missing argument or a
value of the wrong type fails, as it would when systemd starts the unit."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from command_lines import BadCommandLine, Parsed, check

UNITS = Path(__file__).resolve().parents[2] / "deploy" / "systemd"
# unit file -> (the instance a template is started with, the command its ExecStart runs)
EXPECTED = {
    "feedledger-scheduler.service": (None, ("scheduler",)),
    "feedledger-scheduler@.service": ("9465", ("scheduler",)),
    "feedledger-serve.service": (None, ("serve",)),
    "feedledger-sync@.service": ("parcels_search", ("sync",)),
}

Unit = dict[str, dict[str, list[str]]]


def parse_unit(text: str) -> Unit:
    """A unit file's sections, each key with its values in order (systemd allows a key
    more than once); comments and blank lines skipped, backslash continuations joined."""
    unit: Unit = {}
    section: dict[str, list[str]] | None = None
    for line in text.replace("\\\n", " ").splitlines():
        line = line.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and line.endswith("]"):
            section = unit.setdefault(line[1:-1], {})
            continue
        key, sep, value = line.partition("=")
        assert sep and section is not None, f"not KEY=VALUE inside a section: {line!r}"
        section.setdefault(key.strip(), []).append(value.strip())
    return unit


def exec_start(unit: Unit, instance: str | None) -> list[str]:
    """The one ExecStart, split, with `%i`/`%I` the instance and `%%` a percent sign."""
    (line,) = unit["Service"]["ExecStart"]
    words = shlex.split(line.lstrip("-@:+!"))
    if instance is None:
        assert not any("%i" in w or "%I" in w for w in words), line
    filled = [w.replace("%i", instance or "").replace("%I", instance or "") for w in words]
    return [w.replace("%%", "%") for w in filled]


def test_every_unit_in_deploy_systemd_is_checked_here() -> None:
    assert sorted(p.name for p in UNITS.glob("*.service")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_unit_exec_start_runs_a_real_feedledger_command(name: str) -> None:
    unit = parse_unit((UNITS / name).read_text(encoding="utf-8"))
    instance, command = EXPECTED[name]
    assert name.endswith("@.service") == (instance is not None)
    argv = exec_start(unit, instance)
    assert argv[0].startswith("/") and Path(argv[0]).name == "feedledger", argv
    parsed = check(argv[1:])
    assert parsed.path == command
    assert unit["Unit"]["Description"] and unit["Install"]["WantedBy"]
    # the commands stop cleanly on SIGTERM (leases released, the step under way finished)
    assert unit["Service"]["KillSignal"] == ["SIGTERM"]
    assert unit["Service"]["Restart"] == ["on-failure"]
    # the workspace folder (feedledger.toml's, where the local state cache lives) is
    # writable under ProtectSystem=strict
    config = Path(parsed.root["config"])
    writable = {Path(p) for v in unit["Service"]["ReadWritePaths"] for p in v.split()}
    assert config.parent in writable and unit["Service"]["WorkingDirectory"] == [str(config.parent)]


def test_the_scheduler_templates_instance_is_its_metrics_port() -> None:
    unit = parse_unit((UNITS / "feedledger-scheduler@.service").read_text(encoding="utf-8"))
    parsed = check(exec_start(unit, "9465")[1:])
    assert parsed.params["metrics_port"] == 9465
    assert parsed.params["metrics_addr"] == "0.0.0.0"  # scraped from another machine


def test_the_sync_templates_instance_is_the_destination_it_keeps_live() -> None:
    unit = parse_unit((UNITS / "feedledger-sync@.service").read_text(encoding="utf-8"))
    parsed: Parsed = check(exec_start(unit, "parcels_search")[1:])
    assert parsed.params["destination"] == "parcels_search" and parsed.params["live"]


@pytest.mark.parametrize(
    "line",
    [
        "/opt/feedledger/bin/feedledger scheduler --wokers 2",  # a misspelled option
        "/opt/feedledger/bin/feedledger scheduler --metrics-port %i",  # a template's %i left
        "/opt/feedledger/bin/feedledger schedule --workers 2",  # no such command
        "/opt/feedledger/bin/feedledger sync --live",  # its argument missing
    ],
)
def test_a_wrong_exec_start_is_caught(line: str) -> None:
    unit = parse_unit(f"[Service]\nExecStart={line}\n")
    with pytest.raises(BadCommandLine):
        check(exec_start(unit, "")[1:])
