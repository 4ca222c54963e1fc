"""Relational tables: ``DELETE … WHERE <column> IN (:ids)``, one transaction per table.

The table is reflected first, so that the ids are bound with the column's own
type (an integer column gets integers) and every name is quoted by SQLAlchemy:
ids are bound parameters, never SQL text.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.exc import NoSuchTableError, SQLAlchemyError

from lakeward.erasure.executors.base import RELATIONAL, Executor, Outcome, Target
from lakeward.errors import InputError, StorageError
from lakeward.sqlstate import open_foreign_engine
from lakeward.storage import Storage


def split_location(uri: str) -> tuple[str | None, str, str]:
    """``[database.]table.column`` as (schema or None, table, column)."""
    parts = uri.split(".")
    if len(parts) < 2:
        raise InputError(f"{uri!r} is not a database.table.column location")
    schema = parts[-3] if len(parts) >= 4 else None
    return schema, parts[-2], parts[-1]


class RelationalExecutor(Executor):
    layer = RELATIONAL

    def __init__(self, storage: Storage) -> None:
        super().__init__(storage)
        self._engines: dict[str, sa.Engine] = {}
        self._lock = threading.Lock()

    def _engine(self, target: Target) -> sa.Engine:
        if not target.connection:
            raise InputError(f"{target.uri}: the relational layer has no connection URL")
        with self._lock:
            engine = self._engines.get(target.connection)
            if engine is None:
                engine = open_foreign_engine(target.connection)
                self._engines[target.connection] = engine
            return engine

    def _table(self, conn: sa.Connection, target: Target) -> tuple[sa.Table, sa.Column[Any]]:
        schema, name, column = split_location(target.uri)
        try:
            table = sa.Table(name, sa.MetaData(), schema=schema, autoload_with=conn)
        except NoSuchTableError:
            raise InputError(f"{target.uri}: no table {name!r}") from None
        if column not in table.c:
            raise InputError(f"{target.uri}: the table {name!r} has no column {column!r}")
        return table, table.c[column]

    def _ids(self, column: sa.Column[Any], user_ids: Sequence[str]) -> list[Any]:
        try:
            kind = column.type.python_type
        except NotImplementedError:
            return list(user_ids)
        if kind is int:
            return [int(u) for u in user_ids if u.lstrip("-").isdigit()]
        return list(user_ids)

    def purge(self, target: Target, user_ids: Sequence[str]) -> Outcome:
        try:
            with self._engine(target).begin() as conn:
                table, column = self._table(conn, target)
                ids = self._ids(column, user_ids)
                before = conn.scalar(sa.select(sa.func.count()).select_from(table)) or 0
                removed = conn.execute(sa.delete(table).where(column.in_(ids))).rowcount
        except SQLAlchemyError as exc:
            raise StorageError(
                f"could not delete from {target.uri}: {getattr(exc, 'orig', None) or exc}"
            ) from None
        return Outcome(
            target.uri,
            self.layer,
            "rows-deleted" if removed else "unchanged",
            removed=removed,
            note=f"{before} rows before, {before - removed} after",
        )

    def count(self, target: Target, user_ids: Sequence[str]) -> int:
        try:
            with self._engine(target).connect() as conn:
                table, column = self._table(conn, target)
                query = sa.select(sa.func.count()).select_from(table)
                return conn.scalar(query.where(column.in_(self._ids(column, user_ids)))) or 0
        except SQLAlchemyError as exc:
            raise StorageError(
                f"could not read {target.uri}: {getattr(exc, 'orig', None) or exc}"
            ) from None

    def close(self) -> None:
        for engine in self._engines.values():
            engine.dispose()
