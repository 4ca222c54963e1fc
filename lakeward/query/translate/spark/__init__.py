"""Athena's (Trino's) semantics on Spark: what Spark answers as Trino would, and nothing else.

Spark SQL and Trino differ in many small ways (``7 / 2`` is 3.5 in Spark and 3
in Trino; ``CAST(2.5 AS integer)`` truncates in Spark and rounds in Trino;
``length`` is an ``int`` in Spark and a ``bigint`` in Trino), so a list of what
differs would never be complete. This module is the other list: the query
constructs, operators and functions whose Spark translation gives Trino's
answer for the operand types at hand, each checked by the conformance suite
(tests/query/conformance). A query using anything else is refused before it
runs, with an error naming the first construct not on the list.

The checks need the Trino type of each operand, so the query is typed here
from its literals, casts, derived tables (VALUES, subqueries, CTEs) and the
stored tables' columns. Those columns are known only once the query runs (its
tables resolved and the caller's access to them checked): when the query is
started, what depends on them is let through, and checked when it runs.

The Spark session runs with ANSI mode (overflow and bad casts fail, as in
Trino, instead of wrapping or giving NULL) in UTC (``engines/spark/``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from sqlglot import exp

from lakeward.metastore.tables import Column
from lakeward.query.model import PATH_COLUMN
from lakeward.query.translate.spark.checker import (
    _CASE_GUARD,
    _CAST_TO,
    _COMPARISONS,
    _INTEGER_DIVISION,
    _NUMBERS,
    _SPARK_INTEGER,
    TableColumns,
    Type,
    _Checker,
    _Scope,
)
from lakeward.query.translate.spark.functions import (
    _DATE_PARTS,
    _TIME_PARTS,
    _aggregate_filter,
    _array,
    _array_concat,
    _array_join,
    _array_pair,
    _array_remove,
    _array_search,
    _array_sort,
    _array_unary,
    _cardinality,
    _case_mapping,
    _concat,
    _date_add,
    _date_diff,
    _date_format,
    _date_part,
    _date_trunc,
    _day_of_week,
    _escape,
    _extract,
    _filter,
    _grouping,
    _guarded_case_mapping,
    _interval,
    _levenshtein,
    _named,
    _parameter,
    _reduce,
    _sequence,
    _sign,
    _slice,
    _subscript,
    _to_date,
    _transform,
    _window,
)
from lakeward.query.translate.spark.scalars import (
    _abs,
    _alias,
    _any_value,
    _arg_max,
    _arithmetic,
    _avg,
    _between,
    _boolean_aggregate,
    _boolean_string_function,
    _case,
    _cast,
    _coalesce,
    _column,
    _comparison,
    _count,
    _count_if,
    _double_function,
    _if,
    _in,
    _is,
    _length,
    _like,
    _literal,
    _logic,
    _min_max,
    _negate,
    _nullif,
    _pad,
    _round,
    _same,
    _split,
    _statistic,
    _string_function,
    _strpos,
    _subquery,
    _substring,
    _sum,
)
from lakeward.query.types import athena_type_of_hive

_ARGUMENTS: dict[type[exp.Expr], set[str]] = {
    exp.Cast: {"to"},
    exp.TryCast: {"to"},
    exp.Case: {"ifs", "default"},
    exp.If: {"true", "false"},
    exp.Coalesce: {"expressions"},
    exp.Concat: {"expressions"},
    exp.ConcatWs: {"expressions"},
    exp.Array: {"expressions"},
    exp.Anonymous: {"expressions"},
    exp.Grouping: {"expressions"},
    exp.Round: {"decimals"},
    exp.Replace: {"replacement"},
    exp.Substring: {"start", "length"},
    exp.Pad: {"fill_pattern"},
    exp.StrPosition: {"substr"},
    exp.DateTrunc: {"unit"},
    exp.TimestampTrunc: {"unit"},
    exp.DateAdd: {"unit"},
    exp.DateDiff: {"unit"},
    exp.TimeToStr: {"format"},
    exp.Reduce: {"initial", "merge", "finish"},
    exp.ArraySort: {"nulls_first"},
    exp.ArrayToString: {"null"},
    exp.GenerateSeries: {"start", "end", "step"},
    exp.ArraySlice: {"start", "end"},
}

_EXPRESSIONS: dict[type[exp.Expr], Callable[[_Checker, Any, _Scope], Type]] = {
    exp.Literal: _literal,
    exp.Null: lambda *_: "unknown",
    exp.Boolean: lambda *_: "boolean",
    exp.Column: _column,
    exp.Alias: _alias,
    exp.Paren: _same,
    exp.Add: _arithmetic,
    exp.Sub: _arithmetic,
    exp.Mul: _arithmetic,
    exp.Div: _arithmetic,
    exp.Mod: _arithmetic,
    exp.Neg: _negate,
    **{c: _comparison for c in _COMPARISONS},
    exp.And: _logic,
    exp.Or: _logic,
    exp.Not: _logic,
    exp.Is: _is,
    exp.Between: _between,
    exp.In: _in,
    exp.Cast: _cast,
    exp.TryCast: _cast,
    exp.Case: _case,
    exp.If: _if,
    exp.Coalesce: _coalesce,
    exp.Nullif: _nullif,
    exp.Upper: _case_mapping,
    exp.Lower: _case_mapping,
    exp.DPipe: _array_concat,
    exp.Length: _length,
    exp.Count: _count,
    exp.Sum: _sum,
    exp.Avg: _avg,
    exp.Min: _min_max,
    exp.Max: _min_max,
    exp.Abs: _abs,
    exp.Subquery: _subquery,
    exp.Window: _window,
    exp.Round: _round,
    exp.Sqrt: _double_function,
    exp.Cbrt: _double_function,
    exp.Exp: _double_function,
    exp.Pow: _double_function,
    exp.Pi: _double_function,
    exp.Like: _like,
    exp.Replace: _string_function,
    exp.Reverse: _string_function,
    exp.Concat: _concat,
    exp.ConcatWs: _string_function,
    exp.StartsWith: _boolean_string_function,
    exp.Substring: _substring,
    exp.Pad: _pad,
    exp.StrPosition: _strpos,
    exp.Split: _split,
    exp.CountIf: _count_if,
    exp.LogicalAnd: _boolean_aggregate,
    exp.LogicalOr: _boolean_aggregate,
    exp.Stddev: _statistic,
    exp.StddevPop: _statistic,
    exp.StddevSamp: _statistic,
    exp.Variance: _statistic,
    exp.VariancePop: _statistic,
    exp.AnyValue: _any_value,
    exp.ArgMax: _arg_max,
    exp.ArgMin: _arg_max,
    **{part: _date_part for part in (*_DATE_PARTS, *_TIME_PARTS)},
    exp.DateTrunc: _date_trunc,
    exp.Date: _to_date,
    exp.LastDay: _to_date,
    exp.CurrentDate: lambda *_: "date",
    exp.Sign: _sign,
    exp.Escape: _escape,
    exp.Anonymous: _named,
    exp.Array: _array,
    exp.Bracket: _subscript,
    exp.ArraySize: _cardinality,
    exp.ArrayContains: _array_search,
    exp.ArrayPosition: _array_search,
    exp.Grouping: _grouping,
    exp.Interval: _interval,
    exp.DayOfWeekIso: _day_of_week,
    exp.TimeToStr: _date_format,
    exp.Identifier: _parameter,
    exp.Transform: _transform,
    exp.ArrayFilter: _filter,
    exp.Reduce: _reduce,
    exp.ArraySort: _array_sort,
    exp.ArrayToString: _array_join,
    exp.Levenshtein: _levenshtein,
    exp.Filter: _aggregate_filter,
    exp.GenerateSeries: _sequence,
    exp.ArraySlice: _slice,
    exp.Flatten: _array_unary,
    exp.ArrayDistinct: _array_unary,
    exp.ArrayRemove: _array_remove,
    exp.ArrayExcept: _array_pair,
    exp.Extract: _extract,
    exp.DateAdd: _date_add,
    exp.DateDiff: _date_diff,
    exp.TimestampTrunc: _date_trunc,
}


# --- the rewrite --------------------------------------------------------------------------


def check(tree: exp.Expr) -> None:
    """Refuse, when a query is started, what Spark would not answer as Trino does.

    What depends on the stored tables' columns is checked by ``to_spark`` when it runs.
    """
    _Checker(None, _EXPRESSIONS, _ARGUMENTS).query(tree)


def to_spark(tree: exp.Expr, tables: TableColumns) -> exp.Expr:
    """The Trino tree (a copy the caller owns, tables not yet renamed), checked against the
    stored tables' columns and rewritten for Spark SQL; refusals raise InvalidRequest."""
    _Checker(tables, _EXPRESSIONS, _ARGUMENTS).query(tree)
    for division in list(tree.find_all(exp.Div)):
        width = division.meta.get(_INTEGER_DIVISION)
        if width:  # Spark's DIV truncates toward zero as Trino does, and gives a bigint
            quotient = exp.IntDiv(this=division.left, expression=division.right)
            division.replace(exp.Cast(this=quotient, to=exp.DataType.build(_SPARK_INTEGER[width])))
    for node in [n for n in tree.walk() if n.meta.pop(_CASE_GUARD, False)]:
        assert isinstance(node, (exp.Upper, exp.Lower))
        guard = exp.Paren(this=exp.Null())
        node.replace(guard)
        guard.set("this", _guarded_case_mapping(node))
    for node in [n for n in tree.walk() if _CAST_TO in n.meta]:
        cast = exp.Cast(to=exp.DataType.build(node.meta.pop(_CAST_TO), dialect="spark"))
        node.replace(cast)
        cast.set("this", node)
    _file_columns(tree)
    return _name_columns(tree)


def _file_columns(tree: exp.Expr) -> None:
    """Athena's ``"$path"`` of an Iceberg table (the only tables it is given for here:
    planner/iceberg.py) is the data file's name in the table's metadata, which Iceberg's
    runtime gives as the metadata column ``_file``; a result column keeps Athena's name."""
    for column in [c for c in tree.find_all(exp.Column) if c.name == PATH_COLUMN]:
        renamed = column.copy()
        renamed.set("this", exp.to_identifier("_file"))
        if isinstance(column.parent, exp.Select) and column.arg_key == "expressions":
            column.replace(exp.alias_(renamed, PATH_COLUMN, quoted=True))
        else:
            column.replace(renamed)


def column_types(columns: Iterable[Column]) -> dict[str, Type]:
    """A stored table's columns by lower-case name, with the Trino types checked here."""
    checked = {*_NUMBERS, "varchar", "boolean", "date"}  # not timestamps: Spark's are zoned
    found = {}
    for column in columns:
        name = athena_type_of_hive(column.type).name
        found[column.name.lower()] = name if name in checked else None
    return found


def _name_columns(tree: exp.Expr) -> exp.Expr:
    """Athena names an unnamed result column ``_col<position>``; Spark names it by its text."""
    select = tree
    while isinstance(select, exp.SetOperation):
        select = select.left
    if isinstance(select, exp.Subquery):
        return tree
    if isinstance(select, exp.Select):
        for position, projection in enumerate(select.expressions):
            if isinstance(projection, exp.Star) or projection.is_star:
                break
            if not isinstance(projection, (exp.Alias, exp.Column)):
                projection.replace(exp.alias_(projection.copy(), f"_col{position}", quoted=True))
    return tree
