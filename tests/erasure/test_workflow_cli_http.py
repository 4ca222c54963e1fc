"""The erasure workflow through the real ``lakeward`` command and the server's REST API."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from fastapi.testclient import TestClient

from lakeward.access.control import AccessControl
from lakeward.config import load_settings
from lakeward.http.app import create_app
from tests.erasure.workflow_helpers import (
    Mailbox,
    busiest_users,
    make_lake,
    smtp_server,
    workflow_settings,
)
from tests.helpers import lakeward, parse_outputs

KEY = "AKIAERASUREPURGE0001"
SECRET = "purge-secret-key-0123456789abcdef"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Mailbox, list[str]]]:
    data_dir = tmp_path_factory.mktemp("cli") / "data"
    with smtp_server() as (mailbox, port):
        settings = workflow_settings(data_dir, port)
        make_lake(settings, records=800)
        yield data_dir, mailbox, busiest_users(settings, 6)


def run(data_dir: Path, *args: str, check: bool = True) -> dict[str, str]:
    env = {"LAKEWARD_CONFIG": str(data_dir / "lakeward.toml")}
    result = lakeward("erasure", *args, data_dir=data_dir, env=env, check=check)
    if not check:
        return {"returncode": str(result.returncode), "stderr": result.stderr}
    return parse_outputs(result.stdout) | {"stdout": result.stdout}


def test_request_approve_purge_and_vacuum_from_the_command_line(
    stack: tuple[Path, Mailbox, list[str]],
) -> None:
    data_dir, mailbox, users = stack
    dry = run(data_dir, "request", users[0], "--dry-run", "--requester", "dpo@example.com")
    real = run(data_dir, "request", users[0], "--contact", "subject@example.com")
    assert dry["request_id"] != real["request_id"] and real["joined"] == "false"
    run(data_dir, "worker", "--once")
    status = json.loads(run(data_dir, "status", real["request_id"], "--output", "json")["stdout"])
    assert status["state"] == "AWAITING_APPROVAL" and status["targets"]
    listed = run(data_dir, "list")["stdout"].splitlines()
    assert any(dry["request_id"] in line and "REPORT_READY" in line for line in listed)
    assert any(real["request_id"] in line and "AWAITING_APPROVAL" in line for line in listed)
    assert run(data_dir, "approve", real["request_id"])["state"] == "APPROVED"
    run(data_dir, "worker", "--once")
    done = run(data_dir, "status", real["request_id"])
    assert done["state"] == "COMPLETED", done["stdout"]
    assert "rewritten" in done["stdout"] and "deleted" in done["stdout"]
    vacuumed = run(data_dir, "vacuum")
    assert int(vacuumed["bytes_reclaimed"]) > 0 and int(vacuumed["placeholders_dropped"]) > 0
    assert any("COMPLETED" in m["Subject"] for m in mailbox.messages)


def test_command_line_errors_are_plain(stack: tuple[Path, Mailbox, list[str]]) -> None:
    data_dir, _, _ = stack
    missing = run(data_dir, "approve", "no-such-request", check=False)
    assert (
        missing["returncode"] != "0" and "no erasure request 'no-such-request'" in missing["stderr"]
    )
    assert "Traceback" not in missing["stderr"]


def signed(client: TestClient, method: str, path: str, body: bytes = b"",
           credentials: tuple[str, str] = (KEY, SECRET)) -> httpx.Response:  # fmt: skip
    url = f"http://testserver{path}"
    request = AWSRequest(method=method, url=url, data=body,
                         headers={"Content-Type": "application/json"} if body else {})  # fmt: skip
    SigV4Auth(Credentials(*credentials), "athena", "us-east-1").add_auth(request)
    return client.request(method, url, content=body, headers=dict(request.headers.items()))


def test_rest_api_requests_lists_and_stops(stack: tuple[Path, Mailbox, list[str]]) -> None:
    data_dir, _, users = stack
    settings = load_settings(
        data_dir=data_dir, config_file=data_dir / "lakeward.toml", env={},
        overrides={"api.access_key_id": KEY, "api.secret_access_key": SECRET},
    )  # fmt: skip
    with TestClient(create_app(settings)) as client:
        assert client.post("/erasure/requests", json={"user_ids": [users[3]]}).status_code == 401
        body = json.dumps({"user_ids": [users[3], users[4]], "reason": "ticket 7"}).encode()
        created = signed(client, "POST", "/erasure/requests", body)
        assert created.status_code == 201, created.text
        request_id = created.json()["id"]
        assert created.json()["state"] == "REQUESTED" and created.json()["requester"] == KEY
        again = signed(client, "POST", "/erasure/requests",
                       json.dumps({"user_ids": [users[4]]}).encode())  # fmt: skip
        assert again.json()["joined"] is True and again.json()["id"] == request_id
        listed = signed(client, "GET", "/erasure/requests?state=REQUESTED").json()
        assert request_id in [r["id"] for r in listed]
        stopped = signed(client, "POST", f"/erasure/requests/{request_id}/stop")
        assert stopped.json()["state"] == "STOPPED"
        detail = signed(client, "GET", f"/erasure/requests/{request_id}").json()
        assert [h["to"] for h in detail["history"]] == ["REQUESTED", "REQUESTED", "STOPPED"]
        bad = signed(client, "POST", f"/erasure/requests/{request_id}/approve")
        assert bad.status_code == 400 and "STOPPED" in bad.json()["error"]["message"]


def wait_for_state(
    client: TestClient, request_id: str, state: str, field: str | None = None
) -> dict[str, object]:
    """The request once the server's worker has brought it to ``state`` (bounded wait).

    With ``field``, also wait until that field is set: a request enters
    AWAITING_APPROVAL before its mail goes out (it waits there when SMTP is down).
    """
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        current = signed(client, "GET", f"/erasure/requests/{request_id}").json()
        if current["state"] == state and (field is None or current.get(field)):
            return dict(current)
        time.sleep(0.2)
    raise AssertionError(f"request {request_id} is {current['state']}, not {state} ({field})")


def test_the_server_runs_the_workflow(stack: tuple[Path, Mailbox, list[str]]) -> None:
    data_dir, mailbox, users = stack
    settings = load_settings(
        data_dir=data_dir, config_file=data_dir / "lakeward.toml", env={},
        overrides={"api.access_key_id": KEY, "api.secret_access_key": SECRET,
                   "erasure.run_worker": True},
    )  # fmt: skip
    with TestClient(create_app(settings)) as client:
        body = json.dumps({"user_ids": [users[5]]}).encode()
        request_id = signed(client, "POST", "/erasure/requests", body).json()["id"]
        wait_for_state(client, request_id, "AWAITING_APPROVAL", "approval_sent_at")
        [mail] = [m for m in mailbox.messages if request_id in str(m["Subject"])]
        link = urlsplit(mailbox.links(mail)["approve"])
        token = link.query.removeprefix("token=")
        assert "Approve this erasure" in client.get(link.path, params={"token": token}).text
        assert "APPROVED" in client.post(link.path, data={"token": token}).text
        done = wait_for_state(client, request_id, "COMPLETED")
        assert all(t["outcome"]["remaining"] == 0 for t in done["targets"])  # type: ignore[attr-defined]


def test_reading_requests_needs_its_own_permissions(stack: tuple[Path, Mailbox, list[str]]) -> None:
    """Requests name data subjects: a caller who may file one may not read everyone's."""
    data_dir, _, users = stack
    settings = load_settings(
        data_dir=data_dir, config_file=data_dir / "lakeward.toml", env={},
        overrides={"api.access_key_id": KEY, "api.secret_access_key": SECRET},
    )  # fmt: skip
    access = AccessControl(settings)
    access.principals.create_user("filer")
    document = {"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Action": "erasure:CreateRequest", "Resource": "*"},
    ]}  # fmt: skip
    access.principals.create_policy("filer-policy", document)
    access.principals.attach_user_policy("filer", "filer-policy")
    filer = access.principals.create_access_key("filer")
    with TestClient(create_app(settings)) as client:
        body = json.dumps({"user_ids": [users[2]]}).encode()
        created = signed(client, "POST", "/erasure/requests", body, filer)
        assert created.status_code == 201, created.text
        request_id = created.json()["id"]
        listing = signed(client, "GET", "/erasure/requests", credentials=filer)
        assert listing.status_code == 403 and "erasure:ListRequests" in listing.text
        detail = signed(client, "GET", f"/erasure/requests/{request_id}", credentials=filer)
        assert detail.status_code == 403 and "erasure:GetRequest" in detail.text
        assert users[2] not in listing.text + detail.text
        as_root = signed(client, "GET", f"/erasure/requests/{request_id}")
        assert as_root.status_code == 200 and users[2] in as_root.text
