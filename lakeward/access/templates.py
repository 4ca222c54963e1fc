"""Policy strings: variables (``${aws:username}``) and wildcards (``*``, ``?``).

A policy variable may carry a default (``${key, 'text'}``); the escapes ``${*}``, ``${?}``
and ``${$}`` stand for the characters themselves. A string is parsed once into a
``Template`` and rendered per request into ``Chunk``s, which remember whether their
``*`` and ``?`` are wildcards (they are not once they come from an escape or from a
variable's value). Conditions (conditions.py) and resources (policy.py) both use them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NoReturn, Protocol, TypeAlias

from lakeward.errors import InvalidRequest

# A piece of a rendered value: its text, and whether ``*`` and ``?`` in it are wildcards.
Chunk: TypeAlias = tuple[str, bool]

_WILDCARD = re.compile(r"([*?])")


class Values(Protocol):
    """What a template is rendered against: a request's context (conditions.Context)."""

    def text(self, key: str) -> str | None: ...


def fail(path: str, message: str) -> NoReturn:
    raise InvalidRequest(f"{path}: {message}")


def describe(value: object) -> str:
    """How a JSON value is named in an error message."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, int | float):
        return f"the number {value}"
    return json.dumps(value, ensure_ascii=False)


@dataclass(frozen=True, slots=True)
class _Variable:
    key: str  # lower-cased, for the case-insensitive look-up
    default: str | None


@dataclass(frozen=True, slots=True)
class Template:
    """A policy string, with its policy variables resolved per request."""

    parts: tuple[Chunk | _Variable, ...]

    @property
    def is_static(self) -> bool:
        return not any(isinstance(part, _Variable) for part in self.parts)

    def render(self, context: Values | None) -> tuple[Chunk, ...] | None:
        """The chunks of this string for one request; None if a variable has no value."""
        chunks: list[Chunk] = []
        for part in self.parts:
            if isinstance(part, _Variable):
                value = context.text(part.key) if context is not None else None
                if value is None:
                    value = part.default
                if value is None:
                    return None
                chunks.append((value, False))
            else:
                chunks.append(part)
        return tuple(chunks)

    def variables(self) -> frozenset[str]:
        """The (lower-cased) context keys this string reads."""
        return frozenset(part.key for part in self.parts if isinstance(part, _Variable))

    def shape(self) -> str:
        """The text with each variable stood in by a plain word, for structural checks."""
        return "".join(part[0] if isinstance(part, tuple) else "var" for part in self.parts)


def parse_template(text: str, path: str, *, variables: bool) -> Template:
    """Parse ``${...}`` in ``text``; under Version 2008-10-17 IAM takes them literally."""
    if not variables or "${" not in text:
        return Template(((text, True),))
    interned = _INTERNED.get(text)
    if interned is not None:
        return interned
    parts: list[Chunk | _Variable] = []
    pos = 0
    while (start := text.find("${", pos)) >= 0:
        if start > pos:
            parts.append((text[pos:start], True))
        part, pos = _parse_variable(text, start, path)
        parts.append(part)
    if pos < len(text):
        parts.append((text[pos:], True))
    template = Template(tuple(parts))
    if len(_INTERNED) < _INTERNED_SIZE:
        _INTERNED[text] = template
    return template


# One Template object per distinct text lets a request render each text once (Context
# keys renderings by template); bounded, as policies come from users.
_INTERNED: dict[str, Template] = {}
_INTERNED_SIZE = 16384


def _parse_variable(text: str, start: int, path: str) -> tuple[Chunk | _Variable, int]:
    body_at = start + 2
    if text[body_at : body_at + 1] in ("*", "?", "$") and text[body_at + 1 : body_at + 2] == "}":
        return (text[body_at], False), body_at + 2
    bad = f"malformed policy variable at {describe(text[start : start + 40])}"
    close = text.find("}", body_at)
    comma = text.find(",", body_at)
    if close < 0:
        fail(path, f"{bad}: no closing }}")
    if comma < 0 or comma > close:
        key, default, end = text[body_at:close], None, close + 1
    else:
        key = text[body_at:comma]
        default, end = _parse_default(text, comma + 1, path, bad)
    key = key.strip()
    if not key or any(ch.isspace() or ch in "${}'" for ch in key):
        fail(path, f"{bad}: expected ${{key}} or ${{key, 'default'}}")
    return _Variable(key.lower(), default), end


def _parse_default(text: str, pos: int, path: str, bad: str) -> tuple[str, int]:
    """Read `` 'text'}`` after the comma; a quote inside the default is written twice."""
    while pos < len(text) and text[pos] == " ":
        pos += 1
    if text[pos : pos + 1] != "'":
        fail(path, f"{bad}: a default value is written in single quotes")
    pos += 1
    out: list[str] = []
    while True:
        quote = text.find("'", pos)
        if quote < 0:
            fail(path, f"{bad}: the default value has no closing quote")
        out.append(text[pos:quote])
        if text[quote + 1 : quote + 2] == "'":
            out.append("'")
            pos = quote + 2
            continue
        pos = quote + 1
        break
    while pos < len(text) and text[pos] == " ":
        pos += 1
    if text[pos : pos + 1] != "}":
        fail(path, f"{bad}: expected }} after the default value")
    return "".join(out), pos + 1


def joined(chunks: Sequence[Chunk]) -> str:
    return "".join(text for text, _ in chunks)


def has_wildcards(chunks: Sequence[Chunk]) -> bool:
    return any(live and ("*" in text or "?" in text) for text, live in chunks)


def wildcard_regex(chunks: Sequence[Chunk], *, arn: bool = False) -> str:
    """A regex for a wildcard string: ``*`` any run of characters, ``?`` one.

    With ``arn``, IAM's ARN operators check each of the first five colon-separated
    segments on its own, so a wildcard there stops at ``:``; in the sixth (the resource
    part) it may cross colons as anywhere else.
    """
    out: list[str] = []
    colons = 0
    for text, live in chunks:
        if not live:
            out.append(re.escape(text))
            colons += text.count(":")
            continue
        for piece in _WILDCARD.split(text):
            if piece in ("*", "?"):
                inside = arn and colons < 5
                out.append(("[^:]" if inside else ".") + ("*" if piece == "*" else ""))
            elif piece:
                out.append(re.escape(piece))
                colons += piece.count(":")
    return "".join(out)
