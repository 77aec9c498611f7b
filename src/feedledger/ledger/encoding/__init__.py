"""The attribute encoding: how a version's attribute text (canonical JSON,
formats/canonical.py) is stored in its compact form and read back.

One entry point, here:

* encode a batch: `choose` the codebook for a payload from a `sample_of` its texts
  (`spread` picks the rows), then `encode_rows` (a payload's string columns straight
  to stored texts) or `Codebook.encode_series` (canonical texts to stored texts);
* decode a batch: `decode_arrow` (an Arrow column of stored texts, each by its row's
  codebook, to canonical texts), `Decoder` (row by row, the entity reads), `load` (a
  source's codebooks).

What else the package holds, for the snapshot's fast paths (imported by module, not
through this file: they need numpy, and numba for the kernel): `columns` (stored or
canonical texts as one column per field), `split` (its fast path: texts cut at their
field tokens), `render` (CSV lines and string columns rendered by the compiled loops
of `render_kernel` with the lookup arrays of `render_tables`). `codec` is the compact
form itself (codebook, tokens, planning): standard library and polars only, so that
bench/peers/histories.py can load it from its file; `codebooks` keeps codebooks in the
store.

May import: the ledger's `schema` and `store`, `formats.canonical`, `model`. Never the
ledger's `readers` or `views`.
"""

from feedledger.ledger.encoding.codebooks import (
    Decoder,
    choose,
    decode_arrow,
    decode_with,
    load,
    sample_of,
    spread,
)
from feedledger.ledger.encoding.codec import Codebook
from feedledger.ledger.encoding.encode import encode_rows

__all__ = [
    "Codebook",
    "Decoder",
    "choose",
    "decode_arrow",
    "decode_with",
    "encode_rows",
    "load",
    "sample_of",
    "spread",
]
