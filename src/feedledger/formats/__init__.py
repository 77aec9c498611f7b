"""Payload readers: bytes -> columnar observations (Arrow/Polars)."""

from feedledger.formats.canonical import record_hash
from feedledger.formats.readers import Observations, published_from_field, read_observations

__all__ = ["Observations", "published_from_field", "read_observations", "record_hash"]
