"""The deprecation aliases' one warning: an old call still works for one release, and
says which call replaces it."""

from __future__ import annotations

import warnings


def deprecated(old: str, new: str) -> None:
    """Warn (DeprecationWarning, at the caller's caller) that `old` is now `new`."""
    warnings.warn(
        f"{old} is deprecated and will be removed in the next release: use {new}",
        DeprecationWarning,
        stacklevel=3,
    )
