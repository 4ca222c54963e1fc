"""Registering existing servers (--endpoint), and the errors users meet.

Registration uses the machine's servers: PostgreSQL on 127.0.0.1:5432 (user
postgres, trust auth) and MariaDB on 127.0.0.1:3306 (root, no password).
"""

from __future__ import annotations

import json
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from lakeward.access.control import AccessControl
from lakeward.access.secrets import open_secret_store
from lakeward.config import load_settings
from lakeward.databases import Instances
from lakeward.errors import LakewardError
from tests.databases.conftest import need_engine
from tests.helpers import lakeward, need

# Managed instances take the first free port from a fixed start (5433, 3307), so
# these tests run in the one-process phase, not beside each other.
pytestmark = pytest.mark.serial


SERVERS = {
    "postgres": ("127.0.0.1:5432", "postgres"),
    "mariadb": ("127.0.0.1:3306", "root"),
}


def server_up(endpoint: str) -> bool:
    host, port = endpoint.split(":")
    try:
        socket.create_connection((host, int(port)), timeout=2).close()
    except OSError:
        return False
    return True


def drop_database(engine: str, name: str) -> None:
    if engine == "postgres":
        import psycopg

        with psycopg.connect(host="127.0.0.1", user="postgres", dbname="postgres",
                             autocommit=True) as conn:  # fmt: skip
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    else:
        import pymysql

        conn = pymysql.connect(host="127.0.0.1", port=3306, user="root", password="")
        with conn.cursor() as cursor:
            cursor.execute(f"DROP DATABASE IF EXISTS `{name}`")
        conn.close()


def database_exists(engine: str, name: str) -> bool:
    if engine == "postgres":
        import psycopg

        with psycopg.connect(host="127.0.0.1", user="postgres", dbname="postgres") as conn:
            query = "SELECT 1 FROM pg_database WHERE datname = %s"
            return conn.execute(query, (name,)).fetchone() is not None
    import pymysql

    conn = pymysql.connect(host="127.0.0.1", port=3306, user="root", password="")
    with conn.cursor() as cursor:
        found = cursor.execute("SHOW DATABASES LIKE %s", (name,))
    conn.close()
    return bool(found)


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def scratch_database(request: pytest.FixtureRequest) -> Iterator[str]:
    name = f"lakeward_db_{uuid.uuid4().hex[:10]}"
    yield name
    drop_database(request.node.callspec.params["engine"], name)


@pytest.mark.parametrize("engine", ["postgres", "mariadb"])
def test_register_an_existing_server(engine: str, data_dir: Path, scratch_database: str) -> None:
    endpoint, user = SERVERS[engine]
    need(server_up(endpoint), f"no {engine} server at {endpoint}")
    name = f"shared-{engine}"
    lakeward("db", "create", name, "--engine", engine, "--endpoint", endpoint,
             "--master-username", user, "--master-password", "", data_dir=data_dir)  # fmt: skip
    described = json.loads(lakeward("db", "describe", name, "--json", data_dir=data_dir).stdout)[0]
    assert described["endpoint"] == endpoint and described["status"] == "available"
    assert described["instance_class"] is None and described["local"] is False
    assert described["server"].startswith("PostgreSQL" if engine == "postgres" else "MariaDB")

    settings = load_settings(data_dir=data_dir, env={})
    instances = Instances(settings, open_secret_store(settings))
    url = instances.connection_url(name, scratch_database)
    assert url.endswith(f"@{endpoint}/{scratch_database}")
    assert database_exists(engine, scratch_database)

    for command in (["modify", name, "--instance-class", "db.large"], ["stop", name]):
        refused = lakeward("db", *command, data_dir=data_dir, check=False)
        assert refused.returncode != 0
        assert f"registered at {endpoint}" in refused.stderr

    lakeward("db", "delete", name, "--skip-final-snapshot", data_dir=data_dir)
    assert server_up(endpoint)  # only forgotten, never stopped
    assert database_exists(engine, scratch_database)
    assert instances.describe() == []


def test_registration_checks_the_credentials(data_dir: Path) -> None:
    endpoint, _ = SERVERS["mariadb"]
    need(server_up(endpoint), f"no MariaDB server at {endpoint}")
    settings = load_settings(data_dir=data_dir, env={})
    instances = Instances(settings, open_secret_store(settings))
    with pytest.raises(LakewardError, match=r"cannot log in to MariaDB at 127.0.0.1:3306 as root"):
        instances.create("wrong", "mariadb", endpoint=endpoint, master_username="root",
                         master_password="not-the-password")  # fmt: skip
    with pytest.raises(LakewardError, match="runs MariaDB 10.*not engine version 8.0"):
        instances.create("old", "mysql", "8.0", endpoint=endpoint, master_username="root",
                         master_password="")  # fmt: skip
    assert instances.describe() == []


def test_an_unreachable_endpoint_is_a_clear_error(data_dir: Path) -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    failed = lakeward("db", "create", "nowhere", "--engine", "postgres", "--endpoint",
                      f"127.0.0.1:{port}", "--master-username", "postgres",
                      "--master-password", "x", data_dir=data_dir, check=False)  # fmt: skip
    assert failed.returncode != 0
    assert f"cannot log in to PostgreSQL at 127.0.0.1:{port}" in failed.stderr
    assert "Traceback" not in failed.stderr


@pytest.mark.parametrize(
    ("args", "complaint"),
    [
        (
            ["db1", "--engine", "oracle"],
            "unknown engine 'oracle'; use one of postgres, mysql, mariadb",
        ),
        (["Bad_Name", "--engine", "postgres"], "invalid instance name 'Bad_Name'"),
        (["db1", "--engine", "postgres", "--instance-class", "db.huge"], "unknown instance class"),
        (["db1", "--engine", "postgres", "--endpoint", "nohost"], "is not HOST:PORT"),
        (["db1", "--engine", "postgres", "--master-password", "pw"], "--master-password is for"),
    ],
)
def test_bad_create_requests(args: list[str], complaint: str, data_dir: Path) -> None:
    failed = lakeward("db", "create", *args, data_dir=data_dir, check=False)
    assert failed.returncode != 0
    assert complaint in " ".join(failed.stderr.split())
    assert "Traceback" not in failed.stderr


@pytest.mark.parametrize(("engine", "available"), [("postgres", "15"), ("mysql", "10.11")])
def test_an_engine_version_not_installed_lists_those_that_are(
    engine: str, available: str, data_dir: Path
) -> None:
    need_engine(engine)
    failed = lakeward("db", "create", "db1", "--engine", engine, "--engine-version", "9",
                      data_dir=data_dir, check=False)  # fmt: skip
    message = " ".join(failed.stderr.split())
    assert f"engine version '9' of {engine} is not installed; available: {available}" in message
    if engine == "mysql":
        assert "runs MariaDB's server" in message


def test_a_taken_name_and_unknown_instances(data_dir: Path) -> None:
    endpoint, user = SERVERS["postgres"]
    need(server_up(endpoint), f"no PostgreSQL server at {endpoint}")
    settings = load_settings(data_dir=data_dir, env={})
    instances = Instances(settings, open_secret_store(settings))
    instances.create("taken", "postgres", endpoint=endpoint, master_username=user)
    with pytest.raises(LakewardError, match="instance named taken exists already"):
        instances.create("taken", "mariadb", endpoint="127.0.0.1:3306", master_username="root")
    for command in (["describe", "ghost"], ["credentials", "ghost"],
                    ["delete", "ghost", "--skip-final-snapshot"]):  # fmt: skip
        failed = lakeward("db", *command, data_dir=data_dir, check=False)
        assert failed.returncode != 0 and "database instance ghost not found" in failed.stderr
    both = lakeward("db", "delete", "taken", "--skip-final-snapshot", "--final-snapshot", "x.sql",
                    data_dir=data_dir, check=False)  # fmt: skip
    assert both.returncode != 0 and "not both" in both.stderr
    instances.delete("taken", final_snapshot=None)


def test_db_commands_are_authorized_and_audited(data_dir: Path) -> None:
    """An IAM user may describe instances, by policy, and may not read a master password."""
    endpoint, user = SERVERS["postgres"]
    need(server_up(endpoint), f"no PostgreSQL server at {endpoint}")
    settings = load_settings(data_dir=data_dir, env={})
    access = AccessControl(settings)
    Instances(settings, secrets=access.secrets).create(
        "shared", "postgres", endpoint=endpoint, master_username=user
    )
    access.principals.create_user("analyst")
    key_id, secret = access.principals.create_access_key("analyst")
    policy = {"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Action": "rds:Describe*", "Resource": "arn:lakeward:rds:::db:*"},
    ]}  # fmt: skip
    access.principals.create_policy("DescribeDatabases", policy)
    access.principals.attach_user_policy("analyst", "DescribeDatabases")
    as_analyst = {"AWS_ACCESS_KEY_ID": key_id, "AWS_SECRET_ACCESS_KEY": secret}

    described = lakeward("db", "describe", "shared", data_dir=data_dir, env=as_analyst)
    assert "shared" in described.stdout
    denied = lakeward("db", "credentials", "shared", data_dir=data_dir, env=as_analyst,
                      check=False)  # fmt: skip
    assert denied.returncode != 0
    assert "not authorized to perform: secretsmanager:GetSecretValue" in denied.stderr
    stopped = lakeward("db", "delete", "shared", "--skip-final-snapshot", data_dir=data_dir,
                       env=as_analyst, check=False)  # fmt: skip
    assert "not authorized to perform: rds:DeleteDBInstance" in stopped.stderr
    audit = lakeward("audit", data_dir=data_dir).stdout
    assert "rds:DescribeDBInstances" in audit and "rds:DeleteDBInstance" in audit
