"""Browser fixtures: Debian's Chromium driven by Playwright against the session stack.

One browser per test module. Every page is opened with the network closed to
anything but the stack's server (127.0.0.1): a request elsewhere is aborted
and recorded, and each test's teardown fails if there was one.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import need

CHROMIUM = "/usr/bin/chromium"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    executable = shutil.which("chromium") or CHROMIUM
    need(Path(executable).is_file(), "Chromium is not installed (apt install chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        need(False, "playwright is not installed: pip install playwright")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable)
        yield launched
        launched.close()


class Offline:
    """Requests the page tried to make to anywhere but 127.0.0.1 (all aborted)."""

    def __init__(self) -> None:
        self.blocked: list[str] = []

    def route(self, route: Any) -> None:
        url = route.request.url
        if re.match(r"^(https?|wss?)://127\.0\.0\.1(:\d+)?/", url) or url.startswith(
            ("data:", "blob:", "about:")
        ):
            route.continue_()
        else:
            self.blocked.append(url)
            route.abort()


@pytest.fixture
def offline() -> Offline:
    return Offline()


@pytest.fixture
def page(browser: Any, offline: Offline) -> Iterator[Any]:
    """A fresh browser context and page, offline but for 127.0.0.1; fails on page errors."""
    context = browser.new_context(viewport={"width": 1400, "height": 950})
    opened = context.new_page()
    opened.route("**/*", offline.route)
    errors: list[str] = []
    opened.on("pageerror", lambda error: errors.append(str(error)))
    yield opened
    context.close()
    assert offline.blocked == [], f"requests outside 127.0.0.1: {offline.blocked}"
    assert errors == [], f"script errors in the page: {errors}"
