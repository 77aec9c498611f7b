"""A zipped shapefile or FileGDB made readable for GDAL: the shapefile parts, or the
`.gdb` folder's contents, picked from the zip (folders and `__MACOSX/` left out,
checked for the parts a format needs and for the source's size limit) and put at the
root of a new zip (formats/spatial/gis.py reads it)."""

from __future__ import annotations

import io
import posixpath
import zipfile
from collections.abc import Callable

from feedledger.model.errors import BadPayloadError

_SHP_REQUIRED = (".shp", ".shx", ".dbf")
_SHP_PARTS = (*_SHP_REQUIRED, ".prj", ".cpg")
_IGNORED_MEMBERS = ("__MACOSX/",)


def repack(
    data: bytes, fmt: str, bad: Callable[[str], BadPayloadError], max_bytes: int | None = None
) -> bytes:
    """The zip's shapefile parts / `.gdb` folder contents at the root of a new zip."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            names = member_names(zf)
            picked = (
                _shapefile_members(names, bad) if fmt == "shapefile" else _gdb_members(names, bad)
            )
            size = sum(zf.getinfo(member).file_size for member in picked)
            if max_bytes is not None and size > max_bytes:
                raise bad(
                    f"the zipped {fmt} holds {size:,} bytes uncompressed, more than this "
                    f"source's max_payload_bytes of {max_bytes:,} (a decompression bomb?); "
                    "not read"
                )
            out = io.BytesIO()
            with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as dest:
                for member, target in picked.items():
                    dest.writestr(target, zf.read(member))
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, OSError, ValueError) as exc:
        what = "a .zip holding .shp/.shx/.dbf" if fmt == "shapefile" else "a zipped NAME.gdb folder"
        said = " ".join(str(exc).split()) or type(exc).__name__  # zipfile's: one line
        raise bad(f"not a readable zip (truncated or corrupt; a {fmt} is {what}): {said}") from exc
    return out.getvalue()


def member_names(zf: zipfile.ZipFile) -> list[str]:
    return [
        info.filename
        for info in zf.infolist()
        if not info.is_dir() and not info.filename.startswith(_IGNORED_MEMBERS)
    ]


def _shapefile_members(names: list[str], bad: Callable[[str], BadPayloadError]) -> dict[str, str]:
    by_stem: dict[str, dict[str, str]] = {}
    for name in names:
        stem, ext = posixpath.splitext(name)
        if ext.lower() in _SHP_PARTS:
            by_stem.setdefault(stem, {})[ext.lower()] = name
    shapefiles = {stem: parts for stem, parts in by_stem.items() if ".shp" in parts}
    if not shapefiles:
        raise bad(f"the zip holds no .shp file ({listing(names) or 'it is empty'})")
    picked: dict[str, str] = {}
    for stem, parts in sorted(shapefiles.items()):
        missing = [ext for ext in _SHP_REQUIRED if ext not in parts]
        if missing:
            raise bad(
                f"the shapefile {posixpath.basename(stem)}.shp in the zip lacks its "
                f"{' and '.join(missing)} (a shapefile needs .shp, .shx and .dbf)"
            )
        for ext, member in parts.items():
            target = posixpath.basename(stem) + ext
            if target in picked.values():
                raise bad(f"the zip holds two shapefiles named {posixpath.basename(stem)}.shp")
            picked[member] = target
    return picked


def gdb_folders(names: list[str]) -> set[str]:
    folders = set()
    for name in names:
        parts = name.split("/")
        for i, part in enumerate(parts[:-1]):
            if part.lower().endswith(".gdb"):
                folders.add("/".join(parts[: i + 1]) + "/")
                break
    return folders


def _gdb_members(names: list[str], bad: Callable[[str], BadPayloadError]) -> dict[str, str]:
    folders = gdb_folders(names)
    if len(folders) > 1:
        raise bad(f"the zip holds {len(folders)} .gdb folders ({listing(sorted(folders))})")
    if folders:
        (folder,) = folders
        return {n: n[len(folder) :] for n in names if n.startswith(folder)}
    if any(n.lower().endswith(".gdbtable") and "/" not in n for n in names):
        return {n: n for n in names}  # the folder's contents already at the root
    raise bad(f"the zip holds no NAME.gdb folder ({listing(names) or 'it is empty'})")


def listing(names: list[str], limit: int = 20) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f", … ({len(names) - limit} more)" if len(names) > limit else "")
