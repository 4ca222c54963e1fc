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
from dataclasses import asdict
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel
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
from sqlalchemy.engine import Connection, Engine, RowMapping
from sqlalchemy.exc import IntegrityError

from lakeward.bi.model import (
    KIND_NAMES,
    Analysis,
    AnalysisSpec,
    ConversionIssue,
    Dashboard,
    DashboardVersion,
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
from lakeward.errors import InvalidRequest
from lakeward.sqlstate import as_utc_or_none, migrate, open_engine, writer

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

dashboard_versions = Table(
    "bi_dashboard_versions",
    metadata,
    Column("dashboard_id", String(128), primary_key=True),
    Column("version", Integer, primary_key=True),
    Column("name", String(128), nullable=False),
    Column("analysis_id", String(128)),
    Column("definition", Text, nullable=False),
    Column("publisher", String(64), nullable=False),
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


def _v2(conn: Connection) -> None:
    """Every published version kept: the versions table, with each dashboard's current one."""
    dashboard_versions.create(conn, checkfirst=True)  # v1 made it on a database made now
    for row in conn.execute(select(dashboards)).mappings():
        known = select(dashboard_versions.c.version).where(
            dashboard_versions.c.dashboard_id == row["id"],
            dashboard_versions.c.version == row["version"],
        )
        if conn.execute(known).first() is None:
            conn.execute(
                insert(dashboard_versions).values(
                    dashboard_id=row["id"], version=row["version"], name=row["name"],
                    analysis_id=row["analysis_id"], definition=row["definition"],
                    publisher=row["owner"], published=row["published"],
                )
            )  # fmt: skip


MIGRATIONS: list[Callable[[Connection], None]] = [_v1, _v2]


def _columns(text: str) -> list[DatasetColumn]:
    return [DatasetColumn(**c) for c in json.loads(text)]


def _issues(text: str) -> list[ConversionIssue]:
    return [ConversionIssue(**i) for i in json.loads(text)]


# Per kind of record: its table, its class, and how the JSON columns are read back.
_RECORDS: dict[str, tuple[Table, type[Any], dict[str, Callable[[str], Any]]]] = {
    "datasource": (data_sources, DataSource, {}),
    "dataset": (datasets, Dataset,
                {"spec": DatasetSpec.model_validate_json, "columns": _columns}),
    "extract": (extracts, Extract, {"issues": _issues}),
    "analysis": (analyses, Analysis, {"spec": AnalysisSpec.model_validate_json}),
    "dashboard": (dashboards, Dashboard, {"definition": AnalysisSpec.model_validate_json}),
    "dashboard_version": (dashboard_versions, DashboardVersion,
                          {"definition": AnalysisSpec.model_validate_json}),
}  # fmt: skip


def _encode(table: Table, record: Any) -> dict[str, Any]:
    values = {}
    for column in table.c:
        value = getattr(record, column.name)
        if isinstance(value, BaseModel):
            value = value.model_dump_json()
        elif isinstance(value, list):
            value = json.dumps([asdict(item) for item in value])
        values[column.name] = value
    return values


def _decode(kind: str, row: RowMapping) -> Any:
    table, record, parsers = _RECORDS[kind]
    values = {}
    for column in table.c:
        value = row[column.name]
        if column.name in parsers:
            value = parsers[column.name](value)
        elif isinstance(column.type, DateTime):
            value = as_utc_or_none(value)
        values[column.name] = value
    return record(**values)


class BiStore:
    def __init__(self, url_or_path: str | Path) -> None:
        self.engine: Engine = open_engine(url_or_path)
        migrate(self.engine, "bi", MIGRATIONS, label="BI")
        self._writer = writer(self.engine)

    def close(self) -> None:
        self.engine.dispose()

    # -- records, by kind ---------------------------------------------------

    def put(self, kind: str, record: Any) -> None:
        """Insert or replace a record of a kind (datasource, dataset, extract, ...)."""
        table = _RECORDS[kind][0]
        key = table.primary_key.columns.values()[0]
        values = _encode(table, record)
        with self._writer.begin() as conn:
            if conn.execute(select(key).where(key == values[key.name])).first() is None:
                conn.execute(insert(table).values(**values))
            else:
                conn.execute(update(table).where(key == values[key.name]).values(**values))

    def add(self, kind: str, record: Any) -> None:
        """Insert a new record; ``InvalidRequest`` if one with its id exists (even if it was
        created a moment ago by another request)."""
        table = _RECORDS[kind][0]
        try:
            with self._writer.begin() as conn:
                conn.execute(insert(table).values(**_encode(table, record)))
        except IntegrityError:
            raise InvalidRequest(
                f"a {KIND_NAMES[kind]} with id {record.id} exists already"
            ) from None

    def get(self, kind: str, resource_id: str) -> Any:
        table = _RECORDS[kind][0]
        key = table.primary_key.columns.values()[0]
        with self.engine.connect() as conn:
            row = conn.execute(select(table).where(key == resource_id)).mappings().first()
        return _decode(kind, row) if row is not None else None

    def all(self, kind: str) -> list[Any]:
        table = _RECORDS[kind][0]
        key = table.primary_key.columns.values()[0]
        with self.engine.connect() as conn:
            rows = conn.execute(select(table).order_by(key)).mappings().all()
        return [_decode(kind, row) for row in rows]

    def exists(self, kind: Kind, resource_id: str) -> bool:
        return self.get(kind, resource_id) is not None

    def delete(self, kind: Kind, resource_id: str) -> bool:
        table = _RECORDS[kind][0]
        with self._writer.begin() as conn:
            gone = conn.execute(delete(table).where(table.c.id == resource_id)).rowcount > 0
            conn.execute(
                delete(permissions).where(
                    permissions.c.kind == kind, permissions.c.resource_id == resource_id
                )
            )
            if kind == "dataset":
                conn.execute(delete(extracts).where(extracts.c.dataset_id == resource_id))
            if kind == "dashboard":
                conn.execute(
                    delete(dashboard_versions).where(
                        dashboard_versions.c.dashboard_id == resource_id
                    )
                )
        return gone

    # -- dashboard versions -------------------------------------------------

    def publish(self, dashboard: Dashboard, publisher: str, *, new: bool) -> None:
        """Keep ``dashboard`` as a version of its own and make it the one shown, at once."""
        version = DashboardVersion(
            dashboard.id, dashboard.version, dashboard.name, dashboard.analysis_id,
            dashboard.definition, publisher, dashboard.published,
        )  # fmt: skip
        try:
            with self._writer.begin() as conn:
                if new:
                    conn.execute(insert(dashboards).values(**_encode(dashboards, dashboard)))
                else:
                    conn.execute(
                        update(dashboards).where(dashboards.c.id == dashboard.id)
                        .values(**_encode(dashboards, dashboard))
                    )  # fmt: skip
                conn.execute(
                    insert(dashboard_versions).values(**_encode(dashboard_versions, version))
                )
        except IntegrityError:
            raise InvalidRequest(
                f"dashboard {dashboard.id} version {dashboard.version} was published a moment "
                "ago by another request; publish again"
            ) from None

    def dashboard_versions(self, dashboard_id: str) -> list[DashboardVersion]:
        query = (
            select(dashboard_versions)
            .where(dashboard_versions.c.dashboard_id == dashboard_id)
            .order_by(dashboard_versions.c.version)
        )
        with self.engine.connect() as conn:
            rows = conn.execute(query).mappings().all()
        return [_decode("dashboard_version", row) for row in rows]

    # Typed shorthands, used as loaders by the permission checks.

    def data_source(self, source_id: str) -> DataSource | None:
        found: DataSource | None = self.get("datasource", source_id)
        return found

    def dataset(self, dataset_id: str) -> Dataset | None:
        found: Dataset | None = self.get("dataset", dataset_id)
        return found

    def extract(self, dataset_id: str) -> Extract | None:
        found: Extract | None = self.get("extract", dataset_id)
        return found

    def analysis(self, analysis_id: str) -> Analysis | None:
        found: Analysis | None = self.get("analysis", analysis_id)
        return found

    def dashboard(self, dashboard_id: str) -> Dashboard | None:
        found: Dashboard | None = self.get("dashboard", dashboard_id)
        return found

    def set_columns(self, dataset_id: str, columns: list[DatasetColumn]) -> None:
        with self._writer.begin() as conn:
            conn.execute(
                update(datasets)
                .where(datasets.c.id == dataset_id)
                .values(columns=json.dumps([asdict(c) for c in columns]))
            )

    def due_extracts(self, now: datetime) -> list[str]:
        query = select(extracts.c.dataset_id).where(
            extracts.c.next_refresh.is_not(None),
            extracts.c.next_refresh <= now,
            extracts.c.status != "RUNNING",
        )
        with self.engine.connect() as conn:
            return [r[0] for r in conn.execute(query)]

    # -- permissions --------------------------------------------------------

    def shares(self, kind: Kind, resource_id: str) -> list[Share]:
        query = (
            select(permissions.c.principal, permissions.c.role)
            .where(permissions.c.kind == kind, permissions.c.resource_id == resource_id)
            .order_by(permissions.c.principal)
        )
        with self.engine.connect() as conn:
            rows = conn.execute(query).all()
        return [Share(principal=principal, role=role) for principal, role in rows]

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
