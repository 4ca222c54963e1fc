"""How a Hive text table's lines become fields: its SerDe and table properties, read once.

Shared by the DuckDB engine's text readers and the writes that produce text tables (a
table's field delimiter as Hive reads it: ``hive_byte``).
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lakeward.errors import QueryFailed
from lakeward.query.formats import OPENX_JSON_SERDE, TEXT_INPUT

if TYPE_CHECKING:
    from lakeward.query.engines.base import ResolvedTable


@dataclass(frozen=True)
class TextLayout:
    """How a text table's lines become fields (from its SerDe and table properties)."""

    kind: str  # text (LazySimpleSerDe), csv (OpenCSVSerde), json
    delimiter: str = "\x01"
    escape: str | None = None
    null: str | None = "\\N"
    quote: str = '"'
    escape_crlf: bool = False
    header: int = 0
    footer: int = 0
    strict: bool = False  # a field that does not parse fails the query (else NULL)
    ignore_malformed: bool = False  # JSON: a line that is not an object reads as NULLs
    mapping: tuple[tuple[str, str], ...] = ()  # JSON: column -> key (OpenX mapping.*)
    case_insensitive: bool = True  # JSON: keys match columns whatever their case
    collection: str = "\x02"  # LazySimpleSerDe: between an array's items, a struct's fields
    map_key: str = "\x03"  # LazySimpleSerDe: between a map entry's key and value
    encoding: str = "utf-8"  # serialization.encoding

    @classmethod
    def of(cls, table: ResolvedTable) -> TextLayout:
        kind = table.format.kind
        if table.format.input_format != TEXT_INPUT:  # a SequenceFile is not lines of text
            raise QueryFailed(
                f"table {table.ref} has input format {table.format.input_format}; its SerDe "
                f"{table.format.serde} is read from text files only ({TEXT_INPUT})"
            )
        serde = {k.lower(): v for k, v in table.format.serde_parameters.items()}
        props = {k.lower(): v for k, v in table.parameters.items()}
        encoding = serde.get("serialization.encoding", "UTF-8")
        try:
            codecs.lookup(encoding)
        except LookupError:
            raise QueryFailed(
                f"table {table.ref}: serialization.encoding {encoding} is not a known encoding"
            ) from None
        header = _count(props, "skip.header.line.count")
        footer = _count(props, "skip.footer.line.count")
        if kind == "csv":
            return cls(
                "csv",
                delimiter=_char(serde.get("separatorchar"), ",", "separatorChar"),
                quote=_char(serde.get("quotechar"), '"', "quoteChar"),
                escape=_char(serde.get("escapechar"), '"', "escapeChar"),
                null=None,
                header=header,
                footer=footer,
                strict=props.get("use.null.for.invalid.data", "").lower() != "true",
                encoding=encoding,
            )
        if kind == "json":
            ignore = serde.get("ignore.malformed.json", "").lower() == "true"
            mapping = tuple(
                (k.removeprefix("mapping.").lower(), v.lower())
                for k, v in serde.items()
                if k.startswith("mapping.")
            )
            return cls(
                "json",
                header=header,
                footer=footer,
                strict=True,
                ignore_malformed=ignore and table.format.serde == OPENX_JSON_SERDE,
                mapping=mapping,
                case_insensitive=serde.get("case.insensitive", "true").lower() != "false",
                encoding=encoding,
            )
        for unsupported in ("timestamp.formats", "serialization.last.column.takes.rest"):
            if unsupported in serde:  # read otherwise than declared: a different answer
                raise QueryFailed(
                    f"table {table.ref}: SerDe property {unsupported} is not supported"
                )
        delimiter = serde.get("field.delim", serde.get("serialization.format"))
        escape = serde.get("escape.delim")
        return cls(
            "text",
            delimiter=hive_byte(delimiter, "\x01", "field.delim"),
            escape=hive_byte(escape, "", "escape.delim") or None,
            null=serde.get("serialization.null.format", "\\N"),
            escape_crlf=serde.get("serialization.escape.crlf", "").lower() == "true",
            # Hive reads its own misspelling of the property too.
            collection=hive_byte(
                serde.get("collection.delim", serde.get("colelction.delim")),
                "\x02",
                "collection.delim",
            ),
            map_key=hive_byte(serde.get("mapkey.delim"), "\x03", "mapkey.delim"),
            header=header,
            footer=footer,
            encoding=encoding,
        )


def _count(props: dict[str, str], name: str) -> int:
    text = props.get(name)
    if text is None:
        return 0
    try:
        count = int(text)
    except ValueError:
        count = -1
    if count < 0:
        raise QueryFailed(f"table property {name} is {text!r}; it must be a whole number")
    return count


def hive_byte(text: str | None, default: str, name: str) -> str:
    """A delimiter as Hive reads its property (Java's Byte.parseByte, else the first
    character): field.delim '9' is a tab, as in Hive and Athena; '200' is '2'."""
    if not text:
        return default
    if not re.fullmatch(r"[+-]?[0-9]+", text) or not -128 <= int(text) <= 127:
        return text[0]
    if int(text) < 0:  # a byte above 127 is part of a character in UTF-8 text
        raise QueryFailed(f"SerDe property {name} is {text}, a byte that UTF-8 text splits")
    return chr(int(text))


def _char(text: str | None, default: str, name: str) -> str:
    if text is None:
        return default
    if not text:
        raise QueryFailed(f"SerDe property {name} is empty; it must be one character")
    return text[0]
