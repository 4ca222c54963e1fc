"""Type names across the SQL service: Hive (the metastore), DuckDB and Arrow to Athena.

Athena reports result columns with Trino's type names (``varchar``, ``bigint``,
``row``...), whatever stored the data; tables are declared with Hive's names
(``string``, ``int``, ``struct<...>``). Each mapping here is a table plus a
few parameterised forms (decimals, bounded strings, nested types).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TypedDict

import pyarrow as pa

from lakeward.query.model import ColumnInfo

_CASE_SENSITIVE = ("varchar", "char", "json")

# The precisions Athena reports for types without parameters.
_PRECISION = {
    "varchar": 2147483647,
    "tinyint": 3,
    "smallint": 5,
    "integer": 10,
    "bigint": 19,
    "float": 17,
    "double": 17,
    "timestamp": 3,
    "timestamp with time zone": 3,
    "time": 3,
    "varbinary": 1073741824,
}


@dataclass(frozen=True)
class AthenaType:
    name: str
    precision: int = 0
    scale: int = 0

    @classmethod
    def of(cls, name: str, precision: int | None = None, scale: int = 0) -> AthenaType:
        return cls(name, _PRECISION.get(name, 0) if precision is None else precision, scale)

    def column(self, name: str, *, schema: str = "", table: str = "") -> ColumnInfo:
        """A result column of this type, with the precision and case rule Athena reports."""
        return ColumnInfo(
            name=name,
            type=self.name,
            precision=self.precision,
            scale=self.scale,
            schema=schema,
            table=table,
            case_sensitive=self.name in _CASE_SENSITIVE,
        )


UNKNOWN = AthenaType("unknown")


class ColumnType(TypedDict):
    """The type fields of a ColumnInfo: ``ColumnInfo(name=n, **athena_type(t))``."""

    type: str
    precision: int
    scale: int
    case_sensitive: bool


# --- Hive -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class HiveType:
    """A parsed Hive type: ``decimal(10,2)``, ``array<int>``, ``struct<a:int,b:string>``."""

    name: str
    params: tuple[int, ...] = ()
    args: tuple[HiveType, ...] = ()
    fields: tuple[str, ...] = ()  # struct field names, one per arg


_HIVE_TOKEN = re.compile(r"\s*(`(?:[^`]|``)*`|[A-Za-z_][A-Za-z0-9_]*|\d+|[<>(),:])")


def parse_hive_type(text: str) -> HiveType:
    """Parse a Hive type name; raises ValueError on anything that is not one."""
    tokens: list[str] = []
    pos = 0
    text = text.strip()
    while pos < len(text):
        match = _HIVE_TOKEN.match(text, pos)
        if not match:
            raise ValueError(f"not a Hive type: {text!r}")
        tokens.append(match.group(1))
        pos = match.end()
    parsed, end = _parse_hive(tokens, 0)
    if end != len(tokens):
        raise ValueError(f"not a Hive type: {text!r}")
    return parsed


def _expect(tokens: list[str], i: int, token: str) -> int:
    if i >= len(tokens) or tokens[i] != token:
        raise ValueError(f"expected {token!r} in Hive type {''.join(tokens)!r}")
    return i + 1


def _parse_hive(tokens: list[str], i: int) -> tuple[HiveType, int]:
    if i >= len(tokens) or not tokens[i][0].isalpha():
        raise ValueError(f"not a Hive type: {''.join(tokens)!r}")
    name, i = tokens[i].lower(), i + 1
    params: list[int] = []
    if i < len(tokens) and tokens[i] == "(":
        i += 1
        while True:
            if i >= len(tokens) or not tokens[i].isdigit():
                raise ValueError(f"bad parameters in Hive type {''.join(tokens)!r}")
            params.append(int(tokens[i]))
            i += 1
            if tokens[i : i + 1] != [","]:
                break
            i += 1
        i = _expect(tokens, i, ")")
    args: list[HiveType] = []
    fields: list[str] = []
    if name in ("array", "map", "struct", "uniontype"):
        i = _expect(tokens, i, "<")
        while True:
            if name == "struct":
                fields.append(tokens[i].strip("`").replace("``", "`"))
                i = _expect(tokens, i + 1, ":")
            arg, i = _parse_hive(tokens, i)
            args.append(arg)
            if tokens[i : i + 1] != [","]:
                break
            i += 1
        i = _expect(tokens, i, ">")
    return HiveType(name, tuple(params), tuple(args), tuple(fields)), i


_HIVE_TO_ATHENA = {
    "string": "varchar",
    "varchar": "varchar",
    "char": "char",
    "int": "integer",
    "integer": "integer",
    "bigint": "bigint",
    "smallint": "smallint",
    "tinyint": "tinyint",
    "double": "double",
    "float": "float",
    "boolean": "boolean",
    "date": "date",
    "timestamp": "timestamp",
    "timestamp_ntz": "timestamp",  # Spark's name for Hive's timestamp
    "binary": "varbinary",
    "array": "array",
    "map": "map",
    "struct": "row",
}

_HIVE_TO_DUCKDB = {
    "string": "VARCHAR",
    "varchar": "VARCHAR",
    "char": "VARCHAR",
    "int": "INTEGER",
    "integer": "INTEGER",
    "bigint": "BIGINT",
    "smallint": "SMALLINT",
    "tinyint": "TINYINT",
    "double": "DOUBLE",
    "float": "FLOAT",
    "boolean": "BOOLEAN",
    "date": "DATE",
    "timestamp": "TIMESTAMP",
    "binary": "BLOB",
}

_HIVE_TO_ARROW = {
    "string": pa.string(),
    "varchar": pa.string(),
    "char": pa.string(),
    "int": pa.int32(),
    "integer": pa.int32(),
    "bigint": pa.int64(),
    "smallint": pa.int16(),
    "tinyint": pa.int8(),
    "double": pa.float64(),
    "float": pa.float32(),
    "boolean": pa.bool_(),
    "date": pa.date32(),
    "timestamp": pa.timestamp("us"),
    "binary": pa.binary(),
}


def _decimal_params(params: tuple[int, ...]) -> tuple[int, int]:
    # Hive's bare ``decimal`` is decimal(10,0); ``decimal(p)`` has scale 0.
    if not params:
        return 10, 0
    return params[0], params[1] if len(params) > 1 else 0


def athena_type_of_hive(hive_type: str) -> AthenaType:
    try:
        parsed = parse_hive_type(hive_type)
    except ValueError:
        return UNKNOWN
    if parsed.name == "decimal":
        return AthenaType("decimal", *_decimal_params(parsed.params))
    name = _HIVE_TO_ATHENA.get(parsed.name)
    if name is None:
        return UNKNOWN
    if name in ("varchar", "char") and parsed.params:
        return AthenaType(name, parsed.params[0])
    return AthenaType.of(name)


def athena_type(hive_type: str) -> ColumnType:
    """The ColumnInfo type fields of a Hive (or Spark ``simpleString``) type name."""
    found = athena_type_of_hive(hive_type)
    return ColumnType(
        type=found.name,
        precision=found.precision,
        scale=found.scale,
        case_sensitive=found.name in _CASE_SENSITIVE,
    )


def duckdb_type_of_hive(hive_type: str | HiveType) -> str:
    """The DuckDB type a Hive column is read as; raises ValueError for unknown types."""
    parsed = parse_hive_type(hive_type) if isinstance(hive_type, str) else hive_type
    if parsed.name == "decimal":
        precision, scale = _decimal_params(parsed.params)
        return f"DECIMAL({precision},{scale})"
    if parsed.name == "array":
        return f"{duckdb_type_of_hive(parsed.args[0])}[]"
    if parsed.name == "map":
        key, value = (duckdb_type_of_hive(a) for a in parsed.args)
        return f"MAP({key}, {value})"
    if parsed.name == "struct":
        members = ", ".join(
            f"{quote_identifier(f)} {duckdb_type_of_hive(a)}"
            for f, a in zip(parsed.fields, parsed.args, strict=True)
        )
        return f"STRUCT({members})"
    try:
        return _HIVE_TO_DUCKDB[parsed.name]
    except KeyError:
        raise ValueError(f"Hive type {parsed.name!r} has no DuckDB equivalent") from None


def arrow_type_of_hive(hive_type: str) -> pa.DataType:
    """The Arrow type of a primitive Hive column (partition keys); strings for anything else."""
    try:
        parsed = parse_hive_type(hive_type)
    except ValueError:
        return pa.string()
    if parsed.name == "decimal":
        return pa.decimal128(*_decimal_params(parsed.params))
    return _HIVE_TO_ARROW.get(parsed.name, pa.string())


def quote_identifier(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def quote_string(text: str) -> str:
    """A SQL string literal of ``text`` (quotes doubled)."""
    return "'" + text.replace("'", "''") + "'"


# --- DuckDB ---------------------------------------------------------------------------------

_DUCKDB_TO_ATHENA = {
    "VARCHAR": AthenaType.of("varchar"),
    "JSON": AthenaType.of("json"),
    "UUID": AthenaType.of("varchar"),
    "ENUM": AthenaType.of("varchar"),
    "BIT": AthenaType.of("varchar"),
    "INTERVAL": AthenaType.of("varchar"),
    "TINYINT": AthenaType.of("tinyint"),
    "SMALLINT": AthenaType.of("smallint"),
    "INTEGER": AthenaType.of("integer"),
    "BIGINT": AthenaType.of("bigint"),
    # Unsigned and wider integers take the next signed type that holds every value.
    "UTINYINT": AthenaType.of("smallint"),
    "USMALLINT": AthenaType.of("integer"),
    "UINTEGER": AthenaType.of("bigint"),
    "UBIGINT": AthenaType("decimal", 20, 0),
    "HUGEINT": AthenaType("decimal", 38, 0),
    "UHUGEINT": AthenaType("decimal", 38, 0),
    "BIGNUM": AthenaType("decimal", 38, 0),
    "VARINT": AthenaType("decimal", 38, 0),
    "FLOAT": AthenaType.of("float"),
    "DOUBLE": AthenaType.of("double"),
    "BOOLEAN": AthenaType.of("boolean"),
    "DATE": AthenaType.of("date"),
    "TIME": AthenaType.of("time"),
    "TIMESTAMP": AthenaType.of("timestamp"),
    "TIMESTAMP_S": AthenaType.of("timestamp"),
    "TIMESTAMP_MS": AthenaType.of("timestamp"),
    "TIMESTAMP_NS": AthenaType.of("timestamp"),
    "TIMESTAMP WITH TIME ZONE": AthenaType.of("timestamp with time zone"),
    "BLOB": AthenaType.of("varbinary"),
}

_DUCKDB_DECIMAL = re.compile(r"^DECIMAL\((\d+),\s*(\d+)\)$")


def athena_type_of_duckdb(duckdb_type: str) -> AthenaType:
    """The Athena type of a DuckDB result type, given as DuckDB prints it."""
    text = duckdb_type.strip()
    upper = text.upper()
    if upper.endswith("]"):  # INTEGER[] and INTEGER[3]
        return AthenaType.of("array")
    head = upper.split("(", 1)[0].strip()
    if head == "STRUCT":
        return AthenaType.of("row")
    if head == "MAP":
        return AthenaType.of("map")
    if head == "DECIMAL":
        match = _DUCKDB_DECIMAL.match(upper)
        return AthenaType("decimal", int(match[1]), int(match[2])) if match else UNKNOWN
    if upper.startswith("VARCHAR"):  # also VARCHAR COLLATE ...
        return AthenaType.of("varchar")
    return _DUCKDB_TO_ATHENA.get(head, UNKNOWN)


# --- Arrow ----------------------------------------------------------------------------------


def athena_type_of_arrow(arrow_type: pa.DataType) -> AthenaType:
    t = pa.types
    if pa.types.is_dictionary(arrow_type):
        return athena_type_of_arrow(arrow_type.value_type)
    if t.is_decimal(arrow_type):
        return AthenaType("decimal", arrow_type.precision, arrow_type.scale)
    if t.is_timestamp(arrow_type):
        return AthenaType.of("timestamp with time zone" if arrow_type.tz else "timestamp")
    checks = (
        (t.is_string, "varchar"),
        (t.is_large_string, "varchar"),
        (t.is_string_view, "varchar"),
        (t.is_int8, "tinyint"),
        (t.is_int16, "smallint"),
        (t.is_int32, "integer"),
        (t.is_int64, "bigint"),
        (t.is_uint8, "smallint"),
        (t.is_uint16, "integer"),
        (t.is_uint32, "bigint"),
        (t.is_float16, "float"),
        (t.is_float32, "float"),
        (t.is_float64, "double"),
        (t.is_boolean, "boolean"),
        (t.is_date, "date"),
        (t.is_time, "time"),
        (t.is_binary, "varbinary"),
        (t.is_large_binary, "varbinary"),
        (t.is_fixed_size_binary, "varbinary"),
        (t.is_binary_view, "varbinary"),
        (t.is_map, "map"),  # before lists: a map is also a list of entries
        (t.is_list, "array"),
        (t.is_large_list, "array"),
        (t.is_fixed_size_list, "array"),
        (t.is_list_view, "array"),
        (t.is_struct, "row"),
    )
    for check, name in checks:
        if check(arrow_type):
            return AthenaType.of(name)
    if t.is_uint64(arrow_type):
        return AthenaType("decimal", 20, 0)
    return UNKNOWN


_ARROW_TO_HIVE = (
    (pa.types.is_boolean, "boolean"),
    (pa.types.is_int8, "tinyint"),
    (pa.types.is_int16, "smallint"),
    (pa.types.is_int32, "int"),
    (pa.types.is_int64, "bigint"),
    (pa.types.is_float32, "float"),
    (pa.types.is_float64, "double"),
    (pa.types.is_date, "date"),
    (pa.types.is_string, "string"),
    (pa.types.is_large_string, "string"),
    (pa.types.is_string_view, "string"),
    (pa.types.is_binary, "binary"),
    (pa.types.is_large_binary, "binary"),
)


def hive_type_of_arrow(arrow_type: pa.DataType, column: str = "") -> str:
    """The Hive type a table declares for values of ``arrow_type`` (what a CTAS writes).

    Only types whose values Hive and Athena read back unchanged; anything else (time,
    intervals as DuckDB gives them, unsigned 64-bit) is refused naming ``column``.
    """
    t = pa.types
    if t.is_dictionary(arrow_type):
        return hive_type_of_arrow(arrow_type.value_type, column)
    if t.is_decimal(arrow_type):
        return f"decimal({arrow_type.precision},{arrow_type.scale})"
    if t.is_timestamp(arrow_type) and not arrow_type.tz:
        return "timestamp"
    if t.is_map(arrow_type):
        key = hive_type_of_arrow(arrow_type.key_type, column)
        return f"map<{key},{hive_type_of_arrow(arrow_type.item_type, column)}>"
    if t.is_list(arrow_type) or t.is_large_list(arrow_type) or t.is_fixed_size_list(arrow_type):
        return f"array<{hive_type_of_arrow(arrow_type.value_type, column)}>"
    if t.is_struct(arrow_type):
        fields = (
            f"{f.name}:{hive_type_of_arrow(f.type, column)}"
            for f in (arrow_type.field(i) for i in range(arrow_type.num_fields))
        )
        return f"struct<{','.join(fields)}>"
    for check, name in _ARROW_TO_HIVE:
        if check(arrow_type):
            return name
    athena = athena_type_of_arrow(arrow_type).name
    raise ValueError(f"column {column}: a table cannot hold values of type {athena} ({arrow_type})")
