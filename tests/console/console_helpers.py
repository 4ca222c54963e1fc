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


def write_sql(page: Any, text: str) -> None:
    """Replace the query editor's text as a user does: click in it, select all, paste."""
    page.click(".sql-box .CodeMirror-lines")
    page.keyboard.press("Control+A")
    if text:
        page.keyboard.insert_text(text)
    else:
        page.keyboard.press("Delete")
    page.keyboard.press("Escape")  # closes the completion list the last word may have opened


def screenshot(page: Any, name: str, tmp_path: Path) -> Path:
    """Save a screenshot as an artifact (or as a documentation image under make screenshots)."""
    folder = Path(os.environ.get("LAKEWARD_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.png"
    page.screenshot(path=str(path), full_page=False)
    return path


# Whether any element but a scrolling table, the navigation, a chart's own drawing or the
# editor's insides (which it clips) runs past the right edge of the window.
OVERFLOW = """() => {
  const width = document.documentElement.clientWidth;
  const inside = (e) => e.closest(
    'table.grid, header.top nav, .chart, .js-plotly-plot, pre, .CodeMirror *');
  return Array.from(document.querySelectorAll('body *'))
    .filter(e => !inside(e) && e.getBoundingClientRect().right > width + 1
                 && getComputedStyle(e).visibility !== 'hidden' && e.offsetParent !== null)
    .map(e => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '')
              + (e.className && typeof e.className === 'string' ? '.' + e.className : ''))
    .slice(0, 5);
}"""


def check_page(page: Any, width: int, name: str, tmp_path: Path, signed_in: bool = True) -> None:
    assert page.evaluate("document.documentElement.scrollWidth") <= width, name
    assert page.evaluate(OVERFLOW) == [], name
    if signed_in:
        sign_out = page.locator("header .signout button").bounding_box()
        assert sign_out is not None and sign_out["x"] + sign_out["width"] <= width, name
    screenshot(page, f"{name}-{width}", tmp_path)
