"""MERGE INTO an Iceberg table, as Trino (and so Athena) runs it.

    MERGE INTO target [[AS] t] USING source [[AS] s] ON condition
    WHEN MATCHED [AND condition] THEN UPDATE SET column = expression [, ...]
    WHEN MATCHED [AND condition] THEN DELETE
    WHEN NOT MATCHED [AND condition] THEN INSERT [(column, ...)] VALUES (expression, ...)

The source is a table or a parenthesised query. One planned query joins the target's rows
(with each row's file and place) to the source's (FULL OUTER JOIN ... ON condition); for
each pair the first WHEN clause that holds decides, as in Trino. A target row matched by
more than one source row fails the statement, as Trino fails it, and nothing changes. The
data files of the changed rows are rewritten and the inserted rows added in one overwrite
snapshot.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc
import sqlglot
from pyiceberg.catalog import Catalog
from pyiceberg.table import Table
from sqlglot import exp

from lakeward.errors import InvalidRequest, QueryCancelled, QueryFailed
from lakeward.iceberg.commits import arrow_rows, commit_with_retries, replace_files
from lakeward.iceberg.schemas import table_columns
from lakeward.metastore.tables import Column
from lakeward.query.engines.base import EngineResult
from lakeward.query.engines.duckdb.hidden import ROW_COLUMN
from lakeward.query.engines.spark import SparkEngine
from lakeward.query.model import StatementType, TableRef
from lakeward.query.sql.names import Names
from lakeward.query.sql.queries import Statement, parse_query
from lakeward.query.sql.tokens import Cursor
from lakeward.query.statements.base import Command, Context
from lakeward.query.statements.ddl.parsing import Reader
from lakeward.query.statements.writes.commands import coercible
from lakeward.query.statements.writes.rows import changed_after, count_result, open_for_change
from lakeward.query.types import athena_type_of_hive
from lakeward.query.types import quote_identifier as quote

_ACTION = "__lakeward_action"  # the MATCHED clause a target row takes (0: none)
_INSERT = "__lakeward_insert"  # the NOT MATCHED clause a source row takes (0: none)
_SOURCE = "__lakeward_source"  # true on every source row: tells a match from no match
_TARGET = "__lakeward_target"
_INSERTED = "__lakeward_new_"
_FILE, _POS, _PRESENT = "__lakeward_file", "__lakeward_pos", "__lakeward_present"  # Spark's count


@dataclass
class When:
    matched: bool
    condition: str | None
    action: str  # UPDATE, DELETE or INSERT
    assignments: list[tuple[str, str]] = field(default_factory=list)  # UPDATE's, INSERT's


@dataclass
class Merge(Command):
    table: TableRef
    target_alias: str
    source: str  # a table's name or a parenthesised query
    source_alias: str
    condition: str
    clauses: list[When]
    names: Names
    statement_type: StatementType = StatementType.DML
    substatement_type: str | None = "MERGE"

    def catalogs(self) -> set[str]:
        return {self.table.catalog, *(t.catalog for t in self.tables_read())}

    def tables_read(self) -> tuple[TableRef, ...]:
        values = [e for w in self.clauses for _, e in w.assignments]
        conditions = [w.condition for w in self.clauses if w.condition]
        return self._select([*values, *conditions, "1"], star_source=True).tables

    def _from(self, source_columns: list[str] | None) -> str:
        target = f"{self.table.database}.{self.table.table}"
        target = f"{quote(self.table.catalog)}.{target} AS {quote(self.target_alias)}"
        if source_columns is None:  # checking the statement's names only
            source = f"(SELECT * FROM {self.source} AS {quote(self.source_alias)})"
        else:
            listed = ", ".join(f"{quote(self.source_alias)}.{quote(c)}" for c in source_columns)
            source = (
                f"(SELECT {listed}, true AS {_SOURCE} FROM {self.source} "
                f"AS {quote(self.source_alias)})"
            )
        return (
            f"{target} FULL OUTER JOIN {source} AS {quote(self.source_alias)} ON {self.condition}"
        )

    def _select(
        self, projections: list[str], star_source: bool = False, columns: list[str] | None = None
    ) -> Statement:
        source_columns = None if star_source else columns
        return parse_query(
            f"SELECT {', '.join(projections)} FROM {self._from(source_columns)}", self.names
        )

    def run(self, context: Context) -> EngineResult:
        ref = self.table
        iceberg, table = open_for_change(context, ref, "MERGE")
        columns = table_columns(table.schema())
        self._name_inserted_values(columns)
        source_columns = self._source_columns(context)
        self._check(context, columns)
        if context.group.engine == "spark":
            return self._run_in_spark(context, iceberg, table, columns)
        t = quote(self.target_alias)
        present = f'{t}."$path" IS NOT NULL'
        matched = f"{present} AND {quote(self.source_alias)}.{_SOURCE} IS NOT NULL"
        unmatched = f'{t}."$path" IS NULL'
        action = _case(
            [(i, w.condition) for i, w in enumerate(self.clauses, 1) if w.matched], matched
        )
        inserting = _case(
            [(i, w.condition) for i, w in enumerate(self.clauses, 1) if not w.matched], unmatched
        )
        projections = [
            *(self._target_value(c, action) for c in columns),
            f'{t}."$path"',
            f"{t}.{ROW_COLUMN}",
            f"{action} AS {_ACTION}",
            f"{inserting} AS {_INSERT}",
            *(self._inserted_value(c, inserting) for c in columns),
        ]
        plan = context.plan(self._select(projections, columns=source_columns))
        result = plan.engine.execute(context.execution.id, plan.sql, plan.tables, plan.limits)
        rows = pa.Table.from_batches(list(result.batches)) if result.columns else None
        if rows is None or rows.num_rows == 0:
            return count_result(0, result.bytes_scanned)
        names = [c.name for c in columns]
        schema = table.schema().as_arrow()
        changed, touched, kept = self._matched_rows(rows, names, schema)
        inserts = rows.filter(pc.greater(rows.column(_INSERT), 0))
        new = arrow_rows(
            inserts.select([_INSERTED + n for n in names]).rename_columns(names).to_batches(),
            schema,
        )
        if changed == 0 and new.num_rows == 0:
            return count_result(0, result.bytes_scanned)
        if context.cancelled():
            raise QueryCancelled("the query was cancelled")
        replacement = pa.concat_tables([kept, new])
        commit_with_retries(
            iceberg,
            (ref.database, ref.table),
            lambda t: replace_files(t, touched, replacement, "MERGE"),
        )
        return count_result(changed + new.num_rows, result.bytes_scanned)

    def _run_in_spark(
        self, context: Context, iceberg: Catalog, table: Table, columns: list[Column]
    ) -> EngineResult:
        """In a Spark workgroup, Spark's own MERGE through Iceberg's runtime, each condition
        and value translated as a query's are. The pairs of rows the join makes are counted
        first, on the snapshot read, with each target row's place (Iceberg's ``_file`` and
        ``_pos``): a target row that more than one source row would change fails the
        statement as Trino fails it, before anything is written."""
        before = table.current_snapshot()
        if before is None and not any(not w.matched for w in self.clauses):
            return count_result(0, 0)
        expressions = [w.condition or "true" for w in self.clauses]
        for when in self.clauses:
            given = dict(when.assignments)
            if when.action == "UPDATE":
                expressions += [_cast(given[c.name], c) for c in columns if c.name in given]
            elif when.action == "INSERT":
                expressions += [_cast(given.get(c.name, "NULL"), c) for c in columns]
        plan = context.plan(self._select(expressions, star_source=True))
        engine = plan.engine
        assert isinstance(engine, SparkEngine)
        query = sqlglot.parse_one(plan.sql, read="spark")
        target = query.args["from_"].this
        join = query.args["joins"][0]
        source, on = join.this, join.args["on"]
        target.set("version", None)  # a change is made to the table as it is now
        unaliased = source.copy()
        unaliased.set("alias", None)
        translated = iter(e.unalias() for e in query.expressions)
        conditions = [next(translated) for _ in self.clauses]
        t, s = _spark_name(self.target_alias), _spark_name(self.source_alias)

        def spark(expression: exp.Expr) -> str:
            return expression.sql(dialect="spark")

        whens: list[str] = []
        matched_cases: list[str] = []
        inserted_cases: list[str] = []
        for number, (when, condition) in enumerate(zip(self.clauses, conditions, strict=True), 1):
            test = f"coalesce(({spark(condition)}), false)"
            if when.action == "UPDATE":
                setting = [c for c in columns if c.name in dict(when.assignments)]
                sets = ", ".join(
                    f"{_spark_name(c.name)} = {spark(next(translated))}" for c in setting
                )
                whens.append(f"WHEN MATCHED AND {test} THEN UPDATE SET {sets}")
            elif when.action == "DELETE":
                whens.append(f"WHEN MATCHED AND {test} THEN DELETE")
            else:
                names = ", ".join(_spark_name(c.name) for c in columns)
                values = ", ".join(spark(next(translated)) for _ in columns)
                whens.append(f"WHEN NOT MATCHED AND {test} THEN INSERT ({names}) VALUES ({values})")
            (matched_cases if when.matched else inserted_cases).append(f"WHEN {test} THEN {number}")
        merge = f"MERGE INTO {spark(target)} USING {spark(source)} ON {spark(on)} {' '.join(whens)}"

        def case(cases: list[str], applies: str) -> str:
            """The number of the first clause that holds where ``applies`` (0: none)."""
            if not cases:
                return "0"
            return f"CASE WHEN {applies} THEN CASE {' '.join(cases)} ELSE 0 END ELSE 0 END"

        def counted(snapshot: int | None) -> tuple[int, int, int]:
            """(target rows changed, rows inserted, the most source rows changing one target
            row) at ``snapshot``."""
            name = spark(exp.to_table(engine.iceberg_table_name(self.table), dialect="spark"))
            version = "" if snapshot is None else f" VERSION AS OF {snapshot}"
            matched = f"{t}.{_FILE} IS NOT NULL AND {s}.{_PRESENT} IS NOT NULL"
            pairs = (
                f"SELECT {t}.{_FILE}, {t}.{_POS}, "
                f"{case(matched_cases, matched)} AS acting, "
                f"{case(inserted_cases, f'{t}.{_FILE} IS NULL')} AS inserting "
                f"FROM (SELECT *, _file AS {_FILE}, _pos AS {_POS} FROM {name}{version}) AS {t} "
                f"FULL OUTER JOIN (SELECT *, true AS {_PRESENT} FROM {spark(unaliased)} "
                f"AS {_SOURCE}) AS {s} ON {spark(on)}"
            )
            sql = (
                f"SELECT count_if(acting > 0), count_if(inserting > 0), "
                f"coalesce(max(CASE WHEN acting > 0 THEN n END), 0) FROM ("
                f"SELECT *, count(CASE WHEN acting > 0 THEN 1 END) "
                f"OVER (PARTITION BY {_FILE}, {_POS}) AS n FROM ({pairs}) AS pairs) AS counted"
            )
            result = engine.execute(context.execution.id, sql, plan.tables, plan.limits)
            row = next(iter(result.batches)).to_pylist()[0]
            acted, inserted, most = (int(v or 0) for v in row.values())
            return acted, inserted, most

        acted, inserted, most = counted(None if before is None else before.snapshot_id)
        if most > 1:
            raise QueryFailed(
                "One MERGE target table row matched more than one source row: "
                f"{self.table} is unchanged"
            )
        if acted + inserted == 0:
            return count_result(0, plan.scanned)
        if context.cancelled():
            raise QueryCancelled("the query was cancelled")
        engine.change(context.execution.id, merge, plan.tables)
        read = None if before is None else before.snapshot_id
        changed_from = changed_after(iceberg, self.table, read)
        if changed_from is not None:
            acted, inserted, _ = counted(changed_from)
        return count_result(acted + inserted, plan.scanned)

    def _matched_rows(
        self, rows: pa.Table, names: list[str], schema: pa.Schema
    ) -> tuple[int, set[str], pa.Table]:
        """How many target rows change, their files, and those files' rows afterwards."""
        target = rows.filter(pc.is_valid(rows.column("$path")))
        acting = target.filter(pc.greater(target.column(_ACTION), 0))
        if acting.num_rows == 0:
            return 0, set(), schema.empty_table()
        places = acting.group_by(["$path", ROW_COLUMN]).aggregate([([], "count_all")])
        if pc.max(places.column("count_all")).as_py() > 1:
            raise QueryFailed(
                "One MERGE target table row matched more than one source row: "
                f"{self.table} is unchanged"
            )
        touched = set(pc.unique(acting.column("$path")).to_pylist())
        deleting = {i for i, w in enumerate(self.clauses, 1) if w.action == "DELETE"}
        in_touched = pc.is_in(target.column("$path"), pa.array(sorted(touched)))
        stays = pc.invert(pc.is_in(target.column(_ACTION), pa.array(sorted(deleting), pa.int64())))
        kept = target.filter(pc.and_(in_touched, stays)).select(names)
        return acting.num_rows, touched, arrow_rows(kept.to_batches(), schema)

    def _target_value(self, column: Column, action: str) -> str:
        """A target column after the MATCHED clause a row takes (itself unless it sets it)."""
        own = f"{quote(self.target_alias)}.{quote(column.name)}"
        cases = [
            f"WHEN {i} THEN {_cast(value, column)}"
            for i, w in enumerate(self.clauses, 1)
            if w.action == "UPDATE"
            for name, value in w.assignments
            if name == column.name
        ]
        if not cases:
            return f"{own} AS {quote(column.name)}"
        return f"CASE {action} {' '.join(cases)} ELSE {own} END AS {quote(column.name)}"

    def _inserted_value(self, column: Column, inserting: str) -> str:
        cases = [
            f"WHEN {i} THEN {_cast(value, column)}"
            for i, w in enumerate(self.clauses, 1)
            if w.action == "INSERT"
            for name, value in w.assignments
            if name == column.name
        ]
        body = f"CASE {inserting} {' '.join(cases)} END" if cases else "NULL"
        return f"{body} AS {quote(_INSERTED + column.name)}"

    def _name_inserted_values(self, columns: list[Column]) -> None:
        """An INSERT without a column list gives a value for each column, in order."""
        for when in self.clauses:
            if when.action != "INSERT" or not when.assignments or when.assignments[0][0]:
                continue
            if len(when.assignments) != len(columns):
                raise InvalidRequest(
                    f"MERGE INSERT gives {len(when.assignments)} values, and {self.table} "
                    f"has {len(columns)} columns: list the columns the values are for"
                )
            when.assignments = [
                (c.name, v) for c, (_, v) in zip(columns, when.assignments, strict=True)
            ]

    def _source_columns(self, context: Context) -> list[str]:
        probe = parse_query(
            f"SELECT * FROM {self.source} AS {quote(self.source_alias)}", self.names
        )
        found, _ = context.planner.probe(context.run_, probe)
        return [c.name for c in found]

    def _check(self, context: Context, columns: list[Column]) -> None:
        by_name = {c.name: c for c in columns}
        values = [(w, n, e) for w in self.clauses for n, e in w.assignments]
        for when, name, _ in values:
            if name not in by_name:
                raise InvalidRequest(
                    f"MERGE {when.action} names column {name}, which {self.table} does not have"
                )
        if not values:
            return
        probe = self._select([f"({e})" for _, _, e in values], star_source=True)
        found, _ = context.planner.probe(context.run_, probe)
        for (when, name, _), given in zip(values, found, strict=True):
            wanted = athena_type_of_hive(by_name[name].type).name
            if not coercible(given.type, wanted):
                raise InvalidRequest(
                    f"MERGE {when.action}: column {name} is {wanted}, and a value of type "
                    f"{given.type} cannot be written to it"
                )


def _spark_name(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _case(clauses: list[tuple[int, str | None]], applies: str) -> str:
    """The number of the first clause that holds (0: none), as an expression."""
    if not clauses:
        return "(0)"
    whens = " ".join(
        f"WHEN {applies} AND coalesce(({c or 'true'}), false) THEN {i}" for i, c in clauses
    )
    return f"(CASE {whens} ELSE 0 END)"


def _cast(value: str, column: Column) -> str:
    kind = exp.DataType.build(column.type, dialect="hive").sql(dialect="trino")
    return f"CAST(({value}) AS {kind})"


def parse_merge(sql: str, cursor: Cursor, names: Names) -> Command:
    reader = Reader(sql, cursor)
    reader.expect_words("MERGE", "INTO")
    parts = reader.names(3, "a table name")
    ref = names.table(parts)
    target_alias = _alias(reader, "USING") or parts[-1]
    reader.expect("USING")
    if reader.peek() == "(":
        start = reader.token()
        reader.expect("(")
        _text_until(reader, ())  # the query, up to its closing parenthesis
        reader.expect(")")
        assert start is not None
        source = sql[start.start : reader.tokens[reader.pos - 1].end + 1]
        source_alias = _alias(reader, "ON") or "_source"
    else:
        source_parts = reader.names(3, "a table name or a parenthesised query")
        source = ".".join(quote(p) for p in source_parts)
        source_alias = _alias(reader, "ON") or source_parts[-1]
    if source_alias == target_alias:
        reader.fail(f"the target and the source are both named {target_alias}: alias one")
    reader.expect("ON")
    condition = _text_until(reader, ("WHEN",))
    clauses = []
    while reader.word("WHEN"):
        clauses.append(_when(reader))
    if not clauses:
        reader.fail("expected WHEN MATCHED or WHEN NOT MATCHED")
    reader.done()
    command = Merge(ref, target_alias, source, source_alias, condition, clauses, names)
    command.tables_read()  # an expression or condition that does not parse is refused now
    return command


def _alias(reader: Reader, following: str) -> str | None:
    if reader.word("AS"):
        return reader.name("an alias")
    if reader.token() is not None and reader.peek() != following:
        return reader.name(f"an alias or {following}")
    return None


def _when(reader: Reader) -> When:
    matched = not reader.word("NOT")
    reader.expect("MATCHED")
    condition = _text_until(reader, ("THEN",)) if reader.word("AND") else None
    reader.expect("THEN")
    if matched:
        action = reader.expect("UPDATE", "DELETE")
        if action == "DELETE":
            return When(True, condition, "DELETE")
        reader.expect("SET")
        assignments = []
        while True:
            column = reader.name("a column name")
            reader.expect("=")
            assignments.append((column, _text_until(reader, ("WHEN",), commas=True)))
            if not reader.word(","):
                return When(True, condition, "UPDATE", assignments)
    reader.expect("INSERT")
    columns: list[str] = []
    if reader.word("("):
        while True:
            columns.append(reader.name("a column name"))
            if reader.expect(",", ")") == ")":
                break
    reader.expect("VALUES")
    reader.expect("(")
    values = []
    while True:
        values.append(_text_until(reader, (), commas=True))
        if reader.expect(",", ")") == ")":
            break
    if columns and len(columns) != len(values):
        reader.fail(f"INSERT names {len(columns)} columns and gives {len(values)} values")
    names = columns or [""] * len(values)  # without a list: the table's columns, in order
    return When(False, condition, "INSERT", list(zip(names, values, strict=True)))


def _text_until(reader: Reader, stops: tuple[str, ...], commas: bool = False) -> str:
    """The text of an expression, up to a word of ``stops`` (or a ``,``, or the ``)`` that
    closes an enclosing parenthesis) outside parentheses and CASE ... END."""
    start, depth = reader.token(), 0
    while (token := reader.token()) is not None:
        word = reader.peek()
        if depth == 0 and (word in stops or token.text == ")" or (commas and token.text == ",")):
            break
        depth += (token.text == "(") + (word == "CASE") - (token.text == ")") - (word == "END")
        reader.cursor.pos += 1
    if start is None or reader.token() is start:
        reader.fail("expected an expression")
    return reader.sql[start.start : reader.tokens[reader.pos - 1].end + 1]
