"""A GeoPackage rebuild's end (sync/kinds/gpkg.py's `finish`): the destination's
current file merged into the rebuild's new file through the guard, under the current
file's write lock; the current file marked "replaced by" the new one and committed;
then the new file fsynced and renamed over it (gpkg_file.swap). A current file that was
itself replaced meanwhile (another rebuild's swap, or one a killed process announced) is
swapped first, and merged from what replaced it; an announcement whose new file is
gone is cleared.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING

from feedledger import faults
from feedledger.sync.kinds import gpkg_binary, gpkg_file
from feedledger.sync.kinds.gpkg_rows import old_rows

if TYPE_CHECKING:
    from feedledger.sync.kinds.gpkg import GeoPackage


def finish(gp: GeoPackage) -> None:
    """Make the rebuild's new file `gp.into` the destination `gp.path` (the caller holds
    `gp.lock`)."""
    while not _merged_into_current(gp):
        pass
    faults.point("gpkg_swap_marked")
    gp.close_connection()
    gpkg_file.swap(gp.into, gp.path)
    gp.into = gp.path


def _merged_into_current(gp: GeoPackage) -> bool:
    """Merge the current file into the new one and mark it replaced; False (nothing
    done) when the current file was itself replaced (that swap completed first)."""
    old = gpkg_file.connect(gp.path)
    gpkg_binary.register(old)
    try:
        old.execute("BEGIN IMMEDIATE")  # no other writer until the mark is in
        other = gpkg_file.replaced_by(old)
        if other is not None and other != str(gp.into):
            old.execute("ROLLBACK")
            if not gpkg_file.swap(Path(other), gp.path):
                gpkg_file.clear_stale(gp.path, other)
            return False
        if other is None:
            _merge(gp, old)
            gpkg_file.mark_replaced(old, gp.into)
        old.execute("COMMIT")
        return True
    except BaseException:
        if old.in_transaction:
            old.execute("ROLLBACK")
        raise
    finally:
        old.close()


def _merge(gp: GeoPackage, old: sqlite3.Connection) -> None:
    """Every row of the old file written into the new one through the guard, a part
    at a time (each its own transaction in the new file: the old one stays locked)."""
    for items in old_rows(old, gp.layer):
        conn = gp.connection()
        conn.execute("BEGIN IMMEDIATE")
        try:
            gp.apply(conn, items)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
