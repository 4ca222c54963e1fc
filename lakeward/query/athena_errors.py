"""Engine errors in Athena's words: an error category, the line and column, the message.

A query that fails in DuckDB or Spark would otherwise tell the user about the
engine ("Binder Error: Referenced column "x" not found in FROM clause!
Candidate bindings: ..."); Athena says ``COLUMN_NOT_FOUND: line 1:8: Column 'x'
cannot be resolved``. The service turns a failed query's reason into that
shape here, once, so the API, the CLI and the console say the same.

The engine runs a translation of the user's SQL, so its positions are not the
user's: the position given is where the name at fault first appears in the
user's own text (1-based line and column, as Athena counts), or none when it
cannot be found. Messages that are lakeward's own (access, limits, timeouts)
pass unchanged.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from lakeward.errors import LakewardError, MetastoreError, StackError, StorageError


@dataclass(frozen=True)
class ErrorKind:
    """Athena's AthenaError block: ErrorCategory (1 system, 2 user), ErrorType, Retryable."""

    category: int
    type: int
    retryable: bool


SYSTEM_ERROR = ErrorKind(1, 100, True)  # internal service error: the service failed
_ENGINE_ERROR = ErrorKind(1, 200, True)  # the query engine had an internal error
_METASTORE_ERROR = ErrorKind(1, 204, True)  # the metastore had an error
_TIMEOUT = ErrorKind(1, 206, False)  # query timeout
_USER_ERROR = ErrorKind(2, 1000, False)
_SYNTAX_ERROR = ErrorKind(2, 1006, False)
# Trino's error names that are the engine's fault, not the statement's.
_INTERNAL_NAMES = ("GENERIC_INTERNAL_ERROR", "HIVE_METASTORE_ERROR", "HIVE_CURSOR_ERROR")
_TRINO_NAME = re.compile(r"^([A-Z][A-Z_]+):")

# DuckDB's exceptions start with their kind; Spark's analysis errors with [CLASS].
_DUCKDB = re.compile(r"^(Binder|Catalog|Conversion|Parser|Invalid Input|Out of Range) Error: ")
_SPARK = re.compile(r"^(?:AnalysisException: )?\[([A-Z_]+)(?:\.[A-Z_]+)?\] ")
_INT_NAMES = {"INT8": "TINYINT", "INT16": "SMALLINT", "INT32": "INT", "INT64": "BIGINT"}
_TRINO_INTEGERS = {"INT8": "tinyint", "INT16": "smallint", "INT32": "integer", "INT64": "bigint"}


def position(query: str, pattern: str) -> str:
    """``line L:C: `` where ``pattern`` first matches in the query, or nothing."""
    found = re.search(pattern, query, flags=re.IGNORECASE)
    if found is None:
        return ""
    before = query[: found.start()]
    line = before.count("\n") + 1
    column = found.start() - (before.rfind("\n") + 1) + 1
    return f"line {line}:{column}: "


def _name(name: str) -> str:
    """A pattern for an identifier, quoted or not, as a whole word."""
    parts = [rf'"?{re.escape(p)}"?' for p in name.split(".")]
    return r"(?<![\w\"'])" + r"\s*\.\s*".join(parts) + r"(?![\w\"'])"


def _column(query: str, g: dict[str, str]) -> str:
    name = g["name"]
    return f"COLUMN_NOT_FOUND: {position(query, _name(name))}Column '{name}' cannot be resolved"


def _function(query: str, g: dict[str, str]) -> str:
    name = g["name"]
    where = position(query, _name(name) + r"\s*\(")
    return f"FUNCTION_NOT_FOUND: {where}Function '{name}' not registered"


def _not_aggregate(query: str, g: dict[str, str]) -> str:
    name = g["name"]
    return (
        f"EXPRESSION_NOT_AGGREGATE: {position(query, _name(name))}'{name}' must be an "
        "aggregate expression or appear in GROUP BY clause"
    )


# DuckDB's names for a literal whose type it has not fixed yet, as Trino types them.
_LITERALS = {"string_literal": "varchar", "integer_literal": "integer"}


def _arguments(query: str, g: dict[str, str]) -> str:
    name = g["name"]
    types = ", ".join(_LITERALS.get(t, t) for t in g["types"].lower().split(", "))
    if not re.match(r"\w", name):  # an operator: +, -, ||, ...
        left, _, right = types.partition(", ")
        where = position(query, rf"(?<=\s){re.escape(name)}(?=\s)") if right else ""
        return f"TYPE_MISMATCH: {where}Cannot apply operator: {left} {name} {right}".rstrip()
    called = _called(query, name)
    if called is None:
        return f"FUNCTION_NOT_FOUND: Unexpected parameters ({types}) for function {name}"
    where = position(query, _name(called) + r"\s*\(")
    if called != name.lower():  # the types DuckDB gives are those of lakeward's own call
        return f"FUNCTION_NOT_FOUND: {where}Unexpected parameters for function {called}"
    return f"FUNCTION_NOT_FOUND: {where}Unexpected parameters ({types}) for function {name}"


def _macro_arguments(query: str, g: dict[str, str]) -> str:
    """One of the macros that give Trino's semantics, called with types it does not take."""
    called = _called(query, g["macro"])
    name = called or g["macro"].removeprefix("trino_")
    where = position(query, _name(name) + r"\s*\(") if called else ""
    return f"FUNCTION_NOT_FOUND: {where}Unexpected parameters for function {name}"


def _called(query: str, function: str) -> str | None:
    """The function of the user's query that DuckDB's ``function`` stands for: itself, the
    Trino function a ``trino_<name>`` macro gives, or one whose macro calls it; None if
    the query calls none of those (Trino names functions case-insensitively)."""
    from lakeward.query.translate.duckdb import macro_users  # the translation's own table

    wanted = function.lower()
    candidates = [wanted, wanted.removeprefix("trino_"), *sorted(macro_users(wanted))]
    for name in candidates:
        if re.search(_name(name) + r"\s*\(", query, flags=re.IGNORECASE):
            return name
    return None


def _ambiguous(query: str, g: dict[str, str]) -> str:
    name = g["name"]
    return f"AMBIGUOUS_NAME: {position(query, _name(name))}Column '{name}' is ambiguous"


def _cast(query: str, g: dict[str, str]) -> str:
    target = _INT_NAMES.get(g["type"], g["type"])
    return f"INVALID_CAST_ARGUMENT: Cannot cast '{g['value']}' to {target}"


def _table(query: str, g: dict[str, str]) -> str:
    name = g["name"]
    return f"TABLE_NOT_FOUND: {position(query, _name(name))}Table '{name}' does not exist"


_DUCKDB_RULES: list[tuple[re.Pattern[str], Callable[[str, dict[str, str]], str]]] = [
    (re.compile(r'Referenced column "(?P<name>[^"]+)" not found'), _column),
    # A derived table without FROM (SELECT 3 AS id) is a "Values list" to DuckDB.
    (re.compile(
        r'(?:Table|Values list) "(?P<t>[^"]+)" does not have a column named "(?P<c>[^"]+)"'
    ),
     lambda q, g: _column(q, {"name": f"{g['t']}.{g['c']}"})),
    (re.compile(r"Function with name (?P<name>\S+) does not exist"), _function),
    (re.compile(r"Macro (?P<macro>\w+)\(\) does not support the supplied arguments"),
     _macro_arguments),
    (re.compile(r'Ambiguous reference to column name "(?P<name>[^"]+)"'), _ambiguous),
    (re.compile(r'column "(?P<name>[^"]+)" must appear in the GROUP BY clause'), _not_aggregate),
    (re.compile(r"argument types '(?P<name>[^(']+)\((?P<types>.*?)\)'"), _arguments),
    (re.compile(r'candidate function for the function call "(?P<name>[^(]+)\((?P<types>.*?)\)"'),
     _arguments),
    (re.compile(r"Division by zero"), lambda q, g: "DIVISION_BY_ZERO: Division by zero"),
    # A failure the Trino translation wrote into the query (query/translate/duckdb/templates.py).
    (re.compile(r"Could not convert string 'TRINO_ERROR (?P<reason>.*)' to \w+"),
     lambda q, g: g["reason"]),
    (re.compile(r"Could not convert string '(?P<value>.*)' to (?P<type>\w+)"), _cast),
    (re.compile(r"Table with name (?P<name>\S+) does not exist"), _table),
    # A narrowing cast (an INSERT's into a smaller column) of a value that does not fit.
    (re.compile(r"with value (?P<value>\S+) can't be cast because the value is out of range for "
                r"the destination type (?P<type>\w+)"),
     lambda q, g: "NUMERIC_VALUE_OUT_OF_RANGE: Out of range for "
                  f"{_TRINO_INTEGERS.get(g['type'], g['type'].lower())}: {g['value']}"),
]  # fmt: skip
_SPARK_RULES: list[tuple[re.Pattern[str], Callable[[str, dict[str, str]], str]]] = [
    (re.compile(r"with name `(?P<name>[^`]+)` cannot be resolved"), _column),
    (re.compile(r"routine `(?P<name>[^`]+)` cannot be found"), _function),
    (re.compile(r"table or view `?(?P<name>[^`\s]+)`? cannot be found"), _table),
]


def error_kind(reason: str, error: BaseException | None) -> ErrorKind:
    """How Athena classifies a failure, from what raised it and its (Athena-worded) reason."""
    if isinstance(error, MetastoreError):
        return _METASTORE_ERROR
    if isinstance(error, (StorageError, StackError)):
        return SYSTEM_ERROR
    if reason.startswith("timed out after"):
        return _TIMEOUT
    name = _TRINO_NAME.match(reason)
    if name is not None:
        if name.group(1) in _INTERNAL_NAMES:
            return _ENGINE_ERROR
        return _SYNTAX_ERROR if name.group(1) == "SYNTAX_ERROR" else _USER_ERROR
    if "mismatched input" in reason or "Syntax error" in reason:
        return _SYNTAX_ERROR
    if error is not None and not isinstance(error, LakewardError):
        return _ENGINE_ERROR  # an engine's own error lakeward has no word for
    return _USER_ERROR


_MISSING_TABLE = re.compile(r"Table (?P<database>[^\s.]+)\.(?P<table>[^\s.]+) does not exist")


def _missing_table(query: str, catalog: str, database: str, table: str) -> str:
    """A table the planner did not find, as Trino's analyzer reports it: where the query
    names it, and its full name."""
    where = position(query, _name(f"{database}.{table}")) or position(query, _name(table))
    return f"TABLE_NOT_FOUND: {where}Table '{catalog}.{database}.{table}' does not exist"


def athena_reason(message: str, query: str, catalog: str = "") -> str:
    """A failed query's reason as Athena words it (unchanged if it is not an engine's or
    one lakeward words as Trino does)."""
    missing = _MISSING_TABLE.fullmatch(message)
    if missing is not None and catalog:
        return _missing_table(query, catalog.lower(), missing["database"], missing["table"])
    duckdb = _DUCKDB.match(message)
    engine = duckdb or _SPARK.match(message)
    if engine is None:
        return message
    rules = _DUCKDB_RULES if duckdb else _SPARK_RULES
    for pattern, worded in rules:
        match = pattern.search(message)
        if match is not None:
            return worded(query, match.groupdict())
    # Not one Athena has a category for: the engine's first line, without its internals.
    first = message[engine.end() :].split("\n", 1)[0]
    return f"GENERIC_USER_ERROR: {first.rstrip('!').strip()}"
