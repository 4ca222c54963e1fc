"""The leaf of the SQL front: one statement's tokens, and a strict reader over them.

Statements beyond queries (SHOW, DESCRIBE, EXPLAIN, DDL, views, writes) are read token by
token with ``Cursor``: anything unexpected is refused naming its line and column.
"""

from __future__ import annotations

import re
from itertools import groupby
from typing import ClassVar, NoReturn

from sqlglot.dialects.trino import Trino
from sqlglot.errors import TokenError
from sqlglot.tokenizer_core import Token, TokenType

from lakeward.errors import InvalidRequest

WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
QUERY_STARTS = frozenset({"SELECT", "WITH", "VALUES", "("})
"""The first tokens of a query (SELECT, WITH ... SELECT, VALUES, a parenthesised query)."""


class Tokenizer(Trino.Tokenizer):
    # Athena runs SHOW and DESCRIBE on Hive, which quotes names with backticks; Trino uses
    # double quotes, so accept both. No word is a "command" here: every word is a token,
    # so a second statement after SHOW or CALL is seen.
    IDENTIFIERS: ClassVar[list[str | tuple[str, str]]] = ['"', "`"]
    COMMANDS: ClassVar[set[TokenType]] = set()


class HiveTokenizer(Tokenizer):
    # Athena's DDL is Hive's, whose strings take backslash escapes as well: 'it\'s'.
    STRING_ESCAPES: ClassVar[list[str]] = ["'", "\\"]


HIVE_DDL = frozenset(
    [
        ("CREATE", "EXTERNAL", "TABLE"), ("CREATE", "DATABASE"), ("CREATE", "SCHEMA"),
        ("DROP", "TABLE"), ("DROP", "DATABASE"), ("DROP", "SCHEMA"), ("ALTER", "TABLE"),
        ("ALTER", "DATABASE"), ("ALTER", "SCHEMA"), ("MSCK",),
    ]
)  # fmt: skip
"""The leading words of the statements Athena runs on Hive's DDL parser."""


def is_hive_ddl(tokens: list[Token]) -> bool:
    """Whether the statement is one Athena runs on Hive's DDL parser (HIVE_DDL)."""
    words = tuple(t.text.upper() for t in tokens[:3])
    return any(words[: len(start)] == start for start in HIVE_DDL)


def one_statement(sql: str) -> list[Token]:
    """The tokens of the request's only statement; refuse none or several. A Hive DDL
    statement is read with Hive's strings, any other with Trino's."""
    trino_error: TokenError | None = None
    try:
        tokens = Tokenizer().tokenize(sql)
    except TokenError as e:
        trino_error, tokens = e, []
    if trino_error is not None or is_hive_ddl(tokens):
        # Read again with Hive's strings only where they may matter: a DDL statement, or
        # one Trino's strings cannot read (a Hive string ending in \').
        try:
            hive = HiveTokenizer().tokenize(sql)
        except TokenError:
            hive = None
        if hive is not None and is_hive_ddl(hive):
            tokens = hive
        elif trino_error is not None:
            raise InvalidRequest(f"could not read the query: {trino_error}") from None
    by_semicolons = groupby(tokens, lambda t: t.token_type == TokenType.SEMICOLON)
    statements = [list(run) for semicolons, run in by_semicolons if not semicolons]
    if not statements:
        raise InvalidRequest("the query is empty")
    if len(statements) > 1:
        raise InvalidRequest(
            f"only one statement per request is allowed; this request has {len(statements)}"
        )
    return statements[0]


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
            if quoted or (token.token_type != TokenType.STRING and WORD.fullmatch(token.text)):
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
