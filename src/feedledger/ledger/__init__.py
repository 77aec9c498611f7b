"""The bitemporal core: payloads, versions, runs, gaps, watermark, leases (docs/architecture.md)."""
