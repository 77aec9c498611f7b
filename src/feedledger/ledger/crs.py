"""The CRS a GIS source's ledger is stated in: the CRS recorded (`payloads.crs`) for the
payload at its watermark -- the last one applied and standing. A payload stating
another CRS is refused whole, never reprojected (`crs_refusal`)."""

from __future__ import annotations

from sqlalchemy import select

from feedledger.ledger.schema import payloads
from feedledger.ledger.store import Store
from feedledger.model.errors import BadPayloadError

NONE_STATED = "(none stated)"


def payload_crs(store: Store, payload_id: str) -> str | None:
    """The CRS recorded for an applied payload of a GIS source (None: it stated none)."""
    with store.engine.connect() as conn:
        value = conn.execute(
            select(payloads.c.crs).where(payloads.c.payload_id == payload_id)
        ).scalar_one_or_none()
    return str(value) if value is not None else None


def crs_refusal(
    source: str, label: str, stated: str | None, recorded: str | None
) -> BadPayloadError | None:
    """The error refusing a payload whose layer CRS `stated` differs from the source's
    `recorded` one (a missing CRS differs from any stated one); None when they agree."""
    if stated == recorded:
        return None
    return BadPayloadError(
        f"layer CRS {stated or NONE_STATED} differs from this source's "
        f"{recorded or NONE_STATED} (reprojection is never silent): the payload was "
        "refused and nothing changed",
        source=source,
        payload=label,
        hint=(
            f"convert the layer to {recorded} first, e.g. with ogr2ogr -t_srs {recorded}, or "
            if recorded is not None
            else ""
        )
        + "declare a new source for the layer in its new CRS",
    )
