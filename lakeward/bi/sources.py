"""Data sources: a catalog of the SQL service, validated with a test query as the BI role.

Part of ``BiService``; kept apart so that each module stays about one thing.
"""

from __future__ import annotations

from lakeward.bi.live import RoleQueries
from lakeward.bi.model import DataSource, check_id, now, with_arn
from lakeward.bi.permissions import Caller, Gate
from lakeward.bi.store import BiStore
from lakeward.errors import InvalidRequest, LakewardError
from lakeward.query.service import QueryService


class DataSources:
    """The data source calls of ``BiService``."""

    store: BiStore
    gate: Gate
    queries: QueryService
    role_queries: RoleQueries

    # -- data sources -------------------------------------------------------

    def list_data_sources(self, principal: str) -> list[DataSource]:
        found: list[DataSource] = self.gate.listed(principal, "datasource")
        return found

    def create_data_source(
        self, principal: str, source_id: str, name: str, catalog: str, workgroup: str = "primary"
    ) -> DataSource:
        """A data source over a catalog of the SQL service; validate it to use it."""
        caller = self.gate.caller(principal)
        check_id("data source id", source_id)
        if not name.strip() or len(name) > 128:
            raise InvalidRequest("name: give 1 to 128 characters")
        self.gate.create(caller, "datasource", source_id)
        if catalog.lower() not in {c.lower() for c in self.queries.catalogs.names()}:
            raise InvalidRequest(f"catalog: the SQL service has no catalog {catalog!r}")
        if workgroup not in {g.name for g in self.queries.store.workgroups()}:
            raise InvalidRequest(f"workgroup: the SQL service has no workgroup {workgroup!r}")
        source = DataSource(source_id, name.strip(), catalog.lower(), workgroup, caller.name, now())
        self.store.add("datasource", source)
        return with_arn(source, "datasource")

    def get_data_source(self, principal: str, source_id: str) -> DataSource:
        caller = self.gate.caller(principal)
        source = self.gate.get(
            caller, "datasource", source_id, "DescribeDataSource", self.store.data_source
        )
        return with_arn(source, "datasource")

    def update_data_source(
        self, principal: str, source_id: str, *, name: str | None = None,
        catalog: str | None = None, workgroup: str | None = None,
    ) -> DataSource:  # fmt: skip
        """Rename, or point at another catalog or workgroup (then validate it again)."""
        caller = self.gate.caller(principal)
        source = self.gate.get(
            caller, "datasource", source_id, "UpdateDataSource", self.store.data_source
        )
        if name is not None:
            if not name.strip() or len(name) > 128:
                raise InvalidRequest("name: give 1 to 128 characters")
            source.name = name.strip()
        if catalog is not None and catalog.lower() != source.catalog:
            if catalog.lower() not in {c.lower() for c in self.queries.catalogs.names()}:
                raise InvalidRequest(f"catalog: the SQL service has no catalog {catalog!r}")
            source.catalog = catalog.lower()
            source.status, source.status_message, source.validated = "UNVALIDATED", "", None
        if workgroup is not None and workgroup != source.workgroup:
            if workgroup not in {g.name for g in self.queries.store.workgroups()}:
                raise InvalidRequest(f"workgroup: the SQL service has no workgroup {workgroup!r}")
            source.workgroup = workgroup
            source.status, source.status_message, source.validated = "UNVALIDATED", "", None
        self.store.put("datasource", source)
        return with_arn(source, "datasource")

    def delete_data_source(self, principal: str, source_id: str) -> None:
        caller = self.gate.caller(principal)
        self.gate.get(caller, "datasource", source_id, "DeleteDataSource", self.store.data_source)
        users = [d.id for d in self.store.all("dataset") if d.spec.data_source_id == source_id]
        if users:
            raise InvalidRequest(
                f"data source {source_id} is used by dataset(s) {', '.join(users)}; "
                "delete them first"
            )
        self.store.delete("datasource", source_id)

    def validate_data_source(self, principal: str, source_id: str) -> DataSource:
        """Run a test query as the BI role; record and return VALID or INVALID with the reason.

        The test lists the catalog's databases and reads one row of a table, so
        both ``lakeward:UseCatalog`` and ``s3:GetObject`` on the data are tried: of the
        first table of each database, the first the role may read (a role is scoped to
        the data it serves; INVALID, with the first refusal, if it may read none).
        """
        caller = self.gate.caller(principal)
        source = self.gate.get(
            caller, "datasource", source_id, "UpdateDataSource", self.store.data_source
        )
        try:
            self.role_queries.run(source, f'SHOW DATABASES IN "{source.catalog}"')
            refused: LakewardError | None = None
            for table in self.role_queries.some_tables(source):
                try:
                    self.role_queries.run(
                        source, f'SELECT * FROM "{source.catalog}".{table} LIMIT 1'
                    )
                    break
                except LakewardError as exc:
                    refused = refused or exc
            else:  # no table read (or none at all)
                if refused is not None:
                    raise refused
            source.status, source.status_message = "VALID", "the test query succeeded"
        except LakewardError as exc:
            source.status, source.status_message = "INVALID", exc.message
        source.validated = now()
        self.store.put("datasource", source)
        return with_arn(source, "datasource")

    def _usable_source(self, caller: Caller, source_id: str) -> DataSource:
        source = self.gate.get(
            caller, "datasource", source_id, "PassDataSource", self.store.data_source
        )
        return source
