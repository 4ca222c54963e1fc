"""Bad input on small crafted files: fail before writing, or quarantine with file and line."""

from __future__ import annotations

import datetime
import itertools
from collections.abc import Callable
from pathlib import Path

import pyarrow.dataset as ds
import pytest

from lakeward.config import Settings
from lakeward.errors import InputError
from lakeward.ingest.covid import CovidEtl
from lakeward.ingest.jhu import MEASURES
from lakeward.ingest.reports import EtlReport
from lakeward.metastore import MetastoreClient
from lakeward.metastore.uris import metastore_uris
from lakeward.storage import load_storage
from tests.helpers import lake_path

pytestmark = pytest.mark.spark

DATES = ["1/22/20", "1/23/20", "1/24/20", "1/25/20"]
HEADER = "Province/State,Country/Region,Lat,Long," + ",".join(DATES)
GOOD_ROWS = [
    ",Italy,41.87194,12.56738,0,2,3,3",
    '"Bonaire, Sint Eustatius and Saba",Netherlands,12.1784,-68.2385,1,1,2,5',
    '"Say ""Hi""",Testland,1.5,2.5,0,0,0,1',
]
_counter = itertools.count()

Run = Callable[..., tuple[EtlReport, Settings]]


def crafted_files(directory: Path, overrides: dict[str, str]) -> Path:
    """The three JHU files; ``overrides`` replaces a file's whole text by measure name."""
    directory.mkdir(parents=True, exist_ok=True)
    for measure in MEASURES:
        text = overrides.get(measure.name, "\n".join([HEADER, *GOOD_ROWS]) + "\n")
        (directory / measure.file_name).write_text(text)
    return directory


@pytest.fixture
def run(stack: Settings, spark: object, tmp_path: Path) -> Run:
    """Run the ETL on crafted files into a bucket and database of their own."""
    n = next(_counter)
    settings = stack.model_copy(
        update={
            "lake": stack.lake.model_copy(update={"data_bucket": f"crafted-{n}"}),
            "covid": stack.covid.model_copy(update={"database": f"crafted_{n}"}),
        }
    )

    def go(**overrides: str) -> tuple[EtlReport, Settings]:
        source = crafted_files(tmp_path / "source", overrides)
        return CovidEtl(settings).run(str(source), spark=spark), settings  # type: ignore[arg-type]

    return go


def table_rows(settings: Settings, table: str) -> list[dict[str, object]]:
    with MetastoreClient(metastore_uris(settings)) as client:
        location = client.table(settings.covid.database, table).location
    rows: list[dict[str, object]] = (
        ds.dataset(str(lake_path(settings, location)), format="parquet").to_table().to_pylist()
    )
    return rows


def test_good_crafted_files_load_with_quotes_and_daily_change(run: Run) -> None:
    report, settings = run()
    assert [m.rows_loaded for m in report.measures] == [3, 3, 3]
    rows = table_rows(settings, "covid_deaths")
    assert len(rows) == 3 * len(DATES)
    bonaire = sorted(
        (r for r in rows if r["country"] == "Netherlands"), key=lambda r: str(r["date"])
    )
    assert bonaire[0]["province_state"] == "Bonaire, Sint Eustatius and Saba"
    assert [r["deaths"] for r in bonaire] == [1, 1, 2, 5]
    assert [r["new_deaths"] for r in bonaire] == [None, 0, 1, 3]
    assert bonaire[0]["date"] == datetime.date(2020, 1, 22)
    assert {r["province_state"] for r in rows if r["country"] == "Testland"} == {'Say "Hi"'}
    assert table_rows(settings, "covid_quarantine") == []


def test_a_header_off_the_layout_fails_before_anything_is_written(run: Run) -> None:
    bad = "Province/State,Country,Lat,Long," + ",".join(DATES) + "\n" + GOOD_ROWS[0] + "\n"
    with pytest.raises(InputError) as failure:
        run(deaths=bad)
    message = str(failure.value)
    assert "time_series_covid19_deaths_global.csv" in message
    assert "column 2" in message and "'Country'" in message and "'Country/Region'" in message


def test_bad_header_leaves_lake_and_metastore_untouched(
    stack: Settings, spark: object, tmp_path: Path
) -> None:
    settings = stack.model_copy(
        update={
            "lake": stack.lake.model_copy(update={"data_bucket": "crafted-badheader"}),
            "covid": stack.covid.model_copy(update={"database": "crafted_badheader"}),
        }
    )
    source = crafted_files(tmp_path / "src", {"recovered": "Province/State,Country/Region,Lat\n"})
    with pytest.raises(InputError, match=r"recovered_global.csv: line 1, column 4 is missing"):
        CovidEtl(settings).run(str(source), spark=spark)  # type: ignore[arg-type]
    assert load_storage(settings).keys("crafted-badheader") == []
    with MetastoreClient(metastore_uris(settings)) as client:
        assert "crafted_badheader" not in client.databases()


def test_malformed_rows_are_quarantined_with_file_line_and_reason(run: Run) -> None:
    confirmed = "\n".join(
        [
            HEADER,
            GOOD_ROWS[0],  # line 2
            ",Spain,40.4,-3.7,0,1,2",  # line 3: a field short
            ",France,46.2,2.2,0,1,2.5,3",  # line 4: not whole
            ",Peru,-9.2,-75.0,0,-1,2,3",  # line 5: negative
            ",Chile,-35.7,-71.5,0,1,x,3,",  # line 6: a field too many
            ",Japan,abc,138.3,0,1,2,3",  # line 7: Lat not a number
            "Nowhere,China,,,1,2,3,4",  # line 8: no coordinates: kept
            ",,1.0,1.0,1,2,3,4",  # line 9: no country
        ]
    )
    report, settings = run(confirmed=confirmed + "\n")
    measure = report.measures[0]
    assert (measure.rows_read, measure.rows_loaded, measure.rows_quarantined) == (8, 2, 6)
    assert measure.rows_without_coordinates == 1
    quarantined = {r["line"]: r for r in table_rows(settings, "covid_quarantine")}
    assert set(quarantined) == {3, 4, 5, 6, 7, 9}
    assert all(
        r["file"] == "time_series_covid19_confirmed_global.csv" for r in quarantined.values()
    )
    assert quarantined[3]["reason"] == "has 7 fields, the header has 8"
    assert quarantined[4]["reason"] == "column '1/24/20': '2.5' is not a whole non-negative number"
    assert quarantined[4]["column"] == "1/24/20"
    assert quarantined[5]["reason"] == "column '1/23/20': '-1' is not a whole non-negative number"
    assert quarantined[6]["reason"] == "has 9 fields, the header has 8"
    assert quarantined[7]["reason"].startswith("Lat 'abc' is not a number")
    assert quarantined[9]["reason"] == "Country/Region is empty"
    assert quarantined[4]["record"] == ",France,46.2,2.2,0,1,2.5,3"
    loaded = table_rows(settings, "covid_confirmed_cases")
    assert {r["country"] for r in loaded} == {"Italy", "China"}
    china = [r for r in loaded if r["country"] == "China"]
    assert all(r["lat"] is None and r["lon"] is None for r in china)
    assert sum(r["confirmed"] for r in china if r["date"] == datetime.date(2020, 1, 25)) == 4


def test_an_unparseable_date_header_quarantines_that_column_only(run: Run) -> None:
    header = "Province/State,Country/Region,Lat,Long,1/22/20,1/23/20,13/45/20,1/25/20"
    report, settings = run(deaths="\n".join([header, *GOOD_ROWS]) + "\n")
    deaths = report.measures[1]
    assert deaths.bad_date_columns == ["13/45/20"]
    assert deaths.rows_loaded == 3
    rows = table_rows(settings, "covid_deaths")
    assert sorted({r["date"] for r in rows}) == [
        datetime.date(2020, 1, 22), datetime.date(2020, 1, 23), datetime.date(2020, 1, 25)
    ]  # fmt: skip
    quarantine = table_rows(settings, "covid_quarantine")
    assert [(q["file"], q["line"], q["column"]) for q in quarantine] == [
        ("time_series_covid19_deaths_global.csv", 1, "13/45/20")
    ]
    assert "not a M/D/YY date" in str(quarantine[0]["reason"])
    # The combined table still has every day; deaths are null where the column was unusable.
    combined = table_rows(settings, "covid_cases")
    hole = [r for r in combined if r["date"] == datetime.date(2020, 1, 24)]
    assert len(hole) == 3 and all(r["deaths"] is None and r["confirmed"] is not None for r in hole)
    # The raw table keeps the column, as text named by its position.
    with MetastoreClient(metastore_uris(settings)) as client:
        raw = client.table(settings.covid.database, "covid_raw_deaths")
    assert [(c.name, c.type) for c in raw.columns][4:] == [
        ("d_2020_01_22", "bigint"), ("d_2020_01_23", "bigint"), ("column_7", "string"),
        ("d_2020_01_25", "bigint"),
    ]  # fmt: skip


def test_rerun_replaces_tables_without_duplicates(run: Run) -> None:
    _, settings = run()
    first = table_rows(settings, "covid_cases")
    report, _ = run()
    second = table_rows(settings, "covid_cases")
    assert len(second) == len(first) == 3 * len(DATES)
    key = lambda r: (str(r["province_state"]), r["country"], r["date"])  # noqa: E731
    assert sorted(first, key=key) == sorted(second, key=key)
    # The current and the previous version are kept; a third run drops the first.
    run()
    storage = load_storage(settings)
    versions = storage.children(settings.lake.data_bucket, "covid_data/parquet/covid_cases/")
    assert len(versions) == 2 and f"v{report.run_id}" in versions


def test_the_download_path_over_http(stack: Settings, spark: object, tmp_path: Path) -> None:
    import functools
    import threading
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    source = crafted_files(tmp_path / "mirror", {})
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(source))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    settings = stack.model_copy(
        update={
            "lake": stack.lake.model_copy(update={"data_bucket": "crafted-http"}),
            "covid": stack.covid.model_copy(update={"database": "crafted_http"}),
        }
    )
    try:
        url = f"http://127.0.0.1:{server.server_port}/"
        report = CovidEtl(settings).run(url, spark=spark)  # type: ignore[arg-type]
        assert [m.rows_loaded for m in report.measures] == [3, 3, 3]
        assert report.measures[0].source == f"{url}time_series_covid19_confirmed_global.csv"
        with pytest.raises(InputError, match="HTTP 404.*|failed: HTTP 404"):
            CovidEtl(settings).run(url + "missing/", spark=spark)  # type: ignore[arg-type]
    finally:
        server.shutdown()
    with pytest.raises(InputError, match="--covid-source"):
        CovidEtl(settings).run("http://127.0.0.1:9/", spark=spark)  # type: ignore[arg-type]
