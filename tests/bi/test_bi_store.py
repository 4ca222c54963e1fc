"""The BI store on SQLite and on PostgreSQL (the access stores' ``db`` fixture): records
survive a round trip, the schema is migrated once and versioned apart from the access store's."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import insert, text

from lakeward.bi.model import (
    AnalysisSpec,
    Column,
    ConversionIssue,
    Dashboard,
    Dataset,
    DatasetSpec,
    DataSource,
    Extract,
    Share,
)
from lakeward.bi.store import MIGRATIONS, BiStore, dashboards
from lakeward.errors import InvalidRequest
from lakeward.sqlstate import migrate, open_engine


def test_records_round_trip_and_the_schema_is_versioned(db: str | Path) -> None:
    when = datetime(2020, 9, 10, 12, 30, tzinfo=UTC)
    spec = DatasetSpec.model_validate({
        "name": "d", "data_source_id": "src", "sql": "SELECT 1 AS one",
        "fields": [{"op": "computed", "name": "two", "expression": "one + 1"}]})  # fmt: skip
    analysis = AnalysisSpec.model_validate({"name": "a", "dataset_id": "d", "sheets": [
        {"id": "s", "visuals": [{"id": "t", "type": "table", "columns": ["one"]}]}]})  # fmt: skip
    store = BiStore(db)
    try:
        store.add("datasource", DataSource("src", "Source", "cat", "primary", "root", when))
        with pytest.raises(InvalidRequest, match="a data source with id src exists already"):
            store.add("datasource", DataSource("src", "Other", "cat", "primary", "u", when))
        columns = [Column("one", "integer", "measure"), Column("two", "integer", "measure")]
        store.put("dataset", Dataset("d", spec, "de_user", when, when, columns))
        issue = ConversionIssue("one", "convert to integer", 2, ["x", "y"])
        store.put("extract", Extract("d", "COMPLETED", "file:///x.parquet", 10, 1, when,
                                     issues=[issue]))  # fmt: skip
        store.put("dashboard", Dashboard("b", "Board", "a", analysis, 1, "root", when))
        shares = [Share(principal="group/G"), Share(principal="user/u", role="owner")]
        store.set_shares("dashboard", "b", shares)
        # Replacing a record updates it in place.
        store.put("dashboard", Dashboard("b", "Board 2", "a", analysis, 2, "root", when))
    finally:
        store.close()
    again = BiStore(db)  # a second opening migrates nothing and reads the same
    try:
        assert again.data_source("src") == DataSource("src", "Source", "cat", "primary", "root",
                                                      when)  # fmt: skip
        dataset = again.dataset("d")
        assert dataset is not None and dataset.spec == spec and dataset.columns == columns
        extract = again.extract("d")
        assert extract is not None and extract.issues == [issue] and extract.last_refresh == when
        dashboard = again.dashboard("b")
        assert dashboard is not None and (dashboard.name, dashboard.version) == ("Board 2", 2)
        assert dashboard.definition == analysis
        assert [d.id for d in again.all("dashboard")] == ["b"]
        assert again.shares("dashboard", "b") == shares
        assert again.delete("dataset", "d") and again.extract("d") is None
        assert again.dataset("d") is None and not again.delete("dataset", "d")
        with again.engine.connect() as conn:
            versions = conn.execute(text("SELECT component, version FROM schema_version")).all()
        assert [tuple(v) for v in versions] == [("bi", 2)]
    finally:
        again.close()


def test_published_versions_are_kept_and_a_v1_database_keeps_its_dashboards(
    db: str | Path,
) -> None:
    when = datetime(2021, 1, 1, tzinfo=UTC)
    analysis = AnalysisSpec.model_validate({"name": "a", "dataset_id": "d", "sheets": [
        {"id": "s", "visuals": [{"id": "t", "type": "table", "columns": ["one"]}]}]})  # fmt: skip
    # A database made before versions were kept: one dashboard at its version 3.
    engine = open_engine(db)
    migrate(engine, "bi", MIGRATIONS[:1], label="BI")
    with engine.begin() as conn:
        conn.execute(insert(dashboards).values(
            id="b", name="Board", analysis_id="a", definition=analysis.model_dump_json(),
            version=3, owner="de_user", published=when))  # fmt: skip
    engine.dispose()
    store = BiStore(db)
    try:
        (kept,) = store.dashboard_versions("b")
        assert (kept.version, kept.name, kept.publisher, kept.definition) == (
            3,
            "Board",
            "de_user",
            analysis,
        )
        renamed = analysis.model_copy(update={"name": "a2"})
        store.publish(Dashboard("b", "Board 2", "a", renamed, 4, "de_user", when), "root",
                      new=False)  # fmt: skip
        assert [(v.version, v.publisher) for v in store.dashboard_versions("b")] == [
            (3, "de_user"),
            (4, "root"),
        ]
        shown = store.dashboard("b")
        assert shown is not None and (shown.version, shown.definition) == (4, renamed)
        with pytest.raises(InvalidRequest, match="version 4 was published a moment ago"):
            store.publish(Dashboard("b", "Board 2", "a", renamed, 4, "u", when), "u", new=False)
        assert store.delete("dashboard", "b") and store.dashboard_versions("b") == []
    finally:
        store.close()
