"""GetQueryResults pages are the bytes the renderer before stored pages returned.

``data/result_pages.json`` was recorded with the code before pages were
rendered once (rows parsed back from the CSV, shaped into dicts and
``json.dumps``'d per call), for the queries in ``result_cases.py``: every
Athena type, NULLs beside empty strings, unicode, control characters, nested
values, results of several pages. Each page is kept as its SHA-256 and, when
small, in full (so that a failure shows the difference).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lakeward.config import Settings
from lakeward.http.athena import shapes
from lakeward.query.engines.base import EngineResult, Limits
from lakeward.query.engines.duckdb import DuckDbEngine
from lakeward.query.results import ResultCache, read_page, write_results
from lakeward.query.types import athena_type_of_arrow
from lakeward.storage import Storage, load_storage
from tests.query.results.result_cases import SQL_CASES, arrow_cases

BUCKET, PREFIX = "lakeward-data", "r"
SNAPSHOT = json.loads((Path(__file__).parent / "data" / "result_pages.json").read_text())
MODES = {"1000": (1000, True), "7": (7, True), "1000-noheader": (1000, False)}


@pytest.fixture(scope="module")
def storage(tmp_path_factory: pytest.TempPathFactory) -> Storage:
    storage = load_storage(Settings(data_dir=tmp_path_factory.mktemp("lake")))
    storage.ensure_bucket(BUCKET)
    return storage


def result_of(case: str) -> EngineResult:
    if case in SQL_CASES:
        engine = DuckDbEngine(rows_per_batch=1000)  # several batches for the long results
        return engine.execute(f"case-{case}", SQL_CASES[case], [], Limits())
    batches = arrow_cases()[case]
    columns = [athena_type_of_arrow(f.type).column(f.name) for f in batches[0].schema]
    return EngineResult(columns, iter(batches))


def pages_of(storage: Storage, execution_id: str, mode: str, cache: ResultCache) -> Iterator[str]:
    max_results, header = MODES[mode]
    token = None
    while True:
        page = read_page(storage, BUCKET, PREFIX, execution_id, token, max_results, header, cache)
        yield shapes.query_results(page).decode("ascii")
        token = page.next_token
        if token is None:
            return


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def check_pages(storage: Storage, recorded: dict[str, Any], cache: ResultCache) -> None:
    execution_id = f"case-{recorded['case']}"
    for mode, expected in recorded["pages"].items():
        pages = list(pages_of(storage, execution_id, mode, cache))
        if expected["first"] is not None:
            assert pages[0] == expected["first"], (recorded["case"], mode)
        assert [sha(p) for p in pages] == expected["sha256"], (recorded["case"], mode)


@pytest.mark.parametrize("recorded", SNAPSHOT, ids=[r["case"] for r in SNAPSHOT])
def test_pages_and_csv_are_the_bytes_recorded_before(
    storage: Storage, recorded: dict[str, Any]
) -> None:
    written = ResultCache()
    execution_id = f"case-{recorded['case']}"
    write_results(storage, BUCKET, PREFIX, execution_id, result_of(recorded["case"]), written)
    csv = storage.get(BUCKET, f"{PREFIX}/{execution_id}.csv").decode("utf-8")
    assert sha(csv) == recorded["csv"]["sha256"]
    assert recorded["csv"]["text"] in (None, csv)
    metadata = storage.get(BUCKET, f"{PREFIX}/{execution_id}.csv.metadata").decode("utf-8")
    assert metadata == recorded["metadata"]
    # In the writing process's memory, read by another process from the stored pages,
    # by ranges when too big to hold, and from a result stored before pages were.
    for cache in (written, ResultCache(), ResultCache(max_bytes=0)):
        check_pages(storage, recorded, cache)
    storage.delete(BUCKET, f"{PREFIX}/{execution_id}.csv.pages")
    check_pages(storage, recorded, ResultCache())


def test_the_snapshot_covers_every_case() -> None:
    assert {r["case"] for r in SNAPSHOT} == {*SQL_CASES, *arrow_cases()}
    assert any(len(m["sha256"]) > 3 for r in SNAPSHOT for m in r["pages"].values())
