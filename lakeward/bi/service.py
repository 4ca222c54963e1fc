"""The BI service: data sources, datasets and their extracts, analyses, dashboards.

Every public method takes the calling principal (a user name, an access key
id, or ``root``) and asks ``AccessControl.authorize`` before acting, with the
``quicksight:*`` actions listed in ``ACTIONS``. A BI object is reachable by
its owner, by whoever it is shared with (``Share``: a user or a group, as
viewer or owner; a share acts like a resource-based policy, which an explicit
Deny in the caller's policies still overrides), and by principals whose own
policies allow the action on its ARN (``arn:lakeward:quicksight:::<kind>/<id>``).
A caller who may not see an object is refused the same way whether or not it
exists, so ids cannot be probed.

Data never flows around the SQL service: every dataset query runs through
``QueryService`` as the role ``bi-service-role``, with the service's checks
(parsing, catalogs, ``lakeward:UseCatalog``, ``s3:GetObject`` on the tables'
data). On top of that, a caller must be allowed to use the catalog themself to
read a dataset's rows, and, unless ``bi.sharing_grants_data`` is set, to view
a dashboard's data: sharing a dashboard never widens anyone's access to data.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal, TypeVar

import pyarrow as pa

from lakeward.access.control import AccessControl
from lakeward.bi.dashboards import AnalysesAndDashboards, Mode
from lakeward.bi.datasets import Shaped, apply_fields, source_sql
from lakeward.bi.extracts import ExtractFiles
from lakeward.bi.live import RoleQueries
from lakeward.bi.model import (
    Dataset,
    DatasetSpec,
    DataSource,
    Extract,
    Filter,
    Kind,
    Series,
    Share,
    Visual,
    check_id,
    now,
    parse,
    parse_filters,
    with_arn,
)
from lakeward.bi.permissions import NOUNS, Caller, Gate
from lakeward.bi.sources import DataSources
from lakeward.bi.store import BiStore
from lakeward.bi.values import DistinctValues
from lakeward.bi.visuals import compute_series
from lakeward.config import Settings
from lakeward.errors import InvalidRequest, LakewardError
from lakeward.query.service import QueryService
from lakeward.storage import Storage, load_storage

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True)
class Preview:
    """The first rows of a dataset, its fields, and the rows its conversions could not convert."""

    columns: list[dict[str, str]]
    rows: list[dict[str, Any]]
    row_count: int
    issues: list[dict[str, Any]]
    source: Literal["extract", "live"]

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


class BiService(DataSources, AnalysesAndDashboards, DistinctValues):
    """The BI core; the HTTP API, the console and ``lakeward up`` call it."""

    def __init__(
        self,
        settings: Settings,
        access: AccessControl,
        queries: QueryService,
        storage: Storage | None = None,
        *,
        owner: bool = False,
    ) -> None:
        """``owner``: this is the stack's server, which runs the scheduled refreshes."""
        self.settings = settings
        self.access = access
        self.queries = queries
        self.storage = storage or load_storage(settings)
        self.store = BiStore(settings.bi.database_url or settings.data_dir / "bi" / "bi.db")
        self.files = ExtractFiles(self.storage, settings.lake.data_bucket)
        self.gate = Gate(access, self.store, queries)
        self.role_queries = RoleQueries(settings, queries, self.storage)
        self._refreshing: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()
        self._inflight: dict[tuple[str, str], Future[Shaped]] = {}
        self._stop = threading.Event()
        self._scheduler: threading.Thread | None = None
        if owner:
            self._scheduler = threading.Thread(
                target=self._schedule, name="bi-refresh", daemon=True
            )
            self._scheduler.start()

    def close(self) -> None:
        self._stop.set()
        if self._scheduler is not None:
            self._scheduler.join(timeout=5)
        self.store.close()

    # -- datasets -----------------------------------------------------------

    def list_datasets(self, principal: str) -> list[Dataset]:
        found: list[Dataset] = self.gate.listed(principal, "dataset")
        return found

    def create_dataset(
        self, principal: str, dataset_id: str, spec: DatasetSpec | dict[str, Any]
    ) -> Dataset:
        """Create a dataset; a SPICE one is imported into its extract at once.

        The query runs first: a definition whose SQL is refused or whose field
        operations do not apply is not saved.
        """
        caller = self.gate.caller(principal)
        check_id("dataset id", dataset_id)
        spec = spec if isinstance(spec, DatasetSpec) else parse(DatasetSpec, spec, "dataset")
        self.gate.create(caller, "dataset", dataset_id)
        source = self._usable_source(caller, spec.data_source_id)
        self.gate.check_data(caller, source, spec, f"dataset {dataset_id}")
        shaped = self._shape(source, spec)
        created = now()
        dataset = Dataset(dataset_id, spec, caller.name, created, created, shaped.columns)
        self.store.add("dataset", dataset)
        if spec.import_mode == "SPICE":
            self._store_extract(dataset, shaped, time.monotonic())
        return with_arn(dataset, "dataset")

    def update_dataset(
        self, principal: str, dataset_id: str, spec: DatasetSpec | dict[str, Any]
    ) -> Dataset:
        """Replace the definition; a SPICE dataset's extract is refreshed with it."""
        caller = self.gate.caller(principal)
        dataset = self.gate.get(caller, "dataset", dataset_id, "UpdateDataSet", self.store.dataset)
        spec = spec if isinstance(spec, DatasetSpec) else parse(DatasetSpec, spec, "dataset")
        source = self._usable_source(caller, spec.data_source_id)
        self.gate.check_data(caller, source, spec, f"dataset {dataset_id}")
        started = time.monotonic()
        shaped = self._shape(source, spec)
        dataset.spec, dataset.updated, dataset.columns = spec, now(), shaped.columns
        self.store.put("dataset", dataset)
        if spec.import_mode == "SPICE":
            self._store_extract(dataset, shaped, started)
        return with_arn(dataset, "dataset")

    def get_dataset(self, principal: str, dataset_id: str) -> Dataset:
        caller = self.gate.caller(principal)
        return with_arn(
            self.gate.get(caller, "dataset", dataset_id, "DescribeDataSet", self.store.dataset),
            "dataset",
        )

    def delete_dataset(self, principal: str, dataset_id: str) -> None:
        caller = self.gate.caller(principal)
        self.gate.get(caller, "dataset", dataset_id, "DeleteDataSet", self.store.dataset)
        analyses = [a.id for a in self.store.all("analysis") if a.spec.dataset_id == dataset_id]
        dashboards = [
            d.id for d in self.store.all("dashboard") if d.definition.dataset_id == dataset_id
        ]
        if analyses or dashboards:
            users = [f"analysis {i}" for i in analyses] + [f"dashboard {i}" for i in dashboards]
            raise InvalidRequest(
                f"dataset {dataset_id} is used by {', '.join(users)}; delete those first"
            )
        self.store.delete("dataset", dataset_id)
        self.files.prune(dataset_id, keep=set(), grace=timedelta(0))

    def preview_dataset(
        self, principal: str, dataset: str | DatasetSpec | dict[str, Any], limit: int = 100
    ) -> Preview:
        """The first rows of a saved dataset (an id) or of a definition not saved yet."""
        caller = self.gate.caller(principal)
        if not 1 <= limit <= 10_000:
            raise InvalidRequest("limit must be between 1 and 10000")
        if isinstance(dataset, str):
            saved = self.gate.get(caller, "dataset", dataset, "QueryDataSet", self.store.dataset)
            source = self._usable_source(caller, saved.spec.data_source_id)
            self.gate.check_data(caller, source, saved.spec, f"dataset {saved.id}")
            table, columns, origin = self._rows(saved, source, "auto")
            extract = self.store.extract(saved.id)
            issues = extract.issues if extract and origin == "extract" else []
            shaped = Shaped(table, columns, list(issues))
        else:
            spec = (
                dataset
                if isinstance(dataset, DatasetSpec)
                else parse(DatasetSpec, dataset, "dataset")
            )
            source = self._usable_source(caller, spec.data_source_id)
            self.gate.check_data(caller, source, spec, "the dataset")
            shaped, origin = self._shape(source, spec), "live"
        head = shaped.table.slice(0, limit).to_pylist()
        return Preview(
            columns=[c.__dict__ for c in shaped.columns],
            rows=[{k: _plain(v) for k, v in row.items()} for row in head],
            row_count=shaped.table.num_rows,
            issues=[i.__dict__ for i in shaped.issues],
            source=origin,
        )

    # -- extracts -----------------------------------------------------------

    def get_extract(self, principal: str, dataset_id: str) -> Extract:
        caller = self.gate.caller(principal)
        self.gate.get(caller, "dataset", dataset_id, "DescribeDataSet", self.store.dataset)
        return self.store.extract(dataset_id) or Extract(dataset_id)

    def refresh_extract(self, principal: str, dataset_id: str) -> Extract:
        """Import the dataset into its extract now (QuickSight's CreateIngestion)."""
        caller = self.gate.caller(principal)
        dataset = self.gate.get(
            caller, "dataset", dataset_id, "CreateIngestion", self.store.dataset
        )
        if dataset.spec.import_mode != "SPICE":
            raise InvalidRequest(
                f"dataset {dataset_id} queries live (import_mode DIRECT_QUERY); "
                "set import_mode to SPICE to keep an extract"
            )
        source = self._usable_source(caller, dataset.spec.data_source_id)
        self.gate.check_data(caller, source, dataset.spec, f"dataset {dataset_id}")
        return self._refresh(dataset, source)

    def run_due_refreshes(self, when: datetime | None = None) -> list[str]:
        """Refresh the extracts whose scheduled time has come; the ids refreshed."""
        done = []
        for dataset_id in self.store.due_extracts(when or now()):
            dataset = self.store.dataset(dataset_id)
            source = self.store.data_source(dataset.spec.data_source_id) if dataset else None
            if dataset is None or source is None:
                continue
            try:
                self._refresh(dataset, source)
                done.append(dataset_id)
            except LakewardError as exc:
                log.warning("scheduled refresh of dataset %s failed: %s", dataset_id, exc)
        return done

    def _schedule(self) -> None:
        while not self._stop.wait(30):
            try:
                self.run_due_refreshes()
            except Exception:  # the scheduler must outlive one bad refresh
                log.exception("scheduled refreshes failed")

    def _refresh(self, dataset: Dataset, source: DataSource) -> Extract:
        with self._lock:
            lock = self._refreshing.setdefault(dataset.id, threading.Lock())
        if not lock.acquire(blocking=False):
            raise InvalidRequest(f"dataset {dataset.id} is being refreshed already")
        try:
            started = time.monotonic()
            try:
                shaped = self._shape(source, dataset.spec)
            except LakewardError as exc:
                failed = self.store.extract(dataset.id) or Extract(dataset.id)
                failed.status, failed.error = "FAILED", exc.message
                failed.next_refresh = _next(dataset)
                self.store.put("extract", failed)  # the previous file, if any, still serves
                raise
            self.store.set_columns(dataset.id, shaped.columns)
            return self._store_extract(dataset, shaped, started)
        finally:
            lock.release()

    def _store_extract(self, dataset: Dataset, shaped: Shaped, started: float) -> Extract:
        before = self.store.extract(dataset.id)
        uri, size = self.files.write(dataset.id, shaped.table)
        extract = Extract(
            dataset_id=dataset.id,
            status="COMPLETED",
            uri=uri,
            size_bytes=size,
            row_count=shaped.table.num_rows,
            last_refresh=now(),
            duration_ms=int((time.monotonic() - started) * 1000),
            issues=shaped.issues,
            next_refresh=_next(dataset),
        )
        self.store.put("extract", extract)
        current = self.store.extract(dataset.id)  # another process may have refreshed too
        keep = {uri, before.uri if before else "", current.uri if current else ""}
        self.files.prune(dataset.id, keep)
        return extract

    # -- rows ---------------------------------------------------------------

    def _shape(self, source: DataSource, spec: DatasetSpec) -> Shaped:
        rows = self.role_queries.run(source, source_sql(spec), spec.database)
        return apply_fields(rows, spec.fields)

    def _rows(
        self, dataset: Dataset, source: DataSource, mode: Mode
    ) -> tuple[pa.Table, list[Any], Literal["extract", "live"]]:
        extract = self.store.extract(dataset.id)
        use_extract = mode == "extract" or (
            mode == "auto" and dataset.spec.import_mode == "SPICE" and extract is not None
            and bool(extract.uri)
        )  # fmt: skip
        if use_extract:
            if extract is None or not extract.uri:
                raise InvalidRequest(f"dataset {dataset.id} has no extract yet; refresh it first")
            return self.files.read(extract.uri), dataset.columns, "extract"
        if mode not in ("auto", "live"):
            raise InvalidRequest(f"mode must be auto, extract or live, not {mode!r}")
        shaped = self._live(source, dataset.spec)
        return shaped.table, shaped.columns, "live"

    def _live(self, source: DataSource, spec: DatasetSpec) -> Shaped:
        """``_shape``, shared by callers asking for the same rows at the same moment.

        A dashboard's visuals load at once and each asks for the dataset's rows:
        one query answers them all. Nothing is kept once it is answered, so
        the next request queries again (live means live).
        """
        key = (source.id, spec.model_dump_json())
        with self._lock:
            running = self._inflight.get(key)
            if running is None:
                running = self._inflight[key] = Future()
                mine = True
            else:
                mine = False
        if not mine:
            return running.result()
        try:
            shaped = self._shape(source, spec)
        except BaseException as exc:
            running.set_exception(exc)
            raise
        finally:
            with self._lock:
                self._inflight.pop(key, None)
        running.set_result(shaped)
        return shaped

    def dataset_series(
        self, principal: str, dataset_id: str, visual: Visual | dict[str, Any],
        filters: Sequence[Filter | dict[str, Any]] = (), mode: Mode = "auto",
    ) -> Series:  # fmt: skip
        """The data of a visual not saved anywhere yet (while building an analysis)."""
        caller = self.gate.caller(principal)
        dataset = self.gate.get(caller, "dataset", dataset_id, "QueryDataSet", self.store.dataset)
        visual = visual if isinstance(visual, Visual) else parse(Visual, visual, "visual")
        source = self._usable_source(caller, dataset.spec.data_source_id)
        self.gate.check_data(caller, source, dataset.spec, f"dataset {dataset_id}")
        return self._series(dataset, source, visual, parse_filters(filters), mode)

    def _series(
        self,
        dataset: Dataset,
        source: DataSource,
        visual: Visual,
        filters: list[Filter],
        mode: Mode,
    ) -> Series:
        table, columns, origin = self._rows(dataset, source, mode)
        return compute_series(table, columns, visual, filters, origin)

    # -- sharing ------------------------------------------------------------

    def get_permissions(
        self, principal: str, kind: Kind, resource_id: str
    ) -> tuple[str, list[Share]]:
        """The object's owner (a user name, or root) and who it is shared with."""
        caller = self.gate.caller(principal)
        owner = self._load_any(caller, kind, resource_id, "Describe")
        return owner, self.store.shares(kind, resource_id)

    def set_permissions(
        self, principal: str, kind: Kind, resource_id: str, shares: Sequence[Share | dict[str, Any]]
    ) -> tuple[str, list[Share]]:
        """Replace who the object is shared with (its owner keeps it regardless)."""
        caller = self.gate.caller(principal)
        self._load_any(caller, kind, resource_id, "Update", suffix="Permissions")
        parsed = [s if isinstance(s, Share) else parse(Share, s, f"shares[{i}]")
                  for i, s in enumerate(shares)]  # fmt: skip
        for share in parsed:
            kind_of, _, name = share.principal.partition("/")
            known = (
                {u.name for u in self.access.principals.list_users()} if kind_of == "user"
                else {g.name for g in self.access.principals.list_groups()}
            )  # fmt: skip
            if name not in known:
                raise InvalidRequest(f"shares: there is no {kind_of} {name}")
        self.store.set_shares(kind, resource_id, parsed)
        return self.get_permissions(principal, kind, resource_id)

    def shared_without_data(
        self, kind: Kind, resource_id: str, share_principal: str
    ) -> tuple[str, list[str]]:
        """Who a share reaches that will not see the object's data: the catalog it comes
        from and the users among ``share_principal`` who may not use it (none for a
        dashboard when sharing grants its data, ``bi.sharing_grants_data``)."""
        if kind == "dashboard" and self.settings.bi.sharing_grants_data:
            return "", []
        return self.gate.without_catalog(kind, resource_id, share_principal)

    def may(
        self, principal: str, kind: Kind, resource_id: str, owner: str
    ) -> Callable[[str], bool]:
        """Which actions on an object to offer the caller (``may("DeleteDataSet")``); each
        is checked again, and audited, when asked for."""
        caller = self.gate.caller(principal)
        return lambda action: self.gate.may(caller, kind, resource_id, owner, action)

    def _load_any(self, caller: Caller, kind: Kind, resource_id: str, verb: str,
                  suffix: str = "") -> str:  # fmt: skip
        loaders: dict[str, Callable[[str], Any]] = {
            "datasource": self.store.data_source, "dataset": self.store.dataset,
            "analysis": self.store.analysis, "dashboard": self.store.dashboard,
        }  # fmt: skip
        if kind not in loaders:
            raise InvalidRequest(f"kind must be one of {', '.join(loaders)}, not {kind!r}")
        action = f"{verb}{NOUNS[kind]}{suffix}"
        found = self.gate.get(caller, kind, resource_id, action, loaders[kind])
        return str(found.owner)


def _next(dataset: Dataset) -> datetime | None:
    minutes = dataset.spec.refresh_interval_minutes
    return now() + timedelta(minutes=minutes) if minutes else None


def _plain(value: Any) -> Any:
    """A preview cell as JSON can carry it (dates and times as ISO 8601)."""
    return value.isoformat() if hasattr(value, "isoformat") else value
