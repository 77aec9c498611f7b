"""Payload readers: bytes -> columnar observations (Arrow/Polars)."""

from feedledger.formats.canonical import content_hash
from feedledger.formats.readers import Observations, published_from_field, read_observations

__all__ = ["Observations", "content_hash", "published_from_field", "read_observations"]
