"""Queries: Athena SQL (Trino rules, as sqlglot's Athena dialect reads DML) in, one checked
query out.

``parse_query`` parses a SELECT (or WITH, VALUES), refuses whatever could reach past the
tables of registered catalogs (files, settings, the environment, the engine's own
catalog, writes hidden inside a query), qualifies every table it reads and lists them,
all before an engine sees the text. ``lakeward.query.translate.query`` then writes it
in an engine's dialect.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

import sqlglot

# Loaded at import: sqlglot loads a dialect on its first use, and two threads parsing
# at once in a fresh process could find the module half-run (NameError: _TrinoTokenizer).
import sqlglot.dialects.athena  # noqa: F401
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from lakeward.errors import InvalidRequest
from lakeward.query.model import StatementType, TableRef
from lakeward.query.sql.names import ONLY_TABLES, Names
from lakeward.query.sql.tokens import QUERY_STARTS, Cursor

# Functions that reach past the tables a query names. Names are compared lower-cased, as
# both engines resolve them; unknown names reach the engine verbatim, hence the list.
DENIED_FUNCTIONS = frozenset(
    # DuckDB: files, remote data, and SQL run from a string
    {"glob", "sniff_csv", "parquet_scan", "iceberg_scan", "delta_scan", "query", "query_table"}
    | {"json_execute_serialized_sql"}
    # DuckDB: the environment, settings, secrets and extensions
    | {"getenv", "current_setting", "getvariable", "which_secret", "load_extension"}
    | {"load_aws_credentials"}
    # Spark: these call any Java static method
    | {"reflect", "java_method", "try_reflect"}
)
# Whole families of DuckDB functions read files or the engine's catalog; Trino has none
# of these names, so refusing the prefixes costs users nothing.
DENIED_FUNCTION_PREFIXES = ("duckdb_", "pragma_", "read_", "sqlite_", "postgres_", "mysql_")
# Statements hidden inside a query: a data-modifying CTE, SELECT ... INTO, and the like.
_WRITES = (exp.DML, exp.DDL, exp.Command, exp.Into, exp.Pragma, exp.Set, exp.Use)
_EXPLAIN_OPTIONS = {
    "FORMAT": ("TEXT", "GRAPHVIZ", "JSON"),
    "TYPE": ("LOGICAL", "DISTRIBUTED", "VALIDATE", "IO"),
}


@dataclass(frozen=True)
class Statement:
    """A query (``select``) or the query an EXPLAIN shows (``explain``)."""

    kind: Literal["select", "explain"]
    statement_type: StatementType
    sql: str
    tables: tuple[TableRef, ...]
    explained: Statement | None = None
    # The checked Athena AST of a select, its real tables fully qualified and lower-cased.
    _ast: exp.Expr | None = field(default=None, repr=False, compare=False)

    @property
    def target(self) -> Statement:
        """The query an engine runs: the statement, or the one it explains."""
        return self.explained or self


def parse_query(sql: str, names: Names) -> Statement:
    try:
        parsed = sqlglot.parse(sql, read="athena")
    except ParseError as e:
        raise InvalidRequest(_parse_error_message(e)) from None
    except TokenError as e:
        raise InvalidRequest(f"could not read the query: {e}") from None
    except RecursionError:
        raise InvalidRequest("the query is nested too deeply") from None
    # A trailing semicolon leaves None, or a Semicolon holding the comments after it.
    trees = [t for t in parsed if t is not None and not isinstance(t, exp.Semicolon)]
    if len(trees) != 1:  # the statement splitter above already refuses this; stay sure
        raise InvalidRequest("only one statement per request is allowed")
    root = trees[0]
    if not isinstance(root, (exp.Query, exp.Values)):
        raise InvalidRequest(
            f"{root.key.upper()} statements are not allowed here: a query is a SELECT, WITH "
            "or VALUES"
        )
    for node in root.walk(bfs=False):
        if isinstance(node, _WRITES):
            raise InvalidRequest(
                f"{node.key.upper()} inside a query is not allowed: a query only reads "
                "(write with CREATE TABLE AS, INSERT INTO or UNLOAD)"
            )
        if isinstance(node, (exp.From, exp.Join, exp.Lateral)):
            _check_source(node)
        elif isinstance(node, exp.Table):
            _check_table_node(node, sql)
        elif isinstance(node, exp.Func):
            name = _function_name(node)
            if name in DENIED_FUNCTIONS or name.startswith(DENIED_FUNCTION_PREFIXES):
                raise InvalidRequest(
                    f"function {name} is not allowed: it reaches the engine's files, "
                    "settings or environment"
                )
    _decimal_literals_as_doubles(root)
    real = [t for t in root.find_all(exp.Table) if not _names_cte(t)]
    refs: list[TableRef] = []
    for table in sorted(real, key=lambda t: int(t.this.meta.get("start", 0))):
        ref = names.table([p.name.lower() for p in table.parts])
        version = table.args.get("version")
        if version is not None:
            ref = TableRef(ref.catalog, ref.database, ref.table, version_text(version))
        refs.append(ref)
        # Qualify in place, so to_engine_sql needs neither the defaults nor CTE scoping.
        table.set("catalog", exp.to_identifier(ref.catalog))
        table.set("db", exp.to_identifier(ref.database))
        table.set("this", exp.to_identifier(ref.table))
    tables = tuple(dict.fromkeys(refs))
    return Statement("select", StatementType.DML, sql, tables, _ast=root)


def _decimal_literals_as_doubles(root: exp.Expr) -> None:
    """Athena reads a number with a point and no exponent (``0.33``) as a double, where
    Trino's default is a decimal; its decimal literal is ``DECIMAL '0.33'``. Written with
    an exponent (``0.33E0``), the literal is a double to every engine and to the rules
    that type the query (``translate``), as it is to Athena."""
    for literal in list(root.find_all(exp.Literal)):
        text = str(literal.this)
        if literal.is_string or "." not in text or "e" in text.lower():
            continue
        whole, _, fraction = text.partition(".")
        literal.set("this", f"{whole or '0'}.{fraction or '0'}E0")


def version_text(version: exp.Version) -> str:
    """A table's ``FOR VERSION|TIMESTAMP AS OF``, as ``TableRef.version`` keeps it: a
    snapshot id, or the timestamp's expression in DuckDB's SQL (evaluated when planned)."""
    kind = str(version.this).upper()
    if str(version.args.get("kind", "")).upper() != "AS OF":
        raise InvalidRequest(f"FOR {kind} {version.args.get('kind')} is not supported: use AS OF")
    expression = version.expression
    if kind == "VERSION":
        if not (isinstance(expression, exp.Literal) and expression.this.isdigit()):
            raise InvalidRequest(
                f"FOR VERSION AS OF takes a snapshot id (a whole number), not {expression.sql()}"
            )
        return f"FOR VERSION AS OF {expression.this}"
    if kind == "TIMESTAMP":
        return f"FOR TIMESTAMP AS OF {expression.sql(dialect='duckdb')}"
    raise InvalidRequest(f"FOR {kind} AS OF is not supported: use VERSION or TIMESTAMP")


def _parse_error_message(error: ParseError) -> str:
    if not error.errors:
        return f"could not parse the query: {error}"
    first = error.errors[0]
    # sqlglot names the offending token by its repr; users need only its text.
    what = re.sub(
        r"<Token token_type: [\w.]+, text: (.*?), line: .*?>", r"'\1'", first["description"]
    )
    return f"could not parse the query at line {first['line']}, column {first['col']}: {what}"


def _check_source(node: exp.Expression) -> None:
    """FROM, JOIN and LATERAL read tables, subqueries, VALUES or UNNEST, nothing else."""
    source = node.this
    allowed: tuple[type[exp.Expression], ...] = (exp.Subquery,)
    if not isinstance(node, exp.Lateral):
        allowed = (exp.Table, exp.Subquery, exp.Values, exp.Unnest, exp.Lateral)
    if isinstance(source, allowed):
        return
    _refuse_table_function(source)
    raise InvalidRequest(f"'{source}' is not allowed as a table source: {ONLY_TABLES}")


def _check_table_node(table: exp.Table, sql: str) -> None:
    if not isinstance(table.this, exp.Identifier):
        _refuse_table_function(table.this)
        raise InvalidRequest(
            f"'{table.sql('athena')}' is not a table name: name tables catalog.database.table"
        )
    for part in table.parts:
        start = part.meta.get("start")
        # sqlglot reads FROM 'x.csv' as a quoted name; only the source text tells them apart.
        if isinstance(start, int) and sql[start : start + 1] == "'":
            raise InvalidRequest(
                f"the string '{part.name}' is not allowed as a table: {ONLY_TABLES}"
            )
        # Checked on CTE names too: DuckDB reads an unresolved name like x.csv as a file.
        if re.search(r"[./\\:]", part.name) or part.name.startswith("~"):
            raise InvalidRequest(
                f"'{part.name}' is a file name or path, not a table: {ONLY_TABLES}"
            )


def _refuse_table_function(source: object) -> None:
    func = source.find(exp.Func) if isinstance(source, exp.Expression) else None
    if func is not None:
        name = _function_name(func)
        raise InvalidRequest(f"table function {name} is not allowed: {ONLY_TABLES}")


def _function_name(func: exp.Func) -> str:
    if isinstance(func, (exp.Anonymous, exp.AnonymousAggFunc)):
        return func.name.lower()
    return func.sql_name().lower()


def _names_cte(table: exp.Table) -> bool:
    """Whether an unqualified name refers to a CTE in scope rather than to a table."""
    if table.args.get("db"):
        return False
    name = table.name.lower()
    child: exp.Expr = table
    node = table.parent
    while node is not None:
        visible: list[exp.Expr] = []
        if isinstance(node, exp.With):
            # Inside a CTE only the earlier ones are visible (and itself when recursive).
            index = next((i for i, c in enumerate(node.expressions) if c is child), 0)
            visible = node.expressions[: index + 1 if node.args.get("recursive") else index]
        elif isinstance(node, exp.Query):
            with_ = node.args.get("with_")
            if isinstance(with_, exp.With) and with_ is not child:
                visible = with_.expressions
        if any(cte.alias.lower() == name for cte in visible):
            return True
        child, node = node, node.parent
    return False


def parse_explain(sql: str, cursor: Cursor, names: Names) -> Statement:
    cursor.expect("EXPLAIN")
    if cursor.word("ANALYZE"):
        raise InvalidRequest("EXPLAIN ANALYZE is not allowed: it runs the query; use EXPLAIN")
    if cursor.word("("):
        while True:
            option = cursor.expect(*_EXPLAIN_OPTIONS)
            cursor.expect(*_EXPLAIN_OPTIONS[option])
            if cursor.expect(",", ")") == ")":
                break
    if cursor.peek() not in QUERY_STARTS:
        raise InvalidRequest("EXPLAIN is allowed only for SELECT queries")
    inner = parse_query(cursor.rest(), names)
    return Statement("explain", StatementType.UTILITY, sql, inner.tables, explained=inner)


def require_named_columns(statement: Statement) -> None:
    """Every column a table or a view is made of needs a name (Trino's rule): an expression
    without AS is refused by position; ``*`` and ``t.*`` name their columns."""
    tree = statement._ast
    while isinstance(tree, (exp.SetOperation, exp.Subquery)):
        tree = tree.left if isinstance(tree, exp.SetOperation) else tree.this
    if isinstance(tree, exp.Values):
        raise InvalidRequest(
            "Column name not specified at position 1: name the VALUES' columns with AS"
        )
    if isinstance(tree, exp.Select):
        for position, item in enumerate(tree.expressions, 1):
            if not (item.is_star or isinstance(item, (exp.Alias, exp.Column))):
                raise InvalidRequest(
                    f"Column name not specified at position {position}: name it with AS"
                )
