"""The public library layer: typed values in, typed results out (see docs/api.md).

Above `pipeline`, below the faces (CLI, scheduler). `feedledger/__init__.py` re-exports
the public names."""
