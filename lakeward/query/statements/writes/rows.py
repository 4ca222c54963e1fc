"""Row-level DELETE and UPDATE on Iceberg tables, as Athena runs them.

    DELETE FROM [db.]table [[AS] alias] [WHERE condition]
    UPDATE [db.]table SET column = expression [, ...] [WHERE condition]

The condition and the new values are any the table's SELECT takes (subqueries on other
tables included): the rows it holds are found by a planned query, with the same access
checks, over the table's current snapshot. Each data file holding such rows is rewritten
(without them, or with their new values, which must be of a type Trino coerces to the
column's) and the change is committed as one overwrite snapshot, so a reader sees all of it
or none of it.
Athena writes position-delete files instead and leaves the rows in the old files until
OPTIMIZE; lakeward's rewrite makes the same rows visible, and the old files leave the
table at the next snapshot expiry (VACUUM), as Athena's do.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import sqlglot
from pyiceberg.catalog import Catalog
from pyiceberg.table import Table
from sqlglot import exp

from lakeward.access.arns import s3_arn
from lakeward.errors import InvalidRequest, QueryCancelled
from lakeward.iceberg.catalog import is_iceberg
from lakeward.iceberg.commits import arrow_rows, commit_with_retries, live_files, replace_files
from lakeward.iceberg.rewrites import remove, rewritten, writes_directly
from lakeward.iceberg.schemas import table_columns
from lakeward.metastore.tables import Column
from lakeward.query.engines.base import EngineResult
from lakeward.query.engines.spark import SparkEngine
from lakeward.query.model import StatementType, TableRef
from lakeward.query.sql.names import Names
from lakeward.query.sql.queries import Statement, parse_query
from lakeward.query.sql.tokens import Cursor
from lakeward.query.statements.base import Command, Context
from lakeward.query.statements.ddl.parsing import Reader
from lakeward.query.statements.writes.commands import coercible
from lakeward.query.types import athena_type_of_hive, quote_string
from lakeward.query.types import quote_identifier as quote
from lakeward.storage.paths import lake_place

_HIT = "__lakeward_hit"


@dataclass
class _RowLevel(Command):
    """A change to some rows of an Iceberg table: the rows of the data files it touches are
    read with a planned query, and those files replaced in one overwrite snapshot."""

    table: TableRef
    source: str  # the table as the statement names it, with its alias
    condition: str | None  # the WHERE's text
    names: Names
    statement_type: StatementType = StatementType.DML
    verb = ""

    def catalogs(self) -> set[str]:
        return {self.table.catalog, *(t.catalog for t in self.tables_read())}

    def tables_read(self) -> tuple[TableRef, ...]:
        return self._select(self._projections(["true"])).tables

    def _projections(self, projections: list[str]) -> list[str]:
        return projections

    def _select(
        self, projections: list[str], where: str | None = None, group_by_path: bool = False
    ) -> Statement:
        sql = f"SELECT {', '.join(projections)} FROM {self.source}"
        if where or self.condition:
            sql += f" WHERE {where or self.condition}"
        if group_by_path:
            sql += ' GROUP BY "$path"'
        return parse_query(sql, self.names)

    def _hit(self) -> str:
        return "true" if self.condition is None else f"coalesce(({self.condition}), false)"

    def run(self, context: Context) -> EngineResult:
        ref = self.table
        iceberg, table = open_for_change(context, ref, self.verb)
        columns = table_columns(table.schema())
        self._check(context, columns)
        if context.group.engine == "spark":
            return self._run_in_spark(context, iceberg, table, columns)
        if self._keeps_partitions(table) and writes_directly(table):
            return self._rewrite(context, iceberg, table, columns)
        projections = [*self._values(columns), '"$path"', f"{self._hit()} AS {_HIT}"]
        plan = context.plan(self._select(projections, where="true"))
        result = plan.engine.execute(context.execution.id, plan.sql, plan.tables, plan.limits)
        rows = pa.Table.from_batches(list(result.batches)) if result.columns else None
        hits = 0 if rows is None else pc.sum(rows.column(_HIT).cast(pa.int64())).as_py() or 0
        if rows is None or hits == 0:
            return count_result(0, result.bytes_scanned)
        paths = rows.column("$path")
        touched = set(pc.unique(pc.filter(paths, rows.column(_HIT))).to_pylist())
        wanted = pc.is_in(paths, pa.array(sorted(touched)))
        if self.verb == "DELETE":
            wanted = pc.and_(wanted, pc.invert(rows.column(_HIT)))
        names = [c.name for c in columns]
        replacement = arrow_rows(
            rows.filter(wanted).select(names).to_batches(), table.schema().as_arrow()
        )
        if context.cancelled():
            raise QueryCancelled("the query was cancelled")
        commit_with_retries(
            iceberg,
            (ref.database, ref.table),
            lambda t: replace_files(t, touched, replacement, self.verb),
        )
        return count_result(hits, result.bytes_scanned)

    def _rewrite(
        self, context: Context, iceberg: Catalog, table: Table, columns: list[Column]
    ) -> EngineResult:
        """The files holding rows it changes, found first (by a query of the condition
        alone), then each rewritten beside itself by DuckDB's writer (iceberg/rewrites.py)
        as the query of its rows that stay streams them: no row is kept in memory."""
        finding = context.plan(self._select(['"$path"', "count(*)"], group_by_path=True))
        found = finding.engine.execute(
            context.execution.id, finding.sql, finding.tables, finding.limits
        )
        counts = {row[0]: int(row[1]) for batch in found.batches for row in _rows(batch)}
        hits = sum(counts.values())
        if hits == 0:
            return count_result(0, found.bytes_scanned)
        touched = live_files(table, set(counts), self.verb)
        listed = ", ".join(quote_string(f.file_path) for f in touched)
        where = f'"$path" IN ({listed})'
        if self.verb == "DELETE":
            where += f" AND NOT {self._hit()}"
        plan = context.plan(self._select([*self._values(columns), '"$path"'], where=where))
        result = plan.engine.execute(context.execution.id, plan.sql, plan.tables, plan.limits)
        reader = _reader(result)
        written = rewritten(table, reader, touched)
        if context.cancelled():
            remove(table, written)
            raise QueryCancelled("the query was cancelled")
        try:
            commit_with_retries(
                iceberg,
                (self.table.database, self.table.table),
                lambda t: replace_files(t, set(counts), _NO_ROWS, self.verb, written),
            )
        except BaseException:
            remove(table, written)
            raise
        return count_result(hits, found.bytes_scanned + result.bytes_scanned)

    def _run_in_spark(
        self, context: Context, iceberg: Catalog, table: Table, columns: list[Column]
    ) -> EngineResult:
        """In a Spark workgroup, Spark's own DELETE or UPDATE through Iceberg's runtime, its
        condition and new values translated as a SELECT's are. The rows it changes are
        counted on the snapshot it changed: the one read before, unless another writer
        committed in between, when they are counted again on the snapshot Spark changed."""
        before = table.current_snapshot()
        if before is None:  # an empty table: nothing to change
            return count_result(0, 0)
        counting = context.plan(self._select(["count(*)"]))
        engine = counting.engine
        assert isinstance(engine, SparkEngine)
        query = sqlglot.parse_one(counting.sql, read="spark")
        target = query.args["from_"].this
        assert isinstance(target, exp.Table)

        def counted(snapshot: int) -> int:
            target.set("version", exp.Version(
                this="VERSION", kind="AS OF", expression=exp.Literal.number(snapshot)))  # fmt: skip
            sql = query.sql(dialect="spark")
            result = engine.execute(context.execution.id, sql, counting.tables, counting.limits)
            return int(next(iter(result.batches)).column(0)[0].as_py())

        hits = counted(before.snapshot_id)
        if hits == 0:
            return count_result(0, counting.scanned)
        target.set("version", None)  # a change is made to the table as it is now
        where = query.args.get("where")
        if isinstance(self, Update):
            valued = context.plan(self._select(self._set_values(columns)))
            values = sqlglot.parse_one(valued.sql, read="spark").expressions
            sets = [
                exp.EQ(this=exp.column(name, quoted=True), expression=value.unalias())
                for (name, _), value in zip(self.assignments, values, strict=True)
            ]
            change: exp.Expr = exp.Update(this=target, expressions=sets, where=where)
        else:
            change = exp.Delete(this=target, where=where)
        if context.cancelled():
            raise QueryCancelled("the query was cancelled")
        engine.change(context.execution.id, change.sql(dialect="spark"), counting.tables)
        changed_from = changed_after(iceberg, self.table, before.snapshot_id)
        if changed_from is not None:
            hits = counted(changed_from)
        return count_result(hits, counting.scanned)

    def _check(self, context: Context, columns: list[Column]) -> None:
        """Refuse what the statement cannot do to these columns, before anything is read."""

    def _keeps_partitions(self, table: Table) -> bool:
        """Whether every row it writes stays in the partition of the file it comes from."""
        return True

    def _values(self, columns: list[Column]) -> list[str]:
        """Each column's value in the rows that stay: as it is, unless the statement sets it."""
        return [quote(c.name) for c in columns]


@dataclass
class Delete(_RowLevel):
    substatement_type: str | None = "DELETE"
    verb = "DELETE"


@dataclass
class Update(_RowLevel):
    assignments: list[tuple[str, str]] = field(default_factory=list)  # column, expression
    substatement_type: str | None = "UPDATE"
    verb = "UPDATE"

    def _projections(self, projections: list[str]) -> list[str]:
        return [*projections, *(f"({expression})" for _, expression in self.assignments)]

    def _check(self, context: Context, columns: list[Column]) -> None:
        by_name = {c.name: c for c in columns}
        unknown = [name for name, _ in self.assignments if name not in by_name]
        if unknown:
            raise InvalidRequest(f"UPDATE {self.table}: the table has no column {unknown[0]}")
        probe = self._select([f"({e})" for _, e in self.assignments], where="false")
        found, _ = context.planner.probe(context.run_, probe)
        for (name, _), given in zip(self.assignments, found, strict=True):
            wanted = athena_type_of_hive(by_name[name].type).name
            if not coercible(given.type, wanted):
                raise InvalidRequest(
                    f"UPDATE {self.table}: column {name} is {wanted}, and a value of type "
                    f"{given.type} cannot be assigned to it"
                )

    def _set_values(self, columns: list[Column]) -> list[str]:
        """Each assigned value, of its column's type."""
        types = {c.name: c.type for c in columns}
        return [
            f"CAST(({expression}) AS {_trino_type(types[name])})"
            for name, expression in self.assignments
        ]

    def _keeps_partitions(self, table: Table) -> bool:
        schema = table.schema()
        sources = {schema.find_column_name(f.source_id) for f in table.spec().fields}
        return not sources & {name for name, _ in self.assignments}

    def _values(self, columns: list[Column]) -> list[str]:
        setting = dict(self.assignments)
        values = []
        for column in columns:
            if column.name not in setting:
                values.append(quote(column.name))
                continue
            kind = _trino_type(column.type)
            values.append(
                f"CASE WHEN {self._hit()} THEN CAST(({setting[column.name]}) AS {kind}) "
                f"ELSE {quote(column.name)} END AS {quote(column.name)}"
            )
        return values


def _trino_type(hive_type: str) -> str:
    return exp.DataType.build(hive_type, dialect="hive").sql(dialect="trino")


def open_for_change(context: Context, ref: TableRef, verb: str) -> tuple[Catalog, Table]:
    """The Iceberg table a row-level statement changes, once the caller may change it:
    ``glue:UpdateTable`` on it, ``s3:PutObject`` and ``s3:DeleteObject`` on its place."""
    catalog = context.catalog(ref.catalog)
    info = catalog.table(ref.database, ref.table)
    if not is_iceberg(info.parameters):
        raise InvalidRequest(f"{verb} is only supported for Iceberg tables: {ref} is a Hive table")
    context.authorize_table(["glue:UpdateTable"], ref)
    place = lake_place(context.settings, info.location)
    if place is not None:
        objects = s3_arn(place[0], f"{place[1].rstrip('/')}/*")
        context.authorize("s3:PutObject", objects)
        context.authorize("s3:DeleteObject", objects)
    iceberg = catalog.iceberg(context.settings)
    return iceberg, iceberg.load_table((ref.database, ref.table))


_NO_ROWS = pa.table({})


def _rows(batch: pa.RecordBatch) -> list[tuple[Any, ...]]:
    return list(zip(*(column.to_pylist() for column in batch.columns), strict=True))


def _reader(result: EngineResult) -> pa.RecordBatchReader:
    """The result's batches as a stream a writer pulls, the first looked at for the schema
    when the engine does not tell it."""
    batches = iter(result.batches)
    schema = result.schema
    if schema is None:
        first = next(batches, None)
        if first is None:
            return pa.RecordBatchReader.from_batches(pa.schema([]), [])
        schema = first.schema
        batches = itertools.chain([first], batches)
    return pa.RecordBatchReader.from_batches(schema, batches)


def changed_after(iceberg: Catalog, ref: TableRef, read: int | None) -> int | None:
    """The snapshot Spark's change was made to, when another writer committed after
    snapshot ``read`` was read (the change is then counted again on it); else None."""
    after = iceberg.load_table((ref.database, ref.table)).current_snapshot()
    changed_from = None if after is None else after.parent_snapshot_id
    if read is None or changed_from is None or changed_from == read:
        return None
    return changed_from


def count_result(count: int, scanned: int) -> EngineResult:
    return EngineResult([], iter([]), scanned, update_count=count)


def parse_delete(sql: str, cursor: Cursor, names: Names) -> Command:
    reader = Reader(sql, cursor)
    reader.expect_words("DELETE", "FROM")
    ref, source = _target(reader, names, alias=True)
    command = Delete(ref, source, _where(reader), names)
    command.tables_read()  # a condition that does not parse is refused now
    return command


def parse_update(sql: str, cursor: Cursor, names: Names) -> Command:
    reader = Reader(sql, cursor)
    reader.expect("UPDATE")
    ref, source = _target(reader, names, alias=False)
    reader.expect("SET")
    assignments: list[tuple[str, str]] = []
    while True:
        column = reader.name("a column name")
        if any(column == name for name, _ in assignments):
            reader.cursor.pos -= 1
            reader.fail(f"column {column} is set twice")
        reader.expect("=")
        assignments.append((column, _expression(reader)))
        if not reader.word(","):
            break
    command = Update(ref, source, _where(reader), names, assignments=assignments)
    command.tables_read()  # an expression or condition that does not parse is refused now
    return command


def _target(reader: Reader, names: Names, alias: bool) -> tuple[TableRef, str]:
    """The table a row-level statement changes, and its text (with its alias)."""
    first = reader.token()
    ref = names.table(reader.names(3, "a table name"))
    if alias and reader.word("AS"):
        reader.name("an alias")
    elif alias and reader.token() is not None and reader.peek() != "WHERE":
        reader.name("an alias or WHERE")
    assert first is not None
    end = reader.tokens[reader.pos - 1]
    return ref, reader.sql[first.start : end.end + 1]


def _expression(reader: Reader) -> str:
    """An expression's text, up to a ``,`` or WHERE outside parentheses."""
    start, depth = reader.token(), 0
    while (token := reader.token()) is not None:
        if depth == 0 and (token.text == "," or reader.peek() == "WHERE"):
            break
        depth += (token.text == "(") - (token.text == ")")
        reader.cursor.pos += 1
    if start is None or reader.token() is start:
        reader.fail("expected an expression")
    end = reader.tokens[reader.pos - 1]
    return reader.sql[start.start : end.end + 1]


def _where(reader: Reader) -> str | None:
    condition = None
    if reader.word("WHERE"):
        start = reader.token()
        if start is None:
            reader.fail("expected a condition")
        condition = reader.sql[start.start : reader.tokens[-1].end + 1]
        reader.cursor.pos = len(reader.tokens)
    reader.done()
    return condition
