"""A database the metastore cannot use is refused before any node starts, naming the setting."""

from __future__ import annotations

from pathlib import Path

import pytest

from lakeward.config import load_settings
from lakeward.errors import ConfigError, JavaError, MetastoreError
from lakeward.metastore.backends import load_backend, server
from lakeward.metastore.backends.mysql import MysqlBackend
from lakeward.metastore.backends.postgres import PostgresBackend
from lakeward.metastore.backends.server import Connection, parse_version
from lakeward.metastore.launcher import find_javac
from lakeward.process import free_port
from tests.helpers import lakeward


def start(data_dir: Path, backend: str, url: str, *flags: str) -> tuple[int, str]:
    env = {"LAKEWARD_METASTORE__BACKEND": backend, "LAKEWARD_METASTORE__URL": url}
    result = lakeward("metastore", "start", *flags, data_dir=data_dir, env=env, check=False)
    assert "Traceback" not in result.stderr
    return result.returncode, " ".join(result.stderr.split())


def test_wrong_password(tmp_path: Path, mariadb_url: str) -> None:
    url = mariadb_url.replace("root@", "root:not-the-password@")
    code, message = start(tmp_path / "d", "mariadb", url)
    assert code == 2
    assert "metastore.url: cannot connect to the MariaDB database root@127.0.0.1:3306/" in message
    assert "Access denied" in message
    assert "not-the-password" not in message
    assert not (tmp_path / "d" / "run").exists()  # no node was started


def test_unreachable_host(tmp_path: Path) -> None:
    port = free_port("127.0.0.1", 25_432)  # nothing listens there
    code, message = start(tmp_path / "d", "postgres", f"postgresql://postgres@127.0.0.1:{port}/x")
    assert code == 2
    assert (
        f"metastore.url: cannot connect to the PostgreSQL database postgres@127.0.0.1:{port}/x"
        in message
    )
    assert "refused" in message.lower()


def test_missing_database(tmp_path: Path, postgres_url: str) -> None:
    url = postgres_url.rsplit("/", 1)[0] + "/no_such_database_here"
    code, message = start(tmp_path / "d", "postgres", url)
    assert code == 2
    assert "metastore.url" in message and "no_such_database_here" in message


@pytest.mark.parametrize(
    ("backend_class", "product", "reported", "minimum"),
    [
        (PostgresBackend, "PostgreSQL", (12, 2), "12.3"),
        (
            MysqlBackend,
            "MariaDB",
            parse_version("10.4.12-MariaDB-1:10.4.12+maria~focal"),
            "10.4.13",
        ),
        (MysqlBackend, "MySQL", parse_version("8.0.16"), "8.0.17"),
    ],
)
def test_too_old_a_server(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
    backend_class: type[server.ServerBackend],
    product: str,
    reported: tuple[int, ...],
    minimum: str,
) -> None:
    """No server older than the minimum exists to test against: the version lookup is
    replaced in-process by one reporting an older version; everything else is real."""
    backend_name = "postgres" if backend_class is PostgresBackend else "mysql"
    url = request.getfixturevalue("postgres_url" if backend_name == "postgres" else "mariadb_url")
    env = {"LAKEWARD_METASTORE__BACKEND": backend_name, "LAKEWARD_METASTORE__URL": url}
    backend = load_backend(load_settings(data_dir=tmp_path, env=env))
    assert isinstance(backend, backend_class)
    backend.check()  # the real server is new enough

    def older(self: server.ServerBackend, connection: Connection) -> tuple[str, tuple[int, ...]]:
        return product, reported

    monkeypatch.setattr(backend_class, "_server_version", older)
    with pytest.raises(ConfigError) as caught:
        backend.check()
    found = ".".join(map(str, reported))
    assert caught.value.message.startswith("metastore.url: the server at 127.0.0.1:")
    assert (
        f"is {product} {found}; the metastore needs {product} {minimum} or newer"
        in caught.value.message
    )


def test_derby_serves_one_node(tmp_path: Path) -> None:
    result = lakeward("metastore", "start", "--nodes", "3", data_dir=tmp_path / "d", check=False)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    message = " ".join(result.stderr.split())
    assert "metastore.nodes: the derby backend serves one node" in message
    assert "(from flag --nodes)" in message


def test_url_of_the_wrong_engine(tmp_path: Path) -> None:
    code, message = start(tmp_path / "d", "postgres", "mysql://root:secret@127.0.0.1:3306/x")
    assert code == 2
    assert (
        "metastore.url: 'mysql://root:***@127.0.0.1:3306/x' is not a postgres database URL"
        in message
    )


def test_missing_jdbc_driver(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(server, "JDBC_DIR", tmp_path)
    env = {"LAKEWARD_METASTORE__BACKEND": "mariadb", "LAKEWARD_METASTORE__URL": "mariadb://u@h/db"}
    backend = load_backend(load_settings(data_dir=tmp_path, env=env))
    with pytest.raises(MetastoreError, match="sudo apt-get install -y libmariadb-java"):
        backend.check()


def test_missing_javac_names_the_jdk_package(tmp_path: Path) -> None:
    java = tmp_path / "jre" / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text("#!/bin/sh\n")
    with pytest.raises(JavaError, match="openjdk-17-jdk-headless"):
        find_javac(java)


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"NODES": "0"}, "metastore.nodes: Input should be greater than or equal to 1"),
        (
            {"BACKEND": "postgres", "URL": "postgresql://u@h/db", "INSTANCE": "main"},
            "metastore.instance: set metastore.url or metastore.instance, not both",
        ),
        ({"URL": "postgresql://u@h/db"}, "metastore.url: the derby backend takes no url"),
        ({"BACKEND": "mariadb", "URL": "mariadb://u@h"}, "metastore.url: 'mariadb://u@h' is not"),
    ],
)
def test_invalid_metastore_settings_name_the_key(
    tmp_path: Path, env: dict[str, str], expected: str
) -> None:
    variables = {f"LAKEWARD_METASTORE__{k}": v for k, v in env.items()}
    with pytest.raises(ConfigError) as caught:
        load_settings(data_dir=tmp_path, env=variables)
    assert expected in caught.value.message
    assert "(from environment variable LAKEWARD_METASTORE__" in caught.value.message


def test_a_schema_of_another_hive_version_is_refused(tmp_path: Path, postgres_url: str) -> None:
    import psycopg

    with psycopg.connect(postgres_url, autocommit=True) as connection:
        connection.execute('CREATE TABLE "DBS" ("DB_ID" BIGINT PRIMARY KEY)')
        connection.execute(
            'CREATE TABLE "VERSION" ("VER_ID" BIGINT PRIMARY KEY, "SCHEMA_VERSION" VARCHAR(127), '
            '"VERSION_COMMENT" VARCHAR(255))'
        )
        connection.execute("""INSERT INTO "VERSION" VALUES (1, '1.2.0', 'Hive 1.2.0')""")
    code, message = start(tmp_path / "d", "postgres", postgres_url)
    assert code == 2
    assert "metastore.url: the database postgres@127.0.0.1:5432/" in message
    assert "holds a Hive metastore schema of version 1.2.0" in message
    with psycopg.connect(postgres_url) as connection:  # left as it was
        assert connection.execute('SELECT COUNT(*) FROM "DBS"').fetchone() == (0,)
