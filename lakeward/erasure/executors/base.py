"""What every purge executor shares: its target, its outcome, and the rules of a rewrite.

An executor is given one *target* — an object with the eTag the report saw, or
a table — and the user ids to remove from it. It either finishes the target
(the object rewritten atomically, or deleted, or the table's rows deleted) or
changes nothing. A rewrite is conditional: when the object's eTag is no longer
the report's, the executor raises ``ObjectChangedSincePlan`` and the caller re-plans
that object from the index rather than overwrite newer data.
"""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from lakeward.errors import (
    ObjectChangedSincePlan,
    ObjectNotFound,
    PreconditionFailed,
)
from lakeward.failpoints import failpoint
from lakeward.storage import ObjectInfo, Storage

# Layers: what kind of place a target is, which picks its executor.
JSON_LINES = "jsonl"
CSV = "csv"
PARQUET = "parquet"
FILE_NAME = "filename"
RELATIONAL = "relational"
DELTA = "delta"
ICEBERG = "iceberg"
HUDI = "hudi"

OBJECT_LAYERS = (JSON_LINES, CSV, PARQUET, FILE_NAME)
TABLE_LAYERS = (RELATIONAL, DELTA, ICEBERG, HUDI)


@dataclass(frozen=True)
class Target:
    """One place to purge: an object (bucket, key, eTag) or a table (location, column)."""

    layer: str
    uri: str
    """Object URI, table location, or ``database.table.column`` for relational rows."""
    bucket: str = ""
    key: str = ""
    etag: str | None = None
    size: int = 0
    positions: tuple[int, ...] = ()
    """As the index gives them: 1-based line numbers (JSON lines), 1-based record
    numbers (CSV), 0-based row indexes (Parquet)."""
    id_columns: tuple[str, ...] = ("user_id",)
    """The record's id: column names or JSON paths (``$.a.b``); several make a composite."""
    compression: str | None = None
    """``gzip``, ``auto`` (gzip when the content starts with gzip's magic) or None."""
    connection: str | None = None
    """The SQLAlchemy URL of a relational target."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "layer": self.layer,
            "uri": self.uri,
            "bucket": self.bucket,
            "key": self.key,
            "etag": self.etag,
            "size": self.size,
            "positions": list(self.positions),
            "id_columns": list(self.id_columns),
            "compression": self.compression,
            "connection": self.connection,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Target:
        return cls(
            **{
                **data,
                "positions": tuple(data.get("positions") or ()),
                "id_columns": tuple(data.get("id_columns") or ("user_id",)),
            }
        )


@dataclass
class Outcome:
    """What an executor did to one target; JSON-ready for the report and certificate."""

    uri: str
    layer: str
    action: str
    """``rewritten``, ``deleted``, ``rows-deleted``, ``missing`` or ``unchanged``."""
    removed: int = 0
    remaining: int = 0
    before_sha256: str | None = None
    after_sha256: str | None = None
    before_etag: str | None = None
    after_etag: str | None = None
    before_size: int = 0
    after_size: int = 0
    retained: list[dict[str, str]] = field(default_factory=list)
    """Copies that keep data alive (old versions, snapshots) and whether they were removed."""
    note: str = ""

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class Executor(ABC):
    """Removes the records of some user ids from one kind of target."""

    layer: str

    def __init__(self, storage: Storage) -> None:
        self.storage = storage

    @abstractmethod
    def purge(self, target: Target, user_ids: Sequence[str]) -> Outcome:
        """Remove the ids' records from ``target``; raise ``ObjectChangedSincePlan`` to re-plan."""

    @abstractmethod
    def count(self, target: Target, user_ids: Sequence[str]) -> int:
        """How many records of the ids ``target`` holds now (verification reads it again)."""

    def read(self, target: Target) -> bytes:
        """The object's bytes; ``ObjectChangedSincePlan`` when they are not the report's."""
        if target.etag is not None and "-" in target.etag:
            # A multipart upload's eTag is no MD5 of the content: compare it before and
            # after the read instead (the write that follows is conditional on it too).
            before = self.storage.stat(target.bucket, target.key).etag
            data = self.storage.get(target.bucket, target.key)
            after = self.storage.stat(target.bucket, target.key).etag
            if not before == after == target.etag:
                raise ObjectChangedSincePlan(
                    f"{target.uri} changed since the report (eTag differs)"
                )
            return data
        data = self.storage.get(target.bucket, target.key)
        if target.etag is not None and md5_hex(data) != target.etag:
            raise ObjectChangedSincePlan(f"{target.uri} changed since the report (eTag differs)")
        return data

    def current(self, target: Target) -> bytes | None:
        """The object's bytes as they are now (verification), or None when it is gone."""
        try:
            return self.storage.get(target.bucket, target.key)
        except ObjectNotFound:
            return None

    def finish(
        self,
        target: Target,
        raw: bytes,
        new: bytes | None,
        removed: int,
        before_sha256: str | None = None,
    ) -> Outcome:
        """Write ``new`` over the object (None: leave it) and say what was done.

        ``before_sha256`` is ``raw``'s SHA-256 when the caller already has it.
        """
        before = before_sha256 or sha256_hex(raw)
        outcome = Outcome(
            target.uri,
            self.layer,
            "unchanged",
            removed=removed,
            before_sha256=before,
            after_sha256=before,
            before_etag=target.etag,
            after_etag=target.etag,
            before_size=len(raw),
            after_size=len(raw),
        )
        if new is not None:
            info = self.replace(target, new)
            outcome.after_etag, outcome.after_size = info.etag, info.size
            # The storage hashed what it wrote; hash again only if it did not say.
            outcome.after_sha256 = info.sha256 or sha256_hex(new)
            outcome.action = "rewritten"
        return outcome

    def replace(self, target: Target, data: bytes) -> ObjectInfo:
        """Write the new content over the object, only if it is still the report's."""
        failpoint("before-write")
        try:
            if target.etag is None:
                info = self.storage.put(target.bucket, target.key, data)
            else:
                info = self.storage.put_if_match(target.bucket, target.key, data, target.etag)
        except PreconditionFailed as exc:
            raise ObjectChangedSincePlan(str(exc)) from None
        return info


GZIP_MAGIC = b"\x1f\x8b"


def gzipped(target: Target, raw: bytes) -> bool:
    """Whether an object's content is gzip, as its mapper says or (``auto``) its bytes do."""
    return target.compression == "gzip" or (target.compression == "auto" and raw[:2] == GZIP_MAGIC)


def md5_hex(data: bytes) -> str:
    return hashlib.md5(data, usedforsecurity=False).hexdigest()


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sql_string(value: str) -> str:
    """A SQL string literal of ``value`` (quotes doubled): ids are data, never code."""
    return "'" + value.replace("'", "''") + "'"
