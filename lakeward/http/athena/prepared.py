"""Athena's prepared-statement calls: each takes the checked request and calls ``SqlApi``."""

from __future__ import annotations

from lakeward.http.athena.shapes import epoch, page
from lakeward.query.api import SqlApi
from lakeward.query.model import JsonDict


def _put(api: SqlApi, r: JsonDict, *, create: bool) -> JsonDict:
    description = r.get("Description", "")
    statement = (r["StatementName"], r["WorkGroup"], r["QueryStatement"], description)
    api.put_prepared_statement(*statement, create=create)
    return {}


def create(api: SqlApi, r: JsonDict, _: str) -> JsonDict:
    return _put(api, r, create=True)


def update(api: SqlApi, r: JsonDict, _: str) -> JsonDict:
    return _put(api, r, create=False)


def get(api: SqlApi, r: JsonDict, _: str) -> JsonDict:
    found = api.get_prepared_statement(r["StatementName"], r["WorkGroup"])
    statement = {
        "StatementName": found.name,
        "QueryStatement": found.query,
        "WorkGroupName": found.workgroup,
        "LastModifiedTime": epoch(found.modified),
    }
    if found.description:
        statement["Description"] = found.description
    return {"PreparedStatement": statement}


def list_(api: SqlApi, r: JsonDict, _: str) -> JsonDict:
    names, token = page(api.list_prepared_statements(r["WorkGroup"]), r)
    summaries = [{"StatementName": n, "LastModifiedTime": epoch(m)} for n, m in names]
    return {"PreparedStatements": summaries} | token


def batch_get(api: SqlApi, r: JsonDict, principal: str) -> JsonDict:
    found, missing = [], []
    for name in r["PreparedStatementNames"]:
        try:
            found.append(get(api, {"StatementName": name, "WorkGroup": r["WorkGroup"]}, principal))
        except Exception as exc:  # noqa: BLE001 - reported per statement, as Athena does
            missing.append(
                {"StatementName": name, "ErrorCode": "INVALID_INPUT", "ErrorMessage": str(exc)}
            )
    return {
        "PreparedStatements": [f["PreparedStatement"] for f in found],
        "UnprocessedPreparedStatementNames": missing,
    }


def delete(api: SqlApi, r: JsonDict, _: str) -> JsonDict:
    api.delete_prepared_statement(r["StatementName"], r["WorkGroup"])
    return {}
