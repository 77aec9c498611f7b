"""docs/production.md: every `feedledger` command in its shell code blocks parses
against the CLI's command tree (the command and every option exist, values of the
right type, required arguments given: tests/command_lines.py), the unit commands it
quotes are the units' own, its scrape job is the one the alert rules name, and the
README links to it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from command_lines import check, command_lines

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "production.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.MULTILINE | re.DOTALL)


def blocks(language: str) -> list[str]:
    text = GUIDE.read_text(encoding="utf-8")
    return [body for lang, body in FENCE.findall(text) if lang == language]


def guide_commands() -> list[list[str]]:
    return [argv for block in blocks("sh") for argv in command_lines(block)]


def test_the_guide_has_its_commands_in_sh_blocks() -> None:
    names = {" ".join(check(argv).path) for argv in guide_commands()}
    assert {"init", "source add", "scheduler", "serve", "doctor", "health"} <= names


@pytest.mark.parametrize("argv", guide_commands(), ids=" ".join)
def test_every_command_of_the_guide_parses(argv: list[str]) -> None:
    check(argv)


def test_the_unit_commands_the_guide_quotes_are_the_units_own() -> None:
    quoted = {" ".join(argv) for argv in guide_commands()}
    for unit, instance in [
        ("feedledger-scheduler@.service", "9464"),
        ("feedledger-serve.service", ""),
    ]:
        text = (ROOT / "deploy" / "systemd" / unit).read_text(encoding="utf-8")
        (line,) = re.findall(r"^ExecStart=(.*)$", text, re.MULTILINE)
        words = line.replace("%i", instance).split()
        assert " ".join(words[1:]) in quoted, unit


def test_the_scrape_job_is_the_one_the_alert_rules_name() -> None:
    (config,) = [yaml.safe_load(b) for b in blocks("yaml") if "scrape_configs" in b]
    (job,) = config["scrape_configs"]
    rules = (ROOT / "deploy" / "prometheus" / "feedledger-rules.yml").read_text(encoding="utf-8")
    assert f'job="{job["job_name"]}"' in rules


def test_the_readme_links_the_guide() -> None:
    assert "(docs/production.md)" in (ROOT / "README.md").read_text(encoding="utf-8")
