"""The seed's BI objects: the COVID-19 data source, dataset and dashboard.

``lakeward up`` calls ``seed_bi`` once the covid tables are loaded. The first
time, it does the seed's manual step (attaching the metastore-access and
bucket-read policies to ``bi-service-role``), then creates the data source
``demo_hive_metastore``, the dataset ``covid-19`` from ``covid-19.sql``
imported into its extract, and the dashboard "COVID-19 cases", shared with
``DataEngineerGroup``. Each object is created only if it is missing, and the
role's policies are attached only together with the data source, so an
administrator's ``lakeward iam detach-role-policy`` is not undone by a later
``up``.
"""

from __future__ import annotations

from importlib import resources
from typing import Any

from lakeward.access import ROOT
from lakeward.access.arns import arn, workgroup_arn
from lakeward.access.control import AccessControl
from lakeward.access.seed import BI_ROLE, CATALOG
from lakeward.bi.model import AnalysisSpec, DatasetSpec, Share
from lakeward.bi.service import BiService
from lakeward.config import Settings
from lakeward.errors import StackError
from lakeward.query.service import QueryService

SOURCE_ID = "demo_hive_metastore"
DATASET_ID = "covid-19"
DASHBOARD_ID = "covid-19-cases"
DASHBOARD_NAME = "COVID-19 cases"
GROUP = "DataEngineerGroup"
LINE_COUNTRIES = ["US", "Italy", "India", "Brazil", "Spain", "United Kingdom"]
ROLE_POLICIES = ["HiveMetastoreDataSourceAccessPolicy", "DataBucketReadAccessPolicy"]
ROLE_ATHENA_POLICY = "BiServiceAthenaAccess"
AUTHOR_POLICY = "BiAuthorAccessPolicy"
RATE_FORMAT = {"style": "percent", "decimals": 2}  # the map's tooltip as the line's axis


def covid_sql() -> str:
    return resources.files("lakeward").joinpath("resources/covid-19.sql").read_text()


def author_policy() -> dict[str, Any]:
    """Lets a group create BI objects; reading others' objects comes from sharing."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "CreateBiObjects",
                "Effect": "Allow",
                "Action": [
                    "quicksight:CreateDataSource", "quicksight:CreateDataSet",
                    "quicksight:CreateAnalysis", "quicksight:CreateDashboard",
                ],
                "Resource": [arn("quicksight", "*")],
            }
        ],
    }  # fmt: skip


def role_athena_policy() -> dict[str, Any]:
    """What the BI role needs of Athena itself (QuickSight's service role has it built in)."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "RunQueriesInPrimary",
                "Effect": "Allow",
                "Action": [
                    "athena:StartQueryExecution", "athena:GetQueryExecution",
                    "athena:GetQueryResults", "athena:StopQueryExecution",
                ],
                "Resource": [workgroup_arn("primary")],
            }
        ],
    }  # fmt: skip


def dataset_spec(database: str) -> DatasetSpec:
    return DatasetSpec.model_validate(
        {
            "name": "COVID-19 cases per country",
            "data_source_id": SOURCE_ID,
            "database": database,
            "sql": covid_sql(),
            "fields": [
                {"op": "convert", "field": "date", "to": "date", "format": "yyyy-MM-dd"},
                {"op": "geo", "name": "location", "latitude": "lat", "longitude": "lon"},
                {"op": "computed", "name": "mortality_rate", "expression": "deaths / confirmed"},
            ],
            "import_mode": "SPICE",
            "refresh_interval_minutes": 24 * 60,
        }
    )


def dashboard_spec() -> AnalysisSpec:
    return AnalysisSpec.model_validate(
        {
            "name": DASHBOARD_NAME,
            "dataset_id": DATASET_ID,
            "sheets": [
                {
                    "id": "cases",
                    "title": "Cases",
                    "visuals": [
                        {
                            "id": "map",
                            "type": "map",
                            "title": "Confirmed cases per country",
                            "geo": "location",
                            "size": "confirmed",
                            "color": "country",
                            "tooltips": ["confirmed", "deaths", "recovered", "mortality_rate"],
                            "formats": {"mortality_rate": RATE_FORMAT},
                            "filters": [
                                {
                                    "type": "time_range",
                                    "field": "date",
                                    "start": "2020-09-10T00:00:00",
                                    "end": "2020-09-11T00:00:00",
                                }
                            ],
                        },
                        {
                            "id": "mortality",
                            "type": "line",
                            "title": "Mortality rate (deaths / confirmed)",
                            "x": "date",
                            "y": "mortality_rate",
                            "color": "country",
                            "aggregation": "avg",
                            "limit": 100_000,
                            "y_title": "Mortality rate",
                            "formats": {"mortality_rate": RATE_FORMAT},
                            "filters": [
                                {"type": "category", "field": "country", "values": LINE_COUNTRIES}
                            ],
                        },
                    ],
                }
            ],
        }
    )


def attach_role_policies(access: AccessControl) -> None:
    """The seed's manual step: give the BI role the catalog and the bucket."""
    principals = access.principals
    attached = {name for name, _doc in principals.policies_for_role(BI_ROLE)}
    if ROLE_ATHENA_POLICY not in attached:
        principals.put_role_policy(BI_ROLE, ROLE_ATHENA_POLICY, role_athena_policy())
    for policy in ROLE_POLICIES:
        if policy not in attached:
            principals.attach_role_policy(BI_ROLE, policy)


def seed_bi(settings: Settings, access: AccessControl) -> dict[str, str]:
    """Create the seed's BI objects if the data source is not there yet; the outputs."""
    outputs = {"bi_data_source": SOURCE_ID, "bi_dataset": DATASET_ID,
               "bi_dashboard": DASHBOARD_ID}  # fmt: skip
    queries = QueryService(settings, access=access)
    service = BiService(settings, access, queries)
    try:
        principals = access.principals
        if AUTHOR_POLICY not in {p.name for p in principals.list_policies()}:
            principals.create_policy(AUTHOR_POLICY, author_policy(), "Create BI objects")
            principals.attach_group_policy(GROUP, AUTHOR_POLICY)
        viewers = [Share(principal=f"group/{GROUP}", role="viewer")]
        store = service.store
        if store.data_source(SOURCE_ID) is None:
            attach_role_policies(access)
            service.create_data_source(ROOT, SOURCE_ID, "Hive metastore (demo)", CATALOG)
            checked = service.validate_data_source(ROOT, SOURCE_ID)
            if checked.status != "VALID":
                raise StackError(
                    f"the data source {SOURCE_ID} is not valid: {checked.status_message}"
                )
            service.set_permissions(ROOT, "datasource", SOURCE_ID, viewers)
        if store.dataset(DATASET_ID) is None:
            service.create_dataset(ROOT, DATASET_ID, dataset_spec(settings.covid.database))
            service.set_permissions(ROOT, "dataset", DATASET_ID, viewers)
        if store.analysis(DASHBOARD_ID) is None:
            service.create_analysis(ROOT, DASHBOARD_ID, dashboard_spec())
        if store.dashboard(DASHBOARD_ID) is None:
            service.publish_dashboard(ROOT, DASHBOARD_ID, DASHBOARD_ID, DASHBOARD_NAME)
            service.set_permissions(ROOT, "dashboard", DASHBOARD_ID, viewers)
        return outputs
    finally:
        service.close()
        queries.close()
