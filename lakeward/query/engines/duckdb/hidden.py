"""Athena's hidden columns on the DuckDB engine: ``"$path"`` and ``"$bucket"``.

A table's view carries them only for a statement that reads them: DuckDB's Parquet reader
adds each row's file as a column, which becomes its S3 name on the embedded lake (the
stack's S3 endpoint serves it, docs/storage.md) and its file:// URI elsewhere.
"""

from __future__ import annotations

import re

import sqlglot
from sqlglot import exp

from lakeward.config import Settings
from lakeward.errors import InvalidRequest
from lakeward.query.engines.duckdb.scanned import sql_literal
from lakeward.query.types import quote_identifier as quote
from lakeward.storage.paths import local_path

# As the translation quotes them; Athena has more than this engine gives.
_HIDDEN = re.compile(r'"\$(path|bucket|file_size|file_modified_time|partition)"')
FILE_COLUMN = "__lakeward_file"
"""The column of each row's file DuckDB's Parquet reader adds (``filename = ...``)."""
ROW_COLUMN = "__lakeward_row"
"""An Iceberg table's row's place among its file's rows, beside ``"$path"``."""


def reads_hidden_columns(sql: str) -> bool:
    """Whether the statement reads ``"$path"`` or ``"$bucket"``; refuses the hidden columns
    this engine does not give, and ``SELECT *`` beside them (the views' star would hold them,
    where Athena's does not)."""
    named = set(_HIDDEN.findall(sql))
    if not named:
        return False
    other = sorted(named - {"path", "bucket"})
    if other:
        raise InvalidRequest(
            f'the hidden column "${other[0]}" is not supported on the DuckDB engine '
            '(it gives "$path" and "$bucket")'
        )
    tree = sqlglot.parse_one(sql, read="duckdb")
    if any(_star_over_a_table(star) for star in tree.find_all(exp.Star)):
        raise InvalidRequest(
            'SELECT * beside the hidden columns "$path" or "$bucket" is not supported on '
            "the DuckDB engine: name the columns"
        )
    return True


def _star_over_a_table(star: exp.Star) -> bool:
    """Whether a ``*`` (not ``count(*)``) expands a table's view, which holds the hidden
    columns; a star over a subquery or VALUES holds only what they select."""
    if isinstance(star.parent, exp.Count):
        return False
    select = star.find_ancestor(exp.Select)
    if select is None:
        return True
    sources = [select.args.get("from_"), *select.args.get("joins", [])]
    return any(
        isinstance(source.this, exp.Table) and source.this.args.get("catalog")
        for source in sources
        if source is not None
    )


def hidden_columns_refused(table: object) -> InvalidRequest:
    """For a table whose files this engine reads through Arrow (not its Parquet reader)."""
    return InvalidRequest(
        f'the hidden columns "$path" and "$bucket" are not supported on the DuckDB engine '
        f"for {table}: only for Parquet tables"
    )


def hidden_view_columns(settings: Settings | None, has_files: bool) -> str:
    """The view's ``"$path"`` and ``"$bucket"`` (NULL for a table without files)."""
    if not has_files:
        return ', CAST(NULL AS VARCHAR) AS "$path", CAST(NULL AS VARCHAR) AS "$bucket"'
    lake = local_path(settings.lake_root) if settings is not None else None
    file = quote(FILE_COLUMN)
    if lake is None:
        return f', \'file://\' || {file} AS "$path", CAST(NULL AS VARCHAR) AS "$bucket"'
    root = str(lake).rstrip("/") + "/"
    inside = f"starts_with({file}, {sql_literal(root)})"
    relative = f"substr({file}, {len(root) + 1})"
    return (
        f", CASE WHEN {inside} THEN 's3://' || {relative} ELSE 'file://' || {file} END"
        f" AS \"$path\", CASE WHEN {inside} THEN split_part({relative}, '/', 1) END"
        ' AS "$bucket"'
    )


def iceberg_hidden_columns(has_files: bool, direct: Settings | None = None) -> str:
    """An Iceberg table's ``"$path"`` and ``"$bucket"``: its rows carry their data file's
    name as the table's metadata gives it (``s3://...`` on the lake); and each row's place
    in its file (``ROW_COLUMN``). ``direct``: DuckDB reads the files of the stack with these
    settings itself, which names each row's local file and place."""
    if not has_files:
        return hidden_view_columns(None, False) + f", CAST(NULL AS BIGINT) AS {ROW_COLUMN}"
    if direct is not None:
        return hidden_view_columns(direct, True) + f", file_row_number AS {ROW_COLUMN}"
    file = quote(FILE_COLUMN)
    return (
        f", {file} AS \"$path\", CASE WHEN starts_with({file}, 's3://') "
        f"THEN split_part(substr({file}, 6), '/', 1) END AS \"$bucket\", {ROW_COLUMN}"
    )
