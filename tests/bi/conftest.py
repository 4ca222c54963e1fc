"""Fixtures of the BI tests: the BI service over the session stack, and API clients.

The stack is the session's (``lakeward up`` on the real JHU files), so the
seed's data source, dataset, extract and dashboard are the ones ``up`` made.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import httpx
import pytest

from lakeward.access.control import AccessControl
from lakeward.access.keys import derive_key, load_master_key
from lakeward.access.sessions import CSRF_HEADER, SESSION_COOKIE, Sessions
from lakeward.bi.service import BiService
from lakeward.config import Settings
from lakeward.query.service import QueryService


@pytest.fixture(scope="module")
def bi(stack: Settings) -> Iterator[BiService]:
    """A BI service over the stack's state, in this process (as a tool would open it)."""
    access = AccessControl(stack)
    queries = QueryService(stack, access=access)
    service = BiService(stack, access, queries)
    yield service
    service.close()
    queries.close()


@pytest.fixture(scope="module")
def api(stack: Settings) -> Iterator[Callable[..., httpx.Client]]:
    """Clients of the running server signed in as a user (a session issued under the
    stack's key, as sign-in would: these tests are about the BI API, not passwords)."""
    sessions = Sessions(derive_key(load_master_key(stack.data_dir), "sessions"))
    clients: list[httpx.Client] = []

    def client(user: str, csrf: bool = True) -> httpx.Client:
        token, session = sessions.issue(user)
        headers = {CSRF_HEADER: session.csrf} if csrf else {}
        made = httpx.Client(
            base_url=f"http://{stack.server.host}:{stack.server.port}/api/bi",
            cookies={SESSION_COOKIE: token},
            headers=headers,
            timeout=120,
        )
        clients.append(made)
        return made

    yield client
    for made in clients:
        made.close()
