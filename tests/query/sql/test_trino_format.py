"""A view's text laid out as Trino's SQL formatter lays it out (what Athena shows)."""

from __future__ import annotations

import pytest

from lakeward.query.sql.trino_format import formatted


def test_one_table_as_athena_shows_it() -> None:
    # PyAthena's suite checks this layout against Athena itself.
    assert formatted("SELECT number_of_rows FROM db.one_row") == (
        "SELECT number_of_rows\nFROM\n  db.one_row"
    )


def test_items_clauses_and_predicates() -> None:
    sql = (
        'SELECT DISTINCT a AS x, "B", sum(c) total, count(*) FROM t o JOIN u ON o.a = u.b '
        "LEFT JOIN v USING (k) WHERE x > 0.5 OR y NOT IN (1, 2) AND z IS NOT NULL "
        "GROUP BY 1, 2 HAVING sum(c) > 1 ORDER BY 1 DESC, 2 LIMIT 10"
    )
    assert formatted(sql) == "\n".join(
        [
            "SELECT DISTINCT",
            "  a x",
            ', "B"',
            ", sum(c) total",
            ", count(*)",
            "FROM",
            "  ((t o",
            "INNER JOIN u ON (o.a = u.b))",
            "LEFT JOIN v USING (k))",
            "WHERE ((x > 5E-1) OR ((NOT (y IN (1, 2))) AND (z IS NOT NULL)))",
            "GROUP BY 1, 2",
            "HAVING (sum(c) > 1)",
            "ORDER BY 1 DESC, 2 ASC",
            "LIMIT 10",
        ]
    )


def test_literals_casts_and_special_forms() -> None:
    sql = (
        "SELECT CASE WHEN a BETWEEN 1 AND 2 THEN DATE '2020-01-01' ELSE 'it''s' END c, "
        "CAST(b AS varchar(3)), coalesce(a, -1), 1.5, 100.0, 0.001 FROM a, b"
    )
    assert formatted(sql) == "\n".join(
        [
            "SELECT",
            "  CASE WHEN (a BETWEEN 1 AND 2) THEN DATE '2020-01-01' ELSE 'it''s' END c",
            ", CAST(b AS varchar(3))",
            ", COALESCE(a, -1)",
            ", 1.5E0",
            ", 1E2",
            ", 1E-3",
            "FROM",
            "  a",
            ", b",
        ]
    )


@pytest.mark.parametrize(
    "sql",
    [
        "WITH x AS (SELECT 1 a) SELECT a FROM x",
        "SELECT a FROM (SELECT 1 a) t",
        "SELECT a FROM t UNION ALL SELECT a FROM u",
        "SELECT round(a, 2) FROM t",
        "SELECT a || b FROM t",
        "SELECT a FROM t WHERE a IN (SELECT b FROM u)",
        "SELECT sum(a) OVER (PARTITION BY b) FROM t",
    ],
)
def test_a_shape_the_layout_does_not_cover_keeps_its_text(sql: str) -> None:
    assert formatted(sql) is None
