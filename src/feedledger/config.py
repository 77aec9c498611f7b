"""The workspace: `feedledger.toml` (store URL, archive folder, sources).

Bottom layer (beside archive/sources): reads and writes the config file with
tomlkit (user comments are preserved) and validates it with pydantic.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomlkit
from pydantic import ValidationError

from feedledger.model.errors import ConfigError, NotFoundError
from feedledger.model.source import SourceConfig

CONFIG_NAME = "feedledger.toml"
DEFAULT_STORE = "sqlite:///.feedledger/ledger.db"
DEFAULT_ARCHIVE = ".feedledger/archive"
ENV_CONFIG = "FEEDLEDGER_CONFIG"
ENV_STORE = "FEEDLEDGER_STORE"


def _pydantic_message(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "value"
        msg = str(err["msg"]).removeprefix("Value error, ")
        parts.append(f"{loc}: {msg}")
    return "; ".join(parts)


def make_source(name: str, **values: Any) -> SourceConfig:
    """Validate a source declaration, turning pydantic errors into one clear ConfigError."""
    try:
        return SourceConfig(name=name, **values)
    except ValidationError as exc:
        raise ConfigError(
            f"invalid source declaration: {_pydantic_message(exc)}", source=name
        ) from exc


def resolve_store_url(url: str, root: Path) -> str:
    """Make a relative SQLite path absolute against the workspace root."""
    prefix = "sqlite:///"
    if url.startswith(prefix) and not url.startswith("sqlite:////"):
        rel = url[len(prefix) :]
        if rel and rel != ":memory:" and not rel.startswith("/"):
            return prefix + str((root / rel).resolve())
    return url


@dataclass
class Workspace:
    root: Path
    config_path: Path
    store_url: str
    archive_root: Path
    sources: dict[str, SourceConfig] = field(default_factory=dict)
    _doc: Any = None

    @property
    def state_dir(self) -> Path:
        """Local, derived, disposable files (the diff-state cache)."""
        return self.root / ".feedledger" / "cache"

    def source(self, name: str) -> SourceConfig:
        try:
            return self.sources[name]
        except KeyError:
            known = ", ".join(sorted(self.sources)) or "none declared yet"
            raise NotFoundError(
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
        try:
            doc = tomlkit.parse(path.read_text(encoding="utf-8"))
        except (tomlkit.exceptions.ParseError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{path} is not valid TOML: {exc}") from exc
        root = path.parent
        data = doc.unwrap()
        store = data.get("store", {}).get("url", DEFAULT_STORE)
        store = os.environ.get(ENV_STORE) or store
        archive = data.get("archive", {}).get("path", DEFAULT_ARCHIVE)
        sources: dict[str, SourceConfig] = {}
        for name, values in (data.get("sources") or {}).items():
            if not isinstance(values, dict):
                raise ConfigError(f"[sources.{name}] must be a table", source=name)
            sources[name] = make_source(name, **values)
        return cls(
            root=root,
            config_path=path,
            store_url=resolve_store_url(str(store), root),
            archive_root=(root / archive).resolve(),
            sources=sources,
            _doc=doc,
        )

    @classmethod
    def create(cls, root: Path, *, store_url: str | None, archive: str | None) -> Workspace:
        path = root / CONFIG_NAME
        if path.exists():
            raise ConfigError(f"{path} already exists; this folder is already a workspace")
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
        doc.add("archive", arch_tbl)
        doc.add("sources", tomlkit.table(is_super_table=True))
        root.mkdir(parents=True, exist_ok=True)
        path.write_text(tomlkit.dumps(doc), encoding="utf-8")
        return cls.load(path)

    def add_source(self, src: SourceConfig, *, replace: bool = False) -> None:
        if src.name in self.sources and not replace:
            raise ConfigError(
                "source already declared",
                source=src.name,
                hint="use --replace to change its declaration",
            )
        doc = self._doc
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
        del self._doc["sources"][name]
        self._write(self._doc)
        del self.sources[name]

    def _write(self, doc: Any) -> None:
        tmp = self.config_path.with_suffix(".toml.tmp")
        tmp.write_text(tomlkit.dumps(doc), encoding="utf-8")
        os.replace(tmp, self.config_path)
