"""The settings model: one pydantic section per part of the stack, and ``Settings``.

How values are layered and where each came from is the loader's business (loader.py).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
)

STACK_FILE_NAME = "lakeward.toml"
STATE_FILE_NAME = "stack.json"
DEFAULT_DATA_DIR = ".lakeward"
ENV_PREFIX = "LAKEWARD_"
ENV_DATA_DIR = "LAKEWARD_DATA_DIR"
ENV_CONFIG = "LAKEWARD_CONFIG"
ENV_COVID_SOURCE = "LAKEWARD_COVID_SOURCE"

JHU_TIME_SERIES_URL = (
    "https://raw.githubusercontent.com/CSSEGISandData/COVID-19/master/"
    "csse_covid_19_data/csse_covid_19_time_series"
)

BUCKET_NAME = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class LakeSettings(_Section):
    root: str | None = Field(
        default=None, description="Lake root URI; default file://<data dir>/lake"
    )
    data_bucket: str = Field(default="lakeward-data", description="Bucket of the data zones")
    s3_endpoint_url: str | None = Field(
        default=None, description="S3 endpoint (MinIO, a test server); None means AWS"
    )
    s3_region: str | None = None
    s3_access_key_id: str | None = Field(
        default=None, description="None means the usual AWS credential chain"
    )
    s3_secret_access_key: str | None = None

    @field_validator("root")
    @classmethod
    def _known_scheme(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if not value.startswith(("file://", "s3://")):
            raise ValueError(f"must be a file:// or s3:// URI, not {value!r}")
        return value.rstrip("/")

    @field_validator("data_bucket")
    @classmethod
    def _bucket_name(cls, value: str) -> str:
        if not BUCKET_NAME.match(value):
            raise ValueError(
                f"{value!r} is not a valid bucket name (3-63 lower-case letters, digits, '.', '-')"
            )
        return value


# URL schemes a backend's metastore.url may use
DATABASE_URL_SCHEMES = {
    "postgres": ("postgresql", "postgres"),
    "mysql": ("mysql", "mariadb"),
    "mariadb": ("mariadb", "mysql"),
}


class MetastoreSettings(_Section):
    backend: Literal["derby", "postgres", "mysql", "mariadb"] = "derby"
    nodes: int = Field(default=1, ge=1, le=16, description="Thrift nodes over one database")
    url: str | None = Field(
        default=None,
        description="An existing database, e.g. postgresql://user[:password]@host:5432/dbname",
    )
    instance: str | None = Field(
        default=None, description="A managed database instance (lakeward db) to use instead"
    )
    host: str = Field(default="127.0.0.1", description="Address clients connect to")
    bind_address: str = Field(default="127.0.0.1", description="Address the nodes listen on")
    port: int | None = Field(
        default=None, ge=1, le=65535, description="Thrift port of node 1; None picks 9083 or up"
    )
    preferred_node: int | None = Field(
        default=None, ge=1, description="Node clients try first (lakeward metastore failover)"
    )
    heap: str = Field(default="768m", pattern=r"^\d+[kmg]$")
    start_timeout: float = Field(default=120.0, gt=0)
    lock_timeout: int = Field(
        default=60,
        ge=5,
        le=3600,
        description="Seconds after which a table lock whose writer died is released (Iceberg "
        "commits hold one without heartbeats, for well under a second)",
    )
    change_log_retention: int = Field(
        default=86400,
        ge=10,
        description="Seconds the metastore keeps its change log (NOTIFICATION_LOG) events; "
        "older ones are pruned, and a cache that missed them refills",
    )
    java_home: str | None = None

    @field_validator("nodes")
    @classmethod
    def _one_derby_node(cls, value: int, info: ValidationInfo) -> int:
        if value > 1 and info.data.get("backend") == "derby":
            raise ValueError(
                f"the derby backend serves one node (embedded Derby admits one process), "
                f"not {value}; use metastore.backend = postgres, mysql or mariadb for more"
            )
        return value

    @field_validator("url")
    @classmethod
    def _database_url(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None:
            return None
        backend = info.data.get("backend", "derby")
        if backend == "derby":
            raise ValueError("the derby backend takes no url; set metastore.backend too")
        schemes = DATABASE_URL_SCHEMES[backend]
        parsed = urlsplit(value)
        if parsed.scheme not in schemes or not parsed.hostname or len(parsed.path) < 2:
            raise ValueError(
                f"{hide_password(value)!r} is not a {backend} database URL like "
                f"{schemes[0]}://user[:password]@host:port/dbname"
            )
        return value

    @field_validator("instance")
    @classmethod
    def _url_or_instance(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is not None and info.data.get("url") is not None:
            raise ValueError("set metastore.url or metastore.instance, not both")
        if value is not None and info.data.get("backend", "derby") == "derby":
            raise ValueError("the derby backend takes no instance; set metastore.backend too")
        return value


def hide_password(url: str) -> str:
    parsed = urlsplit(url)
    if parsed.password is None:
        return url
    netloc = parsed.netloc.replace(f":{parsed.password}@", ":***@", 1)
    return parsed._replace(netloc=netloc).geturl()


class SparkSettings(_Section):
    master: str = "local[*]"
    driver_memory: str = Field(default="2g", pattern=r"^\d+[kmg]$")
    conf: dict[str, str] = Field(default_factory=dict, description="Extra Spark conf")
    lake_access: Literal["endpoint", "direct"] = Field(
        default="endpoint",
        description="How Spark reaches the embedded lake's s3:// names: through the stack's "
        "S3 endpoint with s3a, or (a local master only) straight from its files",
    )
    workers: int = Field(
        default=0,
        ge=0,
        le=64,
        description="Spark standalone workers `up` starts on this machine, with a master "
        "that becomes `master`; 0: none, `master` as given",
    )
    worker_cores: int = Field(default=1, ge=1, le=256, description="Cores of each worker")
    worker_memory: str = Field(default="2g", pattern=r"^\d+[kmg]$")
    cluster_host: str = Field(
        default="127.0.0.1", description="Address the started master and workers listen on"
    )

    @field_validator("master")
    @classmethod
    def _known_master(cls, value: str) -> str:
        if not re.match(
            r"^(local(\[(\*|\d+)(,\d+)?\])?|spark://.+|yarn|k8s://.+|mesos://.+)$", value
        ):
            raise ValueError(
                f"{value!r} is not a Spark master (local[*], spark://host:port, yarn, k8s://...)"
            )
        return value


class ServerSettings(_Section):
    host: str = "127.0.0.1"
    port: int | None = Field(
        default=None, ge=1, le=65535, description="HTTP port; None picks 8950 or the next free"
    )
    workers: int | None = Field(
        default=None,
        ge=1,
        le=64,
        description="HTTP worker processes behind the port (`lakeward serve`); "
        "None: one per CPU core",
    )
    poll_wait_ms: int | None = Field(
        default=None,
        ge=0,
        le=20_000,
        description="A GetQueryExecution of a query running in the answering process waits "
        "up to this long for it to end, so a client polling on a timer learns of the end at "
        "once; 0 answers at once, as Athena does; None: 1000",
    )
    standby: bool = Field(
        default=False,
        description="Keep a standby supervisor with its workers built, to take over at once "
        "when the serving one dies with its workers (the memory of as many workers again)",
    )

    @property
    def poll_wait_seconds(self) -> float:
        # None is saved as nothing in the stack's state, which an older lakeward reads too.
        return (1000 if self.poll_wait_ms is None else self.poll_wait_ms) / 1000


class LogsSettings(_Section):
    """The stack's process logs (<data dir>/run/*.log), rotated by the server."""

    max_bytes: int = Field(
        default=64 * 1024 * 1024,
        ge=64 * 1024,
        description="A log larger than this is copied to <name>.log.1 and emptied",
    )
    keep: int = Field(default=3, ge=0, le=100, description="Rotated copies kept per log")


class ApiSettings(_Section):
    """The access key pair API clients sign requests with (AWS Signature V4)."""

    access_key_id: str | None = Field(
        default=None, pattern=r"^[A-Z0-9]{16,128}$", description="None: generated by `up`"
    )
    secret_access_key: str | None = Field(default=None, min_length=16)
    region: str = "us-east-1"


class AccessSettings(_Section):
    database_url: str | None = Field(
        default=None,
        description="Where users, policies, secrets and the audit log live; "
        "None: SQLite files in <data dir>/access (e.g. postgresql://user@host/lakeward)",
    )
    audit_keep_days: int = Field(
        default=90,
        ge=0,
        description="Days an audit record stays in the database before it is sealed "
        "into an archive segment (verified with the rest); 0: it stays for good",
    )
    audit_archive: Path | None = Field(
        default=None,
        description="Directory of the audit log's sealed segments; "
        "None: <data dir>/access/audit-archive",
    )

    @field_validator("database_url")
    @classmethod
    def _known_database(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("sqlite:", "postgresql:", "postgresql+")):
            raise ValueError(f"must be a sqlite: or postgresql: URL, not {value!r}")
        return value


DATASET_NAME = r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$"


class ErasureDataset(_Section):
    """A data mapper: where a dataset of the lake lives, how to read it, where its user ids are."""

    name: str = Field(pattern=DATASET_NAME)
    prefix: str = Field(
        min_length=1, description="<bucket>/<key prefix> of the dataset's objects in the lake"
    )
    format: Literal["jsonl", "csv", "parquet", "filename", "sidecar"]
    compression: Literal["none", "gzip", "auto"] = Field(
        default="auto", description="auto: gzip when the key ends in .gz or the data does"
    )
    id_columns: list[str] = Field(
        default_factory=lambda: ["user_id"],
        min_length=1,
        description="Column names or JSON paths ($.user.id); several make a composite id",
    )


class ErasureRelational(_Section):
    """A relational storage layer: a table of a database and the column holding user ids."""

    name: str = Field(pattern=DATASET_NAME)
    url: str = Field(min_length=1, description="SQLAlchemy URL (sqlite:///..., postgresql://...)")
    database: str | None = Field(
        default=None, pattern=DATASET_NAME, description="Database part of locations; None: name"
    )
    table: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_.]{0,127}$")
    column: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")


class ErasureTable(_Section):
    """A Delta, Iceberg or Hudi table holding user ids: purged through its own format."""

    name: str = Field(pattern=DATASET_NAME)
    format: Literal["delta", "iceberg", "hudi"]
    location: str = Field(
        min_length=1,
        description="file:// URI of the table (Delta, Hudi); its identifier (namespace.table) "
        "for Iceberg",
    )
    catalog: Literal["sql", "metastore"] = Field(
        default="sql",
        description="Iceberg: metastore, a table of the stack's Hive Metastore (where the SQL "
        "service and Spark see it; location is database.table); sql, a SQL catalog",
    )
    catalog_url: str | None = Field(
        default=None,
        description="Iceberg: the SQL catalog's database URL (None: SQLite at <data dir>/"
        "erasure/), or the metastore's thrift:// URIs (None: the stack's own nodes)",
    )
    id_column: str = Field(default="user_id", min_length=1)


class ErasureSettings(_Section):
    database_url: str | None = Field(
        default=None,
        description="The erasure index; None: SQLite at <data dir>/erasure/index.db "
        "(e.g. postgresql://user@host/lakeward for scale)",
    )
    datasets: list[ErasureDataset] = Field(default_factory=list)
    relational: list[ErasureRelational] = Field(default_factory=list)
    tables: list[ErasureTable] = Field(default_factory=list)
    # The purge workflow: approval by email, then the purge.
    smtp_host: str | None = Field(default=None, description="None: approval emails are not sent")
    smtp_port: int = Field(default=25, ge=1, le=65535)
    smtp_tls: Literal["none", "starttls", "ssl"] = "none"
    smtp_username: str | None = None
    smtp_password: str | None = None
    mail_from: str = Field(default="lakeward@localhost", min_length=3)
    approvers: list[str] = Field(default_factory=list, description="Addresses approval goes to")
    link_expiry_hours: float = Field(default=72.0, gt=0, description="Approval links expire")
    public_url: str | None = Field(
        default=None, description="Base URL of the server in links; None: http://<server>"
    )
    webhook_url: str | None = Field(default=None, description="Outcomes are POSTed here too")
    purge_workers: int = Field(default=4, ge=1, le=64, description="Objects purged at once")
    run_worker: bool = Field(
        default=True, description="The server takes the workflow's steps (reports, purges) too"
    )

    @field_validator("database_url")
    @classmethod
    def _known_database(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("sqlite:", "postgresql:", "postgresql+")):
            raise ValueError(f"must be a sqlite: or postgresql: URL, not {value!r}")
        return value


class BiSettings(_Section):
    database_url: str | None = Field(
        default=None,
        description="Data sources, datasets, analyses and dashboards; None: SQLite at "
        "<data dir>/bi/bi.db (e.g. postgresql://user@host/lakeward)",
    )
    sharing_grants_data: bool = Field(
        default=False,
        description="QuickSight's behaviour: a dashboard shared with someone shows them its "
        "data even if they may not use its catalog (default: they need both)",
    )

    @field_validator("database_url")
    @classmethod
    def _known_database(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("sqlite:", "postgresql:", "postgresql+")):
            raise ValueError(f"must be a sqlite: or postgresql: URL, not {value!r}")
        return value


class CovidSettings(_Section):
    source: str = Field(
        default=JHU_TIME_SERIES_URL,
        description="Directory or URL holding the three JHU CSSE global time series",
    )
    database: str = Field(default="default", pattern=r"^[a-z_][a-z0-9_]*$")


class DatabasesSettings(_Section):
    """Managed database instances (lakeward db)."""

    maintenance_window: str = Field(
        default="Sun:03:00-Sun:03:30",
        description="When pending modifications are applied: ddd:hh24:mi-ddd:hh24:mi in UTC "
        "(weekly), or hh24:mi-hh24:mi (daily)",
    )

    @field_validator("maintenance_window")
    @classmethod
    def _window(cls, value: str) -> str:
        from lakeward.databases.maintenance import parse_window  # loaded only when needed

        return parse_window(value).text


class Settings(BaseModel):
    """The resolved settings of one stack."""

    model_config = ConfigDict(extra="forbid")

    data_dir: Path
    lake: LakeSettings = Field(default_factory=LakeSettings)
    metastore: MetastoreSettings = Field(default_factory=MetastoreSettings)
    spark: SparkSettings = Field(default_factory=SparkSettings)
    server: ServerSettings = Field(default_factory=ServerSettings)
    logs: LogsSettings = Field(default_factory=LogsSettings)
    api: ApiSettings = Field(default_factory=ApiSettings)
    access: AccessSettings = Field(default_factory=AccessSettings)
    covid: CovidSettings = Field(default_factory=CovidSettings)
    databases: DatabasesSettings = Field(default_factory=DatabasesSettings)
    erasure: ErasureSettings = Field(default_factory=ErasureSettings)
    bi: BiSettings = Field(default_factory=BiSettings)

    @property
    def lake_root(self) -> str:
        return self.lake.root or (self.data_dir / "lake").resolve().as_uri()

    @property
    def server_url(self) -> str:
        """Where the stack's HTTP server answers: the console, Athena's API and S3's."""
        return f"http://{self.server.host}:{self.server.port}"

    @property
    def state_file(self) -> Path:
        return self.data_dir / STATE_FILE_NAME

    def to_raw(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude={"data_dir"}, exclude_none=True)
