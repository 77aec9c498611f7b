"""The CLI's exit codes are one table (cli/exit_codes.py): every feedledger error exits
with the code it always had, and README's exit-code list says the same."""

from __future__ import annotations

import importlib
import pkgutil
import re
from pathlib import Path

import feedledger
from feedledger.cli.exit_codes import EXIT_CODES, GENERAL, exit_code
from feedledger.model import errors
from feedledger.model.errors import FeedledgerError

# Every FeedledgerError class and the exit code it had when codes were the errors' own
# (`exit_code` class attributes, inherited by subclasses), by class name.
BEFORE = {
    "InGap": 2,
    "NotObserved": 2,
    "FeatureGeometryError": 4,
    "ConcurrentApplyError": 1,
    "AmbiguousPayloadError": 4,
    "ArchiveUnavailableError": 8,
    "BadPayloadError": 4,
    "ConfigError": 2,
    "FeedledgerError": 1,
    "FetchError": 11,
    "FutureDateError": 2,
    "LeaseHeldError": 7,
    "MassDeleteError": 5,
    "NotFoundError": 3,
    "RetractConflictError": 10,
    "SourceFrozenError": 9,
    "SourceNotFound": 3,
    "StaleWatermarkError": 6,
    "StoreUnavailableError": 8,
    "DateWentBackError": 6,
    "SchemaTooNewError": 8,  # the store's schema past this release (docs/upgrading.md)
    "UpgradeBlockedError": 7,  # `db upgrade` refused: older releases hold leases
    "ExportError": 1,  # `export delta`: the Delta table refused or failed a commit
}

# README's words for each code (its "non-zero exit code (2 bad configuration...)" list)
README_WORDS = {
    "bad configuration": errors.ConfigError,
    "not found": errors.NotFoundError,
    "bad payload": errors.BadPayloadError,
    "mass deletion": errors.MassDeleteError,
    "payload not": errors.StaleWatermarkError,
    "lease held": errors.LeaseHeldError,
    "store unreachable": errors.StoreUnavailableError,
    "source frozen": errors.SourceFrozenError,
    "retraction refused": errors.RetractConflictError,
    "the source": errors.FetchError,
}


def _every_error_class() -> set[type[FeedledgerError]]:
    for found in pkgutil.walk_packages(feedledger.__path__, "feedledger."):
        if ".migrations" not in found.name and not found.name.endswith("__main__"):
            importlib.import_module(found.name)
    todo: list[type[FeedledgerError]] = [FeedledgerError]
    seen: set[type[FeedledgerError]] = set()
    while todo:
        cls = todo.pop()
        seen.add(cls)
        todo.extend(sub for sub in cls.__subclasses__() if sub not in seen)
    return seen


def test_every_feedledger_error_exits_with_the_code_it_had() -> None:
    classes = _every_error_class()
    codes = {cls.__name__: exit_code(cls.__new__(cls)) for cls in classes}
    assert codes == BEFORE


def test_the_errors_carry_no_exit_code() -> None:
    assert not any(hasattr(cls, "exit_code") for cls in _every_error_class())


def test_readme_lists_the_cli_table() -> None:
    readme = (Path(__file__).parents[2] / "README.md").read_text(encoding="utf-8")
    listed = " ".join(readme.split("with a non-zero exit code (", 1)[1].split())
    found = {}
    for code, words in re.findall(r"(\d+) ([a-z][a-z ]+?)(?:[,/:(]| --)", listed.split(").")[0]):
        cls = next(c for w, c in README_WORDS.items() if words.startswith(w))
        found[cls] = int(code)
    table = dict(EXIT_CODES)
    assert found == {cls: table[cls] for cls in found}
    assert set(found.values()) | {GENERAL} == set(table.values()) | {GENERAL}
    assert set(found) == set(table) - {errors.ArchiveUnavailableError}  # named with 8's store
