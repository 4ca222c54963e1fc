"""Faults around the purge: bad approval links, SMTP down, expiry, stop, a missing object,
and vacuum of the placeholders a purge leaves."""

from __future__ import annotations

import gzip
import json
import socket
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from lakeward.access import current_principal
from lakeward.access.control import AccessControl
from lakeward.config import Settings
from lakeward.erasure import report, worker
from lakeward.erasure.approval import APPROVE, LinkSigner
from lakeward.erasure.requests import (
    APPROVED,
    AWAITING_APPROVAL,
    COMPLETED,
    EXPIRED,
    STOPPED,
    Request,
)
from lakeward.erasure.vacuum import vacuum
from lakeward.erasure.workflow import ErasureWorkflow
from lakeward.errors import LinkRefused
from lakeward.storage import load_storage
from tests.erasure.workflow_helpers import (
    Mailbox,
    busiest_users,
    fingerprint,
    make_lake,
    remaining,
    smtp_server,
    workflow_settings,
)


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Settings, Mailbox, str]]:
    data_dir = tmp_path_factory.mktemp("faults") / "data"
    with smtp_server() as (mailbox, port):
        settings = workflow_settings(data_dir, port)
        yield settings, mailbox, make_lake(settings, records=2000)


@pytest.fixture(scope="module")
def users(lake: tuple[Settings, Mailbox, str]) -> list[str]:
    return busiest_users(lake[0], 12)


def awaiting(flow: ErasureWorkflow, user_ids: list[str]) -> Request:
    created, _ = flow.request(user_ids, "dpo@example.com")
    flow.run_pending()
    current = flow.store.get(created.id)
    assert current.state == AWAITING_APPROVAL and current.approval_sent_at is not None
    return current


def test_forged_expired_replayed_cross_request_and_stale_links_are_refused_and_audited(
    lake: tuple[Settings, Mailbox, str], users: list[str]
) -> None:
    settings, _, _ = lake
    access = AccessControl(settings)
    current_principal.set("root")
    flow = ErasureWorkflow(settings, access=access)
    one = awaiting(flow, users[0:1])
    other = awaiting(flow, users[1:2])
    assert one.report_digest and other.report_digest
    signer = flow.signer
    later = datetime.now(UTC) + timedelta(hours=1)
    cases = {
        "signature": LinkSigner(b"k" * 32).sign(one.id, APPROVE, one.report_digest, later),
        "expired": signer.sign(one.id, APPROVE, one.report_digest, datetime.now(UTC)),
        "another": signer.sign(other.id, APPROVE, other.report_digest, later),
        "changed": signer.sign(one.id, APPROVE, "0" * 64, later),
        "not valid": "not-a-token",
    }
    for why, token in cases.items():
        with pytest.raises(LinkRefused, match=why):
            flow.decide_by_link(one.id, token, None)
    good = signer.sign(one.id, APPROVE, one.report_digest, later)
    assert flow.decide_by_link(one.id, good, None).state == APPROVED
    with pytest.raises(LinkRefused, match="used already"):
        flow.decide_by_link(one.id, good, None)
    refusals = access.audit.query(action="erasure:UseApprovalLink", decision="explicitDeny")
    assert len([r for r in refusals if r.resource.endswith(one.id)]) == len(cases) + 1
    flow.store.move(one.id, APPROVED, STOPPED, "test", "not to be purged here")
    flow.stop(other.id, "test")
    flow.close()


def test_smtp_down_waits_and_retries_and_nothing_is_purged(
    lake: tuple[Settings, Mailbox, str], users: list[str], tmp_path: Path
) -> None:
    settings, mailbox, database_url = lake
    # The same stack, its SMTP server at a port where nothing listens.
    down = settings.model_copy(update={"erasure": settings.erasure.model_copy(
        update={"smtp_port": 9}
    )})  # fmt: skip
    flow = ErasureWorkflow(down)
    storage = load_storage(settings)
    before = fingerprint(storage, settings.lake.data_bucket, database_url, set())
    sent = len(mailbox.messages)
    created, _ = flow.request(users[2:3], "dpo@example.com")
    flow.run_pending()
    waiting = flow.store.get(created.id)
    assert waiting.state == AWAITING_APPROVAL and waiting.approval_sent_at is None
    assert waiting.attempts == 1 and "could not send mail" in (waiting.last_error or "")
    assert waiting.next_attempt_at is not None and waiting.next_attempt_at > datetime.now(UTC)
    flow.run_pending()  # not due yet: no second attempt
    assert flow.store.get(created.id).attempts == 1
    assert fingerprint(storage, settings.lake.data_bucket, database_url, set()) == before
    flow.close()

    back = ErasureWorkflow(settings)  # the server is reachable again; the retry is due
    back.store.update(created.id, next_attempt_at=datetime.now(UTC))
    back.run_pending()
    assert back.store.get(created.id).approval_sent_at is not None
    assert len(mailbox.wait_for(sent + 1)) == sent + 1
    back.stop(created.id, "test")
    back.close()


def test_a_request_that_moves_on_no_longer_shows_the_error_of_the_step_before(
    lake: tuple[Settings, Mailbox, str], users: list[str]
) -> None:
    settings, _, _ = lake
    down = settings.model_copy(update={"erasure": settings.erasure.model_copy(
        update={"smtp_port": 9}
    )})  # fmt: skip
    flow = ErasureWorkflow(down)
    created, _ = flow.request(users[11:12], "dpo@example.com")
    flow.run_pending()
    assert "could not send mail" in (flow.store.get(created.id).last_error or "")
    # Decided without the mail (in the console): its error is not the request's any more.
    stopped = flow.stop(created.id, "test")
    assert stopped.state == STOPPED and stopped.last_error is None
    flow.close()


def test_unanswered_request_expires(lake: tuple[Settings, Mailbox, str], users: list[str]) -> None:
    flow = ErasureWorkflow(lake[0])
    current = awaiting(flow, users[3:4])
    flow.store.update(current.id, approval_expires_at=datetime.now(UTC) - timedelta(seconds=1))
    flow.run_pending()
    assert flow.store.get(current.id).state == EXPIRED
    flow.close()


def test_stop_during_purge_reports_what_was_purged(
    lake: tuple[Settings, Mailbox, str], users: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    settings, _, database_url = lake
    one_at_a_time = settings.model_copy(update={"erasure": settings.erasure.model_copy(
        update={"purge_workers": 1}
    )})  # fmt: skip
    monkeypatch.setattr(worker, "FLUSH_EVERY", 1)  # progress recorded after each target
    flow = ErasureWorkflow(one_at_a_time)
    current = awaiting(flow, users[4:6])
    flow.approve(current.id, "test")
    finish = flow.store.finish_targets
    recorded_before_stop: list[int] = []

    def stop_then_finish(
        request_id: str, results: list[tuple[int, str, dict[str, object]]]
    ) -> bool:
        if results and not recorded_before_stop:
            recorded_before_stop.append(len(results))
            flow.stop(current.id, "test")  # as an operator would, from elsewhere
        return finish(request_id, results)

    monkeypatch.setattr(flow.store, "finish_targets", stop_then_finish)
    flow.run_pending()
    monkeypatch.undo()

    assert flow.store.get(current.id).state == STOPPED
    done = flow.store.targets(current.id, "done")
    todo = flow.store.targets(current.id, "todo")
    # What was recorded, plus the one target running when the stop came; nothing new started.
    assert 1 <= len(done) <= recorded_before_stop[0] + 1 and todo
    storage = load_storage(settings)
    bucket = settings.lake.data_bucket
    certificate = json.loads(
        storage.get(bucket, report.report_prefix(current.id) + "certificate.json")
    )
    assert certificate["state"] == STOPPED
    listed = {p["uri"]: p["status"] for p in certificate["objects"] + certificate["tables"]}
    assert all(listed[row.target["uri"]] == "done" for row in done)
    assert all(listed[row.target["uri"]] == "todo" for row in todo)
    assert remaining(storage, bucket, database_url, set(users[4:6])) > 0  # not all purged
    flow.close()


def test_a_missing_object_is_reported_not_fatal_and_vacuum_compacts(
    lake: tuple[Settings, Mailbox, str], users: list[str]
) -> None:
    settings, _, database_url = lake
    storage = load_storage(settings)
    bucket = settings.lake.data_bucket
    gone = users[6:8]
    flow = ErasureWorkflow(settings)
    current = awaiting(flow, gone)
    lake_targets = [r.target for r in flow.store.targets(current.id) if r.target["layer"] == "csv"]
    vanished = lake_targets[0]
    storage.delete(vanished["bucket"], vanished["key"])  # deleted by its owner meanwhile
    flow.approve(current.id, "test")
    flow.run_pending()
    assert flow.store.get(current.id).state == COMPLETED
    outcomes = {r.target["uri"]: r.outcome for r in flow.store.targets(current.id)}
    assert outcomes[vanished["uri"]]["action"] == "missing"  # type: ignore[index]

    others = set(users) - set(gone)
    before = fingerprint(storage, bucket, database_url, set(gone))
    jsonl_keys = [k for k in storage.keys(bucket, "gdpr/reviews/jsonl") if k.endswith(".jsonl")]
    placeholders = sum(storage.get(bucket, k).split(b"\n").count(b"{}") for k in jsonl_keys)
    plain_before = sum(len(storage.get(bucket, k)) for k in jsonl_keys)
    assert placeholders > 0

    result = vacuum(flow.index)

    # Plain and gzip objects: at least the plain placeholders went, and bytes were reclaimed.
    assert result.objects > 0 and result.placeholders >= placeholders
    assert result.bytes_before > result.bytes_after
    plain_after = sum(len(storage.get(bucket, k)) for k in jsonl_keys)
    assert plain_after == plain_before - 3 * placeholders  # "{}\n" per placeholder
    for key in storage.keys(bucket, "gdpr/reviews/"):
        data = storage.get(bucket, key)
        text = gzip.decompress(data) if key.endswith(".gz") else data
        if "jsonl" in key:
            assert b"{}" not in text.split(b"\n")
    # The index agrees with the compacted objects: every position holds its user's record.
    for user, holdings in flow.index.store.find(sorted(others)).items():
        for holding in holdings:
            if "/jsonl/" not in holding.location or not holding.positions:
                continue
            bucket_key = holding.location.split(f"/{bucket}/", 1)[1]
            lines = storage.get(bucket, bucket_key).split(b"\n")
            for position in holding.positions:
                assert json.loads(lines[position - 1])["user_id"] == user
    after = fingerprint(storage, bucket, database_url, set(gone))
    assert {k: v for k, v in after.items() if "/jsonl" not in k} == {
        k: v for k, v in before.items() if "/jsonl" not in k
    }
    flow.close()


def test_one_worker_at_a_time_per_request(
    lake: tuple[Settings, Mailbox, str], users: list[str]
) -> None:
    flow = ErasureWorkflow(lake[0])
    created, _ = flow.request(users[8:9], "dpo@example.com")
    store = flow.store
    assert store.claim(created.id, "elsewhere:1:a")  # a worker on another host
    assert not store.claim(created.id, flow.worker)
    # It leaves the request to the other worker. (What else it does, it may do: an earlier
    # test's outcome mail whose retry fell due counts among its steps.)
    flow.run_pending()
    assert store.get(created.id).state == "REQUESTED"
    store.release(created.id, "elsewhere:1:a")
    dead = f"{socket.gethostname()}:999999999:b"  # a process of this host that is gone
    assert store.claim(created.id, dead)
    assert store.claim(created.id, flow.worker)  # taken over at once
    assert not store.claim(created.id, "elsewhere:1:a")
    store.release(created.id, flow.worker)
    flow.run_pending()
    assert store.get(created.id).state == AWAITING_APPROVAL
    flow.stop(created.id, "test")
    flow.close()


def test_a_signed_in_approver_needs_erasure_approve(
    lake: tuple[Settings, Mailbox, str], users: list[str]
) -> None:
    from fastapi import FastAPI
    from fastapi.testclient import TestClient

    from lakeward.access.keys import derive_key, load_master_key
    from lakeward.access.sessions import SESSION_COOKIE, Sessions
    from lakeward.http.erasure_requests import erasure_requests_router

    settings = lake[0]
    access = AccessControl(settings)
    access.principals.create_user("clerk")  # no policy: may not approve
    access.principals.create_user("officer")
    access.principals.put_user_policy("officer", "approve-erasures", {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Action": "erasure:Approve", "Resource": "*"}],
    })  # fmt: skip
    current_principal.set("root")
    flow = ErasureWorkflow(settings, access=access)
    current = awaiting(flow, users[9:10])
    assert current.report_digest
    token = flow.signer.sign(current.id, APPROVE, current.report_digest,
                             datetime.now(UTC) + timedelta(hours=1))  # fmt: skip
    sessions = Sessions(derive_key(load_master_key(settings.data_dir), "sessions"))
    app = FastAPI()
    app.include_router(erasure_requests_router(flow, access, sessions))
    client = TestClient(app)
    path = f"/erasure/approval/{current.id}"

    client.cookies.set(SESSION_COOKIE, sessions.issue("clerk")[0])
    refused = client.post(path, data={"token": token})
    assert refused.status_code == 403 and flow.store.get(current.id).state == AWAITING_APPROVAL
    client.cookies.set(SESSION_COOKIE, sessions.issue("officer")[0])
    approved = client.post(path, data={"token": token})  # the link was not spent by the refusal
    assert approved.status_code == 200 and "APPROVED" in approved.text
    assert flow.store.get(current.id).decided_by == "officer (link)"
    flow.store.move(current.id, APPROVED, STOPPED, "test", "not to be purged here")
    flow.close()


def test_outcome_goes_to_the_webhook_too(
    lake: tuple[Settings, Mailbox, str], users: list[str]
) -> None:
    import http.server
    import threading

    received: list[dict[str, object]] = []

    class Hook(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            received.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *_args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    settings, mailbox, _ = lake
    hooked = settings.model_copy(update={"erasure": settings.erasure.model_copy(
        update={"webhook_url": f"http://127.0.0.1:{server.server_address[1]}/erasure"}
    )})  # fmt: skip
    flow = ErasureWorkflow(hooked)
    current = awaiting(flow, users[10:11])
    flow.reject(current.id, "test", "not a valid request")
    flow.run_pending()
    server.shutdown()
    # (Outcomes of requests ended earlier in this module go out in the same run.)
    assert [r for r in received if r["request_id"] == current.id] == [
        {"request_id": current.id, "state": "REJECTED"}
    ]
    assert flow.store.get(current.id).outcome_sent_at is not None
    assert any(current.id in m["Subject"] and "REJECTED" in m["Subject"] for m in mailbox.messages)
    flow.close()
