"""Conditions of lakeward policies: operators, policy variables and the request context.

A ``Condition`` element maps operators to condition keys to values. IAM's logic, which
this module reproduces:

- operators in one block, and keys under one operator, are ANDed; the values of one key
  are ORed, and for a negated operator (``StringNotEquals``, ``NotIpAddress``, ...) NORed:
  the request's value must match none of them;
- a key absent from the request makes a condition false, except that a negated operator
  is then true (nothing was matched, as its name asks), ``...IfExists`` is true, and
  ``Null`` tests exactly that presence;
- ``ForAllValues:`` is true when every value of a multi-valued key passes (and when the
  key is absent or empty); ``ForAnyValue:`` when at least one does (false when absent);
- keys are compared case-insensitively, values as each operator says;
- a multi-valued key under an operator without a set prefix matches when any of its
  values does (IAM asks for a set prefix there; this is the reading that keeps a negated
  operator's "matches none" meaning).

Policy variables in condition values are ``Template``s (templates.py, shared with the
resources of policy.py). A variable the request has no single value for resolves to
nothing: a condition holding it makes its statement not apply.
"""

from __future__ import annotations

import base64
import difflib
import ipaddress
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, date, datetime
from decimal import Decimal, InvalidOperation
from functools import lru_cache
from operator import eq, ge, gt, le, lt
from typing import Any, TypeAlias

from lakeward.access.templates import (
    Chunk,
    Template,
    describe,
    fail,
    joined,
    parse_template,
    wildcard_regex,
)

Matcher: TypeAlias = Callable[[object], bool]
IpNetwork: TypeAlias = ipaddress.IPv4Network | ipaddress.IPv6Network

_MULTI = (list, tuple, set, frozenset)
_EPOCH = re.compile(r"-?\d+(\.\d+)?")


# ---------------------------------------------------------------------------- context


def as_text(value: object) -> str | None:
    """A single context value as the string that string operators and variables see."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float | Decimal):
        return str(value)
    if isinstance(value, datetime):
        return _utc(value).strftime("%Y-%m-%dT%H:%M:%SZ")
    if isinstance(value, ipaddress.IPv4Address | ipaddress.IPv6Address):
        return str(value)
    return None


class Context:
    """A request's condition keys, looked up case-insensitively as IAM does."""

    __slots__ = ("_values", "_sets", "_rendered", "_patterns")

    def __init__(self, raw: Mapping[str, object]) -> None:
        self._values = {key.lower(): value for key, value in raw.items()}
        # Every key as a tuple of values, None for absent: IAM treats a multi-valued key
        # with no values like an absent one.
        self._sets = {
            key: (tuple(value) or None) if isinstance(value, _MULTI) else (value,)
            for key, value in self._values.items()
            if value is not None
        }
        # Renderings by template: templates are interned, and the same ${aws:username}
        # resource recurs across many of a user's policies.
        self._rendered: dict[int, tuple[Chunk, ...] | None] = {}
        self._patterns: dict[int, re.Pattern[str] | None] = {}

    def values(self, key: str) -> tuple[object, ...] | None:
        """The values of ``key`` (lower-cased), or None when the request lacks it."""
        return self._sets.get(key)

    def text(self, key: str) -> str | None:
        """The value a policy variable takes; multi-valued keys cannot be variables."""
        value = self._values.get(key)
        return None if isinstance(value, _MULTI) else as_text(value)

    def rendered(self, template: Template) -> tuple[Chunk, ...] | None:
        """``template`` for this request; None if a variable has no value."""
        key = id(template)  # templates outlive the context: the caller holds the policies
        if key not in self._rendered:
            self._rendered[key] = template.render(self)
        return self._rendered[key]

    def wildcards(self, template: Template) -> re.Pattern[str] | None:
        """``template`` for this request as a compiled wildcard pattern."""
        key = id(template)
        if key not in self._patterns:
            chunks = self.rendered(template)
            self._patterns[key] = None if chunks is None else compiled_wildcards(chunks)
        return self._patterns[key]


# ------------------------------------------------------------------ typed comparisons


def _utc(moment: datetime) -> datetime:
    # A naive time is read as UTC: lakeward's clocks and AWS's aws:CurrentTime are UTC.
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment


def to_number(value: object) -> Decimal | None:
    if isinstance(value, bool):
        return None
    try:
        if isinstance(value, int | Decimal):
            number = Decimal(value)
        elif isinstance(value, float):
            number = Decimal(repr(value))
        elif isinstance(value, str):
            number = Decimal(value.strip())
        else:
            return None
    except InvalidOperation:
        return None
    return number if number.is_finite() else None


def to_datetime(value: object) -> datetime | None:
    """ISO 8601 text or seconds since the epoch, as IAM's date operators accept."""
    if isinstance(value, datetime):
        return _utc(value)
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day, tzinfo=UTC)
    if isinstance(value, str) and _EPOCH.fullmatch(value.strip()):
        value = Decimal(value.strip())
    if isinstance(value, int | float | Decimal) and not isinstance(value, bool):
        try:
            return datetime.fromtimestamp(float(value), tz=UTC)
        except (OverflowError, OSError, ValueError):
            return None
    if isinstance(value, str):
        try:
            return _utc(datetime.fromisoformat(value.strip()))
        except ValueError:
            return None
    return None


def to_ip(value: object) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    if isinstance(value, ipaddress.IPv4Address | ipaddress.IPv6Address):
        return value
    return _parse_ip(value) if isinstance(value, str) else None


# The same few client addresses are tested by many statements of many policies.
@lru_cache(maxsize=4096)
def _parse_ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(text.strip())
    except ValueError:
        return None


def _to_bool_text(value: object) -> str | None:
    text = as_text(value)
    return text.lower() if text is not None else None


def _to_base64(value: object) -> str | None:
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode("ascii")
    return value if isinstance(value, str) else None


# ------------------------------------------------------------------------- operators

# Operator name -> (family, negated). The ``...IfExists`` forms and the set prefixes are
# derived from these names when parsed.
_OPERATORS: dict[str, tuple[str, bool]] = {
    "StringEquals": ("string", False),
    "StringNotEquals": ("string", True),
    "StringEqualsIgnoreCase": ("string_ci", False),
    "StringNotEqualsIgnoreCase": ("string_ci", True),
    "StringLike": ("string_like", False),
    "StringNotLike": ("string_like", True),
    "NumericEquals": ("numeric_eq", False),
    "NumericNotEquals": ("numeric_eq", True),
    "NumericLessThan": ("numeric_lt", False),
    "NumericLessThanEquals": ("numeric_le", False),
    "NumericGreaterThan": ("numeric_gt", False),
    "NumericGreaterThanEquals": ("numeric_ge", False),
    "DateEquals": ("date_eq", False),
    "DateNotEquals": ("date_eq", True),
    "DateLessThan": ("date_lt", False),
    "DateLessThanEquals": ("date_le", False),
    "DateGreaterThan": ("date_gt", False),
    "DateGreaterThanEquals": ("date_ge", False),
    "Bool": ("bool", False),
    "BinaryEquals": ("binary", False),
    "IpAddress": ("ip", False),
    "NotIpAddress": ("ip", True),
    "ArnEquals": ("arn", False),
    "ArnLike": ("arn", False),
    "ArnNotEquals": ("arn", True),
    "ArnNotLike": ("arn", True),
    "Null": ("null", False),
}
_QUALIFIERS = ("ForAnyValue:", "ForAllValues:")
# IAM substitutes policy variables only in these families' values.
_TEMPLATED = frozenset({"string", "string_ci", "string_like", "bool", "arn"})
_ORDER: dict[str, Callable[[Any, Any], bool]] = {"eq": eq, "lt": lt, "le": le, "gt": gt, "ge": ge}


# Values with policy variables are rendered per request; a user's requests render alike.
@lru_cache(maxsize=4096)
def _rendered_matcher(family: str, rendered: tuple[tuple[Chunk, ...], ...]) -> Matcher:
    return _text_matcher(family, rendered)


@lru_cache(maxsize=4096)
def compiled_wildcards(chunks: tuple[Chunk, ...]) -> re.Pattern[str]:
    """A rendered wildcard string, compiled once per distinct rendering."""
    return re.compile(wildcard_regex(chunks), re.DOTALL)


def _text_matcher(family: str, rendered: Sequence[Sequence[Chunk]]) -> Matcher:
    """The positive test of one key against its (rendered) policy values, ORed."""
    if family in ("string", "string_ci", "bool"):
        # Bool compares "true"/"false" in any case; IgnoreCase folds both sides.
        fold: Callable[[str], str] = str if family == "string" else str.casefold
        wanted = frozenset(fold(joined(chunks)) for chunks in rendered)

        def equals(value: object) -> bool:
            text = as_text(value)
            return text is not None and fold(text) in wanted

        return equals
    pattern = re.compile(
        "|".join(f"(?:{wildcard_regex(chunks, arn=family == 'arn')})" for chunks in rendered),
        re.DOTALL,
    )

    def like(value: object) -> bool:
        text = as_text(value)
        return text is not None and pattern.fullmatch(text) is not None

    return like


def _typed_matcher(
    convert: Callable[[object], object | None],
    wanted: Sequence[object],
    test: Callable[[Any, Any], bool],
) -> Matcher:
    def matches(value: object) -> bool:
        converted = convert(value)
        return converted is not None and any(test(converted, want) for want in wanted)

    return matches


def _in_network(address: Any, network: Any) -> bool:
    # Python answers False, not an error, for an IPv4 address in an IPv6 network; the
    # version test says so outright.
    return address.version == network.version and address in network


class Condition:
    """One condition key under one operator, compiled; ``holds`` decides it."""

    __slots__ = (
        "operator",
        "key",
        "values",
        "_key",
        "_family",
        "_negated",
        "_if_exists",
        "_qualifier",
        "_null",
        "_templates",
        "_matcher",
    )

    def __init__(
        self, operator: str, key: str, raw: object, where: str, *, variables: bool
    ) -> None:
        """Compile ``key: raw`` under ``operator``; ``where`` names the operator in errors."""
        self.operator = operator
        self.key = key
        self._key = key.lower()
        self._family, self._negated, self._if_exists, self._qualifier = _parse_operator(
            operator, where
        )
        path = f"{where}.{key}"
        listed = isinstance(raw, list)
        self.values: tuple[object, ...] = tuple(raw) if isinstance(raw, list) else (raw,)
        if not self.values:
            fail(path, "has no values")
        self._null: frozenset[bool] | None = None
        self._templates: tuple[Template, ...] = ()
        self._matcher: Matcher | None = None
        paths = [f"{path}[{i}]" for i in range(len(self.values))] if listed else [path]
        self._compile(paths, variables)

    @property
    def templates(self) -> tuple[Template, ...]:
        """The values as templates (their policy variables are context keys read too)."""
        return self._templates

    def _compile(self, paths: list[str], variables: bool) -> None:
        family = self._family
        if family == "null":
            pairs = zip(self.values, paths, strict=True)
            self._null = frozenset(_parse_bool(v, p, "Null") for v, p in pairs)
            return
        if family in _TEMPLATED:
            templates: list[Template] = []
            for value, p in zip(self.values, paths, strict=True):
                template = parse_template(_scalar_text(value, p), p, variables=variables)
                if family == "bool" and template.is_static:
                    _parse_bool(value, p, "Bool")
                shape = template.shape()
                if family == "arn" and shape != "*" and shape.count(":") < 5:
                    fail(
                        p,
                        f"{describe(value)} is not an ARN (arn:partition:service:...)",
                    )
                templates.append(template)
            if all(t.is_static for t in templates):
                rendered = [t.render(None) or () for t in templates]
                self._matcher = _text_matcher(family, rendered)
            else:
                self._templates = tuple(templates)
            return
        kind, _, order = family.partition("_")
        parsed: list[object] = []
        convert: Callable[[object], object | None]
        if kind == "numeric":
            convert, what = to_number, "a number"
        elif kind == "date":
            convert, what = to_datetime, "a date (ISO 8601 or seconds since the epoch)"
        elif kind == "ip":
            convert, what = to_ip, "an IP address or CIDR range"
        else:
            convert, what = _to_base64, "base64 text"
        for value, p in zip(self.values, paths, strict=True):
            item = _network(value) if kind == "ip" else convert(value)
            if item is None:
                fail(p, f"{self.operator} takes {what}, not {describe(value)}")
            parsed.append(item)
        test = _in_network if kind == "ip" else _ORDER[order or "eq"]
        self._matcher = _typed_matcher(convert, parsed, test)

    def _identity(self) -> tuple[str, str, tuple[object, ...]]:
        return self.operator, self.key, self.values

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Condition) and self._identity() == other._identity()

    def __hash__(self) -> int:
        return hash(self._identity())

    def __repr__(self) -> str:
        return f"Condition({self.operator!r}, {self.key!r}, {list(self.values)!r})"

    @property
    def requires_key(self) -> bool:
        """Whether this is a ``Null: false`` check, which fails when the key is absent."""
        return self._null == frozenset({False})

    def holds(self, context: Context) -> bool:
        values = context.values(self._key)
        if self._null is not None:
            return (values is None) in self._null
        matcher = self._matcher
        if matcher is None:
            rendered = []
            for template in self._templates:
                chunks = context.rendered(template)
                if chunks is None:
                    return False  # a variable without a value: the statement does not apply
                rendered.append(chunks)
            matcher = _rendered_matcher(self._family, tuple(rendered))
        if values is None:
            if self._if_exists or self._qualifier == "ForAllValues:":
                return True
            if self._qualifier == "ForAnyValue:":
                return False
            return self._negated
        negated = self._negated
        if len(values) == 1 and not self._qualifier:  # the common case, kept cheap
            return matcher(values[0]) != negated
        if self._qualifier == "ForAllValues:":
            return all(matcher(value) != negated for value in values)
        if self._qualifier == "ForAnyValue:":
            return any(matcher(value) != negated for value in values)
        # Without a set prefix the key matches when any of its values does.
        return any(matcher(value) for value in values) != negated


def _parse_operator(name: str, where: str) -> tuple[str, bool, bool, str]:
    """Split ``ForAnyValue:StringLikeIfExists`` and the like; ``where`` names it in errors."""
    qualifier = next((q for q in _QUALIFIERS if name.startswith(q)), "")
    base = name[len(qualifier) :]
    if_exists = base.endswith("IfExists") and base != "IfExists"
    if if_exists:
        base = base[: -len("IfExists")]
    if base not in _OPERATORS:
        known = list(_OPERATORS) + [f"{op}IfExists" for op in _OPERATORS if op != "Null"]
        guess = difflib.get_close_matches(name[len(qualifier) :], known, n=1)
        if not guess:
            lower = {op.lower(): op for op in known}
            guess = [lower[base.lower()]] if base.lower() in lower else []
        hint = f" (did you mean {qualifier}{guess[0]}?)" if guess else ""
        fail(where, f"unknown condition operator{hint}")
    family, negated = _OPERATORS[base]
    if family == "null" and if_exists:
        fail(where, "Null has no IfExists form: Null itself tests whether the key exists")
    if family == "null" and qualifier:
        fail(where, f"Null takes no {qualifier} prefix: it tests the whole key")
    return family, negated, if_exists, qualifier


def _scalar_text(value: object, path: str) -> str:
    text = as_text(value) if isinstance(value, str | bool | int | float) else None
    if text is None:
        fail(path, f"a condition value must be a string, number or boolean, not {describe(value)}")
    return text


def _parse_bool(value: object, path: str, operator: str) -> bool:
    text = _scalar_text(value, path).lower()
    if text not in ("true", "false"):
        fail(path, f'{operator} takes "true" or "false", not {describe(value)}')
    return text == "true"


def _network(value: object) -> IpNetwork | None:
    if not isinstance(value, str):
        return None
    try:
        # Host bits set ("10.0.0.1/24") name the enclosing network, as IAM reads them.
        return ipaddress.ip_network(value.strip(), strict=False)
    except ValueError:
        return None


def parse_conditions(block: object, path: str, *, variables: bool) -> tuple[Condition, ...]:
    """Compile a statement's ``Condition`` element; ``path`` names it in errors."""
    if not isinstance(block, dict):
        fail(path, f"must be an object of condition operators, not {describe(block)}")
    conditions: list[Condition] = []
    for operator, keys in block.items():
        where = f"{path}.{operator}"
        _parse_operator(operator, where)  # an unknown operator is reported before its keys
        if not isinstance(keys, dict):
            fail(where, f"must be an object of condition keys and values, not {describe(keys)}")
        if not keys:
            fail(where, "names no condition keys")
        for key, raw in keys.items():
            if not key.strip():
                fail(where, "has an empty condition key")
            conditions.append(Condition(operator, key, raw, where, variables=variables))
    return tuple(conditions)
