"""Helpers shared by the tests: prerequisites, and running the real command.

Running ``lakeward``, the JHU files and databases on the machine's servers come from
bench/_harness.py, which the benchmarks use too; here a missing server becomes a skip.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from bench import _harness
from bench._harness import JHU_DIR, PG_SERVER, lakeward

if TYPE_CHECKING:
    from lakeward.config import Settings

__all__ = ["JHU_DIR", "PG_SERVER", "lakeward"]  # re-exported for the tests
IN_CI = os.environ.get("CI") == "true"


def pg_url(dbname: str, schema: str | None = None) -> str:
    """A SQLAlchemy URL of a database on ``PG_SERVER`` (searching ``schema`` first if given)."""
    url = f"postgresql+psycopg://postgres@127.0.0.1:5432/{dbname}"
    return f"{url}?options=-csearch_path%3D{schema}" if schema else url


def need(condition: bool, reason: str) -> None:
    """Skip (or, in CI, fail) when a prerequisite of the test is missing."""
    if condition:
        return
    if IN_CI:
        pytest.fail(f"required in CI: {reason}")
    pytest.skip(reason)


def need_java() -> None:
    need(
        shutil.which("java") is not None or bool(os.environ.get("JAVA_HOME")),
        "Java 17 is not installed",
    )


def parse_outputs(stdout: str) -> dict[str, str]:
    pairs = {}
    for line in stdout.splitlines():
        key, sep, value = line.partition(" = ")
        if sep and key.strip().isidentifier():
            pairs[key.strip()] = value.strip()
    return pairs


# -- databases on the machine's servers, one per test or module ----------------------


@contextmanager
def _or_skip(database: AbstractContextManager[str]) -> Iterator[str]:
    """The database, or a skip (a failure under CI=true) when its server is missing."""
    with ExitStack() as stack:
        try:
            value = stack.enter_context(database)
        except _harness.Unavailable as exc:
            need(False, str(exc))
        yield value


def postgres_database() -> AbstractContextManager[str]:
    """A new, empty PostgreSQL database on 127.0.0.1:5432 (its name), dropped on exit."""
    return _or_skip(_harness.postgres_database())


def fresh_database(engine: str) -> AbstractContextManager[str]:
    """A new, empty database on the engine's server (its URL), dropped on exit."""
    return _or_skip(_harness.fresh_database(engine))


@contextmanager
def serving(app: Any, *, lifespan: str = "auto") -> Iterator[str]:
    """``app`` served by uvicorn on a free port, in a background thread; yields its URL."""
    import socket
    import threading
    import time

    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    # h11, as the server's workers use (lakeward/http/worker.py), whatever else is installed.
    config = uvicorn.Config(app, http="h11", log_level="warning", lifespan=lifespan)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


def over_stack(stack: Settings, data_dir: Path) -> Settings:
    """Settings with a state directory of their own over a stack's metastore and lake."""
    settings = stack.model_copy(update={"data_dir": data_dir})
    lake = stack.lake.model_copy(update={"root": stack.lake_root})
    return settings.model_copy(update={"lake": lake})


def lake_path(settings: Settings, location: str) -> Path:
    """The path on this machine of a place in a stack's embedded lake, however it is named
    (the metastore's s3://<bucket>/<key>, or file:/...)."""
    from lakeward.storage.paths import lake_uri, local_path

    path = local_path(lake_uri(settings, location))
    assert path is not None, f"{location} is not in the embedded lake"
    return path


def s3_client(url: str, key_id: str, secret: str, **config: Any) -> Any:
    """boto3's S3 client for the stack's (or a test's) S3 endpoint at ``url``."""
    import boto3
    from botocore.config import Config

    return boto3.client(
        "s3",
        endpoint_url=url,
        aws_access_key_id=key_id,
        aws_secret_access_key=secret,
        region_name="us-east-1",
        config=Config(retries={"max_attempts": 1}, **config),
    )


def bi_api(stack: Settings, user: str, csrf: bool = True) -> Any:
    """An httpx client of the stack's BI API signed in as ``user`` (a session issued under
    the stack's key, as sign-in would); the caller closes it."""
    import httpx

    from lakeward.access.keys import derive_key, load_master_key
    from lakeward.access.sessions import CSRF_HEADER, SESSION_COOKIE, Sessions

    sessions = Sessions(derive_key(load_master_key(stack.data_dir), "sessions"))
    token, session = sessions.issue(user)
    return httpx.Client(
        base_url=f"http://{stack.server.host}:{stack.server.port}/api/bi",
        cookies={SESSION_COOKIE: token},
        headers={CSRF_HEADER: session.csrf} if csrf else {},
        timeout=120,
    )
