"""Partition projection end to end on the in-memory catalog: a table whose partitions its
properties tell is created, read where its template places the files, and refused where
Athena refuses it."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from lakeward.query.service import QueryService
from tests.query.statements.lake import as_analyst, jhu_cases
from tests.query.support import MEMORY, failure


def refused(service: QueryService, sql: str) -> str:
    return failure(service, sql, catalog=MEMORY, database="sales", principal="analyst")


@pytest.fixture
def projected_files(sales: QueryService, jhu_dir: Path) -> tuple[str, pa.Table]:
    """The JHU cases of three countries on three days, one file per country and day at
    ``<place>/<country>/<yyyy>/<MM>/<dd>/``, as a log shipper lays them out."""
    settings = sales.settings
    cases = jhu_cases(jhu_dir)
    directory = Path(settings.data_dir) / "lake" / settings.lake.data_bucket / "projected"
    for row in cases.to_pylist():
        day = row["day"]
        place = directory / row["country"] / f"{day:%Y}" / f"{day:%m}" / f"{day:%d}"
        place.mkdir(parents=True)
        pq.write_table(pa.table({"confirmed": [row["confirmed"]]}), place / "part-0.parquet")
    return f"{settings.lake_root}/{settings.lake.data_bucket}/projected", cases


def test_a_projected_table_reads_the_partitions_its_properties_allow(
    sales: QueryService, projected_files: tuple[str, pa.Table]
) -> None:
    place, cases = projected_files
    as_analyst(
        sales,
        "CREATE EXTERNAL TABLE projected (confirmed bigint) "
        "PARTITIONED BY (country string, day string) STORED AS PARQUET "
        f"LOCATION '{place}/' TBLPROPERTIES ("
        "'projection.enabled'='true', "
        "'projection.country.type'='enum', 'projection.country.values'='Italy,Spain', "
        "'projection.day.type'='date', 'projection.day.format'='yyyy/MM/dd', "
        "'projection.day.range'='2020/09/08,2020/09/09', "
        f"'storage.location.template'='{place}/${{country}}/${{day}}/')",
    )
    # The metastore has no partition: the properties alone tell them.
    assert as_analyst(sales, "SHOW PARTITIONS projected")[1] == []
    _, rows = as_analyst(
        sales, "SELECT country, day, confirmed FROM projected ORDER BY country, day"
    )
    # US is not among the values, 2020-09-10 is past the range: their files are not read.
    wanted = cases.filter(
        pc.and_(
            pc.is_in(cases["country"], pa.array(["Italy", "Spain"])),
            pc.less(cases["day"], pa.scalar(pa.scalar("2020-09-10").cast(pa.date32()))),
        )
    ).sort_by([("country", "ascending"), ("day", "ascending")])
    assert rows == [
        [r["country"], f"{r['day']:%Y/%m/%d}", str(r["confirmed"])] for r in wanted.to_pylist()
    ]
    assert len(rows) == 4
    _, italy = as_analyst(sales, "SELECT sum(confirmed) FROM projected WHERE country = 'Italy'")
    assert italy == [
        [str(sum(r["confirmed"] for r in wanted.to_pylist() if r["country"] == "Italy"))]
    ]
    # Rows are written only where a projection reads them back.
    insert = refused(sales, "INSERT INTO projected VALUES (1, 'Italy', '2020/09/08')")
    assert "INSERT INTO a table with partition projection" in insert


def test_an_injected_column_is_read_only_for_the_values_a_query_names(
    sales: QueryService, projected_files: tuple[str, pa.Table]
) -> None:
    place, cases = projected_files
    as_analyst(
        sales,
        "CREATE EXTERNAL TABLE by_country (confirmed bigint) PARTITIONED BY (country string) "
        f"STORED AS PARQUET LOCATION '{place}/' TBLPROPERTIES ('projection.enabled'='true', "
        "'projection.country.type'='injected', "
        f"'storage.location.template'='{place}/${{country}}/')",
    )
    _, rows = as_analyst(sales, "SELECT count(*) FROM by_country WHERE country IN ('US', 'Peru')")
    assert rows == [[str(sum(1 for c in cases["country"].to_pylist() if c == "US"))]]
    for where in ("", " WHERE country <> 'US'", " WHERE country = 'US' OR confirmed > 0"):
        reason = refused(sales, f"SELECT count(*) FROM by_country{where}")
        assert reason.startswith("CONSTRAINT_VIOLATION: For the injected projected partition")
        assert "country" in reason


@pytest.mark.parametrize(
    ("properties", "named"),
    [
        ("'projection.day.type'='date', 'projection.day.range'='NOW-1YEARS,NOW'",
         "'projection.day.format' must be set"),
        ("'projection.day.type'='date', 'projection.day.format'='dd MMM yyyy', "
         "'projection.day.range'='NOW-1YEARS,NOW'", "the pattern 'MMM' is not supported"),
        ("'projection.day.type'='range'", "'projection.day.type' is 'range'"),
        ("'projection.day.type'='integer', 'projection.day.range'='1,x'",
         "'projection.day.range' must be two whole numbers"),
        ("'projection.day.type'='enum', 'projection.day.values'='a', "
         "'projection.day.timezone'='UTC'", "'projection.day.timezone' is not supported"),
        ("'projection.day.type'='enum', 'projection.day.values'='a', "
         "'storage.location.template'='s3://elsewhere/${day}/'",
         "'storage.location.template': LOCATION 's3://elsewhere/': the lake has no bucket"),
        ("'projection.day.type'='enum', 'projection.day.values'='a', "
         "'storage.location.template'='s3://x/${month}/'", "${month} is not a partition column"),
    ],
)  # fmt: skip
def test_a_projection_that_is_incomplete_or_unknown_is_refused_naming_the_property(
    sales: QueryService, properties: str, named: str
) -> None:
    place = f"{sales.settings.lake_root}/{sales.settings.lake.data_bucket}/projected"
    reason = refused(
        sales,
        "CREATE EXTERNAL TABLE p (n bigint) PARTITIONED BY (day string) STORED AS PARQUET "
        f"LOCATION '{place}/' TBLPROPERTIES ('projection.enabled'='true', {properties})",
    )
    assert named in reason
    assert ["p"] not in as_analyst(sales, "SHOW TABLES")[1]  # nothing half-made
