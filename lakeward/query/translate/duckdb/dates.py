"""Dates, times and intervals as Trino computes and types them.

A DATE stays a DATE in Trino when days, months or years are added to it or it is
truncated (``date_add``, ``date_trunc``, ``DATE + INTERVAL``); DuckDB makes a
TIMESTAMP of it. The operand's type decides, and only DuckDB's binder knows it
for a column, so these become macros with one overload per type. ``date_diff``
counts whole units between the two values (DuckDB's ``date_sub``), not the unit
boundaries crossed (DuckDB's ``date_diff``). ``format_datetime`` and
``parse_datetime`` take Joda patterns, translated here to strftime's.

DuckDB keeps no zone in a TIMESTAMP WITH TIME ZONE (it is an instant shown in
the session's zone, UTC), so only conversions to UTC can be answered exactly.
"""

from __future__ import annotations

import datetime
import re

from sqlglot import exp

from lakeward.errors import InvalidRequest
from lakeward.query.translate.duckdb.calls import call, literal_text

_DATE_UNITS = ("day", "week", "month", "quarter", "year")
_TIME_UNITS = ("millisecond", "second", "minute", "hour")
_INTERVAL_OF_UNIT = {
    "millisecond": "to_milliseconds(n)",
    "second": "to_seconds(n)",
    "minute": "to_minutes(n)",
    "hour": "to_hours(n)",
    "day": "to_days(n)",
    "week": "to_weeks(n)",
    "month": "to_months(n)",
    "quarter": "to_months(3 * n)",
    "year": "to_years(n)",
}
_DATE_ONLY = "lower(unit) IN ({})".format(", ".join(f"'{u}'" for u in _DATE_UNITS))
_NOT_DATE_FIELD = "error('''' || unit || ''' is not a valid DATE field')"
_TIMESTAMPS = ("TIMESTAMP", "TIMESTAMPTZ")

MACROS: list[str] = [
    "CREATE MACRO trino_interval_of(unit, n) AS CASE lower(unit) "
    + " ".join(f"WHEN '{u}' THEN {i}" for u, i in _INTERVAL_OF_UNIT.items())
    + " ELSE error('''' || unit || ''' is not a valid interval unit') END",
    "CREATE MACRO trino_date_add"
    f"(unit VARCHAR, n BIGINT, x DATE) AS CASE WHEN {_DATE_ONLY}"
    f" THEN CAST(x + trino_interval_of(unit, n) AS DATE) ELSE {_NOT_DATE_FIELD} END, "
    + ", ".join(
        f"(unit VARCHAR, n BIGINT, x {t}) AS x + trino_interval_of(unit, n)" for t in _TIMESTAMPS
    ),
    "CREATE MACRO trino_date_diff"
    f"(unit VARCHAR, a DATE, b DATE) AS CASE WHEN {_DATE_ONLY}"
    f" THEN date_sub(lower(unit), a, b) ELSE {_NOT_DATE_FIELD} END, "
    + ", ".join(
        f"(unit VARCHAR, a {t}, b {t}) AS date_sub(lower(unit), a, b)" for t in _TIMESTAMPS
    ),
    "CREATE MACRO trino_date_trunc"
    f"(unit VARCHAR, x DATE) AS CASE WHEN {_DATE_ONLY}"
    f" THEN CAST(date_trunc(lower(unit), x) AS DATE) ELSE {_NOT_DATE_FIELD} END, "
    + ", ".join(f"(unit VARCHAR, x {t}) AS date_trunc(lower(unit), x)" for t in _TIMESTAMPS),
    # Trino adds to a DATE only whole days, months and years.
    "CREATE MACRO trino_plus_date(x, i) AS CASE WHEN CAST(x + i AS TIME) <> TIME '00:00:00'"
    " THEN error('Cannot add hour, minutes or seconds to a date') ELSE CAST(x + i AS DATE) END",
    "CREATE MACRO trino_plus(x DATE, i INTERVAL) AS trino_plus_date(x, i), "
    "(i INTERVAL, x DATE) AS trino_plus_date(x, i), "
    + ", ".join(f"(x {t}, i INTERVAL) AS x + i, (i INTERVAL, x {t}) AS x + i" for t in _TIMESTAMPS)
    + ", (x INTERVAL, i INTERVAL) AS x + i, (x TIME, i INTERVAL) AS x + i",
    "CREATE MACRO trino_minus"
    "(x DATE, i INTERVAL) AS CASE WHEN CAST(x - i AS TIME) <> TIME '00:00:00'"
    " THEN error('Cannot subtract hour, minutes or seconds from a date')"
    " ELSE CAST(x - i AS DATE) END, "
    + ", ".join(f"(x {t}, i INTERVAL) AS x - i" for t in _TIMESTAMPS)
    + ", (x INTERVAL, i INTERVAL) AS x - i, (x TIME, i INTERVAL) AS x - i",
    # A zone other than UTC would be shown as UTC: refused when a value has one.
    "CREATE MACRO trino_from_iso8601_timestamp(s) AS CASE"
    " WHEN regexp_matches(s, 'T[0-9:.,]*[+-][0-9]{2}(:?[0-9]{2})?$') THEN error("
    "'from_iso8601_timestamp: a time with an offset (not Z) is not supported: ' || s)"
    " ELSE CAST(s AS TIMESTAMPTZ) END",
    "CREATE MACRO trino_to_iso8601(x DATE) AS strftime(x, '%Y-%m-%d'),"
    " (x TIMESTAMP) AS strftime(x, '%Y-%m-%dT%H:%M:%S.%g'),"
    " (x TIMESTAMPTZ) AS strftime(x, '%Y-%m-%dT%H:%M:%S.%gZ')",
]

REFUSED: dict[str, str] = {
    "parse_duration": "not available on DuckDB",
    "human_readable_seconds": "not available on DuckDB",
    "timezone_hour": "DuckDB keeps no zone in a timestamp with time zone",
    "timezone_minute": "DuckDB keeps no zone in a timestamp with time zone",
    "from_unixtime_nanos": "not available on DuckDB",
}

# Joda pattern letters, by letter and count, as strftime directives. A count not
# listed is refused, as is any letter not listed.
_JODA = {
    "y": {2: "%y", 0: "%Y"},
    "Y": {2: "%y", 0: "%Y"},
    "M": {1: "%-m", 2: "%m", 3: "%b", 0: "%B"},
    "d": {1: "%-d", 2: "%d"},
    "H": {1: "%-H", 2: "%H"},
    "h": {1: "%-I", 2: "%I"},
    "m": {1: "%-M", 2: "%M"},
    "s": {1: "%-S", 2: "%S"},
    "S": {3: "%g", 6: "%f"},
    "a": {1: "%p"},
    "E": {1: "%a", 2: "%a", 3: "%a", 0: "%A"},
    "D": {1: "%-j", 3: "%j"},
}
_JODA_TOKEN = re.compile(r"'(?:[^']|'')*'|([A-Za-z])\1*|[^A-Za-z']+")


def strftime_of_joda(pattern: str, function: str) -> str:
    """A Joda-Time pattern as strftime's; refused for letters DuckDB cannot print alike."""
    out = []
    for match in _JODA_TOKEN.finditer(pattern):
        token = match.group(0)
        if token.startswith("'"):
            out.append((token[1:-1].replace("''", "'") or "'").replace("%", "%%"))
        elif token[0].isalpha():
            forms = _JODA.get(token[0], {})
            form = forms.get(len(token)) or (forms.get(0) if len(token) >= 3 else None)
            if form is None:
                raise InvalidRequest(
                    f"{function}: the pattern letter '{token}' is not supported on DuckDB"
                )
            out.append(form)
        else:
            out.append(token.replace("%", "%%"))
    if sum(len(m.group(0)) for m in _JODA_TOKEN.finditer(pattern)) != len(pattern):
        raise InvalidRequest(f"{function}: the pattern '{pattern}' has an unclosed quote")
    return "".join(out)


# Format characters Athena prints as they are (%A prints "A") that sqlglot's rewrite of
# the MySQL specifiers makes the same as real ones: %W becomes %A, %M %B, %x %G, %e %-d.
_AMBIGUOUS_FORMAT = re.compile(r"%[ABG-]")


def refuse_ambiguous_formats(words: list[str], strings: list[str]) -> None:
    """Refuse date_format or date_parse when a string of the query holds %A, %B, %G or %-.

    Read from the query's own text (its words and string literals): once parsed, such
    a format can no longer be told from %W, %M, %x or %e.
    """
    called = {w.lower() for w in words} & {"date_format", "date_parse"}
    found = [m.group(0) for s in strings for m in _AMBIGUOUS_FORMAT.finditer(s)]
    if called and found:
        raise InvalidRequest(
            f"{sorted(called)[0]}: the format characters {', '.join(sorted(set(found)))} "
            "(which Athena prints as they are) are not supported"
        )


# date_format's and date_parse's MySQL specifiers, as sqlglot has already rewritten them
# into strftime's (%i is %M, %W is %A, %u is %W, ...): those strftime prints alike.
_MYSQL_KEPT = {"%a", "%b", "%-m", "%d", "%-d", "%H", "%I", "%M", "%j", "%-H", "%-I", "%B"}
_MYSQL_KEPT |= {"%m", "%p", "%S", "%Y", "%y", "%%", "%A", "%G", "%f"}
# Specifiers Trino does not support (it fails on them), by their rewritten form.
_MYSQL_UNSUPPORTED = {"%W": "%u", "%U": "%U", "%D": "%D", "%V": "%V", "%w": "%w", "%X": "%X"}
_STRFTIME_TOKEN = re.compile(r"%-?.|[^%]+", re.DOTALL)


def _mysql_format(node: exp.Expr, function: str, parsing: bool) -> exp.Expr:
    """The format of date_format or date_parse in DuckDB's strftime and strptime terms."""
    text = literal_text(node.args.get("format"), function, "format")
    out = []
    for token in _STRFTIME_TOKEN.findall(text):
        if not token.startswith("%") or token in _MYSQL_KEPT:
            # Trino keeps milliseconds: its %f prints them and three zeros.
            out.append("%g000" if token == "%f" and not parsing else token)
        elif token in _MYSQL_UNSUPPORTED:
            raise InvalidRequest(
                f"{function}: the specifier {_MYSQL_UNSUPPORTED[token]} is not supported"
            )
        elif token == "%v" and not parsing:  # week of the year, Monday first: ISO's
            out.append("%V")
        elif token == "%v":
            raise InvalidRequest(f"{function}: parsing the specifier %v is not supported")
        else:  # Trino prints the letter of any other specifier as it is
            out.append(token[-1].replace("%", "%%"))
    return exp.Literal.string("".join(out))


_ZONE_SUFFIX = re.compile(r"\d\s*([A-Za-z][\w/+-]*|[+-]\d{1,2}(:?\d{2})?)\s*$")


def _zoned(node: exp.UnixToTime) -> bool:
    zone, hours = node.args.get("zone"), node.args.get("hours")
    utc = isinstance(zone, exp.Literal) and zone.this.upper() == "UTC"
    return (zone is not None and not utc) or hours is not None


def _utc_literal(value: exp.Expr) -> None:
    """A timestamp with time zone written out must be in UTC: DuckDB keeps no other zone."""
    if isinstance(value, exp.Literal) and value.is_string:
        zone = _ZONE_SUFFIX.search(value.this)
        if zone and zone.group(1).upper() != "UTC":
            raise InvalidRequest(
                f"timestamp with time zone '{value.this}': only UTC is supported on DuckDB, "
                "which keeps no other zone"
            )


def _unit(node: exp.Expr, function: str) -> exp.Expr:
    return exp.Literal.string(literal_text(node.args.get("unit"), function, "unit").lower())


def _is_interval(node: exp.Expr) -> bool:
    """An interval literal, or arithmetic on one (``2 * INTERVAL '1' DAY``)."""
    if isinstance(node, exp.Interval):
        return True
    if isinstance(node, exp.Paren | exp.Neg):
        return _is_interval(node.this)
    if isinstance(node, exp.Mul | exp.Div):
        return _is_interval(node.left) or _is_interval(node.right)
    return False


def _utc_only(zone: exp.Expr | None, function: str) -> None:
    if not (isinstance(zone, exp.Literal) and zone.is_string and zone.this.upper() == "UTC"):
        raise InvalidRequest(
            f"{function} is supported only for the zone 'UTC': DuckDB keeps no other zone "
            "in a timestamp with time zone"
        )


def _literal_date(node: exp.Expr) -> datetime.date | None:
    """The date of ``DATE 'y-m-d'`` or ``CAST('y-m-d' AS DATE)`` (Trino takes 1-digit fields)."""
    if not (isinstance(node, exp.Cast) and node.to.this == exp.DataType.Type.DATE):
        return None
    text = node.this
    found = re.fullmatch(r"\s*(\d{4})-(\d{1,2})-(\d{1,2})\s*", text.this) if (
        isinstance(text, exp.Literal) and text.is_string) else None  # fmt: skip
    if found is None:
        return None
    try:
        return datetime.date(*map(int, found.groups()))
    except ValueError:
        return None  # an impossible date: left for the engine to refuse


def _literal_days(node: exp.Expr) -> int | None:
    unit = node.args.get("unit") if isinstance(node, exp.Interval) else None
    if unit is None or unit.name.upper() not in ("DAY", "DAYS"):
        return None
    found = re.fullmatch(r"\s*([+-]?\d+)\s*", str(node.this.this)) if isinstance(
        node.this, exp.Literal) else None  # fmt: skip
    return None if found is None else int(found.group(1))


def _date_plus_days(node: exp.Expr) -> exp.Expr | None:
    """A literal date plus or minus a literal number of days, computed here: a date, as in
    Trino. A constant the engine sees as one (the macro around it would hide it from the
    optimizer, which then cannot decorrelate a subquery that filters on it)."""
    if not isinstance(node, exp.Add | exp.Sub):
        return None
    pairs = [(node.left, node.right)] + (
        [(node.right, node.left)] if isinstance(node, exp.Add) else []
    )
    for date_side, interval_side in pairs:
        day, days = _literal_date(date_side), _literal_days(interval_side)
        if day is None or days is None:
            continue
        try:
            result = day + datetime.timedelta(days=days if isinstance(node, exp.Add) else -days)
        except OverflowError:
            return None
        return exp.cast(exp.Literal.string(result.isoformat()), exp.DataType.build("DATE"))
    return None


def _dates(node: exp.Expr) -> exp.Expr:
    if isinstance(node, exp.DateAdd):
        return call("trino_date_add", _unit(node, "date_add"), node.expression, node.this)
    if isinstance(node, exp.DateDiff):
        return call("trino_date_diff", _unit(node, "date_diff"), node.expression, node.this)
    if isinstance(node, exp.TimestampTrunc | exp.DateTrunc):
        return call("trino_date_trunc", _unit(node, "date_trunc"), node.this)
    folded = _date_plus_days(node)
    if folded is not None:
        return folded
    if isinstance(node, exp.Add) and (_is_interval(node.left) or _is_interval(node.right)):
        return call("trino_plus", node.left, node.right)
    if isinstance(node, exp.Sub) and _is_interval(node.right):
        return call("trino_minus", node.left, node.right)
    if isinstance(node, exp.Extract) and isinstance(node.this, exp.Var):
        field = node.this.name.upper()
        if field in ("DOW", "DAYOFWEEK", "DAY_OF_WEEK"):  # ISO: Monday is 1, Sunday 7
            return exp.Extract(this=exp.var("ISODOW"), expression=node.expression)
        if field in ("YOW", "YEAR_OF_WEEK"):
            return exp.Extract(this=exp.var("ISOYEAR"), expression=node.expression)
        return node
    if isinstance(node, exp.AtTimeZone):
        _utc_only(node.args.get("zone"), "AT TIME ZONE")
        return exp.cast(node.this, exp.DataType.build("TIMESTAMPTZ"))
    if isinstance(node, exp.TimeToStr):
        return call("strftime", node.this, _mysql_format(node, "date_format", parsing=False))
    if isinstance(node, exp.StrToTime):
        return call("strptime", node.this, _mysql_format(node, "date_parse", parsing=True))
    if isinstance(node, exp.UnixToTime) and _zoned(node):
        raise InvalidRequest(
            "from_unixtime is supported without a zone or offset: DuckDB keeps no other zone "
            "than UTC in a timestamp with time zone"
        )
    if isinstance(node, exp.CurrentTimezone):  # Athena's sessions run in UTC
        return exp.Literal.string("UTC")
    if isinstance(node, exp.FromISO8601Timestamp):
        return call("trino_from_iso8601_timestamp", node.this)
    if isinstance(node, exp.FromISO8601TimestampNanos):
        raise InvalidRequest("from_iso8601_timestamp_nanos is not supported on DuckDB")
    if isinstance(node, exp.Cast) and node.to.this == exp.DType.TIMESTAMPTZ:
        _utc_literal(node.this)
        return node
    if isinstance(node, exp.ParseDatetime):
        fmt = literal_text(node.args.get("format"), "parse_datetime", "pattern")
        parsing = strftime_of_joda(fmt, "parse_datetime").replace("%-", "%")
        parsed = call("strptime", node.this, exp.Literal.string(parsing))
        return exp.cast(parsed, exp.DataType.build("TIMESTAMPTZ"))
    if isinstance(node, exp.Anonymous):
        return _named(node, node.name.lower())
    return node


def _named(node: exp.Anonymous, name: str) -> exp.Expr:
    args = node.expressions
    if name == "format_datetime" and len(args) == 2:
        fmt = literal_text(args[1], "format_datetime", "pattern")
        return call("strftime", args[0], exp.Literal.string(strftime_of_joda(fmt, name)))
    if name in ("at_timezone", "with_timezone") and len(args) == 2:
        _utc_only(args[1], name)
        return exp.cast(args[0], exp.DataType.build("TIMESTAMPTZ"))
    if name == "to_iso8601" and len(args) == 1:
        return call("trino_to_iso8601", args[0])
    if name == "yow" and len(args) == 1:
        return exp.Extract(this=exp.var("ISOYEAR"), expression=args[0])
    if name == "millisecond" and len(args) == 1:  # DuckDB's counts the seconds too
        of_second = call("date_part", exp.Literal.string("millisecond"), args[0])
        return exp.Mod(this=of_second, expression=exp.Literal.number(1000))
    return node


REWRITES = [_dates]
