"""The whole erasure flow on a generated lake, with real email and approval links.

request → report → approval email (a real SMTP server) → link page (GET shows,
POST approves) → purge in every format → verification → certificate → outcome
email; on SQLite and on PostgreSQL (index, requests and the relational layer).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from lakeward.erasure import report
from lakeward.erasure.requests import (
    AWAITING_APPROVAL,
    COMPLETED,
    REJECTED,
    REPORT_READY,
)
from lakeward.erasure.workflow import ErasureWorkflow
from lakeward.http.erasure_requests import erasure_requests_router
from lakeward.storage import load_storage
from tests.erasure.workflow_helpers import (
    APPROVERS,
    Mailbox,
    body_of,
    busiest_users,
    fingerprint,
    make_lake,
    remaining,
    smtp_server,
    workflow_settings,
)


@pytest.fixture(scope="module")
def lake(
    db_backend: str, service_db: str | None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Path, Mailbox, int, str | None, str]]:
    """A generated, indexed lake; on PostgreSQL the index, requests and shop tables live there."""
    data_dir = tmp_path_factory.mktemp(f"erasure-{db_backend}")
    with smtp_server() as (mailbox, port):
        settings = workflow_settings(data_dir, port, service_db)
        database_url = make_lake(settings, database_url=service_db)
        yield data_dir, mailbox, port, service_db, database_url


def link_parts(link: str) -> tuple[str, str]:
    parts = urlsplit(link)
    return parts.path, parts.query.removeprefix("token=")


def test_request_to_certificate_with_email_approval(
    lake: tuple[Path, Mailbox, int, str | None, str],
) -> None:
    data_dir, mailbox, port, url, database_url = lake
    settings = workflow_settings(data_dir, port, url)
    flow = ErasureWorkflow(settings)
    storage = load_storage(settings)
    bucket = settings.lake.data_bucket
    gone = busiest_users(settings, 2)
    before = fingerprint(storage, bucket, database_url, set(gone))
    assert remaining(storage, bucket, database_url, set(gone)) > 0
    first = len(mailbox.messages)

    created, joined = flow.request(gone[:1], "dpo@example.com", contact="subject@example.com")
    again, joined_again = flow.request(gone, "dpo@example.com")
    assert not joined and joined_again and again.id == created.id
    assert set(again.user_ids) == set(gone)

    flow.run_pending()
    assert flow.store.get(created.id).state == AWAITING_APPROVAL
    [mail] = mailbox.wait_for(first + 1)[first:]
    assert set(mail["X-Rcpt"].split(", ")) == set(APPROVERS)
    saved = json.loads(storage.get(bucket, report.report_prefix(created.id) + "report.json"))
    assert saved["totals"]["objects"] > 10 and saved["layers"]["database"]
    # Objects are named as every S3 tool names them, in the report and the certificate.
    assert all(e["uri"].startswith(f"s3://{bucket}/") for e in saved["layers"]["lake"])
    assert report.digest(report.encode(saved)) == flow.store.get(created.id).report_digest
    for name in ("report.txt", "report.html"):
        assert gone[0] in storage.get(bucket, report.report_prefix(created.id) + name).decode()

    app = FastAPI()
    app.include_router(erasure_requests_router(flow, credentials=None))  # type: ignore[arg-type]
    client = TestClient(app)
    path, token = link_parts(mailbox.links(mail)["approve"])
    page = client.get(path, params={"token": token})
    assert page.status_code == 200 and "Approve this erasure" in page.text
    assert flow.store.get(created.id).state == AWAITING_APPROVAL  # a GET changes nothing
    done = client.post(path, data={"token": token})
    assert done.status_code == 200 and "APPROVED" in done.text
    replay = client.post(path, data={"token": token})
    assert replay.status_code == 403

    flow.run_pending()

    final = flow.store.get(created.id)
    assert final.state == COMPLETED, flow.store.history(created.id)
    assert remaining(storage, bucket, database_url, set(gone)) == 0
    assert fingerprint(storage, bucket, database_url, set(gone)) == before
    assert all(not holdings for holdings in flow.index.store.find(gone).values())
    certificate = json.loads(
        storage.get(bucket, report.report_prefix(created.id) + "certificate.json")
    )
    assert certificate["state"] == COMPLETED
    assert certificate["user_id_sha256"] == [report.hash_id(u) for u in final.user_ids]
    assert gone[0] not in json.dumps(certificate)
    assert certificate["index_entries_remaining"] == 0
    assert all(o["uri"].startswith(f"s3://{bucket}/") for o in certificate["objects"])
    rewritten = [o for o in certificate["objects"] if o["action"] == "rewritten"]
    assert rewritten and all(o["before_sha256"] != o["after_sha256"] for o in rewritten)
    assert all(o["remaining"] == 0 for o in certificate["objects"] + certificate["tables"])
    assert certificate["approver"].startswith("approval link")
    outcome = mailbox.wait_for(first + 2)[first + 1]
    assert "COMPLETED" in outcome["Subject"]
    recipients = set(outcome["X-Rcpt"].split(", "))
    assert {"dpo@example.com", "subject@example.com", *APPROVERS} <= recipients
    assert "COMPLETED" in body_of(outcome)
    flow.close()


def test_reject_and_dry_run_purge_nothing(lake: tuple[Path, Mailbox, int, str | None, str]) -> None:
    data_dir, mailbox, port, url, database_url = lake
    settings = workflow_settings(data_dir, port, url)
    flow = ErasureWorkflow(settings)
    storage = load_storage(settings)
    bucket = settings.lake.data_bucket
    users = busiest_users(settings, 4)[2:]
    before = fingerprint(storage, bucket, database_url, set())

    dry, _ = flow.request(users[:1], "dpo@example.com", dry_run=True)
    first = len(mailbox.messages)
    rejected, _ = flow.request(users[1:], "dpo@example.com")
    flow.run_pending()
    assert flow.store.get(dry.id).state == REPORT_READY  # a dry run stops at its report
    assert storage.exists(bucket, report.report_prefix(dry.id) + "report.json")
    [mail] = mailbox.wait_for(first + 1)[first:]

    app = FastAPI()
    app.include_router(erasure_requests_router(flow, credentials=None))  # type: ignore[arg-type]
    client = TestClient(app)
    path, token = link_parts(mailbox.links(mail)["reject"])
    assert "Reject this erasure" in client.get(path, params={"token": token}).text
    assert "REJECTED" in client.post(path, data={"token": token}).text
    approve_path, approve_token = link_parts(mailbox.links(mail)["approve"])
    late = client.get(approve_path, params={"token": approve_token})
    assert "REJECTED" in late.text  # the other link shows the state, changes nothing
    flow.run_pending()

    assert flow.store.get(rejected.id).state == REJECTED
    assert fingerprint(storage, bucket, database_url, set()) == before
    flow.close()
