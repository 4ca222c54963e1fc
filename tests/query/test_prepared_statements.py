"""Prepared statements, as Athena keeps them: PREPARE, EXECUTE ... USING, ExecutionParameters,
DEALLOCATE PREPARE, and the prepared-statement API calls, through boto3."""

from __future__ import annotations

import uuid
from typing import Any

import boto3
import pytest

from lakeward.config import Settings
from tests.query.support import api_failed, api_ok, credentials, endpoint

pytestmark = pytest.mark.spark


def athena(stack: Settings) -> Any:
    return boto3.client("athena", endpoint_url=endpoint(stack), **credentials(stack))


def test_prepare_execute_and_deallocate(stack: Settings) -> None:
    client = athena(stack)
    name = f"deaths_{uuid.uuid4().hex[:8]}"
    api_ok(
        client,
        f"PREPARE {name} FROM SELECT max(deaths) FROM covid_deaths WHERE country = ? AND date <= ?",
    )
    direct = api_ok(
        client,
        "SELECT max(deaths) FROM covid_deaths WHERE country = 'Iceland' "
        "AND date <= DATE '2021-06-30'",
    )["rows"]
    using = api_ok(client, f"EXECUTE {name} USING 'Iceland', DATE '2021-06-30'")["rows"]
    assert using == direct and int(direct[1][0]) > 0
    started = client.start_query_execution(
        QueryString=f"EXECUTE {name}", ExecutionParameters=["'Iceland'", "DATE '2021-06-30'"]
    )
    assert started["QueryExecutionId"]
    with pytest.raises(client.exceptions.InvalidRequestException, match="expected 2 but found 1"):
        client.start_query_execution(QueryString=f"EXECUTE {name} USING 'Iceland'")
    listed = client.list_prepared_statements(WorkGroup="primary")["PreparedStatements"]
    assert name in {p["StatementName"] for p in listed}
    api_ok(client, f"DEALLOCATE PREPARE {name}")
    with pytest.raises(client.exceptions.InvalidRequestException, match="was not found"):
        client.start_query_execution(
            QueryString=f"EXECUTE {name} USING 'Iceland', DATE '2021-06-30'"
        )
    reason = api_failed(client, f"DEALLOCATE PREPARE {name}")
    assert "was not found" in reason


def test_the_prepared_statement_api(stack: Settings) -> None:
    client = athena(stack)
    name = f"by_country_{uuid.uuid4().hex[:8]}"
    text = "SELECT count(*) FROM covid_deaths WHERE country = ?"
    client.create_prepared_statement(
        StatementName=name, WorkGroup="primary", QueryStatement=text, Description="rows of one"
    )
    with pytest.raises(client.exceptions.InvalidRequestException, match="already exists"):
        client.create_prepared_statement(
            StatementName=name, WorkGroup="primary", QueryStatement=text
        )
    got = client.get_prepared_statement(StatementName=name, WorkGroup="primary")[
        "PreparedStatement"
    ]
    assert (got["QueryStatement"], got["WorkGroupName"], got["Description"]) == (
        text,
        "primary",
        "rows of one",
    )
    assert (
        api_ok(client, f"EXECUTE {name} USING 'Iceland'")["rows"][1:]
        == api_ok(client, "SELECT count(*) FROM covid_deaths WHERE country = 'Iceland'")["rows"][1:]
    )
    with pytest.raises(
        client.exceptions.InvalidRequestException, match="line 1:1: mismatched input 'SELEC'"
    ):
        client.update_prepared_statement(
            StatementName=name, WorkGroup="primary", QueryStatement="SELEC 1"
        )
    client.delete_prepared_statement(StatementName=name, WorkGroup="primary")
    with pytest.raises(client.exceptions.ResourceNotFoundException):
        client.get_prepared_statement(StatementName=name, WorkGroup="primary")
