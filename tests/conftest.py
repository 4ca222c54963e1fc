"""Shared fixtures: a real stack (metastore + server + ETL of the real JHU files).

Tests that need Java, Spark or the JHU data skip with a reason on a developer's
machine that lacks them; under CI=true they fail instead, so that nothing is
silently left untested.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from moto.server import ThreadedMotoServer

from lakeward.config import Settings, load_settings
from tests.helpers import JHU_DIR, PG_SERVER, lakeward, need, need_java, pg_url, postgres_database


@pytest.fixture(scope="session")
def jhu_dir() -> Path:
    need((JHU_DIR / "time_series_covid19_confirmed_global.csv").is_file(),
         f"the JHU CSSE files are not at {JHU_DIR}")  # fmt: skip
    return JHU_DIR


@pytest.fixture(scope="session")
def stack_dir(tmp_path_factory: pytest.TempPathFactory, jhu_dir: Path) -> Iterator[Path]:
    """A stack brought up with ``lakeward up`` on the real JHU files, for the session."""
    need_java()
    data_dir = tmp_path_factory.mktemp("stack") / "data"
    try:
        result = lakeward("up", "--covid-source", str(jhu_dir), data_dir=data_dir, timeout=900)
    except BaseException:
        # What started before the failure (the metastore, say) must not outlive the run.
        lakeward("down", data_dir=data_dir, check=False, timeout=120)
        raise
    (data_dir / "up.stdout").write_text(result.stdout)
    yield data_dir
    lakeward("down", data_dir=data_dir, check=False, timeout=120)


@pytest.fixture(scope="session")
def stack(stack_dir: Path) -> Settings:
    """The settings of the running session stack, as any command would load them."""
    return load_settings(data_dir=stack_dir, env={})


@pytest.fixture(scope="session")
def spark(stack: Settings) -> Iterator[object]:
    """An in-process SparkSession wired to the session stack."""
    from lakeward.spark import build_session

    session = build_session(stack, "lakeward-tests")
    yield session
    session.stop()


@pytest.fixture(scope="module")
def postgres_db() -> Iterator[str]:
    """A fresh PostgreSQL database on 127.0.0.1:5432 for this module, dropped afterwards.

    Skips without a server (fails under CI=true).
    """
    with postgres_database() as name:
        yield name


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def db_backend(request: pytest.FixtureRequest) -> str:
    """The backend of the store fixtures below: a test taking any of them runs on each.

    Module-scoped, so that a module's tests on one backend share its PostgreSQL database.
    """
    return str(request.param)


@pytest.fixture
def new_db(
    request: pytest.FixtureRequest, db_backend: str, tmp_path: Path
) -> Callable[[], str | Path]:
    """Fresh places for a store's state, one per call: SQLite files in the test's
    directory, or schemas of their own in the module's PostgreSQL database."""
    made: list[str | Path] = []

    def make() -> str | Path:
        if db_backend == "sqlite":
            where: str | Path = tmp_path / ("state.db" if not made else f"state-{len(made)}.db")
        else:
            import psycopg

            dbname = request.getfixturevalue("postgres_db")
            schema = f"t_{uuid.uuid4().hex[:12]}"
            with psycopg.connect(PG_SERVER, dbname=dbname, autocommit=True) as conn:
                conn.execute(f"CREATE SCHEMA {schema}")
            where = pg_url(dbname, schema)
        made.append(where)
        return where

    return make


@pytest.fixture
def db(new_db: Callable[[], str | Path]) -> str | Path:
    """Where a store keeps its state: a SQLite file, or a schema of its own in the
    module's PostgreSQL database (``postgres_db``). Every store's tests take it (or
    ``new_db`` for several), so each runs on both backends."""
    return new_db()


@pytest.fixture(scope="module")
def service_db(request: pytest.FixtureRequest, db_backend: str) -> str | None:
    """The database URL a whole service of the module is configured with (index,
    requests, a user's tables): None on SQLite (each component's file in the data dir,
    the default), else the module's PostgreSQL database."""
    if db_backend == "sqlite":
        return None
    return pg_url(request.getfixturevalue("postgres_db"))


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """A moto S3 server on a free port of 127.0.0.1, for the whole session: every test of
    an s3:// code path uses it (no S3-compatible server can be installed here)."""
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def isolated_aws(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # A developer's own AWS profile or endpoint must not leak into the tests.
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))


# What a test needs, as markers, so that `-m "not spark"`, `-m postgres` ... select
# by it. Given here from the fixtures a test uses and the backends it is parametrized
# over, so that a new test is marked without anyone remembering to.
_SPARK_FIXTURES = {"stack", "stack_dir", "spark"}
_BROWSER_FIXTURES = {"browser", "page"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        where = item.nodeid.lower()
        if fixtures & _SPARK_FIXTURES and item.get_closest_marker("spark") is None:
            item.add_marker(pytest.mark.spark)
        if fixtures & _BROWSER_FIXTURES:
            item.add_marker(pytest.mark.browser)
        if "postgres" in where or fixtures & {"postgres_db", "postgres_url"}:
            item.add_marker(pytest.mark.postgres)
        if "mariadb" in where or "mysql" in where or "mariadb_url" in fixtures:
            item.add_marker(pytest.mark.mariadb)
