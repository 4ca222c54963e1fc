"""Steps the console's browser tests share: the server's URL, passwords, signing in, screenshots.

Screenshots go to ``$LAKEWARD_SCREENSHOTS`` (``make screenshots`` sets it to
docs/images) or else to the test's temporary directory, as artifacts.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Any

from lakeward.config import Settings
from tests.helpers import lakeward


def server_url(stack: Settings) -> str:
    return f"http://{stack.server.host}:{stack.server.port}"


def password_of(stack: Settings, secret: str) -> str:
    value = json.loads(lakeward("secrets", "get", secret, data_dir=stack.data_dir).stdout)
    return str(value["password"])


def sign_in(page: Any, base: str, user: str, password: str) -> None:
    """Sign in through the form; waits out a lockout other tests may have caused."""
    deadline = time.monotonic() + 90
    while True:
        page.goto(f"{base}/console/login")
        page.fill("input[name=username]", user)
        page.fill("input[name=password]", password)
        page.click("form button[type=submit]")
        page.wait_for_load_state()
        refusal = page.locator(".flash.error")
        if refusal.count() == 0:
            break
        text = refusal.inner_text()
        wait = re.search(r"try again in (\d+) s", text)
        # Another test's wrong passwords can lock the account for a while.
        if wait is None or time.monotonic() > deadline:
            raise AssertionError(f"signing in as {user} failed: {text}")
        time.sleep(int(wait.group(1)) + 1)
    assert page.locator(".signout .who").inner_text() == user


def screenshot(page: Any, name: str, tmp_path: Path) -> Path:
    """Save a screenshot as an artifact (or as a documentation image under make screenshots)."""
    folder = Path(os.environ.get("LAKEWARD_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.png"
    page.screenshot(path=str(path), full_page=False)
    return path
