"""Destinations: guarded projections of the ledger's current state (live route,
rebuild from a manifest, reconcile)."""
