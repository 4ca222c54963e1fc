"""Fixtures of the BI tests: the BI service over the session stack, and API clients.

The stack is the session's (``lakeward up`` on the real JHU files), so the
seed's data source, dataset, extract and dashboard are the ones ``up`` made.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import httpx
import pytest

from lakeward.access.control import AccessControl
from lakeward.bi.service import BiService
from lakeward.config import Settings
from lakeward.query.service import QueryService
from tests.helpers import bi_api


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
    clients: list[httpx.Client] = []

    def client(user: str, csrf: bool = True) -> httpx.Client:
        made: httpx.Client = bi_api(stack, user, csrf)
        clients.append(made)
        return made

    yield client
    for made in clients:
        made.close()
