"""Deterministic generator of a synthetic county parcel feed (daily CSV snapshots).

Day 1 is the initial population of ``n`` parcels. Every following day, relative to the
previous day's live parcels:

* 1 % of the parcels change one or two attributes (each change really alters the text);
* 0.1 % new parcels are added (fresh, never reused ``parcel_id`` values);
* 0.1 % of the parcels are deleted (chosen among the parcels that did not change).

Everything is vectorised (polars expressions over integer-coded state); random numbers
come from one ``random.Random(seed)`` stream turned into UInt64 columns through a
zero-copy Arrow buffer, so the output only depends on ``(n, seed)`` and the day number,
never on the machine, the polars version's own RNG or the number of days asked for.
(numpy is deliberately not used: it is not a dependency of the project.)

Files are written as ``parcels_2026-08-01.csv``, ``parcels_2026-08-02.csv``, ... plus a
``manifest.json`` recording the expected added/changed/deleted counts of each day. The
default output directory is a cache under ``bench/.work/`` keyed by ``(n, seed)`` and the
generator version; a cache holding at least the requested number of days is reused.

    python bench/gen_parcels.py --n 1000000 --days 10 [--seed 20260801] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from dataclasses import asdict, dataclass
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa

GEN_VERSION = 1
DEFAULT_N = 1_000_000
DEFAULT_DAYS = 10
DEFAULT_SEED = 20260801
FIRST_DAY = date(2026, 8, 1)

CHANGE_RATE = 0.01
ADD_RATE = 0.001
DELETE_RATE = 0.001
TWO_ATTR_RATE = 0.35  # share of changed parcels that change two attributes instead of one

BENCH_DIR = Path(__file__).resolve().parent
CACHE_ROOT = BENCH_DIR / ".work"
MANIFEST = "manifest.json"

COLUMNS = [
    "parcel_id",
    "owner",
    "address",
    "city",
    "zip",
    "zoning",
    "land_use",
    "acres",
    "assessed_value",
    "year_built",
    "last_sale_date",
    "flood_zone",
]

# --- vocabularies -----------------------------------------------------------------------

ZONING = ["R-1", "R-2", "MU-2", "MU-3", "C-1", "I-1"]
ZONING_W = [46, 22, 8, 6, 12, 6]
# acres (thousandths) range and assessed value base/spread per zoning code
ZONING_ACRES_LO = [100, 50, 80, 80, 200, 1000]
ZONING_ACRES_HI = [2500, 600, 3000, 3000, 10000, 50000]
ZONING_VALUE_BASE = [120_000, 90_000, 250_000, 400_000, 300_000, 500_000]
ZONING_VALUE_SPREAD = [600_000, 400_000, 1_500_000, 3_000_000, 2_500_000, 4_000_000]

LAND_USE = [
    "RESIDENTIAL",
    "MULTI-FAMILY",
    "MIXED USE",
    "COMMERCIAL",
    "INDUSTRIAL",
    "VACANT",
    "AGRICULTURAL",
    "INSTITUTIONAL",
]
ZONING_DEFAULT_LAND_USE = [0, 1, 2, 2, 3, 4]  # land_use code most parcels of a zoning have
VACANT_LIKE = [5, 6]  # land uses whose year_built is mostly empty

FLOOD = ["X", "X500", "AE", "A", "AO", "VE"]
FLOOD_W = [75, 10, 8, 4, 2, 1]

CITIES = [
    ("SPRINGFIELD", 62701, 12),
    ("RIVERTON", 62561, 3),
    ("CHATHAM", 62629, 2),
    ("ROCHESTER", 62563, 2),
    ("SHERMAN", 62684, 1),
    ("AUBURN", 62615, 2),
    ("PAWNEE", 62558, 1),
    ("WILLIAMSVILLE", 62693, 1),
    ("NEW BERLIN", 62670, 1),
    ("PLEASANT PLAINS", 62677, 1),
]
CITY_W = [55, 8, 8, 7, 5, 5, 3, 3, 3, 3]

STREETS = [
    "OAK",
    "MAPLE",
    "CEDAR",
    "ELM",
    "WASHINGTON",
    "LINCOLN",
    "JEFFERSON",
    "MADISON",
    "MONROE",
    "WALNUT",
    "CHESTNUT",
    "HICKORY",
    "PRAIRIE",
    "LAKE",
    "HILL",
    "PARK",
    "MILL",
    "CHURCH",
    "SCHOOL",
    "SPRING",
    "MEADOW",
    "RIDGE",
    "SUNSET",
    "WILLOW",
    "BIRCH",
    "PINE",
    "FOREST",
    "RIVER",
    "CENTRAL",
    "MAIN",
    "1ST",
    "2ND",
    "3RD",
    "4TH",
    "5TH",
    "6TH",
    "7TH",
    "8TH",
    "9TH",
    "10TH",
    "11TH",
    "12TH",
    "STATE",
    "UNION",
    "GRAND",
    "COLLEGE",
    "MARKET",
    "BROADWAY",
    "WABASH",
    "SANGAMON",
]
STREET_SUFFIX = ["ST", "AVE", "RD", "DR", "LN", "CT", "BLVD", "WAY", "PL", "TRL"]

_FIRST_NAMES = (
    "JAMES MARY JOHN PATRICIA ROBERT JENNIFER MICHAEL LINDA WILLIAM ELIZABETH DAVID BARBARA "
    "RICHARD SUSAN JOSEPH JESSICA THOMAS SARAH CHARLES KAREN CHRISTOPHER LISA DANIEL NANCY "
    "MATTHEW BETTY ANTHONY MARGARET MARK SANDRA DONALD ASHLEY STEVEN KIMBERLY PAUL EMILY "
    "ANDREW DONNA JOSHUA MICHELLE KENNETH CAROL KEVIN AMANDA BRIAN DOROTHY GEORGE MELISSA "
    "TIMOTHY DEBORAH RONALD STEPHANIE EDWARD REBECCA JASON SHARON JEFFREY LAURA RYAN CYNTHIA"
)
_LAST_NAMES = (
    "SMITH JOHNSON WILLIAMS BROWN JONES GARCIA MILLER DAVIS RODRIGUEZ MARTINEZ HERNANDEZ "
    "LOPEZ GONZALEZ WILSON ANDERSON THOMAS TAYLOR MOORE JACKSON MARTIN LEE PEREZ THOMPSON "
    "WHITE HARRIS SANCHEZ CLARK RAMIREZ LEWIS ROBINSON WALKER YOUNG ALLEN KING WRIGHT SCOTT "
    "TORRES NGUYEN HILL FLORES GREEN ADAMS NELSON BAKER HALL RIVERA CAMPBELL MITCHELL CARTER "
    "ROBERTS GOMEZ PHILLIPS EVANS TURNER DIAZ PARKER CRUZ EDWARDS COLLINS REYES STEWART "
    "MORRIS MORALES MURPHY COOK ROGERS GUTIERREZ ORTIZ MORGAN COOPER PETERSON BAILEY REED "
    "KELLY HOWARD RAMOS KIM COX WARD RICHARDSON WATSON BROOKS CHAVEZ WOOD JAMES BENNETT GRAY "
    "MENDOZA RUIZ HUGHES PRICE ALVAREZ CASTILLO SANDERS PATEL MYERS LONG ROSS FOSTER O'BRIEN "
    "O'CONNOR MCDONALD"
)
FIRST_NAMES = _FIRST_NAMES.split()
LAST_NAMES = _LAST_NAMES.split()
# Owner text forms (below) and their weights; form 3 carries double quotes so the feed
# exercises CSV quoting and JSON escaping (as real county rolls occasionally do).
OWNER_FORMS_W = [70, 12, 12, 1, 5]


OWNER_FORMS = [
    "{last}, {first}",
    "{last} FAMILY TRUST",
    "{last} HOLDINGS LLC",
    '{last}, {first} "TRUSTEE"',
    "{last} ET AL C/O {first}",
]
# Every (form, last, first) owner text, indexed by (form * len(LAST) + last) * len(FIRST) +
# first: rendering owners is then one gather instead of five string concatenations.
OWNER_TEXTS = [
    form.format(last=last, first=first)
    for form in OWNER_FORMS
    for last in LAST_NAMES
    for first in FIRST_NAMES
]


def _owner_expr(first: pl.Expr, last: pl.Expr, form: pl.Expr) -> pl.Expr:
    index = (form * len(LAST_NAMES) + last) * len(FIRST_NAMES) + first
    return _lookup(index, OWNER_TEXTS)


# Attributes a daily change can touch, with their relative frequency.
CHANGE_ATTRS = [
    "assessed_value",
    "owner",
    "last_sale_date",
    "zoning",
    "land_use",
    "acres",
    "flood_zone",
    "year_built",
]
CHANGE_ATTRS_W = [30, 15, 10, 8, 8, 8, 11, 10]

SALE_EPOCH_LO = (date(1985, 1, 1) - date(1970, 1, 1)).days
SALE_EPOCH_HI = (date(2026, 7, 31) - date(1970, 1, 1)).days


# --- random numbers ---------------------------------------------------------------------


class Rand:
    """A deterministic stream of UInt64 columns derived from ``random.Random(seed)``."""

    def __init__(self, seed: int) -> None:
        self._rng = random.Random(seed)

    def u64(self, n: int) -> pl.Series:
        buf = pa.py_buffer(self._rng.randbytes(8 * n))
        arr = pa.Array.from_buffers(pa.uint64(), n, [None, buf])
        s = pl.from_arrow(arr)
        assert isinstance(s, pl.Series)
        return s

    def ints(self, n: int, k: int) -> pl.Series:
        """Uniform integers in ``[0, k)`` (modulo bias is negligible for k << 2**64)."""
        return (self.u64(n) % max(k, 1)).cast(pl.Int64)

    def weighted(self, n: int, weights: list[int]) -> pl.Series:
        """Codes ``0..len(weights)-1`` drawn with the given relative weights."""
        cum: list[int] = []
        total = 0
        for w in weights:
            total += w
            cum.append(total)
        draw = self.ints(n, total)
        return pl.Series(cum[:-1], dtype=pl.Int64).search_sorted(draw, side="right").cast(pl.Int64)


def _lookup(code: pl.Expr, values: list[str] | list[int]) -> pl.Expr:
    """``values[code]`` for every row."""
    return pl.lit(pl.Series(values)).gather(code)


def _gather(values: list[int], codes: pl.Series) -> pl.Series:
    return pl.Series(values, dtype=pl.Int64).gather(codes)


def _shift_code(old: pl.Series, k: int, r: pl.Series) -> pl.Series:
    """A code in ``[0, k)`` guaranteed to differ from ``old``."""
    return (old + 1 + r % (k - 1)) % k


# --- state ------------------------------------------------------------------------------


def new_parcels(rand: Rand, n: int, first_id: int) -> pl.DataFrame:
    """``n`` fresh parcels with ids ``first_id ..``, as integer-coded state."""
    zoning = rand.weighted(n, ZONING_W)
    lu_default = _gather(ZONING_DEFAULT_LAND_USE, zoning)
    lu_random = rand.ints(n, len(LAND_USE))
    land_use = pl.select(
        pl.when(rand.ints(n, 100) < 85).then(lu_default).otherwise(lu_random)
    ).to_series()
    lo = _gather(ZONING_ACRES_LO, zoning)
    hi = _gather(ZONING_ACRES_HI, zoning)
    acres_m = lo + rand.ints(n, 1 << 40) % (hi - lo)
    base = _gather(ZONING_VALUE_BASE, zoning)
    spread = _gather(ZONING_VALUE_SPREAD, zoning)
    assessed = (base + rand.ints(n, 1 << 40) % spread) // 100 * 100
    vacant = land_use.is_in(VACANT_LIKE)
    year = 1900 + rand.ints(n, 126)
    year_built = pl.select(
        pl.when(vacant & (rand.ints(n, 10) < 8)).then(0).otherwise(year)
    ).to_series()
    city = rand.weighted(n, CITY_W)
    zip_span = _gather([c[2] for c in CITIES], city)
    return pl.DataFrame(
        {
            "id": pl.int_range(first_id, first_id + n, dtype=pl.Int64, eager=True),
            "first": rand.ints(n, len(FIRST_NAMES)),
            "last": rand.ints(n, len(LAST_NAMES)),
            "oform": rand.weighted(n, OWNER_FORMS_W),
            "st_num": 1 + rand.ints(n, 9999),
            "street": rand.ints(n, len(STREETS)),
            "st_suffix": rand.ints(n, len(STREET_SUFFIX)),
            "city": city,
            "zip_off": rand.ints(n, 1 << 20) % zip_span,
            "zoning": zoning,
            "land_use": land_use,
            "acres_m": acres_m,
            "assessed": assessed,
            "year_built": year_built,
            "sale_day": SALE_EPOCH_LO + rand.ints(n, SALE_EPOCH_HI - SALE_EPOCH_LO),
            "flood": rand.weighted(n, FLOOD_W),
        }
    )


def _mutate(rand: Rand, df: pl.DataFrame, day: date) -> pl.DataFrame:
    """Change one or two attributes of every row of ``df`` (the parcels picked to change)."""
    m = df.height
    k = len(CHANGE_ATTRS)
    a1 = rand.weighted(m, CHANGE_ATTRS_W)
    two = rand.ints(m, 100) < int(TWO_ATTR_RATE * 100)
    a2 = _shift_code(a1, k, rand.ints(m, k - 1))
    touched = {
        name: pl.select((a1 == i) | (two & (a2 == i))).to_series()
        for i, name in enumerate(CHANGE_ATTRS)
    }
    day_epoch = (day - date(1970, 1, 1)).days

    def r(bound: int = 1 << 40) -> pl.Series:
        return rand.ints(m, bound)

    # New values; each one differs from the old value by construction.
    owner_last = _shift_code(df["last"], len(LAST_NAMES), r())
    owner_first = r(len(FIRST_NAMES))
    owner_form = rand.weighted(m, OWNER_FORMS_W)
    factor = 850 + r(400)  # 0.850 .. 1.249
    assessed = (df["assessed"] * factor // 100_000) * 100
    assessed = pl.select(
        pl.when(assessed == df["assessed"]).then(assessed + 100).otherwise(assessed)
    ).to_series()
    old_acres = df["acres_m"]
    step = 1 + r() % (old_acres // 5).clip(lower_bound=1)
    acres = pl.select(
        pl.when((r(2) == 0) & (old_acres - step > 0))
        .then(old_acres - step)
        .otherwise(old_acres + step)
    ).to_series()
    year = 1900 + r(126)
    year = pl.select(
        pl.when(year == df["year_built"]).then(1900 + (year - 1900 + 1) % 126).otherwise(year)
    ).to_series()
    sale = day_epoch - 1 - r(60)
    sale = pl.select(pl.when(sale == df["sale_day"]).then(sale - 1).otherwise(sale)).to_series()
    zoning = _shift_code(df["zoning"], len(ZONING), r())
    land_use = _shift_code(df["land_use"], len(LAND_USE), r())
    flood = _shift_code(df["flood"], len(FLOOD), r())

    def pick(attr: str, col: str, new: pl.Series) -> pl.Expr:
        return pl.when(touched[attr]).then(new).otherwise(pl.col(col)).alias(col)

    return df.with_columns(
        pick("owner", "last", owner_last),
        pick("owner", "first", owner_first),
        pick("owner", "oform", owner_form),
        pick("assessed_value", "assessed", assessed),
        pick("acres", "acres_m", acres),
        pick("year_built", "year_built", year),
        pick("last_sale_date", "sale_day", sale),
        pick("zoning", "zoning", zoning),
        pick("land_use", "land_use", land_use),
        pick("flood_zone", "flood", flood),
    )


def next_day(
    rand: Rand, live: pl.DataFrame, day: date, next_id: int
) -> tuple[pl.DataFrame, dict[str, int]]:
    n_live = live.height
    n_change = round(n_live * CHANGE_RATE)
    n_del = round(n_live * DELETE_RATE)
    n_add = round(n_live * ADD_RATE)
    n_change = min(n_change, n_live)
    n_del = min(n_del, n_live - n_change)
    order = rand.u64(n_live).arg_sort()
    role = pl.zeros(n_live, dtype=pl.Int8, eager=True)
    role = role.scatter(order[:n_change], 1).scatter(order[n_change : n_change + n_del], 2)
    keep = live.filter(role == 0)
    changed = _mutate(rand, live.filter(role == 1), day)
    added = new_parcels(rand, n_add, next_id)
    new_live = pl.concat([keep, changed, added]).sort("id")
    counts = {"added": n_add, "changed": n_change, "deleted": n_del, "rows": new_live.height}
    return new_live, counts


def render(live: pl.DataFrame) -> pl.DataFrame:
    """The CSV payload (all text) of a snapshot."""
    zip_base = [c[1] for c in CITIES]
    acres = pl.col("acres_m")
    return live.select(
        pl.concat_str([pl.lit("P"), pl.col("id").cast(pl.String).str.zfill(8)]).alias("parcel_id"),
        _owner_expr(pl.col("first"), pl.col("last"), pl.col("oform")).alias("owner"),
        pl.concat_str(
            [
                pl.col("st_num").cast(pl.String),
                pl.lit(" "),
                _lookup(pl.col("street"), STREETS),
                pl.lit(" "),
                _lookup(pl.col("st_suffix"), STREET_SUFFIX),
            ]
        ).alias("address"),
        _lookup(pl.col("city"), [c[0] for c in CITIES]).alias("city"),
        (_lookup(pl.col("city"), zip_base) + pl.col("zip_off")).cast(pl.String).alias("zip"),
        _lookup(pl.col("zoning"), ZONING).alias("zoning"),
        _lookup(pl.col("land_use"), LAND_USE).alias("land_use"),
        pl.concat_str(
            [
                (acres // 1000).cast(pl.String),
                pl.lit("."),
                (acres % 1000).cast(pl.String).str.zfill(3),
            ]
        ).alias("acres"),
        pl.col("assessed").cast(pl.String).alias("assessed_value"),
        # vacant land has no year_built: an empty field (written as ``,,``)
        pl.when(pl.col("year_built") != 0)
        .then(pl.col("year_built").cast(pl.String))
        .alias("year_built"),
        pl.col("sale_day").cast(pl.Int32).cast(pl.Date).cast(pl.String).alias("last_sale_date"),
        _lookup(pl.col("flood"), FLOOD).alias("flood_zone"),
    )


# --- files ------------------------------------------------------------------------------


@dataclass(frozen=True)
class DayFile:
    day: int
    published_at: str
    path: Path
    added: int
    changed: int
    deleted: int
    rows: int


def file_name(day: date) -> str:
    return f"parcels_{day.isoformat()}.csv"


def cache_dir(n: int, seed: int) -> Path:
    return CACHE_ROOT / f"parcels-v{GEN_VERSION}-n{n}-s{seed}"


def _read_manifest(out: Path, n: int, seed: int) -> dict[str, Any] | None:
    try:
        manifest = json.loads((out / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    if (manifest.get("gen_version"), manifest.get("n"), manifest.get("seed")) != (
        GEN_VERSION,
        n,
        seed,
    ):
        return None
    days = manifest.get("days", [])
    if not all((out / d["file"]).is_file() for d in days):
        return None
    return dict(manifest)


def _day_files(out: Path, manifest: dict[str, Any], days: int) -> list[DayFile]:
    return [
        DayFile(
            day=d["day"],
            published_at=d["published_at"],
            path=out / d["file"],
            added=d["added"],
            changed=d["changed"],
            deleted=d["deleted"],
            rows=d["rows"],
        )
        for d in manifest["days"][:days]
    ]


def generate(
    n: int = DEFAULT_N,
    days: int = DEFAULT_DAYS,
    seed: int = DEFAULT_SEED,
    out: Path | None = None,
    force: bool = False,
    log: bool = True,
) -> list[DayFile]:
    """Write (or reuse) ``days`` daily snapshots of ``n`` parcels; return them in order.

    The content of day ``k`` depends only on ``(n, seed, k)``, so a directory already
    holding at least ``days`` days for the same ``(n, seed)`` is reused as is.
    """
    if n < 1 or days < 1:
        raise ValueError("n and days must be >= 1")
    out = cache_dir(n, seed) if out is None else out
    manifest = None if force else _read_manifest(out, n, seed)
    if manifest is not None and len(manifest["days"]) >= days:
        if log:
            print(f"gen_parcels: reusing {days} day(s) of n={n:,} in {out}", file=sys.stderr)
        return _day_files(out, manifest, days)

    out.mkdir(parents=True, exist_ok=True)
    (out / MANIFEST).unlink(missing_ok=True)
    t0 = time.perf_counter()
    rand = Rand(seed)
    live = new_parcels(rand, n, 1)
    next_id = n + 1
    entries: list[dict[str, Any]] = []
    for k in range(1, days + 1):
        day = FIRST_DAY + timedelta(days=k - 1)
        if k == 1:
            counts = {"added": n, "changed": 0, "deleted": 0, "rows": n}
        else:
            live, counts = next_day(rand, live, day, next_id)
            next_id += counts["added"]
        path = out / file_name(day)
        tmp = path.with_suffix(".csv.tmp")
        render(live).write_csv(tmp)
        os.replace(tmp, path)
        entries.append({"day": k, "published_at": day.isoformat(), "file": path.name, **counts})
        if log:
            print(
                f"gen_parcels: day {k}/{days} {path.name}: {counts} "
                f"({time.perf_counter() - t0:.1f}s)",
                file=sys.stderr,
            )
    manifest = {
        "gen_version": GEN_VERSION,
        "n": n,
        "seed": seed,
        "columns": COLUMNS,
        "key": "parcel_id",
        "rates": {"change": CHANGE_RATE, "add": ADD_RATE, "delete": DELETE_RATE},
        "generate_seconds": round(time.perf_counter() - t0, 3),
        "days": entries,
    }
    tmp_manifest = out / (MANIFEST + ".tmp")
    tmp_manifest.write_text(json.dumps(manifest, indent=2) + "\n")
    os.replace(tmp_manifest, out / MANIFEST)
    return _day_files(out, manifest, days)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=DEFAULT_N, help="parcels on day 1 (%(default)s)")
    p.add_argument("--days", type=int, default=DEFAULT_DAYS, help="daily snapshots (%(default)s)")
    p.add_argument("--seed", type=int, default=DEFAULT_SEED, help="RNG seed (%(default)s)")
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        help="output directory (default: cache under bench/.work/ keyed by n and seed)",
    )
    p.add_argument("--force", action="store_true", help="regenerate even if cached")
    p.add_argument(
        "--json", action="store_true", help="print the day files as one JSON object on stdout"
    )
    args = p.parse_args(argv)
    t0 = time.perf_counter()
    files = generate(args.n, args.days, args.seed, args.out, force=args.force)
    if args.json:
        days = [{**asdict(f), "path": str(f.path.resolve())} for f in files]
        print(
            json.dumps({"gen_version": GEN_VERSION, "n": args.n, "seed": args.seed, "days": days})
        )
    else:
        for f in files:
            print(f.path)
    print(f"gen_parcels: done in {time.perf_counter() - t0:.1f}s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
