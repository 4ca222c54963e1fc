"""Administration and erasure approval pages, on a small stack of their own.

The server runs in this process (uvicorn on a free port) over a demo lake that
the erasure index covers, with approval email going to a real SMTP server; an
administrator with a console password signs in with Chromium.
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import uvicorn

from lakeward.access.control import AccessControl
from lakeward.config import Settings
from lakeward.erasure.requests import APPROVED, AWAITING_APPROVAL
from lakeward.erasure.workflow import ErasureWorkflow
from lakeward.http.app import create_app
from lakeward.process import free_port
from tests.console.console_helpers import sign_in
from tests.erasure.workflow_helpers import busiest_users, make_lake, smtp_server, workflow_settings

ADMIN = "console_admin"
EVERYTHING = {"Version": "2012-10-17",
              "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}  # fmt: skip


@pytest.fixture(scope="module")
def small_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Settings, str, str]]:
    """(settings, server URL, the administrator's password) of a running server."""
    data_dir = tmp_path_factory.mktemp("console-admin") / "data"
    with smtp_server() as (_mailbox, smtp_port):
        settings = workflow_settings(data_dir, smtp_port)
        make_lake(settings, records=300)
        access = AccessControl(settings)
        password = secrets.token_urlsafe(16)
        access.principals.create_policy("ConsoleAdministrator", EVERYTHING)
        access.principals.create_user(ADMIN, password)
        access.principals.attach_user_policy(ADMIN, "ConsoleAdministrator")
        access.secrets.put("ConsoleAdminCreds", {"password": password}, "an administrator")
        port = free_port("127.0.0.1", 18000)
        server = uvicorn.Server(
            uvicorn.Config(create_app(settings), host="127.0.0.1", port=port, log_level="warning")
        )
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        try:
            while not server.started:
                assert thread.is_alive(), "the server did not start"
                thread.join(0.05)
            yield settings, f"http://127.0.0.1:{port}", password
        finally:
            server.should_exit = True
            thread.join(10)


def test_administration_pages(page: Any, small_stack: tuple[Settings, str, str]) -> None:
    _settings, base, password = small_stack
    sign_in(page, base, ADMIN, password)
    assert "Administration" in page.locator("header nav a").all_inner_texts()
    page.goto(base + "/console/admin/users")
    page.fill("form.stacked input[name=name]", "analyst_1")
    page.fill("form.stacked input[name=password]", "a-long-enough-password-1")
    page.click("text=Create user")
    assert "created user analyst_1" in page.locator(".flash.done").inner_text()
    assert page.locator("table.grid td", has_text="analyst_1").count() == 1

    page.goto(base + "/console/admin/policies")
    page.fill("form.stacked input[name=name]", "Broken")
    page.fill("form.stacked textarea[name=document]", '{"Statement": "nope"}')
    page.click("text=Create policy")
    assert "policy Broken" in page.locator(".flash.error").inner_text()

    page.goto(base + "/console/admin/secrets")
    assert page.locator("td", has_text="ConsoleAdminCreds").count() == 1
    assert password not in page.content()  # names only, never values

    page.goto(base + "/console/admin/audit?user=console_admin")
    actions = page.locator("table.audit td:nth-child(3)").all_inner_texts()
    assert "iam:CreateUser" in actions and "secretsmanager:ListSecrets" in actions


def test_approve_an_erasure_request_from_its_page(
    page: Any, small_stack: tuple[Settings, str, str]
) -> None:
    settings, base, password = small_stack
    flow = ErasureWorkflow(settings)
    try:
        users = busiest_users(settings, 1)
        created, _joined = flow.request(users, "dpo@example.com", reason="asked by mail")
        flow.run_pending()  # the worker: the report, then the request for approval
        assert flow.store.get(created.id).state == AWAITING_APPROVAL
    finally:
        flow.close()
    sign_in(page, base, ADMIN, password)
    page.click("header nav a:text('Erasure requests')")
    page.click(f"a:text('{created.id}')")
    assert users[0] in page.locator("pre.report").inner_text()
    approve = page.locator(f"form[action$='/{created.id}/approve']")
    # Without the confirmation ticked the browser does not send the form; the server
    # refuses it too.
    page.evaluate("(form) => { form.noValidate = true; }", approve.element_handle())
    page.once("dialog", lambda dialog: dialog.accept())
    approve.locator("button").click()
    assert "tick the confirmation" in page.locator(".flash.error").inner_text()
    assert page.locator("#erasure-state").inner_text() == AWAITING_APPROVAL
    approve.locator("input[name=confirm]").check()
    dialogs: list[str] = []
    page.once("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.accept()))
    approve.locator("button").click()
    assert dialogs and "Approve the erasure" in dialogs[0]
    assert page.locator("#erasure-state").inner_text() == APPROVED
    history = page.locator("table.grid").last.inner_text()
    assert f"{AWAITING_APPROVAL}\t{APPROVED}\t{ADMIN}" in history
