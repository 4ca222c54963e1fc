"""Administration and erasure approval pages, on a small stack of their own.

The server runs in this process (uvicorn on a free port) over a demo lake that
the erasure index covers, with approval email going to a real SMTP server; the
seed's identities (as ``lakeward up`` creates them: the console administrator
``admin``, the data-protection group's ``dpo_user``) sign in with Chromium.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from lakeward.access.control import AccessControl
from lakeward.access.seed import ADMIN, ADMIN_SECRET, DATA_PROTECTION_GROUP, seed_identities
from lakeward.config import Settings
from lakeward.erasure.requests import APPROVED, AWAITING_APPROVAL
from lakeward.erasure.workflow import ErasureWorkflow
from lakeward.http.app import create_app
from lakeward.process import free_port
from tests.console.conftest import Offline
from tests.console.console_helpers import check_page, screenshot, sign_in
from tests.erasure.workflow_helpers import busiest_users, make_lake, smtp_server, workflow_settings

DPO = "dpo_user"


@pytest.fixture(scope="module")
def small_stack(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Settings, str, dict[str, str]]]:
    """(settings, server URL, the seed users' passwords by name) of a running server."""
    data_dir = tmp_path_factory.mktemp("console-admin") / "data"
    with smtp_server() as (_mailbox, smtp_port):
        settings = workflow_settings(data_dir, smtp_port)
        make_lake(settings, records=300)
        access = AccessControl(settings)
        outputs = seed_identities(settings, access)
        assert outputs["console_admin"] == ADMIN and outputs["console_admin_secret"] == ADMIN_SECRET
        passwords = {}
        for name in outputs["iam_secrets"].split(","):
            value = access.secrets.get(name).value
            passwords[value["username"]] = value["password"]
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
            yield settings, f"http://127.0.0.1:{port}", passwords
        finally:
            server.should_exit = True
            thread.join(10)


def test_administration_pages(page: Any, small_stack: tuple[Settings, str, dict[str, str]]) -> None:
    _settings, base, passwords = small_stack
    password = passwords[ADMIN]
    sign_in(page, base, ADMIN, password)
    assert page.locator("h1").inner_text() == f"Welcome, {ADMIN}"  # the home page
    assert page.locator(".home-pages .card strong").all_inner_texts() == ["Administration"]
    assert "Administration" in page.locator("header nav a").all_inner_texts()
    page.goto(base + "/console/admin/users")
    page.fill("form.stacked input[name=name]", "analyst_2")
    page.fill("form.stacked input[name=password]", "short")  # the password policy's refusal
    page.click("text=Create user")
    assert "PasswordPolicyViolation" in page.locator(".flash.error").inner_text()
    assert page.locator("table.grid td", has_text="analyst_2").count() == 0
    page.fill("form.stacked input[name=name]", "analyst_1")
    page.fill("form.stacked input[name=password]", "a-long-enough-password-1")
    page.click("text=Create user")
    assert "created user analyst_1" in page.locator(".flash.done").inner_text()
    assert page.locator("table.grid td", has_text="analyst_1").count() == 1

    # Membership: no group is chosen for you, each change is confirmed, and undone as easily.
    asked: list[str] = []

    def accept(dialog: Any) -> None:
        asked.append(dialog.message)
        dialog.accept()

    page.on("dialog", accept)
    row = page.locator("table.grid tr", has_text="analyst_1")
    assert row.locator("select[name=group]").input_value() == ""
    row.locator("select[name=group]").select_option("SalesGroup")
    row.locator("button", has_text="Add").click()
    assert "added analyst_1 to SalesGroup" in page.locator(".flash.done").inner_text()
    assert asked[-1].startswith("Add analyst_1 to the chosen group?")
    row = page.locator("table.grid tr", has_text="analyst_1")
    row.locator("button[aria-label='Remove analyst_1 from SalesGroup']").click()
    assert "removed analyst_1 from SalesGroup" in page.locator(".flash.done").inner_text()
    groups_cell = page.locator("table.grid tr", has_text="analyst_1").locator("td:nth-child(2)")
    assert groups_cell.inner_text().strip() == ""

    # Groups list their policies; a group is created and deleted.
    page.goto(base + "/console/admin/groups")
    sales = page.locator("table.grid tr", has_text="SalesGroup")
    assert sales.locator("td.attached").inner_text() == "AthenaQueryAccessPolicy"
    page.fill("form.stacked input[name=name]", "Auditors")
    page.click("text=Create group")
    assert "created group Auditors" in page.locator(".flash.done").inner_text()
    page.locator("table.grid tr", has_text="Auditors").locator("button", has_text="Delete").click()
    assert "deleted group Auditors" in page.locator(".flash.done").inner_text()
    assert asked[-1] == "Delete group Auditors?"

    page.goto(base + "/console/admin/policies")
    page.fill("#create-policy input[name=name]", "Broken")
    written = '{"Version": "2012-10-17",\n "Statement": "nope"}'
    page.fill("#create-policy textarea[name=document]", written)
    page.click("text=Create policy")
    assert "policy Broken" in page.locator(".flash.error").inner_text()
    # The form comes back as it was written, so the mistake costs no retyping.
    assert page.locator("#create-policy textarea[name=document]").input_value() == written
    assert page.locator("#create-policy input[name=name]").input_value() == "Broken"
    # Each policy says where it is attached.
    athena = page.locator("details.policy", has_text="AthenaQueryAccessPolicy").locator("summary")
    assert "attached to group/DataEngineerGroup, group/SalesGroup" in athena.inner_text()

    # A policy is edited: each edit a new version that applies at once, undone in a click.
    statement = {
        "Effect": "Allow",
        "Action": "s3:GetObject",
        "Resource": "arn:lakeward:s3:::sales/*",
    }
    first = json.dumps({"Version": "2012-10-17", "Statement": [statement]})
    page.fill("#create-policy input[name=name]", "SalesReads")
    page.fill("#create-policy textarea[name=document]", first)
    page.click("text=Create policy")
    assert "created policy SalesReads" in page.locator(".flash.done").inner_text()
    policy = page.locator("details.policy[data-policy=SalesReads]")
    policy.locator("summary").click()
    edited = first.replace("sales/*", "sales/2026/*")
    policy.locator("form.edit-policy textarea").fill(edited)
    policy.locator("form.edit-policy button").click()
    assert "saved v2 of SalesReads, which applies now" in page.locator(".flash.done").inner_text()
    policy = page.locator("details.policy[data-policy=SalesReads]")
    policy.locator("summary").click()
    assert "sales/2026/*" in policy.locator("pre").inner_text()
    assert policy.locator("tr.default td").first.inner_text().startswith("v2")
    policy.locator("tr", has_text="v1").locator("button", has_text="Apply").click()
    assert "v1 of SalesReads applies now" in page.locator(".flash.done").inner_text()
    assert asked[-1].startswith("Make v1 of SalesReads the version that applies?")
    # A broken edit comes back as written, its policy opened, nothing saved.
    policy = page.locator("details.policy[data-policy=SalesReads]")
    policy.locator("summary").click()
    policy.locator("form.edit-policy textarea").fill('{"Statement": ')
    policy.locator("form.edit-policy button").click()
    assert "policy SalesReads" in page.locator(".flash.error").inner_text()
    policy = page.locator("details.policy[data-policy=SalesReads]")
    assert policy.locator("form.edit-policy textarea").input_value() == '{"Statement": '
    assert "2 version(s)" in policy.locator("summary").inner_text()

    # A password is reset, confirmed first, and held to the password policy.
    page.goto(base + "/console/admin/users")
    reset = page.locator("table.grid tr", has_text="analyst_1").locator("form.reset-password")
    reset.locator("input[name=password]").fill("weak")
    reset.locator("button").click()
    assert "PasswordPolicyViolation" in page.locator(".flash.error").inner_text()
    reset = page.locator("table.grid tr", has_text="analyst_1").locator("form.reset-password")
    reset.locator("input[name=password]").fill("another-long-password-2")
    reset.locator("button").click()
    assert "reset the console password of analyst_1" in page.locator(".flash.done").inner_text()
    assert asked[-1].startswith("Set a new console password for analyst_1?")
    elsewhere = page.context.browser.new_context()  # another browser: its own cookies
    other = elsewhere.new_page()
    sign_in(other, base, "analyst_1", "another-long-password-2")  # the new one works
    assert other.locator("h1").inner_text() == "Welcome, analyst_1"
    elsewhere.close()

    # A user is deleted, confirmed first.
    page.goto(base + "/console/admin/users")
    page.locator("table.grid tr", has_text="analyst_1").locator("button", has_text="Delete").click()
    assert "deleted user analyst_1" in page.locator(".flash.done").inner_text()
    assert page.locator("table.grid td", has_text="analyst_1").count() == 0

    # A message in a link from elsewhere (typed, or followed from a mail) is not shown as ours.
    page.goto(base + "/console/admin/users?error=Your+account+is+locked%2C+call+555-0100")
    assert page.locator(".flash").count() == 0

    page.goto(base + "/console/admin/secrets")
    assert page.locator("td", has_text=ADMIN_SECRET).count() == 1
    assert password not in page.content()  # names only, never values

    page.goto(base + f"/console/admin/audit?user={ADMIN}")
    actions = page.locator("table.audit td:nth-child(3)").all_inner_texts()
    assert "iam:CreateUser" in actions and "secretsmanager:ListSecrets" in actions


def awaiting_requests(settings: Settings, count: int) -> list[tuple[str, str]]:
    """(request id, user to erase) of ``count`` requests awaiting approval."""
    flow = ErasureWorkflow(settings)
    try:
        made = []
        for user in busiest_users(settings, count):
            created, _joined = flow.request([user], "dpo@example.com", reason="asked by mail")
            made.append((created.id, user))
        flow.run_pending()  # the worker: the reports, then the requests for approval
        assert all(flow.store.get(i).state == AWAITING_APPROVAL for i, _u in made)
        return made
    finally:
        flow.close()


def approve(page: Any, request_id: str, user: str, approver: str) -> None:
    """Open the request from the list and approve it, confirmation ticked."""
    page.click("header nav a:text('Erasure requests')")
    page.click(f"a:text('{request_id}')")
    assert user in page.locator("table.grid.narrow").inner_text()
    assert page.locator("#report-places tbody tr").count() >= 1  # where the user's data is
    form = page.locator(f"form[action$='/{request_id}/approve']")
    form.locator("input[name=confirm]").check()
    dialogs: list[str] = []
    page.once("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.accept()))
    form.locator("button").click()
    assert dialogs and "Approve the erasure" in dialogs[0]
    assert page.locator("#erasure-state").inner_text() == APPROVED
    history = page.locator("table.grid").last.inner_text()
    assert f"{AWAITING_APPROVAL}\t{APPROVED}\t{approver}" in history


def test_the_data_protection_group_decides_erasure_requests(
    page: Any, small_stack: tuple[Settings, str, dict[str, str]], tmp_path: Path
) -> None:
    settings, base, passwords = small_stack
    (first, first_user), (second, second_user) = awaiting_requests(settings, 2)
    # The seed's data-protection officer lands on a home page that leads to the requests.
    sign_in(page, base, DPO, passwords[DPO])
    assert page.locator(".home-pages .card strong").all_inner_texts() == ["Erasure requests"]
    assert page.locator("header nav a").all_inner_texts() == ["Erasure requests"]
    page.goto(base + "/console/erasure")
    approve_form = page.locator(f"form[action$='/{first}/approve']")
    page.click(f"a:text('{first}')")
    # Without the confirmation ticked the browser does not send the form; the server
    # refuses it too.
    page.evaluate("(form) => { form.noValidate = true; }", approve_form.element_handle())
    page.once("dialog", lambda dialog: dialog.accept())
    approve_form.locator("button").click()
    assert "tick the confirmation" in page.locator(".flash.error").inner_text()
    assert page.locator("#erasure-state").inner_text() == AWAITING_APPROVAL
    approve(page, first, first_user, DPO)
    # An administration page is refused with the console's page and a next step.
    response = page.goto(base + "/console/admin/users")
    assert response is not None and response.status == 403
    assert page.locator("h1").inner_text() == "Access denied"
    assert "Ask an administrator" in page.locator(".next-step").inner_text()
    assert page.locator(".next-pages a").all_inner_texts() == ["Erasure requests"]

    # The administrator may not decide, but is told how: join the group, then approve.
    page.click("button:text('Sign out')")
    sign_in(page, base, ADMIN, passwords[ADMIN])
    assert DATA_PROTECTION_GROUP in page.locator("#join-data-protection").inner_text()
    screenshot(page, "home-admin", tmp_path)
    assert page.goto(base + "/console/erasure").status == 403  # type: ignore[union-attr]
    page.goto(base + "/console/admin/users")
    row = page.locator("table.grid tr", has_text=ADMIN).filter(has_not_text=DPO).first
    row.locator("select[name=group]").select_option(DATA_PROTECTION_GROUP)
    confirmed: list[str] = []
    page.once("dialog", lambda dialog: (confirmed.append(dialog.message), dialog.accept()))
    row.locator("button:text('Add')").click()  # asked first: the group's policies apply at once
    assert f"added {ADMIN} to {DATA_PROTECTION_GROUP}" in page.locator(".flash.done").inner_text()
    assert confirmed and confirmed[0].startswith(f"Add {ADMIN} to the chosen group?")
    page.goto(base + "/console/")
    assert "Erasure requests" in page.locator(".home-pages .card strong").all_inner_texts()
    approve(page, second, second_user, ADMIN)


def request_state_becomes(page: Any, settings: Settings, state: str) -> None:
    """Let the erasure worker take its steps until the request's page shows ``state``."""
    flow = ErasureWorkflow(settings)
    try:
        for _ in range(50):
            flow.run_pending()
            page.reload()
            if page.locator("#erasure-state").inner_text() == state:
                return
            page.wait_for_timeout(200)
    finally:
        flow.close()
    raise AssertionError(f"the request did not become {state}")


def test_an_erasure_request_is_filed_followed_and_certified_in_the_console(
    page: Any, small_stack: tuple[Settings, str, dict[str, str]], tmp_path: Path
) -> None:
    settings, base, passwords = small_stack
    user = busiest_users(settings, 3)[2]  # not one of the other test's
    sign_in(page, base, DPO, passwords[DPO])
    page.goto(base + "/console/erasure")
    page.click("details.new-request summary")  # folded while there are requests
    form = page.locator("#new-erasure-request")
    form.locator("textarea[name=user_ids]").fill(f"  {user}\n")
    form.locator("input[name=reason]").fill("the data subject's mail of today")
    form.locator("button").click()
    assert "filed" in page.locator(".flash.done").inner_text()
    assert user in page.locator("table.grid.narrow").inner_text()
    assert page.locator("#erasure-state").inner_text() == "REQUESTED"
    request_id = page.url.rsplit("/", 1)[-1].split("?")[0]

    request_state_becomes(page, settings, AWAITING_APPROVAL)
    places = page.locator("#report-places tbody tr")
    assert places.count() >= 1
    assert "object(s)" in page.locator("#report-totals").inner_text()
    html = page.request.get(
        base + (page.locator("a:text('Report (HTML)')").get_attribute("href") or "")
    )
    assert html.ok and user in html.text()
    screenshot(page, "erasure-request-report", tmp_path)
    approve(page, request_id, user, DPO)

    request_state_becomes(page, settings, "COMPLETED")
    assert page.locator("th:text('Last error')").count() == 0
    certificate = page.request.get(
        base + (page.locator("#certificate").get_attribute("href") or "")
    )
    assert certificate.ok and certificate.json()["state"] == "COMPLETED"
    assert certificate.json()["request_id"] == request_id
    assert page.locator("#erasure-requests").count() == 0  # the request's page, not the list
    page.goto(base + "/console/erasure")
    assert user in page.locator("#erasure-requests").inner_text()  # ids, not a count


ADMIN_PAGES = {
    "admin": "/console/admin",
    "admin-users": "/console/admin/users",
    "admin-groups": "/console/admin/groups",
    "admin-policies": "/console/admin/policies",
    "admin-secrets": "/console/admin/secrets",
    "admin-audit": "/console/admin/audit",
}


@pytest.fixture(scope="module")
def reported_request(small_stack: tuple[Settings, str, dict[str, str]]) -> str:
    """A request awaiting approval, its report made, for a user the other tests leave alone."""
    settings = small_stack[0]
    flow = ErasureWorkflow(settings)
    try:
        created, _joined = flow.request(
            [busiest_users(settings, 4)[3]], "dpo@example.com", reason="asked by mail"
        )
        flow.run_pending()
        assert flow.store.get(created.id).state == AWAITING_APPROVAL
        return created.id
    finally:
        flow.close()


@pytest.mark.parametrize("width", [390, 1280])
def test_administration_and_erasure_pages_fit_the_window(
    browser: Any,
    offline: Offline,
    small_stack: tuple[Settings, str, dict[str, str]],
    reported_request: str,
    tmp_path: Path,
    width: int,
) -> None:
    """The administrator's and the data-protection officer's pages at a phone's width and a
    laptop's: nothing past the right edge, Sign out on screen, a screenshot of each."""
    _settings, base, passwords = small_stack
    context = browser.new_context(viewport={"width": width, "height": 844})
    page = context.new_page()
    page.route("**/*", offline.route)
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    erasure_pages = {
        "erasure": "/console/erasure",
        "erasure-request": f"/console/erasure/{reported_request}",
    }
    try:
        for user, pages in ((ADMIN, ADMIN_PAGES), (DPO, erasure_pages)):
            sign_in(page, base, user, passwords[user])
            for name, path in pages.items():
                response = page.goto(base + path)
                assert response is not None and response.status == 200, name
                check_page(page, width, name, tmp_path)
            page.click("button:text('Sign out')")
    finally:
        context.close()
    assert errors == [] and offline.blocked == []


def test_unknown_pages_and_api_docs_offline(
    page: Any, offline: Any, small_stack: tuple[Settings, str, dict[str, str]], tmp_path: Path
) -> None:
    _settings, base, passwords = small_stack
    # Signed out, an unknown console URL is a page that offers to sign in.
    response = page.goto(base + "/console/no-such-page")
    assert response is not None and response.status == 404
    assert response.headers["content-type"].startswith("text/html")
    assert page.locator("h1").inner_text() == "Not found"
    assert "Sign in" in page.locator(".next-step").inner_text()
    sign_in(page, base, DPO, passwords[DPO])
    response = page.goto(base + "/console/dashboards/x/y/z")
    assert response is not None and response.status == 404
    assert "/console/dashboards/x/y/z" in page.locator(".flash.error").inner_text()
    assert page.locator(".next-pages a").all_inner_texts() == ["Erasure requests"]
    screenshot(page, "not-found", tmp_path)
    # The API's JSON stays JSON.
    status = page.evaluate("fetch('/console/api/nothing').then(r => r.status)")
    assert status == 404
    # Swagger UI comes from lakeward itself: drawn with every other host blocked.
    page.goto(base + "/docs")
    page.wait_for_selector(".swagger-ui .info .title", timeout=30_000)
    assert "lakeward" in page.locator(".swagger-ui .info .title").inner_text()
    assert page.locator(".opblock-summary-path", has_text="/health").count() >= 1
    assert offline.blocked == []
