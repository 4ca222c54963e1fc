"""PostgreSQL instances: ``initdb`` and ``postgres`` from /usr/lib/postgresql/<version>/bin."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

from lakeward.databases.base import (
    LOCALHOST,
    Account,
    Endpoint,
    Engine,
    MasterCredentials,
    binary_version,
    replace_config_file,
    run_tool,
)
from lakeward.databases.classes import InstanceClass
from lakeward.errors import InvalidRequest, StackError

PG_ROOT = Path("/usr/lib/postgresql")
CONFIG = "lakeward.conf"  # included from postgresql.conf; rewritten on each class change


class PostgresEngine(Engine):
    server_name = "PostgreSQL"
    default_port = 5433  # 5432 is usually the machine's own server
    default_master = "postgres"
    server_account = "postgres"
    # SIGINT is PostgreSQL's fast shutdown: sessions are ended, not waited for.
    shutdown_signal = signal.SIGINT
    url_scheme = "postgresql"  # SQLAlchemy 2.1 reads it with psycopg 3

    def bin(self, major: str, tool: str) -> Path:
        return PG_ROOT / major / "bin" / tool

    def installed(self) -> dict[str, str]:
        found = {}
        for initdb in PG_ROOT.glob("*/bin/initdb"):
            major = initdb.parent.parent.name
            full = binary_version(initdb.parent / "postgres", r"\(PostgreSQL\) (\d+(?:\.\d+)*)")
            if full:
                found[major] = full
        return found

    def missing_binaries(self) -> str:
        return (
            f"no PostgreSQL server binaries under {PG_ROOT}/<version>/bin; install them "
            "(apt-get install postgresql-15, or ./dev.sh install)"
        )

    def initialize(
        self, root: Path, major: str, master: MasterCredentials, account: Account | None
    ) -> None:
        data = root / "data"
        data.mkdir(mode=0o700)
        pwfile = root / ".master-password"
        fd = os.open(pwfile, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, master.password.encode())
            os.close(fd)
            if account:
                account.give(data)
                account.give(pwfile)
            run_tool(
                [
                    str(self.bin(major, "initdb")),
                    "-D",
                    str(data),
                    "-U",
                    master.username,
                    f"--pwfile={pwfile}",
                    "--auth=scram-sha-256",
                    "--encoding=UTF8",
                    "--locale=C.UTF-8",
                    "--no-instructions",
                ],  # fmt: skip
                "initdb",
                account=account,
            )
        finally:
            pwfile.unlink(missing_ok=True)
        with open(data / "postgresql.conf", "a", encoding="utf-8") as conf:
            conf.write(
                f"\n# Written by lakeward: port, address and instance class.\ninclude '{CONFIG}'\n"
            )

    def class_settings(self, klass: InstanceClass) -> dict[str, str]:
        return {
            "shared_buffers": f"{klass.buffer_mb}MB",
            "max_connections": str(klass.max_connections),
            "work_mem": f"{klass.work_mem_mb}MB",
            "maintenance_work_mem": f"{klass.memory_mb // 8}MB",
            "effective_cache_size": f"{klass.memory_mb * 3 // 4}MB",
        }

    def write_config(
        self, root: Path, major: str, port: int, klass: InstanceClass, account: Account | None
    ) -> None:
        settings = {
            "listen_addresses": LOCALHOST,
            "port": str(port),
            # TCP only: no socket in a directory the server account may not own.
            "unix_socket_directories": "",
            **self.class_settings(klass),
        }
        lines = [f"# instance class {klass.name}: {klass.summary}"]
        lines += [f"{key} = '{value}'" for key, value in settings.items()]
        replace_config_file(root / "data" / CONFIG, lines, account)

    def server_command(self, root: Path, major: str) -> list[str]:
        return [str(self.bin(major, "postgres")), "-D", str(root / "data")]

    def ready(self, root: Path, major: str, port: int) -> bool:
        # Listening is not enough: during start-up it answers "starting up".
        probe = [str(self.bin(major, "pg_isready")), "-q", "-h", LOCALHOST, "-p", str(port)]
        return subprocess.run(probe, timeout=30, check=False).returncode == 0

    # -- any server ---------------------------------------------------------

    def _connect(self, endpoint: Endpoint, master: MasterCredentials, dbname: str) -> Any:
        import psycopg

        try:
            return psycopg.connect(
                host=endpoint.host,
                port=endpoint.port,
                user=master.username,
                password=master.password,
                dbname=dbname,
                connect_timeout=5,
                autocommit=True,
            )
        except psycopg.OperationalError as exc:
            reason = str(exc).strip().splitlines()[-1] if str(exc).strip() else "no answer"
            raise InvalidRequest(
                f"cannot log in to PostgreSQL at {endpoint} as {master.username}: {reason}"
            ) from None

    def server_version(self, endpoint: Endpoint, master: MasterCredentials) -> str:
        with self._connect(endpoint, master, "postgres") as conn:
            version: str = conn.execute("SHOW server_version").fetchone()[0]
        return f"PostgreSQL {version.split()[0]}"

    def ensure_database(self, endpoint: Endpoint, master: MasterCredentials, name: str) -> None:
        from psycopg import errors, sql

        with self._connect(endpoint, master, "postgres") as conn:
            found = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
            if found is None:
                # Another client may create it in the meantime: that is fine too.
                with contextlib.suppress(errors.DuplicateDatabase):
                    conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))

    def dump(self, endpoint: Endpoint, master: MasterCredentials, target: Path) -> None:
        server = self.server_version(endpoint, master).split()[1]
        major = server.split(".")[0]
        # pg_dumpall refuses servers newer than itself: use the newest installed.
        usable = [m for m in self.installed() if int(m) >= int(major)]
        if not usable:
            raise StackError(
                f"no pg_dumpall for PostgreSQL {server} is installed "
                f"(install postgresql-client-{major})"
            )
        tool = self.bin(max(usable, key=int), "pg_dumpall")
        run_tool(
            [
                str(tool),
                "-h",
                endpoint.host,
                "-p",
                str(endpoint.port),
                "-U",
                master.username,
                "--no-role-passwords",
                "-f",
                str(target),
            ],  # fmt: skip
            "final snapshot",
            env={"PGPASSWORD": master.password, "PGCONNECT_TIMEOUT": "10"},
        )
