"""One Alembic revision a file, `NNNN_name.py`, each naming the one before it
(`down_revision`); see ledger/migrations/__init__.py."""
