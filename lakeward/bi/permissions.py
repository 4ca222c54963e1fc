"""Who may do what to a BI object: owners, shares, and the caller's own policies.

A BI object is reachable by its owner (every action), by whoever it is shared
with (``Share``: viewers get the ``Describe``/``Pass``/``Query`` actions,
owners all of them), and by principals whose policies allow the action on its
ARN. A share acts like a resource-based policy in AWS: it allows unless the
caller's policies deny explicitly. Every decision goes through
``AccessControl.authorize`` and is audited.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from lakeward.access.arns import catalog_arn, quicksight_arn
from lakeward.access.control import AccessControl, Identity
from lakeward.bi.datasets import source_sql
from lakeward.bi.model import KIND_NAMES, DatasetSpec, DataSource, Kind, with_arn
from lakeward.bi.store import BiStore
from lakeward.errors import AccessDenied, InvalidRequest, ResourceNotFound
from lakeward.query.service import QueryService
from lakeward.query.sql.names import Names
from lakeward.query.sql.queries import parse_query
from lakeward.query.sql.tokens import QUERY_STARTS, Cursor, one_statement

# The quicksight:* actions the service asks for, per kind of object.
ACTIONS: dict[str, tuple[str, ...]] = {
    "datasource": ("CreateDataSource", "DescribeDataSource", "PassDataSource",
                   "UpdateDataSource", "DeleteDataSource", "UpdateDataSourcePermissions"),
    "dataset": ("CreateDataSet", "DescribeDataSet", "PassDataSet", "QueryDataSet",
                "UpdateDataSet", "DeleteDataSet", "CreateIngestion",
                "UpdateDataSetPermissions"),
    "analysis": ("CreateAnalysis", "DescribeAnalysis", "QueryAnalysis", "UpdateAnalysis",
                 "DeleteAnalysis", "UpdateAnalysisPermissions"),
    "dashboard": ("CreateDashboard", "DescribeDashboard", "QueryDashboard",
                  "ListDashboardVersions", "UpdateDashboard",
                  "UpdateDashboardPublishedVersion", "DeleteDashboard",
                  "UpdateDashboardPermissions"),
}  # fmt: skip
VIEWER_VERBS = ("Describe", "Pass", "Query", "List")
NOUNS = {"datasource": "DataSource", "dataset": "DataSet", "analysis": "Analysis",
         "dashboard": "Dashboard"}  # fmt: skip


class Owned(Protocol):
    id: str
    owner: str


OwnedT = TypeVar("OwnedT", bound=Owned)


@dataclass(frozen=True)
class Caller:
    """Who is calling, resolved once per call: the identity and the user's groups."""

    principal: str
    identity: Identity
    groups: tuple[str, ...]

    @property
    def name(self) -> str:
        return self.identity.name


class Gate:
    """The checks ``BiService`` makes before acting on an object."""

    def __init__(self, access: AccessControl, store: BiStore, queries: QueryService) -> None:
        self.access = access
        self.store = store
        self.queries = queries

    def caller(self, principal: str) -> Caller:
        identity = self.access.identify(principal)
        groups: tuple[str, ...] = ()
        if not identity.is_root and not identity.is_role:
            groups = tuple(self.access.principals.groups_of(identity.name))
        return Caller(principal, identity, groups)

    def role_of(self, caller: Caller, kind: Kind, resource_id: str, owner: str) -> str | None:
        """The caller's share on an object: ``owner``, ``viewer`` or None."""
        if owner == caller.name:
            return "owner"
        mine = {f"user/{caller.name}", *(f"group/{g}" for g in caller.groups)}
        roles = {s.role for s in self.store.shares(kind, resource_id) if s.principal in mine}
        return "owner" if "owner" in roles else "viewer" if roles else None

    def check(self, caller: Caller, kind: Kind, resource_id: str, owner: str, action: str) -> None:
        role = self.role_of(caller, kind, resource_id, owner)
        shared = role == "owner" or (role == "viewer" and action.startswith(VIEWER_VERBS))
        self.access.authorize(
            f"quicksight:{action}",
            quicksight_arn(kind, resource_id),
            principal=caller.principal,
            shared=shared,
        )

    def visible(self, caller: Caller, kind: Kind, resource_id: str, owner: str) -> bool:
        """Whether a list shows the object (asked without an audit record per row)."""
        action = f"quicksight:Describe{NOUNS[kind]}"
        decision = self.access.decide(caller.identity, action, quicksight_arn(kind, resource_id))
        if decision.decision == "explicitDeny":
            return False
        return decision.allowed or self.role_of(caller, kind, resource_id, owner) is not None

    def may(self, caller: Caller, kind: Kind, resource_id: str, owner: str, action: str) -> bool:
        """Whether ``check`` would allow ``action`` (asked without an audit record: for
        offering a button; the click is checked, and audited, by ``check``)."""
        decision = self.access.decide(
            caller.identity, f"quicksight:{action}", quicksight_arn(kind, resource_id)
        )
        if decision.decision == "explicitDeny":
            return False
        role = self.role_of(caller, kind, resource_id, owner)
        shared = role == "owner" or (role == "viewer" and action.startswith(VIEWER_VERBS))
        return decision.allowed or shared

    def listed(self, principal: str, kind: Kind) -> list[Any]:
        """The objects of a kind the caller may see, with their ARNs."""
        caller = self.caller(principal)
        return [
            with_arn(r, kind) for r in self.store.all(kind)
            if self.visible(caller, kind, r.id, r.owner)
        ]  # fmt: skip

    def get(
        self, caller: Caller, kind: Kind, resource_id: str, action: str,
        load: Callable[[str], OwnedT | None],
    ) -> OwnedT:  # fmt: skip
        """The object, if the caller may do ``action`` to it."""
        found = load(resource_id)
        if found is None:
            # Only a caller whose own policies allow the action learns that nothing is
            # there; anyone else is refused exactly as for an object they may not see.
            self.access.authorize(
                f"quicksight:{action}", quicksight_arn(kind, resource_id),
                principal=caller.principal,
            )  # fmt: skip
            raise ResourceNotFound(f"{KIND_NAMES[kind]} {resource_id} does not exist")
        self.check(caller, kind, resource_id, found.owner, action)
        return found

    def create(self, caller: Caller, kind: Kind, resource_id: str) -> None:
        self.access.authorize(
            f"quicksight:Create{NOUNS[kind]}",
            quicksight_arn(kind, resource_id),
            principal=caller.principal,
        )
        if self.store.exists(kind, resource_id):
            raise InvalidRequest(f"a {KIND_NAMES[kind]} with id {resource_id} exists already")

    def check_catalog(self, caller: Caller, source: DataSource, what: str) -> None:
        """The caller's own right to the data: ``lakeward:UseCatalog`` on the catalog."""
        arn = catalog_arn(source.catalog)
        try:
            self.access.authorize("lakeward:UseCatalog", arn, principal=caller.principal)
        except AccessDenied:
            raise AccessDenied(
                f"{what} reads the catalog {source.catalog}, which you may not use "
                f"(lakeward:UseCatalog on {arn}); ask an administrator for access"
            ) from None

    def check_data(self, caller: Caller, source: DataSource, spec: DatasetSpec, what: str) -> None:
        """The caller's own right to what a dataset reads, as if they ran its SQL themself.

        The query runs as the BI role; without this check, anyone who may use a
        data source could read through the role what their own policies deny
        them: ``lakeward:UseCatalog`` on every catalog and ``s3:GetObject`` on
        the data of every table the SQL reads.
        """
        self.check_catalog(caller, source, what)
        sql = source_sql(spec)
        if Cursor(one_statement(sql), sql).peek() not in QUERY_STARTS:
            # The SQL service also runs DDL and writes; a dataset only ever reads, and its
            # queries run as the BI role, whose rights must not write anything for anyone.
            first = sql.split(None, 1)[0].upper()
            raise InvalidRequest(
                f"{what}: a dataset's SQL must be a query (SELECT, WITH or VALUES); "
                f"{first} statements are not allowed"
            )
        names = Names(
            source.catalog.lower(),
            spec.database.lower(),
            frozenset(c.lower() for c in self.queries.catalogs.names()),
        )
        statement = parse_query(sql, names)
        for ref in statement.tables:
            if ref.catalog != source.catalog:
                other = DataSource("", "", ref.catalog, "", "", source.created)
                self.check_catalog(caller, other, what)
            location = self.queries.catalogs.catalog(ref.catalog).table(ref.database, ref.table)
            # The SQL service's own mapping of a lake location to its ARN.
            arn = self.queries.planner.lake_arn(location.location.rstrip("/") + "/*")
            if arn is None:
                continue
            try:
                self.access.authorize("s3:GetObject", arn, principal=caller.principal)
            except AccessDenied:
                raise AccessDenied(
                    f"{what} reads the table {ref}, whose data you may not read "
                    f"(s3:GetObject on {arn}); ask an administrator for access"
                ) from None

    def without_catalog(
        self, kind: Kind, resource_id: str, share_principal: str
    ) -> tuple[str, list[str]]:
        """The users a share with ``share_principal`` (``user/x`` or ``group/g``) reaches
        who may not use the catalog the object's data comes from: they would open it and
        see no data; with the catalog. A what-if of the recipients' policies, like IAM's
        policy simulator: nobody asked for anything yet, so nothing is audited."""
        catalog = self._catalog_of(kind, resource_id)
        if catalog is None:
            return "", []
        kind_of, _, name = share_principal.partition("/")
        users = [name] if kind_of == "user" else self.access.principals.members_of(name)
        arn = catalog_arn(catalog)
        return catalog, [
            u for u in users
            if not self.access.decide(Identity(u), "lakeward:UseCatalog", arn).allowed
        ]  # fmt: skip

    def _catalog_of(self, kind: Kind, resource_id: str) -> str | None:
        dataset_id: str | None = resource_id if kind == "dataset" else None
        if kind == "analysis":
            analysis = self.store.analysis(resource_id)
            dataset_id = analysis.spec.dataset_id if analysis else None
        elif kind == "dashboard":
            dashboard = self.store.dashboard(resource_id)
            dataset_id = dashboard.definition.dataset_id if dashboard else None
        dataset = self.store.dataset(dataset_id) if dataset_id else None
        source_id = resource_id if kind == "datasource" else (
            dataset.spec.data_source_id if dataset else None)  # fmt: skip
        source = self.store.data_source(source_id) if source_id else None
        return source.catalog if source else None
