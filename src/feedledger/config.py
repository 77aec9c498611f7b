"""The workspace: `feedledger.toml` (store URL, archive location, sources).

Bottom layer (beside archive/sources): reads the config file with the standard
library's `tomllib` (every command does: 8 ms for a fleet's file of 300 sources, where
tomlkit took 62), writes it with tomlkit (user comments are preserved; the document is parsed
only when a command changes it) and validates it with pydantic.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from feedledger.model.errors import ConfigError, SourceNotFound
from feedledger.model.source import SourceConfig, format_from_name

CONFIG_NAME = "feedledger.toml"
DEFAULT_STORE = "sqlite:///.feedledger/ledger.db"
DEFAULT_ARCHIVE = ".feedledger/archive"
ENV_CONFIG = "FEEDLEDGER_CONFIG"
ENV_STORE = "FEEDLEDGER_STORE"
ARCHIVE_URL_SCHEME = "s3://"
# [archive] never holds credentials: they come from the AWS environment or profile
_CREDENTIAL_WORDS = ("key", "secret", "token", "password", "credential", "profile")


def _pydantic_message(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"])
        msg = str(err["msg"]).removeprefix("Value error, ")
        # a check across fields (the connector's options) names its fields itself
        parts.append(f"{loc}: {msg}" if loc else msg)
    return "; ".join(parts)


def make_source(name: str, **values: Any) -> SourceConfig:
    """Validate a source declaration, turning pydantic errors into one clear ConfigError.
    `format=None` (or absent) is decided here: an ArcGIS layer is a GeoJSON sequence, a
    Socrata dataset JSON, otherwise `fetch`'s extension says (csv when it does not)."""
    if values.get("format") is None:
        values.pop("format", None)
        fmt = _default_format(values)
        if fmt is not None:
            values["format"] = fmt
    try:
        return SourceConfig(name=name, **values)
    except ValidationError as exc:
        raise ConfigError(
            f"invalid source declaration: {_pydantic_message(exc)}", source=name
        ) from exc


def _default_format(values: dict[str, Any]) -> str | None:
    connector = values.get("connector")
    if connector == "arcgis":
        return "geojsonseq"
    if connector == "socrata":
        return "json"
    fetch = values.get("fetch")
    return format_from_name(fetch) if isinstance(fetch, str) else None


def resolve_store_url(url: str, root: Path) -> str:
    """Make a relative SQLite path absolute against the workspace root."""
    prefix = "sqlite:///"
    if url.startswith(prefix) and not url.startswith("sqlite:////"):
        rel = url[len(prefix) :]
        if rel and rel != ":memory:" and not rel.startswith("/"):
            return prefix + str((root / rel).resolve())
    return url


def _archive_settings(table: Any, root: Path) -> tuple[str, str | None]:
    """(location, endpoint_url) from the [archive] table: an absolute folder or an s3:// URL
    (checked when the archive is opened), and the object store's endpoint if given."""
    if not isinstance(table, dict):
        raise ConfigError(f"[archive] in {CONFIG_NAME} must be a table")
    for name in table:
        if name not in ("path", "endpoint_url") and any(
            word in name.lower() for word in _CREDENTIAL_WORDS
        ):
            raise ConfigError(
                f"[archive] {name}: credentials are never read from {CONFIG_NAME}",
                hint="remove it and use the standard AWS environment variables or profile "
                "(AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE)",
            )
    path = table.get("path", DEFAULT_ARCHIVE)
    endpoint = table.get("endpoint_url")
    if not isinstance(path, str) or not path:
        raise ConfigError("[archive] path must be a folder or an s3://BUCKET/PREFIX URL")
    if endpoint is not None and not isinstance(endpoint, str):
        raise ConfigError("[archive] endpoint_url must be a URL such as http://127.0.0.1:9000")
    if path.startswith(ARCHIVE_URL_SCHEME):
        return path, endpoint or None
    if "://" in path:
        raise ConfigError(
            f"[archive] path {path!r} is neither a folder nor an s3:// URL",
            hint="use a path, or s3://BUCKET/PREFIX for S3-compatible object storage",
        )
    folder = (root / path).resolve()
    if folder.exists() and not folder.is_dir():
        raise ConfigError(
            f"[archive] path {folder} is a file, not a folder",
            hint=f"point [archive] path in {CONFIG_NAME} at a folder (created if missing)",
        )
    return str(folder), endpoint or None


@dataclass
class Workspace:
    root: Path
    config_path: Path
    store_url: str
    # an absolute folder, or s3://bucket/prefix on S3-compatible object storage
    archive_location: str
    sources: dict[str, SourceConfig] = field(default_factory=dict)
    # the object store's endpoint from [archive] endpoint_url (not a secret); the
    # AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL variables take precedence when opening
    archive_endpoint_url: str | None = None
    # the file's values as read (tomllib) and its text; the tomlkit document of that text
    # (comments and layout kept) is parsed only to write the file (`_document`)
    _data: dict[str, Any] = field(default_factory=dict)
    _text: str | None = None
    _doc: Any = None

    @property
    def archive_is_local(self) -> bool:
        return not self.archive_location.startswith(ARCHIVE_URL_SCHEME)

    def archive_keyframe_every(self, source: str) -> int:
        """[archive] full_frame_every: a standalone compressed frame (a keyframe) every K
        payloads of a source (default 30; 1: no deltas; 0: stored raw, uncompressed); a
        table gives K per source
        (`default` the rest). Not "keyframe_every": names with "key" are refused above."""
        table = self._data.get("archive", {})
        value = table.get("full_frame_every", 30) if isinstance(table, dict) else 30
        if isinstance(value, dict):
            value = value.get(source, value.get("default", 30))
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ConfigError(
                f"[archive] full_frame_every must be a whole number >= 0, or a table of them "
                f"per source, not {value!r}"
            )
        return int(value)

    def _check_full_frame_every(self) -> None:
        """Every [archive] full_frame_every value checked when the file is loaded: a bad
        one is refused by every command, not first by the next payload archived."""
        table = self._data.get("archive", {})
        value = table.get("full_frame_every") if isinstance(table, dict) else None
        for source in value if isinstance(value, dict) else ["default"]:
            self.archive_keyframe_every(str(source))

    @property
    def archive_root(self) -> Path:
        """The archive folder; ConfigError when the archive is on object storage."""
        if not self.archive_is_local:
            raise ConfigError(
                f"the archive is {self.archive_location}, not a local folder",
                hint="this needs a local archive ([archive] path in feedledger.toml)",
            )
        return Path(self.archive_location)

    @property
    def state_dir(self) -> Path:
        """Local, derived, disposable files (the diff-state cache)."""
        return self.root / ".feedledger" / "cache"

    def source(self, name: str) -> SourceConfig:
        try:
            return self.sources[name]
        except KeyError:
            known = ", ".join(sorted(self.sources)) or "none declared yet"
            raise SourceNotFound(
                "unknown source",
                source=name,
                hint=f"known sources: {known}; declare one with `feedledger source add`",
            ) from None

    # -- persistence -----------------------------------------------------------------
    @classmethod
    def locate(cls, config: Path | None = None) -> Path:
        if config is not None:
            return config
        env = os.environ.get(ENV_CONFIG)
        if env:
            return Path(env)
        return Path.cwd() / CONFIG_NAME

    @classmethod
    def load(cls, config: Path | None = None) -> Workspace:
        path = cls.locate(config).resolve()
        if not path.exists():
            raise ConfigError(
                f"no {CONFIG_NAME} at {path}",
                hint=f"run `feedledger init` in this folder, or pass --config / set {ENV_CONFIG}",
            )
        if path.is_dir():
            raise ConfigError(
                f"{path} is a folder, not a {CONFIG_NAME} file",
                hint=f"pass --config {path / CONFIG_NAME} (or set {ENV_CONFIG} to the file)",
            )
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from exc
        except UnicodeDecodeError as exc:
            raise ConfigError(f"{path} is not valid TOML: {exc}") from exc
        data = _parse(path, text)
        root = path.parent
        store = data.get("store", {}).get("url", DEFAULT_STORE)
        store = os.environ.get(ENV_STORE) or store
        archive, endpoint = _archive_settings(data.get("archive", {}), root)
        sources: dict[str, SourceConfig] = {}
        for name, values in (data.get("sources") or {}).items():
            if not isinstance(values, dict):
                raise ConfigError(f"[sources.{name}] must be a table", source=name)
            sources[name] = make_source(name, **values)
        workspace = cls(
            root=root,
            config_path=path,
            store_url=resolve_store_url(str(store), root),
            archive_location=archive,
            sources=sources,
            archive_endpoint_url=endpoint,
            _data=data,
            _text=text,
        )
        workspace._check_full_frame_every()
        return workspace

    @classmethod
    def create(
        cls,
        root: Path,
        *,
        store_url: str | None,
        archive: str | None,
        archive_endpoint_url: str | None = None,
    ) -> Workspace:
        path = root / CONFIG_NAME
        if path.exists():
            raise ConfigError(f"{path} already exists; this folder is already a workspace")
        import tomlkit  # lazy: only a command that writes the file loads tomlkit

        doc = tomlkit.document()
        doc.add(
            tomlkit.comment(
                "feedledger workspace. Edit with `feedledger source add` "
                "or by hand; validated on every command."
            )
        )
        store_tbl = tomlkit.table()
        store_tbl.add("url", store_url or DEFAULT_STORE)
        doc.add("store", store_tbl)
        arch_tbl = tomlkit.table()
        arch_tbl.add("path", archive or DEFAULT_ARCHIVE)
        if archive_endpoint_url:
            arch_tbl.add("endpoint_url", archive_endpoint_url)
        doc.add("archive", arch_tbl)
        doc.add("sources", tomlkit.table(is_super_table=True))
        root.mkdir(parents=True, exist_ok=True)
        path.write_text(tomlkit.dumps(doc), encoding="utf-8")
        try:
            return cls.load(path)
        except ConfigError:
            path.unlink(missing_ok=True)
            raise

    def add_source(self, src: SourceConfig, *, replace: bool = False) -> None:
        if src.name in self.sources and not replace:
            raise ConfigError(
                "source already declared",
                source=src.name,
                hint="use --replace to change its declaration",
            )
        import tomlkit  # lazy: only a command that writes the file loads tomlkit

        doc = self._document()
        if "sources" not in doc:
            doc.add("sources", tomlkit.table(is_super_table=True))
        tbl = tomlkit.table()
        for key, value in src.model_dump(exclude={"name"}, mode="json").items():
            if value is None:
                continue
            tbl.add(key, list(value) if isinstance(value, tuple) else value)
        doc["sources"][src.name] = tbl
        self._write(doc)
        self.sources[src.name] = src

    def remove_source(self, name: str) -> None:
        self.source(name)
        doc = self._document()
        del doc["sources"][name]
        self._write(doc)
        del self.sources[name]

    def _document(self) -> Any:
        """The file's tomlkit document (its comments and layout), parsed once."""
        if self._doc is None:
            if self._text is None:
                raise ConfigError(
                    "this workspace has no feedledger.toml to change (opened in memory)",
                    hint="open a workspace folder (`feedledger.open(PATH)`) to declare sources",
                )
            import tomlkit  # lazy: only a command that writes the file loads tomlkit

            self._doc = tomlkit.parse(self._text)
        return self._doc

    def _write(self, doc: Any) -> None:
        import tomlkit  # lazy: only a command that writes the file loads tomlkit

        text = tomlkit.dumps(doc)
        tmp = self.config_path.with_suffix(".toml.tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, self.config_path)
        self._text = text


def _parse(path: Path, text: str) -> dict[str, Any]:
    """The file's values; ConfigError naming the line of the first mistake."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise _toml_error(path, exc) from exc


def _toml_error(path: Path, exc: tomllib.TOMLDecodeError) -> ConfigError:
    """One line naming the file, the mistake and its line and column (tomllib's words)."""
    # tomllib's words for a key given twice in a table, or a table declared twice
    repeated = str(exc).startswith(
        ("Cannot overwrite a value", "Cannot declare", "Duplicate inline table key")
    )
    hint = "a key may appear once per table: remove or rename the repeated one"
    return ConfigError(f"{path} is not valid TOML: {exc}", hint=hint if repeated else None)
