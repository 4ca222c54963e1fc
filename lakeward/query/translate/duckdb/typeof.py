"""typeof: Trino's name of a value's type, where the query text shows it.

DuckDB's own ``typeof`` answers its names (``DECIMAL(2,1)``, ``VARCHAR``, ``FLOAT``);
Trino's are ``decimal(2,1)``, ``varchar(1)`` and ``real``. A string literal's type carries
its length, which no DuckDB value keeps, so the name is worked out when the query is
translated: from literals, casts, stored columns and the exact numeric rules of
``numbers``. The call becomes that text, with the argument still evaluated (an argument
that fails in Trino fails here too). An expression whose Trino type the text does not show
is refused by name.

This area runs first: it reads the Trino tree before other rewrites make macro calls of it.
"""

from __future__ import annotations

from sqlglot import exp

from lakeward.errors import InvalidRequest
from lakeward.query.translate.duckdb import numbers
from lakeward.query.types import HiveType, parse_hive_type

MACROS: list[str] = [
    # The argument is read, so that its failures are raised, and the name is answered.
    "CREATE MACRO trino_typeof(x, name) AS CASE WHEN x IS NULL THEN name ELSE name END",
]
REFUSED: dict[str, str] = {}

_HIVE_NAMES = {
    "string": "varchar",
    "int": "integer",
    "float": "real",
    "binary": "varbinary",
    "timestamp": "timestamp(3)",
    "timestamp_ntz": "timestamp(3)",
}
_PLAIN = {
    "varchar", "char", "integer", "bigint", "smallint", "tinyint", "real", "double",
    "boolean", "date", "varbinary", "json", "decimal", "timestamp",
}  # fmt: skip
_INTEGER_NAMES = {3: "tinyint", 5: "smallint", 10: "integer", 19: "bigint"}
# Functions whose value is a double whatever their arguments' types.
_DOUBLE_NAMES = {
    "cos", "sin", "tan", "acos", "asin", "atan", "atan2", "cosh", "tanh", "degrees",
    "radians", "pi", "e", "infinity", "nan",
}  # fmt: skip


def hive_type_name(hive: HiveType) -> str | None:
    """Trino's name of a stored column's Hive type; None for one Trino has no name for."""
    if hive.name == "array" and len(hive.args) == 1:
        element = hive_type_name(hive.args[0])
        return None if element is None else f"array({element})"
    if hive.name == "map" and len(hive.args) == 2:
        key, value = (hive_type_name(a) for a in hive.args)
        return None if key is None or value is None else f"map({key}, {value})"
    if hive.name == "struct":
        fields = [(f, hive_type_name(a)) for f, a in zip(hive.fields, hive.args, strict=True)]
        if any(t is None for _, t in fields):
            return None
        return "row(" + ", ".join(f"{f} {t}" for f, t in fields) + ")"
    if hive.name == "decimal":
        precision, scale = (list(hive.params) + [10, 0][len(hive.params) :])[:2]
        return f"decimal({precision},{scale})"
    if hive.name in ("varchar", "char") and hive.params:
        return f"{hive.name}({hive.params[0]})"
    if hive.name == "char":
        return "char(1)"
    name = _HIVE_NAMES.get(hive.name, hive.name)
    return name if name in _PLAIN or name == "timestamp(3)" else None


def _cast_name(to: exp.DataType) -> str | None:
    """Trino's name of a cast's target type, for the types this answers."""
    if to.this == exp.DataType.Type.TIMESTAMP:
        params = [p.name for p in to.expressions]
        return f"timestamp({params[0] if params else 3})"
    if to.this == exp.DataType.Type.DECIMAL:
        found = numbers.cast_type(to)
        return None if found is None else f"decimal({found.precision},{found.scale})"
    if to.this in (exp.DataType.Type.CHAR, exp.DataType.Type.NCHAR) and not to.expressions:
        return "char(1)"
    text = to.sql(dialect="trino").lower().replace(" ", "")
    bare = text.split("(")[0]
    return text if bare in _PLAIN else None


def _double(node: exp.Expr) -> bool:
    """Whether ``node`` is a double by the text: a double literal, a cast to double, a
    stored double column, a function whose value is a double, or arithmetic with one of
    them and an exact number or another double."""
    if isinstance(node, exp.Paren):
        return _double(node.this)
    if isinstance(node, exp.Literal) and not node.is_string:
        return "e" in node.name.lower()
    if isinstance(node, exp.Cast):
        return bool(node.to.this == exp.DataType.Type.DOUBLE)
    if isinstance(node, exp.Column):
        return node.meta.get(numbers.STORED_KEY) is True and _stored(node) == "double"
    if isinstance(node, numbers.DOUBLE_FUNCTIONS):
        return True
    if isinstance(node, exp.Anonymous):
        return node.name.lower() in _DOUBLE_NAMES
    if isinstance(node, exp.Func) and node.sql_name().lower() in _DOUBLE_NAMES:
        return True
    if isinstance(node, (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod)):
        sides = (node.left, node.right)
        return any(_double(s) for s in sides) and all(
            _double(s) or numbers.numeric_type(s) is not None for s in sides
        )
    return False


def _stored(column: exp.Column) -> str | None:
    found = column.meta.get(numbers.COLUMN_KEY)
    if not isinstance(found, str):
        return None
    try:
        return hive_type_name(parse_hive_type(found))
    except ValueError:
        return None


def trino_type_name(node: exp.Expr) -> str | None:
    """Trino's name of ``node``'s type where the text shows it; None where it does not."""
    if isinstance(node, exp.Paren):
        return trino_type_name(node.this)
    if isinstance(node, exp.Literal) and node.is_string:
        return f"varchar({len(node.name)})"
    if isinstance(node, exp.Boolean):
        return "boolean"
    if isinstance(node, exp.Null):
        return "unknown"
    if isinstance(node, exp.Cast) and not isinstance(node.this, exp.Null):
        bare = node.to.this == exp.DataType.Type.DECIMAL and not node.to.expressions
        if not bare:  # DECIMAL '1.5' is typed by its digits, below
            return _cast_name(node.to)
    if isinstance(node, exp.Column):
        stored = node.meta.get(numbers.STORED_KEY) is True
        if stored:
            return _stored(node)
    if _double(node):
        return "double"
    found = numbers.numeric_type(node)
    if found is None:
        return None
    if found.integer:
        return _INTEGER_NAMES.get(found.precision)
    return f"decimal({found.precision},{found.scale})"


def typeof(node: exp.Expr) -> exp.Expr:
    if not isinstance(node, exp.Typeof):
        return node
    name = trino_type_name(node.this)
    if name is None and not node.root().meta.get(numbers.COLUMNS_KNOWN_KEY, True):
        name = "unknown"  # checked before its stored columns are known: decided when it runs
    if name is None:
        raise InvalidRequest(
            f"typeof is not supported on the DuckDB engine for {node.this.sql('trino')}: its "
            "Trino type is not shown by the query (typeof answers literals, casts, stored "
            "columns and arithmetic on them)"
        )
    return exp.Anonymous(this="trino_typeof", expressions=[node.this, exp.Literal.string(name)])


REWRITES = [typeof]
