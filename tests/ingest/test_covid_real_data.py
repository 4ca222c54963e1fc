"""End to end on the real JHU CSSE files: `lakeward up`, the metastore, Spark, Parquet."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.dataset as ds
import pytest

from lakeward.config import Settings
from lakeward.metastore import MetastoreClient
from lakeward.metastore.uris import metastore_uris
from tests.helpers import lake_path, lakeward, parse_outputs

pytestmark = pytest.mark.spark

# Sums over all rows of the source files (the data's README lists them).
EXPECTED = {
    "covid_confirmed_cases": ("confirmed", {"2020-09-10": 28_227_493, "2020-12-31": 83_778_622,
                                            "2023-03-09": 676_570_149}),
    "covid_deaths": ("deaths", {"2020-09-10": 972_736, "2020-12-31": 1_901_777,
                                "2023-03-09": 6_881_802}),
}  # fmt: skip


def read_table(settings: Settings, table: str) -> ds.Dataset:
    with MetastoreClient(metastore_uris(settings)) as client:
        info = client.table(settings.covid.database, table)
    # The embedded lake's s3:// name, read from its files.
    return ds.dataset(str(lake_path(settings, info.location)), format="parquet")


def sum_on(dataset: ds.Dataset, column: str, day: str, country: str | None = None) -> int:
    import datetime

    date = datetime.date.fromisoformat(day)
    condition = pc.field("date") == date
    if country:
        condition &= pc.field("country") == country
    values = dataset.to_table(columns=[column], filter=condition).column(column)
    return int(pc.sum(values).as_py() or 0)


def test_up_prints_the_stack_outputs(stack_dir: Path, stack: Settings) -> None:
    outputs = parse_outputs((stack_dir / "up.stdout").read_text())
    assert outputs["metastore_uris"] == ",".join(metastore_uris(stack))
    assert outputs["lake_root"] == f"file://{stack_dir}/lake"
    assert outputs["data_bucket"] == "lakeward-data"
    assert outputs["server_url"].startswith("http://127.0.0.1:")
    assert "default.covid_cases" in outputs["tables"].split(",")
    assert Path(outputs["server_log"]).is_file()


@pytest.mark.parametrize("table", sorted(EXPECTED))
def test_tables_reproduce_the_source_totals(stack: Settings, table: str) -> None:
    dataset = read_table(stack, table)
    assert dataset.count_rows() == 330_327  # 289 locations x 1,143 days
    column, totals = EXPECTED[table]
    for day, total in totals.items():
        assert sum_on(dataset, column, day) == total, (table, day)


def test_us_and_italy_on_2020_09_10(stack: Settings) -> None:
    confirmed = read_table(stack, "covid_confirmed_cases")
    deaths = read_table(stack, "covid_deaths")
    assert sum_on(confirmed, "confirmed", "2020-09-10", "US") == 6_420_040
    assert sum_on(deaths, "deaths", "2020-09-10", "US") == 190_930
    assert sum_on(confirmed, "confirmed", "2020-09-10", "Italy") == 283_180
    assert sum_on(deaths, "deaths", "2020-09-10", "Italy") == 35_587


def test_recovered_is_null_once_no_longer_tracked(stack: Settings) -> None:
    recovered = read_table(stack, "covid_recovered")
    assert sum_on(recovered, "recovered", "2020-09-10") == 19_004_538
    assert sum_on(recovered, "recovered", "2020-12-31") == 47_055_807
    import datetime

    after = recovered.to_table(filter=pc.field("date") > datetime.date(2021, 8, 4))
    assert after.num_rows == 274 * (1143 - 561)
    assert after.column("recovered").null_count == after.num_rows
    assert after.column("new_recovered").null_count == after.num_rows


def test_daily_change_and_missing_coordinates(stack: Settings) -> None:
    import datetime

    deaths = read_table(stack, "covid_deaths")
    italy = deaths.to_table(filter=pc.field("country") == "Italy").sort_by("date").to_pylist()
    assert italy[0]["new_deaths"] is None  # no previous day
    for before, after in zip(italy, italy[1:], strict=False):
        assert after["new_deaths"] == after["deaths"] - before["deaths"]
    assert italy[0]["date"] == datetime.date(2020, 1, 22)
    # Rows without Lat/Long are kept, with null coordinates: 2 locations in deaths.
    no_coordinates = deaths.to_table(filter=pc.field("lat").is_null())
    assert no_coordinates.num_rows == 2 * 1143
    assert sum_on(deaths, "deaths", "2023-03-09") == 6_881_802  # they still count


def test_combined_table_for_the_map_and_mortality_chart(stack: Settings) -> None:
    cases = read_table(stack, "covid_cases")
    # 289 locations, plus Canada as a whole, which only the recovered file has.
    assert cases.count_rows() == 290 * 1143
    assert sum_on(cases, "confirmed", "2020-09-10") == 28_227_493
    assert sum_on(cases, "deaths", "2020-09-10") == 972_736
    assert sum_on(cases, "recovered", "2020-09-10") == 19_004_538
    italy = cases.to_table(
        filter=(pc.field("country") == "Italy")
        & (pc.field("date") == __import__("datetime").date(2020, 9, 10))
    ).to_pylist()
    assert italy == [
        {"province_state": None, "country": "Italy", "lat": 41.87194, "lon": 12.56738,
         "date": __import__("datetime").date(2020, 9, 10), "confirmed": 283_180, "deaths": 35_587,
         "recovered": italy[0]["recovered"]}
    ]  # fmt: skip


def test_tables_are_visible_through_the_thrift_client(stack: Settings) -> None:
    with MetastoreClient(metastore_uris(stack)) as client:
        assert {"covid_confirmed_cases", "covid_deaths", "covid_recovered", "covid_cases",
                "covid_quarantine"} <= set(client.tables("default"))  # fmt: skip
        info = client.table("default", "covid_deaths")
    assert info.table_type == "EXTERNAL_TABLE"
    assert info.location.startswith("s3://lakeward-data/covid_data/parquet/covid_deaths/")
    assert [(c.name, c.type) for c in info.columns] == [
        ("province_state", "string"), ("country", "string"), ("lat", "double"), ("lon", "double"),
        ("date", "date"), ("deaths", "bigint"), ("new_deaths", "bigint"),
    ]  # fmt: skip
    assert info.serde == "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe"


def test_raw_files_are_kept_unchanged_with_their_checksums(stack: Settings, jhu_dir: Path) -> None:
    import hashlib

    raw = stack.data_dir / "lake" / "lakeward-data" / "covid_data" / "csv"
    runs = sorted(
        (stack.data_dir / "lake" / "lakeward-data" / "covid_data" / "runs").glob("*.json")
    )
    report = json.loads(runs[-1].read_text())
    for measure in report["measures"]:
        name = Path(measure["raw_uri"]).name
        source = (jhu_dir / name).read_bytes()
        # Each measure's file in a directory of its own: the location of its raw table.
        assert (raw / measure["measure"] / name).read_bytes() == source
        assert measure["sha256"] == hashlib.sha256(source).hexdigest()
        assert measure["size"] == len(source)


def test_a_fresh_spark_session_reads_the_tables(stack: Settings) -> None:
    """A new Spark application, in its own process, finds the tables through the metastore."""
    script = textwrap.dedent(
        f"""
        import json
        from lakeward.config import load_settings
        from lakeward.spark import build_session
        spark = build_session(load_settings({str(stack.data_dir)!r}), "fresh-reader")
        rows = spark.sql(
            "SELECT count(*) AS n, sum(CASE WHEN date = DATE'2020-09-10' THEN deaths END) AS d "
            "FROM default.covid_deaths").collect()
        us = spark.sql(
            "SELECT sum(confirmed) AS c FROM default.covid_cases "
            "WHERE country = 'US' AND date = DATE'2020-09-10'").collect()
        print(json.dumps({{"n": rows[0]["n"], "d": rows[0]["d"], "us": us[0]["c"]}}))
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout.strip().splitlines()[-1])
    assert answer == {"n": 330_327, "d": 972_736, "us": 6_420_040}


def test_a_plain_spark_sql_reads_and_writes_the_lake_through_s3a(
    stack: Settings, tmp_path: Path
) -> None:
    """Spark's own spark-sql, given the stack's settings (``lakeward spark-conf``), reads the
    covid tables by their s3:// names and writes a table that lakeward's engine then reads."""
    from lakeward.jvm import find_java, java_env, spark_home

    properties = tmp_path / "spark.properties"
    properties.write_text(lakeward("spark-conf", data_dir=stack.data_dir).stdout)
    env = {**java_env(find_java()), "COLUMNS": "200"}
    place = f"s3://{stack.lake.data_bucket}/spark-sql-test/deaths_0910"
    script = (
        "SELECT sum(deaths) FROM default.covid_deaths WHERE date = DATE'2020-09-10';"
        "DROP TABLE IF EXISTS default.spark_sql_deaths;"
        f"CREATE TABLE default.spark_sql_deaths USING parquet LOCATION '{place}' AS "
        "SELECT country, sum(deaths) AS deaths FROM default.covid_deaths "
        "WHERE date = DATE'2020-09-10' GROUP BY country;"
    )
    result = subprocess.run(
        [str(spark_home() / "bin" / "spark-sql"), "--properties-file", str(properties),
         "-S", "-e", script],
        capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert "972736" in result.stdout.split()
    try:
        with MetastoreClient(metastore_uris(stack)) as client:
            written = client.table("default", "spark_sql_deaths")
        assert written.location.rstrip("/") in (place, place.replace("s3://", "s3a://"))
        # The files are in the lake, where the S3 endpoint and lakeward's engines find them.
        total = ds.dataset(str(lake_path(stack, place)), format="parquet").to_table()
        assert pc.sum(total["deaths"]).as_py() == 972_736
        queried = lakeward(
            "query", "SELECT sum(deaths) FROM spark_sql_deaths", "--output", "json",
            data_dir=stack.data_dir,
        ).stdout  # fmt: skip
        assert "972736" in queried
    finally:
        with MetastoreClient(metastore_uris(stack)) as client:
            client.drop_table("default", "spark_sql_deaths")
