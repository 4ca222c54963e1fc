"""A view's Spark side: the Spark SQL and table properties a Spark session reads it by.

Spark 3 reads a metastore view made outside Spark from ``viewExpandedText`` and the
metastore's columns alone, if the text names its tables in full (it parses the text,
resolves it, and up-casts each output column, matched by name, to the stored type).
Found by experiment with Spark 3.5 over lakeward's metastore; the properties below make
it exact rather than lucky:

- ``view.query.out.numCols`` / ``view.query.out.col.<i>``: the query's output columns,
  matched to the view's columns by position (else Spark matches by the schema's names);
- ``view.catalogAndNamespace.numParts`` / ``.part.<i>``: where the text's names resolve
  (``spark_catalog`` and the view's database), whatever the reader's current database;
- ``view.sqlConfig.<key>``: the settings Spark analyses the view under. They are the
  Spark engine's (ANSI arithmetic, UTC, timestamps without zone, exact decimals), so a
  plain Spark session gets the rows lakeward's Spark engine gets, which are Athena's.

``spark.sql.sources.schema.*`` is not needed: without it Spark takes the schema from the
metastore's (Hive) columns.

A view Spark cannot be given Trino's answer for gets a text that fails when read, with
the reason (``raise_error`` in a WHERE clause, so that no projection prunes it away).
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from lakeward.errors import InvalidRequest, LakewardError
from lakeward.metastore.tables import TableInfo
from lakeward.query.engines.spark import SQL_CONF
from lakeward.query.model import TableRef
from lakeward.query.sql.queries import Statement
from lakeward.query.translate.query import to_engine_sql
from lakeward.query.view_definitions import View, columns_of

SPARK_CATALOG = "spark_catalog"


def definition(
    view: View, query: Statement, lookup: Callable[[TableRef], TableInfo]
) -> tuple[str, dict[str, str]]:
    """The view's ``viewExpandedText`` and the table properties Spark reads it with."""
    properties = {
        "view.query.out.numCols": str(len(view.columns)),
        **{f"view.query.out.col.{i}": c.name for i, c in enumerate(view.columns)},
        "view.catalogAndNamespace.numParts": "2",
        "view.catalogAndNamespace.part.0": SPARK_CATALOG,
        "view.catalogAndNamespace.part.1": view.ref.database,
        **{f"view.sqlConfig.{key}": value for key, value in SQL_CONF.items()},
    }
    try:
        text = _spark_sql(view, query, lookup)
    except LakewardError as refused:
        text = _refusal(view, refused.message)
    return text, properties


def _spark_sql(view: View, query: Statement, lookup: Callable[[TableRef], TableInfo]) -> str:
    for ref in query.tables:
        if ref.catalog != view.ref.catalog:
            raise InvalidRequest(
                f"it reads {ref.catalog}.{ref.database}.{ref.table}, a table of another "
                "catalog, which a Spark session on this metastore does not see"
            )
    columns = {}
    for ref in query.tables:
        info = lookup(ref)
        columns[ref] = [*columns_of(info), *info.partition_keys]

    def table_name(ref: TableRef) -> str:
        return f"`{ref.database}`.`{ref.table}`"

    return to_engine_sql(query, "spark", table_name, columns)


def _refusal(view: View, reason: str) -> str:
    """A Spark text that fails when read, saying why; its columns are the view's."""
    message = (
        f"view {view.ref.database}.{view.ref.table} cannot be read by Spark with Athena's "
        f"results: {reason}. Query it through lakeward's SQL service"
    )
    columns = [exp.alias_(exp.Null(), c.name, quoted=True) for c in view.columns]
    raised = exp.Anonymous(this="raise_error", expressions=[exp.Literal.string(message)])
    select = exp.select(*columns).where(exp.Is(this=raised, expression=exp.Null()))
    return select.sql(dialect="spark")
