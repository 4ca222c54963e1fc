"""``lakeward db`` on local instances, the same behaviour on PostgreSQL and on MariaDB.

The ``mysql`` engine runs MariaDB's server (Debian ships no MySQL server), so
this suite covers both of MariaDB's engine names' shared code through ``mysql``.
"""

from __future__ import annotations

import json
import os
import pwd
import socket
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from lakeward.access.secrets import open_secret_store
from lakeward.config import load_settings
from lakeward.databases import Instances
from lakeward.errors import LakewardError
from lakeward.stack import Stack
from tests.databases.conftest import Created, create_instance, need_engine
from tests.helpers import lakeward

# Managed instances take the first free port from a fixed start (5433, 3307), so
# these tests run in the one-process phase, not beside each other.
pytestmark = pytest.mark.serial


SETTINGS = {  # what each class must set, as the server reports it
    "postgres": {
        "db.small": ("50", "128MB"),
        "db.medium": ("100", "256MB"),
        "db.large": ("200", "512MB"),
    },
    "mysql": {
        "db.small": ("50", str(128 << 20)),
        "db.medium": ("100", str(256 << 20)),
        "db.large": ("200", str(512 << 20)),
    },
}


@pytest.fixture(scope="module", params=["postgres", "mysql"])
def instance(request: pytest.FixtureRequest, db_data_dir: Path) -> Created:
    engine = request.param
    return create_instance(db_data_dir, f"{engine}-main", engine)


def run_sql(created: Created, sql: str, database: str | None = None) -> list[tuple[Any, ...]]:
    creds = created.credentials()
    if created.engine == "postgres":
        import psycopg

        with psycopg.connect(
            host=creds["host"], port=creds["port"], user=creds["username"],
            password=creds["password"], dbname=database or "postgres", autocommit=True,
        ) as conn:  # fmt: skip
            cursor = conn.execute(sql)
            return list(cursor.fetchall()) if cursor.description else []
    import pymysql

    conn = pymysql.connect(
        host=creds["host"], port=creds["port"], user=creds["username"],
        password=creds["password"], database=database, autocommit=True,
    )  # fmt: skip
    try:
        with conn.cursor() as cursor:
            cursor.execute(sql)
            return list(cursor.fetchall())
    finally:
        conn.close()


def class_settings(created: Created) -> tuple[str, str]:
    if created.engine == "postgres":
        connections = run_sql(created, "SHOW max_connections")[0][0]
        buffers = run_sql(created, "SHOW shared_buffers")[0][0]
    else:
        connections, buffers = run_sql(
            created, "SELECT @@max_connections, @@innodb_buffer_pool_size"
        )[0]
    return str(connections), str(buffers)


def listening_addresses(port: int) -> set[str]:
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, _, hex_port = local.rpartition(":")
            if state == "0A" and int(hex_port, 16) == port:
                found.add(address)
    return found


def weekly_window(start: datetime, minutes: int = 30) -> str:
    end = start + timedelta(minutes=minutes)
    return f"{start:%a:%H:%M}-{end:%a:%H:%M}"


def test_describe_shows_an_available_instance_on_loopback(instance: Created) -> None:
    described = instance.describe()
    assert described["status"] == "available"
    assert described["engine"] == instance.engine
    assert described["instance_class"] == "db.small"
    assert described["pending_modifications"] == {}
    assert described["maintenance_window"] == "Sun:03:00-Sun:03:30"
    expected_server = "PostgreSQL 15" if instance.engine == "postgres" else "MariaDB 10"
    assert described["server"].startswith(expected_server)
    host, port = described["endpoint"].split(":")
    assert host == "127.0.0.1"
    # 127.0.0.1 only, in /proc/net/tcp's byte order; nothing on any other address
    assert listening_addresses(int(port)) == {"0100007F"}
    # As root, the server runs as the engine's own system account, never as root.
    record = json.loads(
        (instance.data_dir / "databases" / instance.name / "server.pid").read_text()
    )
    owner = Path(f"/proc/{record['pid']}").stat().st_uid
    expected = os.geteuid()
    if expected == 0:
        expected = pwd.getpwnam("postgres" if instance.engine == "postgres" else "mysql").pw_uid
    assert owner == expected != 0
    table = instance.cli("describe").stdout
    assert instance.name in table and "available" in table
    if instance.engine == "mysql":
        assert "MariaDB" in table  # a mysql instance says what really runs


def test_class_settings_are_applied_by_the_server(instance: Created) -> None:
    klass = instance.info().instance_class
    assert klass is not None
    assert class_settings(instance) == SETTINGS[instance.engine][klass]


def test_the_password_shows_only_through_credentials(instance: Created) -> None:
    creds = instance.credentials()
    password = creds["password"]
    assert len(password) == 32 and creds["username"] in ("postgres", "admin")
    shown = instance.cli("describe").stdout + instance.cli("describe", "--json").stdout
    assert password not in shown
    # Nowhere in the data dir in the clear: registry, server log, config, pid files, the
    # audit log, and the server's own files (they keep a hash) alike.
    # grep runs in a process of its own: opening and closing a SQLite file here would drop
    # this process's POSIX locks on it (the access stores are open here too).
    found = subprocess.run(
        ["grep", "-r", "-l", "-a", "-F", "-f", "-", str(instance.data_dir)],
        input=password, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert found.returncode == 1, f"the password is in: {found.stdout}{found.stderr}"


def test_modify_now_restarts_with_the_new_class(instance: Created) -> None:
    instance.instances().connection_url(instance.name, "app")  # creates it
    run_sql(instance, "CREATE TABLE kept (id INT)", "app")
    run_sql(instance, "INSERT INTO kept VALUES (7)", "app")
    described = json_of(instance.cli("modify", instance.name, "--instance-class", "db.medium",
                                     "--apply-immediately", "--json"))  # fmt: skip
    assert described["instance_class"] == "db.medium"
    assert described["status"] == "available" and described["pending_modifications"] == {}
    assert class_settings(instance) == SETTINGS[instance.engine]["db.medium"]
    assert run_sql(instance, "SELECT id FROM kept", "app") == [(7,)]


def test_a_pending_modification_waits_for_the_window(instance: Created) -> None:
    # Wednesday noon; the window is Sunday 03:00-03:30 UTC (the default).
    now = [datetime(2026, 11, 18, 12, 0, tzinfo=UTC)]
    instances = Instances(
        instance.settings, open_secret_store(instance.settings), clock=lambda: now[0]
    )
    info = instances.modify(instance.name, "db.large")
    assert info.pending_modifications == {"instance_class": "db.large"}
    assert info.instance_class == "db.medium"
    assert info.next_maintenance == datetime(2026, 11, 22, 3, 0, tzinfo=UTC)

    now[0] = datetime(2026, 11, 22, 2, 59, tzinfo=UTC)  # a minute before the window
    assert instances.maintain() == []
    assert instances.describe(instance.name)[0].pending_modifications
    assert class_settings(instance) == SETTINGS[instance.engine]["db.medium"]

    now[0] = datetime(2026, 11, 22, 3, 0, tzinfo=UTC)  # the window opens: describe applies it
    info = instances.describe(instance.name)[0]
    assert info.instance_class == "db.large" and info.pending_modifications == {}
    assert info.status == "available"
    assert class_settings(instance) == SETTINGS[instance.engine]["db.large"]


def test_db_maintain_applies_what_is_due(instance: Created) -> None:
    now = datetime.now(UTC)
    later = {"LAKEWARD_DATABASES__MAINTENANCE_WINDOW": weekly_window(now + timedelta(hours=2))}
    open_now = {"LAKEWARD_DATABASES__MAINTENANCE_WINDOW": weekly_window(now - timedelta(minutes=5))}
    instance.cli("modify", instance.name, "--instance-class", "db.small", env=later)
    described = json_of(instance.cli("describe", instance.name, "--json", env=later))
    assert described["pending_modifications"] == {"instance_class": "db.small"}
    assert "nothing due" in instance.cli("maintain", env=later).stdout
    assert class_settings(instance) == SETTINGS[instance.engine]["db.large"]

    assert instance.name in instance.cli("maintain", env=open_now).stdout
    assert class_settings(instance) == SETTINGS[instance.engine]["db.small"]
    assert instance.info().pending_modifications == {}


def test_stop_keeps_the_data_and_ensure_starts_it_again(instance: Created) -> None:
    instance.cli("stop", instance.name)
    info = instance.info()
    assert info.status == "stopped"
    with pytest.raises(OSError):
        socket.create_connection((info.endpoint.host, info.endpoint.port), timeout=2).close()

    instances = instance.instances()
    with pytest.raises(LakewardError, match="runs engine"):
        instances.ensure(instance.name, "mariadb" if instance.engine == "postgres" else "postgres")
    assert instances.ensure(instance.name, instance.engine).status == "available"
    assert run_sql(instance, "SELECT id FROM kept", "app") == [(7,)]

    # `lakeward down` stops the data dir's servers; `up` starts the metastore's through ensure.
    Stack(instance.settings).down(retain_data=True)
    assert instance.info().status == "stopped"
    assert instances.ensure(instance.name, instance.engine).status == "available"


def test_a_server_that_fails_to_start_is_reported_with_its_log(instance: Created) -> None:
    instance.instances().stop(instance.name)
    root = instance.data_dir / "databases" / instance.name
    config = root / "data" / "postgresql.conf" if instance.engine == "postgres" else root / "my.cnf"
    # A value PostgreSQL refuses; a name MariaDB does not know (it only warns of bad values).
    setting, line = (
        ("max_connections", "max_connections = plenty")
        if instance.engine == "postgres"
        else ("max_connectionz", "max_connectionz = 10")
    )
    original = config.read_text()
    config.write_text(original + f"\n{line}\n")
    try:
        failed = instance.cli("start", instance.name, check=False)
        assert failed.returncode != 0
        assert "exited while starting" in failed.stderr
        assert setting in failed.stderr  # the server's own complaint, from its log
        assert "Traceback" not in failed.stderr
        assert instance.info().status == "failed"
    finally:
        config.write_text(original)
    instance.instances().start(instance.name)  # fixed: it starts again
    assert instance.info().status == "available"


def test_a_taken_port_is_refused(instance: Created) -> None:
    port = instance.info().endpoint.port
    instance.instances().stop(instance.name)
    squatter = socket.socket()
    squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # past TIME_WAIT
    squatter.bind(("127.0.0.1", port))
    squatter.listen()
    try:
        refused = instance.cli("start", instance.name, check=False)
        assert refused.returncode != 0
        assert f"port {port} on 127.0.0.1 is taken by another process" in refused.stderr
        taken = instance.cli("create", "other", "--engine", instance.engine, "--port", str(port),
                             check=False)  # fmt: skip
        assert taken.returncode != 0 and f"port {port}" in taken.stderr
    finally:
        squatter.close()
    instance.instances().start(instance.name)


def test_delete_dumps_a_final_snapshot_that_restores(instance: Created, tmp_path: Path) -> None:
    url = instance.instances().connection_url(instance.name, "shop")
    expected_url = "postgresql://" if instance.engine == "postgres" else "mysql://"
    assert url.startswith(expected_url) and url.endswith("/shop")
    run_sql(instance, "CREATE TABLE orders (id INT PRIMARY KEY, item VARCHAR(20))", "shop")
    run_sql(instance, "INSERT INTO orders VALUES (1, 'lamp'), (2, 'desk')", "shop")

    refused = instance.cli("delete", instance.name, check=False)
    assert refused.returncode != 0 and "--final-snapshot" in refused.stderr
    existing = tmp_path / "existing.sql"
    existing.write_text("keep me")
    with pytest.raises(LakewardError, match="existing.sql exists; name a new file"):
        instance.instances().delete(instance.name, existing)
    assert existing.read_text() == "keep me"
    info = instance.info()
    assert info.status == "available"
    port = info.endpoint.port
    snapshot = tmp_path / "final.sql"
    instance.cli("delete", instance.name, "--final-snapshot", str(snapshot))
    assert "orders" in snapshot.read_text()
    gone = instance.cli("describe", instance.name, check=False)
    assert gone.returncode != 0 and "not found" in gone.stderr
    assert not (instance.data_dir / "databases" / instance.name).exists()
    assert listening_addresses(port) == set()

    restored = Created(f"{instance.engine}-restored", instance.engine, instance.data_dir)
    restored.instances().create(restored.name, restored.engine)
    load_dump(restored, snapshot)
    assert run_sql(restored, "SELECT id, item FROM orders ORDER BY id", "shop") == [
        (1, "lamp"),
        (2, "desk"),
    ]


def load_dump(created: Created, dump: Path) -> None:
    creds = created.credentials()
    if created.engine == "postgres":
        command = ["psql", "-q", "-h", creds["host"], "-p", str(creds["port"]),
                   "-U", creds["username"], "-d", "postgres", "-f", str(dump)]  # fmt: skip
        env = {"PGPASSWORD": creds["password"]}
    else:
        command = ["mariadb", "-h", creds["host"], "-P", str(creds["port"]),
                   "-u", creds["username"], "-e", f"source {dump}"]  # fmt: skip
        env = {"MYSQL_PWD": creds["password"]}
    subprocess.run(command, env={"PATH": "/usr/bin:/bin", **env}, check=True, capture_output=True)


def json_of(result: Any) -> dict[str, Any]:
    found: list[dict[str, Any]] = json.loads(result.stdout)
    return found[0]


def test_as_root_a_data_dir_the_server_account_cannot_enter_is_refused(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("only root hands the server to another account")
    need_engine("postgres")
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    failed = lakeward("db", "create", "db1", "--engine", "postgres",
                      data_dir=private / "data", check=False)  # fmt: skip
    message = " ".join(failed.stderr.split())
    assert failed.returncode != 0
    # The first directory on the way that others may not enter (private, or one above it).
    on_the_way = [*reversed(private.parents), private]
    blocked = next(p for p in on_the_way if not p.stat().st_mode & 0o001)
    assert f"'postgres' cannot enter {blocked} (mode " in message
    assert f"chmod o+x {blocked}" in message
    private_settings = load_settings(data_dir=private / "data", env={})
    assert Instances(private_settings, open_secret_store(private_settings)).describe() == []
