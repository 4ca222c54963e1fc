"""OPTIMIZE and VACUUM of an Iceberg table, as Athena runs them.

    OPTIMIZE [db.]table REWRITE DATA USING BIN_PACK [WHERE condition]
    VACUUM [db.]table

The table's properties say what each does (``lakeward.iceberg.maintenance``). OPTIMIZE's
condition picks the data files holding a row it holds, through a planned query. Both need
``glue:UpdateTable`` on the table and ``s3:PutObject`` and ``s3:DeleteObject`` on its place.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.table import Table

from lakeward.iceberg import maintenance
from lakeward.iceberg.commits import commit_with_retries
from lakeward.query.engines.base import EngineResult
from lakeward.query.model import StatementType
from lakeward.query.sql.names import Names
from lakeward.query.sql.queries import parse_query
from lakeward.query.sql.tokens import Cursor
from lakeward.query.statements.base import Command, Context, no_rows
from lakeward.query.statements.ddl.common import TableCommand, table_ref
from lakeward.query.statements.ddl.parsing import Reader
from lakeward.query.statements.writes.rows import open_for_change


@dataclass
class Optimize(TableCommand):
    condition: str | None = None
    names: Names | None = None
    statement_type: StatementType = StatementType.DML
    substatement_type: str | None = "OPTIMIZE"

    def run(self, context: Context) -> EngineResult:
        iceberg, _ = open_for_change(context, self.ref, "OPTIMIZE")
        among = None if self.condition is None else self._files_matching(context)
        identifier = (self.ref.database, self.ref.table)

        def change(current: Table) -> None:
            maintenance.optimize(current, maintenance.files_to_rewrite(current, among))

        commit_with_retries(iceberg, identifier, change)
        return no_rows()

    def _files_matching(self, context: Context) -> set[str]:
        assert self.names is not None
        select = parse_query(
            f'SELECT DISTINCT "$path" FROM {self.ref.catalog}.{self.ref.database}.'
            f"{self.ref.table} WHERE {self.condition}",
            self.names,
        )
        plan = context.plan(select)
        result = plan.engine.execute(context.execution.id, plan.sql, plan.tables, plan.limits)
        batches = list(result.batches)
        if not batches:
            return set()
        paths = pa.Table.from_batches(batches).column(0)
        return set(pc.drop_null(paths).to_pylist())


@dataclass
class Vacuum(TableCommand):
    statement_type: StatementType = StatementType.DML
    substatement_type: str | None = "VACUUM"

    def run(self, context: Context) -> EngineResult:
        iceberg, table = open_for_change(context, self.ref, "VACUUM")
        identifier = (self.ref.database, self.ref.table)

        def expire(ids: list[int]) -> Table:
            def change(current: Table) -> None:
                still_there = [i for i in ids if current.snapshot_by_id(i) is not None]
                current.maintenance.expire_snapshots().by_ids(still_there).commit()

            commit_with_retries(iceberg, identifier, change)
            return iceberg.load_table(identifier)

        maintenance.vacuum(table, expire)
        return no_rows()


def parse_optimize(sql: str, cursor: Cursor, names: Names) -> Command:
    reader = Reader(sql, cursor)
    reader.expect("OPTIMIZE")
    ref = table_ref(reader, names)
    reader.expect_words("REWRITE", "DATA", "USING", "BIN_PACK")
    condition = None
    if reader.word("WHERE"):
        start = reader.token()
        if start is None:
            reader.fail("expected a condition")
        condition = sql[start.start : reader.tokens[-1].end + 1]
        reader.cursor.pos = len(reader.tokens)
    reader.done()
    command = Optimize(ref, condition, names)
    if condition is not None:  # a condition that does not parse is refused now
        parse_query(
            f"SELECT 1 FROM {ref.catalog}.{ref.database}.{ref.table} WHERE {condition}", names
        )
    return command


def parse_vacuum(sql: str, cursor: Cursor, names: Names) -> Command:
    reader = Reader(sql, cursor)
    reader.expect("VACUUM")
    ref = table_ref(reader, names)
    reader.done()
    return Vacuum(ref)
