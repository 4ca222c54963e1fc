"""The SQL front of the query service: Athena SQL in, one checked statement out.

Users write Athena SQL (Trino rules for DML, as sqlglot's Athena dialect routes it) and
name tables ``catalog.database.table``. This module parses one statement, classifies it,
refuses whatever could reach past the tables of registered catalogs (files, settings, the
environment, the engine's own catalog, writes of any kind) and lists the tables read, all
before an engine sees the text. ``to_engine_sql`` then rewrites table names the way the
engine asks and generates the engine's dialect, which translates Trino functions.

SHOW and DESCRIBE are answered from the metastore, never by an engine; sqlglot reads them
only as opaque commands, so a small strict reader below parses them from tokens.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import groupby
from typing import ClassVar, Literal, NoReturn

import sqlglot

# Loaded at import: sqlglot loads a dialect on its first use, and two threads parsing
# at once in a fresh process could find the module half-run (NameError: _TrinoTokenizer).
import sqlglot.dialects.athena  # noqa: F401
from sqlglot import exp
from sqlglot.dialects.trino import Trino
from sqlglot.errors import ErrorLevel, ParseError, TokenError, UnsupportedError
from sqlglot.tokenizer_core import Token, TokenType

from lakeward.errors import InvalidRequest
from lakeward.metastore.client import Column
from lakeward.query import statements, trino
from lakeward.query.model import StatementType, TableRef
from lakeward.query.trino import spark as trino_on_spark

StatementKind = Literal[
    "select",
    "show_catalogs",
    "show_databases",
    "show_tables",
    "show_columns",
    "describe",
    "explain",
    "command",  # DDL, views and writes: statement.command runs it (lakeward.query.statements)
]

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
# The engine's own catalog answers to these names inside any attached database; and Spark
# reads `csv`.`name` as the file "name" when no database csv exists (SQL on files).
_INTERNAL_SCHEMAS = frozenset(
    {"information_schema", "pg_catalog", "csv", "json", "parquet", "orc", "avro", "text"}
    | {"binaryfile", "delta", "iceberg", "jdbc"}
)
_INTERNAL_TABLE_PREFIXES = ("duckdb_", "sqlite_", "pragma_")
# The Hive Metastore accepts only these database and table names; anything else is a
# file name, a path or a trick, and no registered table could match it.
_HIVE_NAME = re.compile(r"[a-z0-9_]+")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_QUERY_STARTS = frozenset({"SELECT", "WITH", "VALUES", "("})
_ALLOWED = "the SQL service runs only SELECT, SHOW, DESCRIBE and EXPLAIN"
_ONLY_TABLES = "queries read only tables of registered catalogs"
# Statements hidden inside a query: a data-modifying CTE, SELECT ... INTO, and the like.
_WRITES = (exp.DML, exp.DDL, exp.Command, exp.Into, exp.Pragma, exp.Set, exp.Use)
_EXPLAIN_OPTIONS = {
    "FORMAT": ("TEXT", "GRAPHVIZ", "JSON"),
    "TYPE": ("LOGICAL", "DISTRIBUTED", "VALIDATE", "IO"),
}


@dataclass(frozen=True)
class Statement:
    kind: StatementKind
    statement_type: StatementType
    sql: str
    tables: tuple[TableRef, ...]
    catalog: str | None = None
    database: str | None = None
    table: TableRef | None = None
    like: str | None = None
    explained: Statement | None = None
    command: statements.Command | None = None
    # The checked Athena AST of a select, its real tables fully qualified and lower-cased.
    _ast: exp.Expr | None = field(default=None, repr=False, compare=False)


def parse_statement(
    sql: str, *, default_catalog: str, default_database: str, catalogs: Collection[str]
) -> Statement:
    """Parse and check one statement; raise InvalidRequest for anything not allowed."""
    names = Names(
        default_catalog.lower(), default_database.lower(), frozenset(c.lower() for c in catalogs)
    )
    cursor = Cursor(_one_statement(sql), sql)
    first = cursor.peek()
    trino.dates.refuse_ambiguous_formats(
        [t.text for t in cursor.tokens if t.token_type == TokenType.VAR],
        [t.text for t in cursor.tokens if t.token_type == TokenType.STRING],
    )
    parser = statements.parser_for(cursor.keywords())
    if parser is not None:
        command = parser(sql, cursor, names)
        tables = command.tables_read()
        return Statement("command", command.statement_type, sql, tables, command=command)
    if first in _QUERY_STARTS:
        return parse_query(sql, names)
    if first == "EXPLAIN":
        return _explain(sql, cursor, names)
    if first in ("SHOW", "DESCRIBE", "DESC"):
        return _show_or_describe(sql, cursor, names)
    if not first:
        raise InvalidRequest(f"a statement must start with a keyword: {_ALLOWED}")
    raise InvalidRequest(f"{first} statements are not allowed: {_ALLOWED}")


def to_engine_sql(
    statement: Statement,
    dialect: str,
    table_name: Callable[[TableRef], str],
    columns: Mapping[TableRef, Sequence[Column]] | None = None,
) -> str:
    """The select (or explained select) in ``dialect``, each table named by ``table_name``;
    ``columns``: the stored tables' columns, which the Spark translation checks types with
    and the DuckDB one types numeric operations by."""
    target = statement.explained or statement
    if target._ast is None:
        raise InvalidRequest(f"{statement.kind} is answered from the metastore, not by an engine")
    tree = target._ast.copy()
    if dialect == "spark":
        types = {ref: trino_on_spark.column_types(cols) for ref, cols in (columns or {}).items()}
        tree = trino_on_spark.to_spark(tree, types)
    # parse_statement qualified every real table; an unqualified name is a CTE reference.
    tables = [t for t in tree.find_all(exp.Table) if t.args.get("catalog")]
    bare_names = [t.name for t in tables if not t.alias]
    for table in tables:
        ref = TableRef(table.catalog, table.db, table.name)
        engine_table = exp.to_table(table_name(ref), dialect=dialect)
        # Columns qualified by the table's own name must keep resolving whatever the engine
        # calls it; an alias would clash if two tables share that name, so none is added then.
        renamed = engine_table.name.lower() != ref.table
        if renamed and not table.alias and bare_names.count(ref.table) == 1:
            table.set("alias", exp.TableAlias(this=exp.to_identifier(ref.table)))
        for part in ("this", "db", "catalog"):
            table.set(part, engine_table.args.get(part))
    if dialect == "duckdb":  # stored columns type operations on them (decimal division)
        stored = {
            (r.catalog, r.database, r.table): {c.name.lower(): c.type for c in cols}
            for r, cols in (columns or {}).items()
        }
        tree = trino.to_duckdb(tree, stored)
    try:
        # Users' comments would be re-quoted into the engine's text; they are of no use there.
        return tree.sql(dialect=dialect, unsupported_level=ErrorLevel.RAISE, comments=False)
    except UnsupportedError as e:
        raise InvalidRequest(f"the query cannot run on {dialect}: {e}") from None


def check_translatable(statement: Statement, engine: str) -> None:
    """Refuse, before the query is queued, what ``engine`` cannot answer as Athena would."""
    if statement.command is not None:
        statement.command.check(engine)
        return
    target = statement.explained or statement
    if target._ast is not None and engine == "duckdb":
        tree = trino.to_duckdb(target._ast.copy())
        try:  # what sqlglot cannot write for DuckDB is refused now, not once queued
            tree.sql(dialect="duckdb", unsupported_level=ErrorLevel.RAISE, comments=False)
        except UnsupportedError as e:
            raise InvalidRequest(f"the query cannot run on duckdb: {e}") from None
    elif target._ast is not None and engine == "spark":
        trino_on_spark.check(target._ast.copy())


@dataclass(frozen=True)
class Names:
    default_catalog: str
    default_database: str
    catalogs: frozenset[str]

    def catalog(self, name: str) -> str:
        if name not in self.catalogs:
            raise InvalidRequest(f"catalog '{name}' is not registered")
        return name

    def database(self, parts: list[str]) -> tuple[str, str]:
        catalog, database = parts if len(parts) == 2 else (self.default_catalog, parts[0])
        if database in _INTERNAL_SCHEMAS:
            raise InvalidRequest(f"schema {database} is not allowed: {_ONLY_TABLES}")
        _check_hive_name(database, "database")
        return self.catalog(catalog), database

    def table(self, parts: list[str]) -> TableRef:
        *qualifier, table = parts
        catalog, database = self.database(qualifier or [self.default_database])
        if table.startswith(_INTERNAL_TABLE_PREFIXES):
            raise InvalidRequest(f"table {table} is not allowed: {_ONLY_TABLES}")
        _check_hive_name(table, "table")
        return TableRef(catalog, database, table)


def _check_hive_name(name: str, what: str) -> None:
    if not _HIVE_NAME.fullmatch(name):
        raise InvalidRequest(
            f"'{name}' is not a {what} name: {_ONLY_TABLES}, named with letters, digits and _"
        )


class _Tokenizer(Trino.Tokenizer):
    # Athena runs SHOW and DESCRIBE on Hive, which quotes names with backticks; Trino uses
    # double quotes, so accept both. No word is a "command" here: every word is a token,
    # so a second statement after SHOW or CALL is seen.
    IDENTIFIERS: ClassVar[list[str | tuple[str, str]]] = ['"', "`"]
    COMMANDS: ClassVar[set[TokenType]] = set()


def _one_statement(sql: str) -> list[Token]:
    """The tokens of the request's only statement; refuse none or several."""
    try:
        tokens = _Tokenizer().tokenize(sql)
    except TokenError as e:
        raise InvalidRequest(f"could not read the query: {e}") from None
    by_semicolons = groupby(tokens, lambda t: t.token_type == TokenType.SEMICOLON)
    statements = [list(run) for semicolons, run in by_semicolons if not semicolons]
    if not statements:
        raise InvalidRequest("the query is empty")
    if len(statements) > 1:
        raise InvalidRequest(
            f"only one statement per request is allowed; this request has {len(statements)}"
        )
    return statements[0]


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
        raise InvalidRequest(f"{root.key.upper()} statements are not allowed: {_ALLOWED}")
    for node in root.walk(bfs=False):
        if isinstance(node, _WRITES):
            raise InvalidRequest(f"{node.key.upper()} inside a query is not allowed: {_ALLOWED}")
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
    real = [t for t in root.find_all(exp.Table) if not _names_cte(t)]
    refs: list[TableRef] = []
    for table in sorted(real, key=lambda t: int(t.this.meta.get("start", 0))):
        ref = names.table([p.name.lower() for p in table.parts])
        refs.append(ref)
        # Qualify in place, so to_engine_sql needs neither the defaults nor CTE scoping.
        table.set("catalog", exp.to_identifier(ref.catalog))
        table.set("db", exp.to_identifier(ref.database))
        table.set("this", exp.to_identifier(ref.table))
    tables = tuple(dict.fromkeys(refs))
    return Statement("select", StatementType.DML, sql, tables, _ast=root)


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
    raise InvalidRequest(f"'{source}' is not allowed as a table source: {_ONLY_TABLES}")


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
                f"the string '{part.name}' is not allowed as a table: {_ONLY_TABLES}"
            )
        # Checked on CTE names too: DuckDB reads an unresolved name like x.csv as a file.
        if re.search(r"[./\\:]", part.name) or part.name.startswith("~"):
            raise InvalidRequest(
                f"'{part.name}' is a file name or path, not a table: {_ONLY_TABLES}"
            )


def _refuse_table_function(source: object) -> None:
    func = source.find(exp.Func) if isinstance(source, exp.Expression) else None
    if func is not None:
        name = _function_name(func)
        raise InvalidRequest(f"table function {name} is not allowed: {_ONLY_TABLES}")


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


class Cursor:
    """Reads SHOW, DESCRIBE and EXPLAIN token by token; anything unexpected is refused."""

    def __init__(self, tokens: list[Token], sql: str) -> None:
        self.tokens = tokens
        self.sql = sql
        self.pos = 0

    def peek(self) -> str:
        """The next keyword or punctuation upper-cased; "" for names, strings or the end."""
        if self.pos >= len(self.tokens):
            return ""
        token = self.tokens[self.pos]
        if token.token_type in (TokenType.IDENTIFIER, TokenType.STRING):
            return ""
        return token.text.upper()

    def keywords(self, most: int = 5) -> list[str]:
        """The statement's first words, upper-cased, up to the first name or string."""
        words = []
        for token in self.tokens[self.pos : self.pos + most]:
            if token.token_type in (TokenType.IDENTIFIER, TokenType.STRING):
                break
            words.append(token.text.upper())
        return words

    def word(self, *words: str) -> str | None:
        found = self.peek()
        if found and found in words:
            self.pos += 1
            return found
        return None

    def expect(self, *words: str) -> str:
        found = self.word(*words)
        if found is None:
            self.fail(f"expected {' or '.join(words)}")
        return found

    def name(self) -> str:
        if self.pos < len(self.tokens):
            token = self.tokens[self.pos]
            quoted = token.token_type == TokenType.IDENTIFIER
            if quoted or (token.token_type != TokenType.STRING and _WORD.fullmatch(token.text)):
                self.pos += 1
                return token.text.lower()
        self.fail("expected a name")

    def names(self, most: int) -> list[str]:
        parts = [self.name()]
        while len(parts) < most and self.word("."):
            parts.append(self.name())
        return parts

    def string(self) -> str:
        if self.pos < len(self.tokens) and self.tokens[self.pos].token_type == TokenType.STRING:
            self.pos += 1
            return self.tokens[self.pos - 1].text
        self.fail("expected a quoted pattern")

    def rest(self) -> str:
        if self.pos >= len(self.tokens):
            self.fail("expected a statement")
        return self.sql[self.tokens[self.pos].start :]

    def done(self) -> None:
        if self.pos < len(self.tokens):
            self.fail(f"unexpected '{self.tokens[self.pos].text}'")

    def fail(self, what: str) -> NoReturn:
        token = self.tokens[min(self.pos, len(self.tokens) - 1)]
        where = f"line {token.line}, column {token.col}"
        raise InvalidRequest(f"could not parse the statement at {where}: {what}")


def _explain(sql: str, cursor: Cursor, names: Names) -> Statement:
    cursor.expect("EXPLAIN")
    if cursor.word("ANALYZE"):
        raise InvalidRequest("EXPLAIN ANALYZE is not allowed: it runs the query; use EXPLAIN")
    if cursor.word("("):
        while True:
            option = cursor.expect(*_EXPLAIN_OPTIONS)
            cursor.expect(*_EXPLAIN_OPTIONS[option])
            if cursor.expect(",", ")") == ")":
                break
    if cursor.peek() not in _QUERY_STARTS:
        raise InvalidRequest("EXPLAIN is allowed only for SELECT queries")
    inner = parse_query(cursor.rest(), names)
    return Statement("explain", StatementType.UTILITY, sql, inner.tables, explained=inner)


def _show_or_describe(sql: str, cursor: Cursor, names: Names) -> Statement:
    utility = StatementType.UTILITY
    if cursor.expect("SHOW", "DESCRIBE", "DESC") != "SHOW":
        table = names.table(cursor.names(3))
        cursor.done()
        return Statement("describe", utility, sql, (), table=table)
    what = cursor.expect("CATALOGS", "DATABASES", "SCHEMAS", "TABLES", "COLUMNS")
    if what == "COLUMNS":
        cursor.expect("FROM", "IN")
        table = names.table(cursor.names(3))
        cursor.done()
        return Statement("show_columns", utility, sql, (), table=table)
    target: list[str] = []
    if what != "CATALOGS" and cursor.word("FROM", "IN"):
        target = cursor.names(2 if what == "TABLES" else 1)
    like = cursor.string() if cursor.word("LIKE") else None
    cursor.done()
    if what == "CATALOGS":
        return Statement("show_catalogs", utility, sql, (), like=like)
    if what != "TABLES":
        catalog = names.catalog(target[0] if target else names.default_catalog)
        return Statement("show_databases", utility, sql, (), catalog=catalog, like=like)
    catalog, database = names.database(target or [names.default_database])
    return Statement("show_tables", utility, sql, (), catalog=catalog, database=database, like=like)


statements.load()  # the statement modules register their parsers (they import this module)
