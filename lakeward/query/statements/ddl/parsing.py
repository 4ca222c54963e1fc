"""Reading Hive DDL (Athena's DDL syntax) token by token, strictly.

Athena parses DDL with Hive's grammar: backticks quote names, strings take Hive's
backslash escapes (``'\\t'``, ``'\\001'``), column types are Hive's. sqlglot's Hive
parser accepts much of this but silently keeps what it does not know as opaque
properties and reports positions only for some mistakes; a malformed statement must
instead be refused naming the line, column and token, so the statements here are read
by ``Reader``, sql.Cursor's strict token reader with the clauses DDL needs.
"""

from __future__ import annotations

import re
from typing import NoReturn

from sqlglot.tokenizer_core import Token, TokenType

from lakeward.errors import InvalidRequest
from lakeward.metastore.tables import Column
from lakeward.query.sql.tokens import Cursor, is_hive_ddl
from lakeward.query.types import HiveType, parse_hive_type

# Athena's rule for table, database and column names (Hive's, lower-cased).
_NAME = re.compile(r"[a-z0-9_]+")

# Hive's primitive types and how many parameters each takes (min, max).
_PRIMITIVES = {
    "boolean": (0, 0),
    "tinyint": (0, 0),
    "smallint": (0, 0),
    "int": (0, 0),
    "integer": (0, 0),
    "bigint": (0, 0),
    "float": (0, 0),
    "double": (0, 0),
    "decimal": (0, 2),
    "string": (0, 0),
    "char": (1, 1),
    "varchar": (1, 1),
    "binary": (0, 0),
    "date": (0, 0),
    "timestamp": (0, 0),
}
_NESTED = {"array": 1, "map": 2, "struct": None}

# Hive's backslash escapes in string literals (BaseSemanticAnalyzer.unescapeSQLString).
_ESCAPES = {"0": "\0", "b": "\b", "n": "\n", "r": "\r", "t": "\t", "Z": "\x1a"}
_ESCAPE = re.compile(r"\\([0-1][0-7][0-7]|u[0-9a-fA-F]{4}|.)", re.DOTALL)
# Athena's Hive DDL keeps a comment or property value with each run of two or more
# whitespace characters (line breaks among them) made one space.
_WHITESPACE_RUN = re.compile(r"\s{2,}")


def unescape(text: str) -> str:
    """A Hive string literal's value: ``'\\t'`` is a tab, ``'\\001'`` is Ctrl-A."""

    def one(match: re.Match[str]) -> str:
        code = match.group(1)
        if len(code) == 3:
            return chr(int(code, 8))
        if len(code) == 5:
            return chr(int(code[1:], 16))
        if code in "%_":  # kept escaped, as Hive does (they mean themselves in LIKE)
            return "\\" + code
        return _ESCAPES.get(code, code)

    return _ESCAPE.sub(one, text)


def check_name(name: str, what: str) -> str:
    if not _NAME.fullmatch(name):
        raise InvalidRequest(
            f"'{name}' is not a valid {what} name: use lower-case letters, digits and _"
        )
    return name


def check_hive_type(text: str) -> str:
    """A column type as the metastore keeps it (lower case, no spaces); refuse non-types."""
    try:
        parsed = parse_hive_type(text)
    except (ValueError, IndexError):
        raise InvalidRequest(f"'{text}' is not a Hive type") from None
    return _render(parsed, text)


def _what(hive: HiveType, text: str) -> str:
    """Where a problem is: the type itself, or a part of a nested one."""
    return f"'{text}'" if hive.name == text.lower().strip() else f"{hive.name} in '{text}'"


def _render(hive: HiveType, text: str) -> str:
    if hive.name in _PRIMITIVES:
        least, most = _PRIMITIVES[hive.name]
        if not least <= len(hive.params) <= most:
            raise InvalidRequest(f"{_what(hive, text)} takes {least} to {most} parameters")
        if hive.name == "decimal" and hive.params:
            precision, scale = (*hive.params, 0)[:2]
            if not (1 <= precision <= 38 and 0 <= scale <= precision):
                raise InvalidRequest(
                    f"decimal({precision},{scale}) in '{text}': precision must be 1 to 38 and "
                    "scale 0 to the precision"
                )
        if hive.name in ("char", "varchar"):
            limit = 255 if hive.name == "char" else 65535
            if not 1 <= hive.params[0] <= limit:
                raise InvalidRequest(f"{hive.name} length in '{text}' must be 1 to {limit}")
        params = f"({','.join(map(str, hive.params))})" if hive.params else ""
        return ("int" if hive.name == "integer" else hive.name) + params
    if hive.name in ("uniontype", "interval_day_time", "interval_year_month", "void"):
        raise InvalidRequest(f"{_what(hive, text)}: Hive's {hive.name} is not supported")
    if hive.name not in _NESTED:
        raise InvalidRequest(f"{_what(hive, text)} is not a Hive type")
    if hive.params:
        raise InvalidRequest(f"type {hive.name} in '{text}' takes no parameters")
    arity = _NESTED[hive.name]
    if arity is not None and len(hive.args) != arity:
        raise InvalidRequest(f"type {hive.name} in '{text}' takes {arity} type(s) in <>")
    args = [_render(a, text) for a in hive.args]
    if hive.name == "struct":
        for name in hive.fields:
            if not name:
                raise InvalidRequest(f"a struct field in '{text}' has no name")
        args = [f"{n.lower()}:{a}" for n, a in zip(hive.fields, args, strict=True)]
    return f"{hive.name}<{','.join(args)}>"


class Reader:
    """A statement's tokens, read clause by clause; anything unexpected is refused."""

    def __init__(self, sql: str, cursor: Cursor) -> None:
        self.sql = sql
        self.cursor = cursor
        self.hive = is_hive_ddl(cursor.tokens)

    @property
    def tokens(self) -> list[Token]:
        return self.cursor.tokens

    @property
    def pos(self) -> int:
        return self.cursor.pos

    def token(self) -> Token | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def fail(self, what: str) -> NoReturn:
        """Refuse the statement at the current token, naming where and what was found."""
        token = self.token()
        if token is None:
            last = self.tokens[-1]
            line, column = self._where(last.end + 1)
            found = "the end of the statement"
        else:
            line, column = self._where(token.start)
            found = f"'{self.sql[token.start : token.end + 1]}'"
        raise InvalidRequest(
            f"could not parse the statement at line {line}, column {column}: {what}, found {found}"
        )

    def _where(self, offset: int) -> tuple[int, int]:
        line = self.sql.count("\n", 0, offset) + 1
        return line, offset - (self.sql.rfind("\n", 0, offset) + 1) + 1

    # -- words ---------------------------------------------------------------

    def peek(self, ahead: int = 0) -> str:
        index = self.pos + ahead
        if index >= len(self.tokens):
            return ""
        token = self.tokens[index]
        if token.token_type in (TokenType.IDENTIFIER, TokenType.STRING):
            return ""
        return token.text.upper()

    def word(self, *words: str) -> str | None:
        return self.cursor.word(*words)

    def words(self, *words: str) -> bool:
        """Consume the sequence ``words`` if the next tokens are exactly it.

        sqlglot reads a few word pairs as one token (``PARTITIONED BY``), so the words
        of each token are compared, not the tokens.
        """
        read: list[str] = []
        taken = 0
        while len(read) < len(words):
            word = self.peek(taken)
            if not word:
                return False
            read += word.split()
            taken += 1
        if read != list(words):
            return False
        self.cursor.pos += taken
        return True

    def expect(self, *words: str) -> str:
        found = self.word(*words)
        if found is None:
            self.fail(f"expected {' or '.join(words)}")
        return found

    def expect_words(self, *words: str) -> None:
        for word in words:
            self.expect(word)

    def if_not_exists(self) -> bool:
        if self.word("IF"):
            self.expect_words("NOT", "EXISTS")
            return True
        return False

    def if_exists(self) -> bool:
        if self.word("IF"):
            self.expect("EXISTS")
            return True
        return False

    def done(self) -> None:
        if self.token() is not None:
            self.fail("expected the end of the statement")

    # -- names, strings, numbers ---------------------------------------------

    def name(self, what: str = "a name") -> str:
        token = self.token()
        if token is not None and token.token_type != TokenType.STRING:
            quoted = token.token_type == TokenType.IDENTIFIER
            if quoted or re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", token.text):
                self.cursor.pos += 1
                return token.text.lower()
        self.fail(f"expected {what}")

    def names(self, most: int, what: str = "a name") -> list[str]:
        parts = [self.name(what)]
        while len(parts) < most and self.word("."):
            parts.append(self.name(what))
        return parts

    def string(self, what: str = "a quoted string") -> str:
        """A string literal's value: '...' or Hive's "..." (sqlglot reads it as a name)."""
        token = self.token()
        if token is not None and (
            token.token_type == TokenType.STRING
            or (token.token_type == TokenType.IDENTIFIER and self.sql[token.start] == '"')
        ):
            self.cursor.pos += 1
            return unescape(token.text)
        self.fail(f"expected {what}")

    def prose(self, what: str) -> str:
        """A comment or property value, as Athena keeps it: Hive DDL squeezes whitespace."""
        text = self.string(what)
        return _WHITESPACE_RUN.sub(" ", text) if self.hive else text

    def integer(self, what: str = "a number") -> int:
        token = self.token()
        if token is not None and token.token_type == TokenType.NUMBER and token.text.isdigit():
            self.cursor.pos += 1
            return int(token.text)
        self.fail(f"expected {what}")

    def literal(self) -> str:
        """A partition value: a string, a number (perhaps negative), true or false."""
        token = self.token()
        if token is None:
            self.fail("expected a value")
        if token.token_type == TokenType.STRING or self.sql[token.start] == '"':
            return self.string()
        sign = "-" if self.word("-") else ""
        token = self.token()
        if token is not None and token.token_type == TokenType.NUMBER:
            self.cursor.pos += 1
            return sign + token.text
        if not sign and self.peek() in ("TRUE", "FALSE"):
            self.cursor.pos += 1
            return token.text.lower() if token else ""
        self.fail("expected a value (a quoted string or a number)")

    # -- clauses ---------------------------------------------------------------

    def properties(self) -> dict[str, str]:
        """``('key' = 'value', ...)``, as TBLPROPERTIES and SERDEPROPERTIES write them."""
        self.expect("(")
        found: dict[str, str] = {}
        while True:
            key = self.string("a quoted property name")
            self.expect("=")
            found[key] = self.prose("a quoted property value")
            if self.expect(",", ")") == ")":
                return found

    def columns(self, what: str = "column") -> list[Column]:
        """``(name type [COMMENT '...'], ...)``; each type is checked as Hive's."""
        self.expect("(")
        found: list[Column] = []
        while True:
            token = self.token()
            name = self.name(f"a {what} name")
            if token is not None and not _NAME.fullmatch(name):
                self.cursor.pos -= 1
                self.fail(f"a {what} name has only lower-case letters, digits and _")
            if any(c.name == name for c in found):
                self.cursor.pos -= 1
                self.fail(f"{what} {name} is named twice")
            type_ = self.hive_type(f"{what} {name}")
            comment = self.prose("a quoted comment") if self.word("COMMENT") else None
            found.append(Column(name, type_, comment))
            if self.expect(",", ")") == ")":
                return found

    def hive_type(self, of: str) -> str:
        """The type of ``of`` (a column): its text up to the ``,``, ``)`` or COMMENT after it."""
        start = self.token()
        depth = 0
        while (token := self.token()) is not None:
            text = token.text
            if depth == 0 and (text in (",", ")") or self.peek() == "COMMENT"):
                break
            depth += text.count("<") + text.count("(") - text.count(">") - text.count(")")
            if depth < 0:
                break
            self.cursor.pos += 1
        if start is None or self.token() is start:
            self.fail(f"expected the type of {of}")
        end = self.tokens[self.pos - 1]
        text = self.sql[start.start : end.end + 1]
        try:
            return check_hive_type(text)
        except InvalidRequest as e:
            line, column = self._where(start.start)
            raise InvalidRequest(
                f"the type of {of} at line {line}, column {column}: {e.message}"
            ) from None

    def partition_spec(self) -> list[tuple[str, str]]:
        """``PARTITION (key = value, ...)``: the keys (lower case) and values as written."""
        self.expect("PARTITION")
        self.expect("(")
        spec: list[tuple[str, str]] = []
        while True:
            key = self.name("a partition column")
            if any(k == key for k, _ in spec):
                self.cursor.pos -= 1
                self.fail(f"partition column {key} is named twice")
            self.expect("=")
            spec.append((key, self.literal()))
            if self.expect(",", ")") == ")":
                return spec
