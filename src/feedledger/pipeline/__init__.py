"""Orchestration: live runs (ingest, run), and the read-side helpers the CLI calls."""
