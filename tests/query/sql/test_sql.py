"""The SQL front: parsing, refusals, the tables read, and translation run on DuckDB."""

from __future__ import annotations

import datetime
from decimal import Decimal

import duckdb
import pytest

from lakeward.errors import InvalidRequest
from lakeward.metastore.tables import Column
from lakeward.query.model import StatementType, TableRef
from lakeward.query.sql.queries import Statement
from lakeward.query.statements import parse_statement
from lakeward.query.statements.show import Describe, ShowCatalogs, ShowDatabases, ShowTables
from lakeward.query.translate.duckdb import MACROS
from lakeward.query.translate.query import to_engine_sql

CATALOG = "demo_hive_metastore"
SEED = (
    "SELECT * FROM demo_hive_metastore.default.covid_confirmed_cases WHERE country = 'US' "
    "OR country = 'Italy' OR country = 'India' OR country = 'Brazil' OR country = 'Spain' "
    "OR country = 'United Kingdom'"
)
CASES = TableRef(CATALOG, "default", "covid_confirmed_cases")


def parse(sql: str) -> Statement:
    return parse_statement(
        sql, default_catalog=CATALOG, default_database="default", catalogs=[CATALOG, "other"]
    )


def refused(sql: str) -> str:
    with pytest.raises(InvalidRequest) as info:
        parse(sql)
    return str(info.value)


def duckdb_name(ref: TableRef) -> str:
    return f'"{ref.catalog}"."{ref.database}"."{ref.table}"'


def spark_name(ref: TableRef) -> str:
    return f"`{ref.database}`.`{ref.table}`"


def with_macros() -> duckdb.DuckDBPyConnection:
    """A DuckDB with the macros the SQL service's connections open with (Trino's semantics)."""
    con = duckdb.connect()
    for macro in MACROS:
        con.execute(macro)
    return con


@pytest.fixture
def duck() -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB holding the seed table where duckdb_name points."""
    con = with_macros()
    con.execute(f"ATTACH ':memory:' AS {CATALOG}")
    con.execute(f'CREATE SCHEMA {CATALOG}."default"')
    con.execute(
        f'CREATE VIEW {CATALOG}."default".covid_confirmed_cases AS SELECT * FROM (VALUES '
        "('US', 100), ('Italy', 50), ('France', 40), ('United Kingdom', 30), ('Peru', 5)"
        ") AS t(country, confirmed)"
    )
    return con


# --- the seed query ---------------------------------------------------------------------


def test_seed_query_parses_and_names_its_table() -> None:
    statement = parse(SEED)
    assert statement.kind == "select"
    assert statement.statement_type == StatementType.DML
    assert statement.sql == SEED
    assert statement.tables == (CASES,)


def test_seed_query_runs_on_duckdb(duck: duckdb.DuckDBPyConnection) -> None:
    sql = to_engine_sql(parse(SEED), "duckdb", duckdb_name)
    assert sql.startswith(f'SELECT * FROM "{CATALOG}"."default"."covid_confirmed_cases" WHERE')
    rows = sorted(duck.execute(sql).fetchall())
    assert rows == [("Italy", 50), ("US", 100), ("United Kingdom", 30)]


# The Spark translation checks operand types: the stored columns, as the metastore gives them.
CASES_COLUMNS = {
    CASES: [Column("country", "string"), Column("d", "date"), Column("c", "bigint")]
    + [Column("a", "array<string>")]
}


def test_seed_query_in_spark_sql() -> None:
    sql = to_engine_sql(parse(SEED), "spark", spark_name, CASES_COLUMNS)
    assert sql == (
        "SELECT * FROM `default`.`covid_confirmed_cases` WHERE country = 'US' OR country = "
        "'Italy' OR country = 'India' OR country = 'Brazil' OR country = 'Spain' OR country = "
        "'United Kingdom'"
    )


def test_a_query_sent_again_is_parsed_once_and_translated_for_the_tables_it_reads() -> None:
    assert parse(SEED) is parse(SEED)  # dashboards send the same text again and again
    in_other = parse_statement(
        "SELECT 1 FROM t", default_catalog=CATALOG, default_database="other", catalogs=[CATALOG]
    )
    assert parse("SELECT 1 FROM t").tables == (TableRef(CATALOG, "default", "t"),)
    assert in_other.tables == (TableRef(CATALOG, "other", "t"),)
    # The same tree is translated anew when its tables are named or typed otherwise.
    halved = parse("SELECT c / 2 AS half FROM covid_confirmed_cases")
    integer, double, decimal, integer_again = (
        to_engine_sql(halved, "duckdb", duckdb_name, {CASES: [Column("c", kind)]})
        for kind in ("bigint", "double", "decimal(10,2)", "bigint")
    )
    assert "c // 2" in integer and "c / 2" in double and "TRINO_DECIMAL_QUOTIENT" in decimal
    assert integer_again == integer
    renamed = to_engine_sql(halved, "duckdb", lambda ref: '"elsewhere"."t"')
    assert 'FROM "elsewhere"."t"' in renamed
    assert to_engine_sql(halved, "duckdb", duckdb_name) != renamed


# --- names and tables -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("SELECT * FROM covid_confirmed_cases", CASES),
        ("SELECT * FROM default.covid_confirmed_cases", CASES),
        ("SELECT * FROM other.db.t", TableRef("other", "db", "t")),
        ('SELECT * FROM "Demo_Hive_Metastore"."DEFAULT".Covid_Confirmed_Cases', CASES),
    ],
)
def test_names_resolve_with_defaults_and_lower_case(sql: str, expected: TableRef) -> None:
    assert parse(sql).tables == (expected,)


def test_cte_names_are_not_tables() -> None:
    statement = parse(
        "WITH a AS (SELECT * FROM x), b AS (SELECT * FROM a) "
        "SELECT * FROM b JOIN covid_confirmed_cases c ON true"
    )
    assert statement.tables == (TableRef(CATALOG, "default", "x"), CASES)
    sql = to_engine_sql(statement, "duckdb", duckdb_name)
    assert "FROM b JOIN" in sql and "FROM a)" in sql


def test_a_cte_does_not_shadow_its_own_body_or_qualified_names() -> None:
    statement = parse("WITH t AS (SELECT * FROM t) SELECT * FROM t, default.t")
    assert statement.tables == (TableRef(CATALOG, "default", "t"),)


def test_a_cte_is_visible_only_in_its_scope() -> None:
    statement = parse("SELECT * FROM (WITH a AS (SELECT 1 AS x) SELECT * FROM a) s, a")
    assert statement.tables == (TableRef(CATALOG, "default", "a"),)


def test_joins_across_catalogs_in_order_without_duplicates() -> None:
    statement = parse(
        "SELECT * FROM other.sales.orders o JOIN covid_confirmed_cases c ON o.k = c.k "
        "WHERE o.k IN (SELECT k FROM other.sales.orders) "
        "UNION ALL SELECT * FROM default.covid_confirmed_cases, other.sales.orders"
    )
    assert statement.tables == (TableRef("other", "sales", "orders"), CASES)


def test_values_and_unnest_read_no_tables() -> None:
    assert parse("VALUES (1, 'a'), (2, 'b')").tables == ()
    assert parse("SELECT x FROM UNNEST(ARRAY[1, 2]) AS u(x)").tables == ()
    assert parse("SELECT * FROM (VALUES 1, 2) AS v(x)").tables == ()


def test_trailing_semicolon_and_comments_are_fine() -> None:
    assert parse("-- hello\nSELECT 1; /* bye */").tables == ()
    assert parse("SELECT * FROM covid_confirmed_cases;;").tables == (CASES,)


def test_unregistered_catalog_is_named() -> None:
    assert refused("SELECT * FROM nowhere.db.t") == "catalog 'nowhere' is not registered"


def test_engine_name_differing_from_the_table_keeps_qualified_columns_working() -> None:
    statement = parse("SELECT covid_confirmed_cases.country FROM covid_confirmed_cases")
    sql = to_engine_sql(statement, "spark", lambda ref: f"`lw_{ref.table}`")
    assert sql == (
        "SELECT covid_confirmed_cases.country FROM `lw_covid_confirmed_cases` "
        "AS covid_confirmed_cases"
    )


# --- SHOW, DESCRIBE, EXPLAIN ------------------------------------------------------------


@pytest.mark.parametrize(
    ("sql", "kind", "fields"),
    [
        ("SHOW CATALOGS", ShowCatalogs, {}),
        ("SHOW DATABASES", ShowDatabases, {"catalog": CATALOG}),
        ("show schemas from OTHER", ShowDatabases, {"catalog": "other"}),
        ("SHOW SCHEMAS IN other LIKE 'sa%'", ShowDatabases, {"catalog": "other", "like": "sa%"}),
        ("SHOW TABLES", ShowTables, {"catalog": CATALOG, "database": "default"}),
        ("SHOW TABLES IN db", ShowTables, {"catalog": CATALOG, "database": "db"}),
        (
            "SHOW TABLES FROM other.\"Sales\" LIKE 'o''r%';",
            ShowTables,
            {"catalog": "other", "database": "sales", "like": "o'r%"},
        ),
        (
            "SHOW COLUMNS FROM covid_confirmed_cases",
            Describe,
            {"table": CASES, "columns_only": True},
        ),
        ("SHOW COLUMNS IN default.covid_confirmed_cases", Describe, {"table": CASES}),
        (
            "DESCRIBE demo_hive_metastore.default.covid_confirmed_cases",
            Describe,
            {"table": CASES, "columns_only": False},
        ),
        ("/* c */ DESC `covid_confirmed_cases`", Describe, {"table": CASES}),
    ],
)
def test_show_and_describe(sql: str, kind: type, fields: dict[str, object]) -> None:
    statement = parse(sql)
    assert isinstance(statement, kind)
    assert statement.statement_type == StatementType.UTILITY
    assert statement.tables_read() == ()
    for name, value in fields.items():
        assert getattr(statement, name) == value


@pytest.mark.parametrize(
    "sql",
    [
        "EXPLAIN SELECT count(*) FROM covid_confirmed_cases",
        "EXPLAIN (FORMAT JSON) SELECT count(*) FROM covid_confirmed_cases",
        "explain (type logical, format text) SELECT count(*) FROM covid_confirmed_cases;",
    ],
)
def test_explain(sql: str) -> None:
    statement = parse(sql)
    assert statement.kind == "explain"
    assert statement.statement_type == StatementType.UTILITY
    assert statement.tables == (CASES,)
    assert statement.explained is not None and statement.explained.kind == "select"
    assert to_engine_sql(statement, "duckdb", duckdb_name) == (
        f'SELECT COUNT(*) AS _col0 FROM "{CATALOG}"."default"."covid_confirmed_cases"'
    )  # an unnamed column is named as Athena names it


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("SHOW TABLES FROM a.b.c", "unexpected '.'"),
        ("SHOW TABLES FROM nowhere.db", "catalog 'nowhere' is not registered"),
        ("SHOW CREATE TABLE", "expected a table name"),
        ("SHOW COLUMNS t", "expected FROM or IN"),
        ("DESCRIBE t col", "unexpected 'col'"),
        ("SHOW TABLES LIKE x", "expected a quoted pattern"),
        ("EXPLAIN ANALYZE SELECT 1", "EXPLAIN ANALYZE is not allowed"),
        ("EXPLAIN (FORMAT XML) SELECT 1", "expected TEXT or GRAPHVIZ or JSON"),
        ("EXPLAIN DROP TABLE t", "EXPLAIN is allowed only for SELECT"),
        ("EXPLAIN SELECT * FROM read_csv('x')", "table function read_csv is not allowed"),
    ],
)
def test_malformed_utility_statements_are_refused(sql: str, message: str) -> None:
    assert message in refused(sql)


def test_comments_do_not_reach_the_engine() -> None:
    statement = parse("SELECT 1 -- */ ; DROP TABLE t ; /*\n")
    assert to_engine_sql(statement, "duckdb", duckdb_name) == "SELECT 1 AS _col0"


def test_show_is_a_command_answered_from_the_catalogs_not_by_an_engine() -> None:
    shown = parse("SHOW TABLES")
    assert isinstance(shown, ShowTables) and not isinstance(shown, Statement)


# --- refusals ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        # several statements, however hidden
        ("SELECT 1; SELECT 2", "only one statement per request"),
        ("SELECT 1; DROP TABLE t", "only one statement per request"),
        ("SHOW TABLES; DROP TABLE t", "only one statement per request"),
        ("/* comment */ ; ATTACH 'x.db'", "ATTACH statements are not allowed"),
        ("SELECT ';' AS a; ATTACH 'x'", "only one statement per request"),
        ("", "the query is empty"),
        ("-- nothing", "the query is empty"),
        # statements other than the read-only ones
        ("INSERT OVERWRITE TABLE t SELECT 1", "INSERT statements are not allowed"),
        ("UPDATE t a = 1", "column 10: expected SET, found 'a'"),
        ("UPDATE t SET a = 1, a = 2", "column a is set twice"),
        ("DELETE t", "DELETE statements are not allowed"),
        ("DELETE FROM t WHERE", "expected a condition"),
        ("MERGE t USING u ON true WHEN MATCHED THEN DELETE", "MERGE statements are not allowed"),
        ("MERGE INTO t USING u ON true", "expected WHEN MATCHED or WHEN NOT MATCHED"),
        ("MERGE INTO t USING u ON true WHEN MATCHED THEN INSERT VALUES (1)", "UPDATE or DELETE"),
        ("MERGE INTO t USING t ON true WHEN MATCHED THEN DELETE", "both named t: alias one"),
        ("CREATE INDEX i ON t (a)", "CREATE statements are not allowed"),
        ("DROP FUNCTION f", "DROP statements are not allowed"),
        ("ALTER TABLE t ADD COLUMN c int", "column 19: expected COLUMNS, found 'COLUMN'"),
        ("ATTACH '/tmp/x.db' AS x", "ATTACH statements are not allowed"),
        ("DETACH x", "DETACH statements are not allowed"),
        ("COPY t TO '/tmp/x.csv'", "COPY statements are not allowed"),
        ("EXPORT DATABASE '/tmp/x'", "EXPORT statements are not allowed"),
        ("IMPORT DATABASE '/tmp/x'", "IMPORT statements are not allowed"),
        ("INSTALL httpfs", "INSTALL statements are not allowed"),
        ("LOAD httpfs", "LOAD statements are not allowed"),
        ("PRAGMA database_list", "PRAGMA statements are not allowed"),
        ("SET memory_limit = '1TB'", "SET statements are not allowed"),
        ("RESET memory_limit", "RESET statements are not allowed"),
        ("CALL pragma_version()", "CALL statements are not allowed"),
        ("USE other.db", "USE statements are not allowed"),
        ("CHECKPOINT", "CHECKPOINT statements are not allowed"),
        ("VACUUM", "expected a table name, found the end of the statement"),
        ("OPTIMIZE t", "expected REWRITE, found the end of the statement"),
        ("PREPARE p AS SELECT 1", "expected FROM"),
        ("EXECUTE p", "EXECUTE statements are not allowed"),
        ("UNLOAD (SELECT 1) TO 's3://b/x'", "UNLOAD needs WITH (format = ...)"),
        ('"SELECT" 1', "a statement must start with a keyword"),
        # a typo in the first word is a syntax error, named where Trino names it
        ("SELEC 1", "line 1:1: mismatched input 'SELEC'. Expecting: a statement"),
        ("\n  SELEC 1", "did you mean SELECT?"),
        ("\n  SELEC 1", "line 2:3: mismatched input 'SELEC'"),
        ("GIVE ME ROWS", "line 1:1: mismatched input 'GIVE'"),
        # writes hidden inside a query
        ("WITH x AS (INSERT INTO t VALUES (1)) SELECT * FROM x", "INSERT inside a query"),
        ("SELECT * INTO t2 FROM covid_confirmed_cases", "INTO inside a query"),
        # table functions, however spelled
        ("SELECT * FROM read_csv('x.csv')", "table function read_csv is not allowed"),
        ("SELECT * FROM read_csv_auto('x.csv')", "table function read_csv_auto is not allowed"),
        ("SELECT * FROM Read_Csv('x.csv')", "table function read_csv is not allowed"),
        ("SELECT * FROM \"READ_CSV\"('x.csv')", "table function read_csv is not allowed"),
        ("SELECT * FROM read_parquet('s3://b/*.parquet')", "table function read_parquet"),
        ("SELECT * FROM parquet_scan('x')", "table function parquet_scan is not allowed"),
        ("SELECT * FROM read_json_auto('x')", "is not allowed"),
        ("SELECT * FROM read_ndjson('x')", "table function read_ndjson is not allowed"),
        ("SELECT * FROM read_text('/etc/passwd')", "table function read_text is not allowed"),
        ("SELECT * FROM read_blob('/etc/passwd')", "table function read_blob is not allowed"),
        ("SELECT * FROM glob('/etc/*')", "could not parse the query"),
        ("SELECT * FROM sniff_csv('x')", "table function sniff_csv is not allowed"),
        ("SELECT * FROM iceberg_scan('x')", "table function iceberg_scan is not allowed"),
        ("SELECT * FROM delta_scan('x')", "table function delta_scan is not allowed"),
        ("SELECT * FROM sqlite_scan('x.db', 't')", "table function sqlite_scan is not allowed"),
        ("SELECT * FROM postgres_scan('', 'p', 't')", "table function postgres_scan"),
        ("SELECT * FROM query('SELECT 1')", "table function query is not allowed"),
        ("SELECT * FROM query_table('t')", "table function query_table is not allowed"),
        ("SELECT * FROM range(10)", "table function range is not allowed"),
        ("SELECT * FROM generate_series(1, 3)", "table function generate_series is not allowed"),
        ("SELECT * FROM TABLE(sequence(1, 3))", "table function table is not allowed"),
        ("SELECT * FROM other.db.read_parquet('x')", "table function read_parquet"),
        ("SELECT * FROM t JOIN read_csv('x') r ON true", "table function read_csv is not allowed"),
        ("SELECT * FROM t, LATERAL range(3)", "table function range is not allowed"),
        ("SELECT (SELECT max(a) FROM read_csv('x'))", "table function read_csv is not allowed"),
        # strings and paths as tables
        ("SELECT * FROM 'x.csv'", "the string 'x.csv' is not allowed as a table"),
        ("SELECT * FROM 'covid_confirmed_cases'", "is not allowed as a table"),
        ("SELECT * FROM t JOIN 's3://bucket/x.parquet' ON true", "is not allowed as a table"),
        ('SELECT * FROM "/etc/passwd"', "'/etc/passwd' is a file name or path, not a table"),
        ('SELECT * FROM "C:\\data\\x.csv"', "is a file name or path"),
        ('SELECT * FROM "~/x.csv"', "is a file name or path"),
        ('WITH "/x" AS (SELECT 1) SELECT * FROM "/x"', "is a file name or path"),
        ('SELECT * FROM "x.csv"', "'x.csv' is a file name or path, not a table"),
        ('WITH "x.csv" AS (SELECT 1) SELECT * FROM "x.csv"', "'x.csv' is a file name or path"),
        ('SELECT * FROM "it""s"', "'it\"s' is not a table name"),
        ("SELECT * FROM a.b.c.d", "is not a table name"),
        # functions reaching the system, files or settings
        ("SELECT getenv('HOME')", "function getenv is not allowed"),
        ("SELECT \"GETENV\"('HOME')", "function getenv is not allowed"),
        ("SELECT main.getenv('HOME')", "function getenv is not allowed"),
        ("SELECT current_setting('home_directory')", "function current_setting is not allowed"),
        ("SELECT a FROM t WHERE a = getvariable('x')", "function getvariable is not allowed"),
        ("SELECT which_secret('s3://b', 's3')", "function which_secret is not allowed"),
        ("SELECT count(*) FROM (SELECT duckdb_secrets())", "function duckdb_secrets"),
        ("SELECT pragma_version()", "function pragma_version is not allowed"),
        ("SELECT sqlite_version()", "function sqlite_version is not allowed"),
        ("SELECT load_extension('x.so')", "function load_extension is not allowed"),
        ("SELECT reflect('java.lang.Runtime', 'getRuntime')", "function reflect is not allowed"),
        ("SELECT java_method('java.lang.System', 'exit', 1)", "function java_method"),
        ("SELECT json_execute_serialized_sql('{}')", "function json_execute_serialized_sql"),
        ("SELECT x FROM UNNEST(read_text('x')) AS u(x)", "function read_text is not allowed"),
        # the engine's own catalog
        ("SELECT * FROM information_schema.roles", "information_schema.roles is not supported"),
        ("SELECT * FROM other.pg_catalog.pg_class", "schema pg_catalog is not allowed"),
        ("SELECT * FROM duckdb_tables", "table duckdb_tables is not allowed"),
        ("SELECT * FROM default.sqlite_master", "table sqlite_master is not allowed"),
        ("SELECT * FROM csv.data", "schema csv is not allowed"),  # Spark's SQL on files
        ("SHOW TABLES FROM information_schema", "schema information_schema is not allowed"),
        # unparseable
        ("SELECT * FROM WHERE", "at line 1, column 19: Expected table name but got 'WHERE'"),
        ("SELECT 'unterminated", "could not read the query"),
    ],
)
def test_refused(sql: str, message: str) -> None:
    assert message in refused(sql)


def test_strings_with_quotes_and_unicode_are_fine() -> None:
    statement = parse(
        "SELECT 'it''s', U&'caf\\00E9', \"we\"\"ird\", 'read_csv(''x'')' "
        'FROM covid_confirmed_cases AS "wei""rd"'
    )
    assert statement.tables == (CASES,)


def test_quoted_function_names_are_not_a_way_around() -> None:
    assert "read_csv" in refused("SELECT * FROM \"rEaD_cSv\"('x')")
    assert "read_text" in refused("SELECT length(\"Read_Text\"('x'))")


# --- translation ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("athena", "expected"),
    [
        ("SELECT date_format(date '2020-09-10', '%Y/%m/%d')", "2020/09/10"),
        (
            "SELECT date_parse('2020-09-10 12:30', '%Y-%m-%d %H:%i')",
            datetime.datetime(2020, 9, 10, 12, 30),
        ),
        ("SELECT from_iso8601_date('2020-09-10')", datetime.date(2020, 9, 10)),
        ("SELECT cardinality(ARRAY[1, 2, 3])", 3),
        ("SELECT element_at(ARRAY['a', 'b', 'c'], 2)", "b"),
        ("SELECT cast(12 AS varchar) || 'x'", "12x"),
        ("SELECT approx_distinct(x) FROM (VALUES 1, 2, 2, 3) AS t(x)", 3),
        ("SELECT date_diff('day', date '2020-09-10', date '2020-09-12')", 2),
        ("SELECT date '2020-01-01' + 2 * INTERVAL '1' DAY", datetime.date(2020, 1, 3)),
    ],
)
def test_trino_functions_translate_and_run_on_duckdb(athena: str, expected: object) -> None:
    sql = to_engine_sql(parse(athena), "duckdb", duckdb_name)
    assert with_macros().execute(sql).fetchall() == [(expected,)]


def test_trino_query_over_a_table_runs_on_duckdb(duck: duckdb.DuckDBPyConnection) -> None:
    statement = parse(
        "WITH big AS (SELECT country, confirmed FROM covid_confirmed_cases WHERE confirmed > 20) "
        "SELECT approx_distinct(country), cast(sum(confirmed) AS varchar) FROM big"
    )
    sql = to_engine_sql(statement, "duckdb", duckdb_name)
    assert duck.execute(sql).fetchall() == [(4, "220")]


def test_stored_arrays_and_maps_are_subscripted_as_trino_does(
    duck: duckdb.DuckDBPyConnection,
) -> None:
    duck.execute(
        f'CREATE VIEW {CATALOG}."default".bags AS SELECT * FROM (VALUES '
        "([1, 2], MAP(['a'], [10]))) AS t(items, counts)"
    )
    bags = TableRef(CATALOG, "default", "bags")
    columns = {bags: [Column("items", "array<int>"), Column("counts", "map<string,int>")]}

    def run(sql: str) -> list[tuple[object, ...]]:
        return duck.execute(to_engine_sql(parse(sql), "duckdb", duckdb_name, columns)).fetchall()

    assert run("SELECT items[2], counts['a'], cardinality(counts) FROM bags") == [(2, 10, 1)]
    assert run("SELECT element_at(items, 3), element_at(counts, 'z') FROM bags") == [(None, None)]
    # Past the end, or a missing key, fails as in Trino rather than answering NULL.
    with pytest.raises(duckdb.InvalidInputException, match="less than or equal to array length"):
        run("SELECT items[3] FROM bags")
    with pytest.raises(duckdb.InvalidInputException, match="Key not present in map"):
        run("SELECT counts['z'] FROM bags")
    # Beside an UNNEST, a column is known by its table's name.
    assert run("SELECT k, v FROM bags b CROSS JOIN UNNEST(b.counts) AS u(k, v)") == [("a", 10)]


def test_stored_columns_type_trino_arithmetic_on_duckdb(duck: duckdb.DuckDBPyConnection) -> None:
    duck.execute(
        f'CREATE VIEW {CATALOG}."default".prices AS SELECT * FROM (VALUES '
        "('a', CAST(10.25 AS DECIMAL(10, 2)), 7, 2.5)) AS t(item, price, units, weight)"
    )
    prices = TableRef(CATALOG, "default", "prices")
    columns = {
        prices: [Column("item", "string"), Column("price", "decimal(10,2)")]
        + [Column("units", "int"), Column("weight", "double")]
    }
    statement = parse(
        "SELECT price / 4, floor(price), round(price, 1), DECIMAL '100.0' * units / 3, units / 2, "
        "weight / 0 FROM prices"
    )
    sql = to_engine_sql(statement, "duckdb", duckdb_name, columns)
    relation = duck.sql(sql)
    # decimal(10,2) / integer is decimal(10,2), rounded half up; floor and round keep
    # Trino's types; decimal(4,1) * integer / integer is decimal(14,1); a double / 0 is infinite.
    assert [str(t) for t in relation.types] == [
        "DECIMAL(10,2)", "DECIMAL(9,0)", "DECIMAL(11,2)", "DECIMAL(14,1)", "INTEGER", "DOUBLE"
    ]  # fmt: skip
    assert relation.fetchall() == [
        (Decimal("2.56"), Decimal("10"), Decimal("10.30"), Decimal("233.3"), 3, float("inf"))
    ]
    # Without the stored types, a decimal's division is refused rather than typed otherwise.
    untyped = to_engine_sql(parse("SELECT price / 4 FROM prices"), "duckdb", duckdb_name)
    with pytest.raises(duckdb.ConversionException, match="is not supported"):
        duck.execute(untyped).fetchall()


def test_trino_functions_translate_for_spark() -> None:
    statement = parse(
        "SELECT substr(country, 2), date_add('month', 1, d), count_if(c > 1) "
        "FROM covid_confirmed_cases GROUP BY 1, 2"
    )
    assert to_engine_sql(statement, "spark", spark_name, CASES_COLUMNS) == (
        "SELECT SUBSTRING(country, 2) AS `_col0`, ADD_MONTHS(d, 1) AS `_col1`, "
        "COUNT_IF(c > 1) AS `_col2` FROM `default`.`covid_confirmed_cases` GROUP BY 1, 2"
    )


def test_what_an_engine_cannot_run_is_refused() -> None:
    statement = parse("SELECT try(cast(c AS integer)) FROM covid_confirmed_cases")
    with pytest.raises(InvalidRequest, match="function try is not supported on the Spark engine"):
        to_engine_sql(statement, "spark", spark_name, CASES_COLUMNS)


def test_a_backslash_ending_a_string_stays_inside_it_in_spark_sql() -> None:
    statement = parse("SELECT 'a\\' AS x, ')' AS y")
    assert to_engine_sql(statement, "spark", spark_name) == "SELECT 'a\\\\' AS x, ')' AS y"
