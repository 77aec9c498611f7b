"""The store's schema history: Alembic's environment (`env.py`) and one revision a file
under `versions/`, applied by `feedledger db upgrade` (ledger/engine.py names the head).

May import: SQLAlchemy and Alembic, and the ledger's own table declarations. `env.py`
also imports notify's and sync's table declarations, so that autogenerate and `alembic
check` compare the store with the one MetaData: the project's one documented upward
import (pyproject's [tool.importlinter] layers contract, `ignore_imports`). A revision,
once released, never changes.
"""
