"""``ExecutionParameters``: the values of a statement's ``?`` placeholders, as Athena binds them.

Each value is a SQL literal written as text (``'O''Brien'``, ``42``, ``DATE '2020-01-01'``,
``NULL``); it takes the place of the placeholder of the same position. A placeholder is
a ``?`` token, never one inside a string, an identifier or a comment. A value that is
not one literal (``1; DROP TABLE t``, a column name) is refused naming its position, so a
parameter can never change what the statement does.
"""

from __future__ import annotations

import sqlglot
from sqlglot import expressions as exp
from sqlglot.dialects.trino import Trino
from sqlglot.tokenizer_core import Token, TokenType

from lakeward.errors import InvalidRequest

_LITERALS = (exp.Literal, exp.Boolean, exp.Null)


def _literal(value: str, position: int) -> str:
    try:
        tree = sqlglot.parse_one(value, read="trino")
    except sqlglot.errors.SqlglotError:
        tree = None
    node = tree.this if isinstance(tree, exp.Neg) else tree
    if isinstance(node, exp.Cast) and not isinstance(tree, exp.Neg):
        node = node.this  # a typed literal: DATE '...', TIMESTAMP '...'
    if not isinstance(node, _LITERALS):
        raise InvalidRequest(
            f"ExecutionParameters member {position} ({value[:60]!r}) is not a SQL literal: "
            "write a string as 'text', a number as 42, a date as DATE '2020-01-01'"
        )
    return value.strip()


def placeholders(query: str) -> list[Token]:
    """The ``?`` tokens of a statement, in order."""
    tokens = Trino().tokenizer_class().tokenize(query)
    return [t for t in tokens if t.token_type == TokenType.PLACEHOLDER]


def bind(query: str, parameters: list[str]) -> str:
    """``query`` with its ``?`` placeholders replaced by ``parameters``, in order."""
    found = placeholders(query)
    if len(found) != len(parameters):
        raise InvalidRequest(
            f"Incorrect number of parameters: expected {len(found)} but found "
            f"{len(parameters)} (ExecutionParameters must give one value per ? in the query)"
        )
    bound, last = [], 0
    for position, (token, value) in enumerate(zip(found, parameters, strict=True), 1):
        bound += [query[last : token.start], _literal(value, position)]
        last = token.end + 1
    return "".join(bound) + query[last:]
