"""Row-level DELETE on Iceberg tables, as Athena runs it.

    DELETE FROM [db.]table [[AS] alias] [WHERE condition]

The condition is any the table's SELECT takes (subqueries on other tables included): the
rows it holds are found by a planned query, with the same access checks, over the table's
current snapshot. Each data file holding such rows is rewritten without them and the
change is committed as one overwrite snapshot, so a reader sees all of it or none of it.
Athena writes position-delete files instead and leaves the rows in the old files until
OPTIMIZE; lakeward's rewrite makes the same rows visible, and the old files leave the
table at the next snapshot expiry (VACUUM), as Athena's do.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.io.pyarrow import _dataframe_to_data_files
from pyiceberg.table import Table

from lakeward.access.arns import s3_arn
from lakeward.errors import InvalidRequest, QueryCancelled, QueryFailed
from lakeward.iceberg.catalog import is_iceberg
from lakeward.iceberg.commits import arrow_rows, commit_with_retries
from lakeward.iceberg.schemas import table_columns
from lakeward.query.engines.base import EngineResult
from lakeward.query.model import StatementType, TableRef
from lakeward.query.sql.names import Names
from lakeward.query.sql.queries import Statement, parse_query
from lakeward.query.sql.tokens import Cursor
from lakeward.query.statements.base import Command, Context
from lakeward.query.statements.ddl.parsing import Reader
from lakeward.query.types import quote_identifier as quote
from lakeward.storage.paths import lake_place

_GONE = "__lakeward_gone"


@dataclass
class Delete(Command):
    table: TableRef
    source: str  # the table as the statement names it, with its alias
    condition: str | None  # the WHERE's text
    names: Names
    statement_type: StatementType = StatementType.DML
    substatement_type: str | None = "DELETE"

    def catalogs(self) -> set[str]:
        return {self.table.catalog, *(t.catalog for t in self.tables_read())}

    def tables_read(self) -> tuple[TableRef, ...]:
        return self._select("true").tables

    def _select(self, projection: str, where: str | None = None) -> Statement:
        sql = f"SELECT {projection} FROM {self.source}"
        if where or self.condition:
            sql += f" WHERE {where or self.condition}"
        return parse_query(sql, self.names)

    def run(self, context: Context) -> EngineResult:
        ref = self.table
        catalog = context.catalog(ref.catalog)
        info = catalog.table(ref.database, ref.table)
        if not is_iceberg(info.parameters):
            raise InvalidRequest(
                f"DELETE is only supported for Iceberg tables: {ref} is a Hive table"
            )
        context.authorize_table(["glue:UpdateTable"], ref)
        place = lake_place(context.settings, info.location)
        if place is not None:
            objects = s3_arn(place[0], f"{place[1].rstrip('/')}/*")
            context.authorize("s3:PutObject", objects)
            context.authorize("s3:DeleteObject", objects)
        iceberg = catalog.iceberg(context.settings)
        table = iceberg.load_table((ref.database, ref.table))
        columns = [c.name for c in table_columns(table.schema())]
        gone = "true" if self.condition is None else f"coalesce(({self.condition}), false)"
        projection = ", ".join([*(quote(c) for c in columns), '"$path"', f"{gone} AS {_GONE}"])
        plan = context.plan(self._select(projection, where="true"))
        result = plan.engine.execute(context.execution.id, plan.sql, plan.tables, plan.limits)
        rows = pa.Table.from_batches(list(result.batches)) if result.columns else None
        if rows is None or rows.num_rows == 0:
            return _count_result(0, result.bytes_scanned)
        removed = pc.sum(rows.column(_GONE).cast(pa.int64())).as_py() or 0
        if removed == 0:
            return _count_result(0, result.bytes_scanned)
        paths = rows.column("$path")
        touched = set(pc.unique(pc.filter(paths, rows.column(_GONE))).to_pylist())
        keep = pc.and_(pc.is_in(paths, pa.array(sorted(touched))), pc.invert(rows.column(_GONE)))
        kept = arrow_rows(rows.filter(keep).select(columns).to_batches(), table.schema().as_arrow())
        if context.cancelled():
            raise QueryCancelled("the query was cancelled")
        commit_with_retries(
            iceberg, (ref.database, ref.table), lambda t: _rewrite(t, touched, kept)
        )
        return _count_result(removed, result.bytes_scanned)


def _rewrite(table: Table, touched: set[str], kept: pa.Table) -> None:
    """One overwrite snapshot: the touched data files out, their remaining rows in."""
    live = {task.file.file_path: task.file for task in table.scan().plan_files()}
    missing = sorted(touched - set(live))
    if missing:  # another writer removed or rewrote them since the rows were read
        raise QueryFailed(
            f"ICEBERG_COMMIT_ERROR: data file {missing[0]} changed while the DELETE ran; "
            "run it again"
        )
    with (
        table.transaction() as transaction,
        transaction.update_snapshot().overwrite() as overwrite,
    ):
        for path in sorted(touched):
            overwrite.delete_data_file(live[path])
        if kept.num_rows:
            for data_file in _dataframe_to_data_files(
                table_metadata=transaction.table_metadata,
                df=kept,
                io=table.io,
                write_uuid=overwrite.commit_uuid,
            ):
                overwrite.append_data_file(data_file)


def _count_result(count: int, scanned: int) -> EngineResult:
    return EngineResult([], iter([]), scanned, update_count=count)


def parse_delete(sql: str, cursor: Cursor, names: Names) -> Command:
    reader = Reader(sql, cursor)
    reader.expect_words("DELETE", "FROM")
    first = reader.token()
    parts = reader.names(3, "a table name")
    ref = names.table(parts)
    if reader.word("AS"):
        reader.name("an alias")
    elif reader.token() is not None and reader.peek() != "WHERE":
        reader.name("an alias or WHERE")
    assert first is not None
    end = reader.tokens[reader.pos - 1]
    source = sql[first.start : end.end + 1]
    condition = None
    if reader.word("WHERE"):
        start = reader.token()
        if start is None:
            reader.fail("expected a condition")
        condition = sql[start.start : reader.tokens[-1].end + 1]
        reader.cursor.pos = len(reader.tokens)
    reader.done()
    command = Delete(ref, source, condition, names)
    command.tables_read()  # a condition that does not parse is refused now
    return command
