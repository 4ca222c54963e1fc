"""The in-memory catalog's lake for statement tests: a database ``sales`` with two tables
of the JHU files' confirmed cases, registered by DDL as a user would.

- ``cases``: country-level rows of three countries on three days;
- ``covid``: every row (provinces too) of France, Italy and Spain, every day.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from lakeward.query.service import QueryService
from tests.query.statements.lake import as_analyst, jhu_cases, jhu_series, put_table


@pytest.fixture
def sales(memory_service: QueryService, jhu_dir: Path) -> QueryService:
    cases = put_table(memory_service, "cases", jhu_cases(jhu_dir))
    covid = put_table(memory_service, "covid", jhu_series(jhu_dir))
    as_analyst(memory_service, "CREATE DATABASE sales")
    as_analyst(
        memory_service,
        "CREATE EXTERNAL TABLE cases (country string, day date, confirmed bigint) "
        f"STORED AS PARQUET LOCATION '{cases}'",
    )
    as_analyst(
        memory_service,
        "CREATE EXTERNAL TABLE covid (province_state string, country string, lat double, "
        f"date date, confirmed bigint) STORED AS PARQUET LOCATION '{covid}'",
    )
    return memory_service
