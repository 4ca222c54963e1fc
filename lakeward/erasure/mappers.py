"""Data mappers: which datasets of the lake are indexed, how they are read, where the ids are.

Mappers come from two places, merged by name (the settings win):

* the ``[erasure]`` section of the settings (``[[erasure.datasets]]`` and
  ``[[erasure.relational]]`` tables, see ``lakeward.config.ErasureSettings``);
* datasets registered in the index database (``IndexStore.register_dataset``),
  as ``lakeward demo-data gdpr`` does, so that the server and every command see
  them without editing the stack file.

An object belongs to the dataset with the longest prefix that matches
``<bucket>/<key>``; an object matching none is outside the indexed prefixes.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from lakeward.config import ErasureDataset, ErasureRelational, Settings
from lakeward.errors import ConfigError

COMPOSITE_SEPARATOR = "\x1f"
"""Joins the parts of a composite id (ASCII unit separator, which no id text contains)."""

SIDECAR_SUFFIX = ".meta.json"
"""A sidecar ``<object>.meta.json`` names the user ids held by ``<object>``."""

LAKE_LAYER = "lake"
"""The storage layer of objects in the lake; relational layers are named ``database``."""
DATABASE_LAYER = "database"


def composite_id(parts: Sequence[str]) -> str:
    """The id stored (and looked up) for a composite key: its parts, in mapper order."""
    return COMPOSITE_SEPARATOR.join(parts)


@dataclass(frozen=True)
class DatasetMapper:
    """An object dataset: objects under ``bucket/key_prefix`` in one format."""

    name: str
    bucket: str
    key_prefix: str
    format: str  # jsonl | csv | parquet | filename | sidecar
    compression: str  # none | gzip | auto
    id_columns: tuple[str, ...]

    @classmethod
    def from_settings(cls, item: ErasureDataset) -> DatasetMapper:
        bucket, _, key_prefix = item.prefix.strip("/").partition("/")
        if not bucket:
            raise ConfigError(f"erasure dataset {item.name}: prefix must be <bucket>/<key prefix>")
        if key_prefix and item.prefix.endswith("/"):
            key_prefix += "/"
        return cls(
            name=item.name,
            bucket=bucket,
            key_prefix=key_prefix,
            format=item.format,
            compression=item.compression,
            id_columns=tuple(item.id_columns),
        )

    def to_settings(self) -> ErasureDataset:
        return ErasureDataset(
            name=self.name,
            prefix=f"{self.bucket}/{self.key_prefix}",
            format=self.format,  # type: ignore[arg-type]
            compression=self.compression,  # type: ignore[arg-type]
            id_columns=list(self.id_columns),
        )

    @property
    def prefix(self) -> str:
        return f"{self.bucket}/{self.key_prefix}"

    def covers(self, bucket: str, key: str) -> bool:
        """Whether an object belongs to this dataset (a sidecar dataset: only its sidecars)."""
        if bucket != self.bucket or not key.startswith(self.key_prefix):
            return False
        return self.format != "sidecar" or key.endswith(SIDECAR_SUFFIX)


@dataclass(frozen=True)
class RelationalMapper:
    """A relational layer: one column of one table holding user ids."""

    name: str
    url: str
    table: str
    column: str
    database: str

    @classmethod
    def from_settings(cls, item: ErasureRelational) -> RelationalMapper:
        return cls(
            name=item.name,
            url=item.url,
            table=item.table,
            column=item.column,
            database=item.database or item.name,
        )

    def to_settings(self) -> ErasureRelational:
        return ErasureRelational(
            name=self.name,
            url=self.url,
            table=self.table,
            column=self.column,
            database=self.database,
        )

    @property
    def location(self) -> str:
        """``database.table.column``, as find reports it."""
        return f"{self.database}.{self.table}.{self.column}"


@dataclass(frozen=True)
class Mappers:
    datasets: tuple[DatasetMapper, ...]
    relational: tuple[RelationalMapper, ...]

    def dataset_for(self, bucket: str, key: str) -> DatasetMapper | None:
        """The dataset an object belongs to (longest prefix wins), or None."""
        best: DatasetMapper | None = None
        for mapper in self.datasets:
            if mapper.covers(bucket, key) and (
                best is None or len(mapper.key_prefix) > len(best.key_prefix)
            ):
                best = mapper
        return best

    def dataset(self, name: str) -> DatasetMapper:
        for mapper in self.datasets:
            if mapper.name == name:
                return mapper
        raise ConfigError(f"no erasure dataset named {name!r}")


def mapper_to_spec(mapper: DatasetMapper | RelationalMapper) -> tuple[str, dict[str, Any]]:
    """(kind, JSON-able spec) as the index database's datasets table stores a mapper."""
    if isinstance(mapper, DatasetMapper):
        return "objects", mapper.to_settings().model_dump(mode="json")
    return "relational", mapper.to_settings().model_dump(mode="json")


def mapper_from_spec(kind: str, spec: dict[str, Any]) -> DatasetMapper | RelationalMapper:
    if kind == "objects":
        return DatasetMapper.from_settings(ErasureDataset.model_validate(spec))
    if kind == "relational":
        return RelationalMapper.from_settings(ErasureRelational.model_validate(spec))
    raise ConfigError(f"unknown kind of registered erasure dataset: {kind!r}")


def merge_mappers(
    settings: Settings, registered: Iterable[DatasetMapper | RelationalMapper]
) -> Mappers:
    """The settings' mappers plus the registered ones whose names the settings don't use."""
    datasets = {d.name: DatasetMapper.from_settings(d) for d in settings.erasure.datasets}
    relational = {r.name: RelationalMapper.from_settings(r) for r in settings.erasure.relational}
    for mapper in registered:
        if isinstance(mapper, DatasetMapper):
            datasets.setdefault(mapper.name, mapper)
        else:
            relational.setdefault(mapper.name, mapper)
    return Mappers(tuple(datasets.values()), tuple(relational.values()))
