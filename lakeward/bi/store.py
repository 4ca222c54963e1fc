"""Where the BI layer keeps its state: data sources, datasets, extracts, analyses,
dashboards and who they are shared with.

SQLAlchemy Core tables in a SQLite file (``<data dir>/bi/bi.db``) or the
database of ``bi.database_url``; the schema is versioned by the same migration
runner as the access store (component ``bi`` in ``schema_version``).
Definitions are kept as JSON text: they are read whole, never queried inside.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import (
    BigInteger,
    Column,
    DateTime,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    delete,
    insert,
    select,
    update,
)
from sqlalchemy.engine import Connection, Engine

from lakeward.access.schema import open_engine, run_migrations, writer
from lakeward.bi.model import (
    Analysis,
    AnalysisSpec,
    ConversionIssue,
    Dashboard,
    Dataset,
    DatasetSpec,
    DataSource,
    Extract,
    Kind,
    Share,
)
from lakeward.bi.model import (
    Column as DatasetColumn,
)

metadata = MetaData()

data_sources = Table(
    "bi_data_sources",
    metadata,
    Column("id", String(128), primary_key=True),
    Column("name", String(128), nullable=False),
    Column("catalog", String(128), nullable=False),
    Column("workgroup", String(128), nullable=False),
    Column("owner", String(64), nullable=False),
    Column("created", DateTime(timezone=True), nullable=False),
    Column("status", String(16), nullable=False),
    Column("status_message", Text, nullable=False, default=""),
    Column("validated", DateTime(timezone=True)),
)

datasets = Table(
    "bi_datasets",
    metadata,
    Column("id", String(128), primary_key=True),
    Column("spec", Text, nullable=False),
    Column("owner", String(64), nullable=False),
    Column("created", DateTime(timezone=True), nullable=False),
    Column("updated", DateTime(timezone=True), nullable=False),
    Column("columns", Text, nullable=False, default="[]"),
)

extracts = Table(
    "bi_extracts",
    metadata,
    Column("dataset_id", String(128), primary_key=True),
    Column("status", String(16), nullable=False),
    Column("uri", Text, nullable=False, default=""),
    Column("size_bytes", BigInteger, nullable=False, default=0),
    Column("row_count", BigInteger, nullable=False, default=0),
    Column("last_refresh", DateTime(timezone=True)),
    Column("duration_ms", Integer, nullable=False, default=0),
    Column("error", Text, nullable=False, default=""),
    Column("issues", Text, nullable=False, default="[]"),
    Column("next_refresh", DateTime(timezone=True)),
)

analyses = Table(
    "bi_analyses",
    metadata,
    Column("id", String(128), primary_key=True),
    Column("spec", Text, nullable=False),
    Column("owner", String(64), nullable=False),
    Column("created", DateTime(timezone=True), nullable=False),
    Column("updated", DateTime(timezone=True), nullable=False),
)

dashboards = Table(
    "bi_dashboards",
    metadata,
    Column("id", String(128), primary_key=True),
    Column("name", String(128), nullable=False),
    Column("analysis_id", String(128)),
    Column("definition", Text, nullable=False),
    Column("version", Integer, nullable=False),
    Column("owner", String(64), nullable=False),
    Column("published", DateTime(timezone=True), nullable=False),
)

permissions = Table(
    "bi_permissions",
    metadata,
    Column("kind", String(16), primary_key=True),
    Column("resource_id", String(128), primary_key=True),
    Column("principal", String(80), primary_key=True),  # user/<name> | group/<name>
    Column("role", String(16), nullable=False),
)


def _v1(conn: Connection) -> None:
    # Built from the definitions above; freeze a table's v1 shape here before changing it.
    metadata.create_all(conn)


MIGRATIONS: list[Callable[[Connection], None]] = [_v1]
_PG_LOCK_KEY = 0x6C616B65_62692020  # "lakebi  "

_TABLES = {"datasource": data_sources, "dataset": datasets, "analysis": analyses,
           "dashboard": dashboards}  # fmt: skip


def _utc(value: datetime | None) -> datetime | None:
    # SQLite hands datetimes back without their zone.
    return value.replace(tzinfo=UTC) if value is not None and value.tzinfo is None else value


class BiStore:
    def __init__(self, url_or_path: str | Path) -> None:
        self.engine: Engine = open_engine(url_or_path)
        run_migrations(self.engine, "bi", MIGRATIONS, _PG_LOCK_KEY, "BI")
        self._writer = writer(self.engine)

    def close(self) -> None:
        self.engine.dispose()

    def _rows(self, query: Any) -> list[dict[str, Any]]:
        with self.engine.connect() as conn:
            return [dict(r) for r in conn.execute(query).mappings().all()]

    def _one(self, query: Any) -> dict[str, Any] | None:
        rows = self._rows(query)
        return rows[0] if rows else None

    def exists(self, kind: Kind, resource_id: str) -> bool:
        table = _TABLES[kind]
        key = table.c.id
        return self._one(select(key).where(key == resource_id)) is not None

    def delete(self, kind: Kind, resource_id: str) -> bool:
        table = _TABLES[kind]
        with self._writer.begin() as conn:
            gone = conn.execute(delete(table).where(table.c.id == resource_id)).rowcount > 0
            conn.execute(
                delete(permissions).where(
                    permissions.c.kind == kind, permissions.c.resource_id == resource_id
                )
            )
            if kind == "dataset":
                conn.execute(delete(extracts).where(extracts.c.dataset_id == resource_id))
        return gone

    # -- data sources -------------------------------------------------------

    def put_data_source(self, source: DataSource) -> None:
        values = {c.name: getattr(source, c.name) for c in data_sources.c}
        self._upsert(data_sources, data_sources.c.id, source.id, values)

    def data_source(self, source_id: str) -> DataSource | None:
        row = self._one(select(data_sources).where(data_sources.c.id == source_id))
        return _data_source(row) if row else None

    def data_sources(self) -> list[DataSource]:
        return [_data_source(r) for r in self._rows(select(data_sources).order_by("id"))]

    # -- datasets -----------------------------------------------------------

    def put_dataset(self, dataset: Dataset) -> None:
        values = {
            "id": dataset.id,
            "spec": dataset.spec.model_dump_json(),
            "owner": dataset.owner,
            "created": dataset.created,
            "updated": dataset.updated,
            "columns": json.dumps([c.__dict__ for c in dataset.columns]),
        }
        self._upsert(datasets, datasets.c.id, dataset.id, values)

    def dataset(self, dataset_id: str) -> Dataset | None:
        row = self._one(select(datasets).where(datasets.c.id == dataset_id))
        return _dataset(row) if row else None

    def datasets(self) -> list[Dataset]:
        return [_dataset(r) for r in self._rows(select(datasets).order_by("id"))]

    def set_columns(self, dataset_id: str, columns: list[DatasetColumn]) -> None:
        with self._writer.begin() as conn:
            conn.execute(
                update(datasets)
                .where(datasets.c.id == dataset_id)
                .values(columns=json.dumps([c.__dict__ for c in columns]))
            )

    # -- extracts -----------------------------------------------------------

    def put_extract(self, extract: Extract) -> None:
        values = {c.name: getattr(extract, c.name) for c in extracts.c if c.name != "issues"}
        values["issues"] = json.dumps([i.__dict__ for i in extract.issues])
        self._upsert(extracts, extracts.c.dataset_id, extract.dataset_id, values)

    def extract(self, dataset_id: str) -> Extract | None:
        row = self._one(select(extracts).where(extracts.c.dataset_id == dataset_id))
        return _extract(row) if row else None

    def due_extracts(self, now: datetime) -> list[str]:
        query = select(extracts.c.dataset_id).where(
            extracts.c.next_refresh.is_not(None),
            extracts.c.next_refresh <= now,
            extracts.c.status != "RUNNING",
        )
        return [r["dataset_id"] for r in self._rows(query)]

    # -- analyses and dashboards --------------------------------------------

    def put_analysis(self, analysis: Analysis) -> None:
        values = {
            "id": analysis.id,
            "spec": analysis.spec.model_dump_json(),
            "owner": analysis.owner,
            "created": analysis.created,
            "updated": analysis.updated,
        }
        self._upsert(analyses, analyses.c.id, analysis.id, values)

    def analysis(self, analysis_id: str) -> Analysis | None:
        row = self._one(select(analyses).where(analyses.c.id == analysis_id))
        return _analysis(row) if row else None

    def analyses(self) -> list[Analysis]:
        return [_analysis(r) for r in self._rows(select(analyses).order_by("id"))]

    def put_dashboard(self, dashboard: Dashboard) -> None:
        values = {
            "id": dashboard.id,
            "name": dashboard.name,
            "analysis_id": dashboard.analysis_id,
            "definition": dashboard.definition.model_dump_json(),
            "version": dashboard.version,
            "owner": dashboard.owner,
            "published": dashboard.published,
        }
        self._upsert(dashboards, dashboards.c.id, dashboard.id, values)

    def dashboard(self, dashboard_id: str) -> Dashboard | None:
        row = self._one(select(dashboards).where(dashboards.c.id == dashboard_id))
        return _dashboard(row) if row else None

    def dashboards(self) -> list[Dashboard]:
        return [_dashboard(r) for r in self._rows(select(dashboards).order_by("id"))]

    # -- permissions --------------------------------------------------------

    def shares(self, kind: Kind, resource_id: str) -> list[Share]:
        query = (
            select(permissions.c.principal, permissions.c.role)
            .where(permissions.c.kind == kind, permissions.c.resource_id == resource_id)
            .order_by(permissions.c.principal)
        )
        return [Share(principal=r["principal"], role=r["role"]) for r in self._rows(query)]

    def set_shares(self, kind: Kind, resource_id: str, shares: list[Share]) -> None:
        where = (permissions.c.kind == kind, permissions.c.resource_id == resource_id)
        with self._writer.begin() as conn:
            conn.execute(delete(permissions).where(*where))
            for share in {s.principal: s for s in shares}.values():
                conn.execute(
                    insert(permissions).values(
                        kind=kind, resource_id=resource_id,
                        principal=share.principal, role=share.role,
                    )
                )  # fmt: skip

    def _upsert(self, table: Table, key: Any, value: str, values: dict[str, Any]) -> None:
        with self._writer.begin() as conn:
            if conn.execute(select(key).where(key == value)).first() is None:
                conn.execute(insert(table).values(**values))
            else:
                conn.execute(update(table).where(key == value).values(**values))


def _data_source(row: dict[str, Any]) -> DataSource:
    row["created"], row["validated"] = _utc(row["created"]), _utc(row["validated"])
    return DataSource(**row)


def _dataset(row: dict[str, Any]) -> Dataset:
    return Dataset(
        id=row["id"],
        spec=DatasetSpec.model_validate_json(row["spec"]),
        owner=row["owner"],
        created=_utc(row["created"]) or datetime.now(UTC),
        updated=_utc(row["updated"]) or datetime.now(UTC),
        columns=[DatasetColumn(**c) for c in json.loads(row["columns"])],
    )


def _extract(row: dict[str, Any]) -> Extract:
    row["issues"] = [ConversionIssue(**i) for i in json.loads(row["issues"])]
    row["last_refresh"], row["next_refresh"] = _utc(row["last_refresh"]), _utc(row["next_refresh"])
    return Extract(**row)


def _analysis(row: dict[str, Any]) -> Analysis:
    return Analysis(
        id=row["id"],
        spec=AnalysisSpec.model_validate_json(row["spec"]),
        owner=row["owner"],
        created=_utc(row["created"]) or datetime.now(UTC),
        updated=_utc(row["updated"]) or datetime.now(UTC),
    )


def _dashboard(row: dict[str, Any]) -> Dashboard:
    return Dashboard(
        id=row["id"],
        name=row["name"],
        analysis_id=row["analysis_id"],
        definition=AnalysisSpec.model_validate_json(row["definition"]),
        version=row["version"],
        owner=row["owner"],
        published=_utc(row["published"]) or datetime.now(UTC),
    )
