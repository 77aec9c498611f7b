"""A payload taken in as a live run: `run` (fetch, then ingest; or a recovery), `ingest`
(archive, then apply: one payload, whole or within a budget) with `live_apply` (the
apply under the source's lease) and `ingest_file` (a file
handed to the CLI), `archiving` (the one way a publication enters the archive and the
index; `archive add`), `stages` (the work run ahead on threads: archive hashing and
store opening beside the parse), `apply` (the diff and the payload's one transaction),
`bounded` (the diff and the transaction within a `memory_budget`), `allocators` (a
budgeted or resident process's memory given back), `observing` (a fetch that found
nothing new observed the source; the publisher date's problems). Nothing is imported
here: the command line loads each module when it needs it."""
