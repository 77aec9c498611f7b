"""The raw-driver read paths: reads that skip SQLAlchemy's per-row machinery and talk
to the store's driver (sqlite3, psycopg, ADBC) directly, for the two hot reads.

One interface, here:

* read one entity: `read_entity` (`entity_read.read`: an entity's versions and gaps in
  one connection, plain driver statements; on PostgreSQL pipelined in one round trip
  on the thread's own connection, `pg_pipeline`);
* stream a source's rows as Arrow: `source_batches` (`snapshot_rows.batches`: the
  entities present at a valid time, in key order, fetched in bulk by `arrow_fetch`,
  on PostgreSQL by COPY through ADBC once the table is big, `pg_copy`), with the
  payload `layout` in force then.

The names resolve on first use (PEP 562): an entity read does not load the snapshot's
libraries (numpy, pyarrow.compute), nor a snapshot the entity read's.

May import: the ledger's core (`store`, `schema`, `records`, `visibility`, `gaps`) and
`encoding`; never `views`. The core never imports this package (`Store.closers` is how
`pg_pipeline` closes its connections with the store).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from feedledger.ledger.readers.entity_read import EntityRead
    from feedledger.ledger.readers.entity_read import read as read_entity
    from feedledger.ledger.readers.snapshot_rows import PayloadLayout, layout
    from feedledger.ledger.readers.snapshot_rows import batches as source_batches

_EXPORTS: dict[str, tuple[str, str]] = {
    "EntityRead": ("feedledger.ledger.readers.entity_read", "EntityRead"),
    "read_entity": ("feedledger.ledger.readers.entity_read", "read"),
    "PayloadLayout": ("feedledger.ledger.readers.snapshot_rows", "PayloadLayout"),
    "layout": ("feedledger.ledger.readers.snapshot_rows", "layout"),
    "source_batches": ("feedledger.ledger.readers.snapshot_rows", "batches"),
}

__all__ = ["EntityRead", "PayloadLayout", "layout", "read_entity", "source_batches"]


def __getattr__(name: str) -> Any:
    found = _EXPORTS.get(name)
    if found is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, attr = found
    return getattr(importlib.import_module(module), attr)
