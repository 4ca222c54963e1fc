"""Metastore nodes: the real Thrift Hive Metastore service as background processes.

Each node is the Hive 2.3 metastore from the jars inside the pyspark wheel,
started through lakeward's launcher (``launcher/BoundMetastore.java``) so that
it listens on ``metastore.bind_address`` only. Node N serves on
``metastore.port + N - 1``; all nodes share one database and one
configuration; each has its pid file and log in the stack's data dir.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape

from lakeward.config import Settings
from lakeward.errors import StackError
from lakeward.jvm import find_java, java_env, s3a_jars
from lakeward.metastore.backends import MetastoreBackend, load_backend
from lakeward.metastore.launcher import (
    CHANGE_LISTENER,
    LAKE_FILE_SYSTEM,
    LAUNCHER_CLASS,
    launcher_classes,
)
from lakeward.process import ManagedProcess, listens_on, port_frees_within
from lakeward.storage.paths import catalog_uri, hadoop_conf, local_path, warehouse_uri

DEFAULT_PORT = 9083
WILDCARD_ADDRESSES = ("0.0.0.0", "::", "")

LOG4J2 = """\
status = warn
appender.file.type = Console
appender.file.name = console
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d{ISO8601} %-5p [%t] %c{2}: %m%n
rootLogger.level = info
rootLogger.appenderRef.file.ref = console
logger.datanucleus.name = DataNucleus
logger.datanucleus.level = warn
logger.dn.name = org.datanucleus
logger.dn.level = warn
"""


@dataclass(frozen=True)
class NodeStatus:
    name: str
    uri: str
    pid: int | None
    healthy: bool
    log: Path


class MetastoreNode:
    """One metastore node of a stack."""

    def __init__(self, settings: Settings, index: int = 1) -> None:
        if settings.metastore.port is None:
            raise StackError("the metastore port must be chosen before a node starts")
        self.settings = settings
        self.index = index
        self.port = settings.metastore.port + index - 1
        self.host = settings.metastore.host
        self.bind_address = settings.metastore.bind_address
        self.process = ManagedProcess(f"metastore-{index}", settings.data_dir / "run")
        self.backend: MetastoreBackend = load_backend(settings)

    @property
    def uri(self) -> str:
        return f"thrift://{self.host}:{self.port}"

    @property
    def conf_dir(self) -> Path:
        return self.settings.data_dir / "metastore" / "conf"

    @property
    def probe_uri(self) -> str:
        """Where the node itself answers: its bind address, unless it listens on all."""
        if self.bind_address in WILDCARD_ADDRESSES:
            return self.uri
        host = f"[{self.bind_address}]" if ":" in self.bind_address else self.bind_address
        return f"thrift://{host}:{self.port}"

    def healthy(self) -> bool:
        """Our node answers over Thrift on its port (not some other process on that port)."""
        pid = self.process.pid()
        if pid is None or not listens_on(pid, self.port):
            return False
        from lakeward.metastore.client import MetastoreClient  # Thrift: loaded when probed

        with MetastoreClient([self.probe_uri], timeout=5.0, rounds=1, retry_delay=0) as client:
            return client.ping()

    def answers_within(self, seconds: float) -> bool:
        """Healthy at some probe within ``seconds``: a loaded JVM (a GC pause, a busy
        machine) can miss one probe, and stopping a node that serves is worse than waiting."""
        deadline = time.monotonic() + seconds
        while True:
            if self.process.pid() is None:
                return False
            if self.healthy():
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(1.0)

    def status(self) -> NodeStatus:
        pid = self.process.pid()
        return NodeStatus(
            name=self.process.name,
            uri=self.uri,
            pid=pid,
            healthy=pid is not None and self.healthy(),
            log=self.process.log_file,
        )

    def start(self) -> None:
        """Start the node (creating the schema first if needed) and wait until it serves."""
        if self.launch():
            self.wait_ready()

    def launch(self) -> bool:
        """Start the node's process without waiting; False if it already serves."""
        if self.process.pid() is not None:
            if self.healthy():
                return False
            # Running but not answering: it may be starting (another up or heal launched it
            # moments ago, its JVM still loading) or slow to answer on a loaded machine.
            try:
                self.wait_ready()
                return False
            except StackError as exc:
                if self.process.pid() is not None:
                    raise StackError(
                        f"{self.process.name} is running but does not answer on {self.uri}; "
                        f"restart it: lakeward metastore heal. {exc.message}"
                    ) from None
            # It died while we waited (killed, or crashed while starting): start it
            # afresh, as for a node found dead.
        self._check_port()
        java = find_java(self.settings.metastore.java_home)
        self.backend.check()
        self.backend.ensure_schema(java)
        self._check_port()  # it may have been taken while the schema was made
        launcher = launcher_classes(java, self.settings.data_dir / "metastore")
        self.write_conf()
        command = [
            str(java),
            f"-Xmx{self.settings.metastore.heap}",
            f"-Dlog4j.configurationFile={self.conf_dir / 'log4j2.properties'}",
            f"-Dderby.stream.error.file={self.process.run_dir / 'derby.log'}",
            "-cp",
            ":".join([str(self.conf_dir), self.backend.classpath(), str(launcher), *self._jars()]),
            LAUNCHER_CLASS,
            self.bind_address,
            str(self.port),
        ]
        self.process.start(command, env=java_env(java))
        return True

    def _jars(self) -> list[str]:
        """Hadoop's s3a connector, for a lake on S3."""
        if local_path(self.settings.lake_root) is not None:
            return []
        return [str(jar) for jar in s3a_jars()]

    def wait_ready(self) -> None:
        self.process.wait_until(self.healthy, self.settings.metastore.start_timeout, "ready")

    def _check_port(self) -> None:
        if not port_frees_within(self.bind_address, self.port):
            raise StackError(
                f"port {self.port} on {self.bind_address} is taken by another process; "
                "choose another with metastore.port (or LAKEWARD_METASTORE__PORT)"
            )

    def stop(self) -> bool:
        return self.process.stop()

    def _lake_file_system(self) -> dict[str, str]:
        """How the node reaches the lake's s3:// names: the embedded lake's directory
        directly (launcher/LakeFileSystem.java), an S3 lake through s3a."""
        lake_dir = local_path(self.settings.lake_root)
        if lake_dir is not None:
            return {
                "fs.s3.impl": LAKE_FILE_SYSTEM,
                "fs.s3a.impl": LAKE_FILE_SYSTEM,
                "lakeward.lake.dir": str(lake_dir),
            }
        return hadoop_conf(self.settings)

    def write_conf(self) -> None:
        """The nodes' hive-site.xml (shared by all nodes; written whole, then renamed)."""
        settings = self.settings
        properties = {
            **self.backend.connection_properties(),
            **self.backend.datanucleus_properties(),
            "hive.metastore.warehouse.dir": catalog_uri(settings, warehouse_uri(settings)),
            # A new folder is made as it is: Hive would copy its parent's owner and
            # permissions with a shell command per folder, which an object store has not.
            "hive.warehouse.subdir.inherit.perms": "false",
            **self._lake_file_system(),
            # The schema exists already (created eagerly); never create tables lazily.
            "datanucleus.schema.autoCreateAll": "false",
            # A shared database has its VERSION row written with the schema, under
            # the schema lock: nodes check it (and refuse a foreign schema) rather
            # than each writing one. Derby's single node records it itself.
            "hive.metastore.schema.verification": str(self.backend.writes_version).lower(),
            "hive.metastore.schema.verification.record.version": str(
                not self.backend.writes_version
            ).lower(),
            "datanucleus.fixedDatastore": "true",
            "hive.async.log.enabled": "false",
            "hive.metastore.event.db.notification.api.auth": "false",
            # Every change is logged in the change's own transaction, so that
            # caching clients see it with the change (see launcher/ChangeLog.java).
            "hive.metastore.transactional.event.listeners": CHANGE_LISTENER,
            # A commit's lock whose writer died is released after this (launcher/DeadLocks).
            "hive.txn.timeout": f"{settings.metastore.lock_timeout}s",
            # Change log events older than this are pruned (launcher/OldChanges.java).
            "lakeward.changes.retention": str(settings.metastore.change_log_retention),
        }
        if not properties.get("javax.jdo.option.ConnectionPassword"):
            properties["lakeward.metastore.password.empty"] = "true"  # see BoundMetastore
        self.conf_dir.mkdir(parents=True, exist_ok=True)
        body = "".join(
            f"  <property><name>{escape(k)}</name><value>{escape(v)}</value></property>\n"
            for k, v in properties.items()
        )
        site = self.conf_dir / "hive-site.xml"
        tmp = self.conf_dir / f"hive-site.xml.{self.index}.tmp"
        tmp.write_text(f'<?xml version="1.0"?>\n<configuration>\n{body}</configuration>\n')
        tmp.chmod(0o600)  # it may hold the database password
        tmp.replace(site)
        (self.conf_dir / "log4j2.properties").write_text(LOG4J2)
