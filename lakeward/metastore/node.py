"""Metastore nodes: the real Thrift Hive Metastore service as background processes.

Each node is ``org.apache.hadoop.hive.metastore.HiveMetaStore`` from the Hive
2.3 jars inside the pyspark wheel, with its configuration, pid file and log in
the stack's data dir.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape

from lakeward.config import Settings
from lakeward.errors import StackError
from lakeward.jvm import find_java, java_env
from lakeward.metastore.backends import MetastoreBackend, load_backend
from lakeward.metastore.client import MetastoreClient
from lakeward.process import ManagedProcess, listens_on, port_is_free
from lakeward.storage.paths import hadoop_uri, warehouse_uri

SERVER_CLASS = "org.apache.hadoop.hive.metastore.HiveMetaStore"
DEFAULT_PORT = 9083

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


def metastore_uris(settings: Settings) -> list[str]:
    if settings.metastore.port is None:
        raise StackError("the metastore port is not known yet; start the stack with: lakeward up")
    return [f"thrift://{settings.metastore.host}:{settings.metastore.port}"]


class MetastoreNode:
    """One metastore node of a stack."""

    def __init__(self, settings: Settings, index: int = 1) -> None:
        if settings.metastore.port is None:
            raise StackError("the metastore port must be chosen before a node starts")
        self.settings = settings
        self.index = index
        self.port = settings.metastore.port + index - 1
        self.host = settings.metastore.host
        self.process = ManagedProcess(f"metastore-{index}", settings.data_dir / "run")
        self.backend: MetastoreBackend = load_backend(settings)

    @property
    def uri(self) -> str:
        return f"thrift://{self.host}:{self.port}"

    @property
    def conf_dir(self) -> Path:
        return self.settings.data_dir / "metastore" / "conf"

    def healthy(self) -> bool:
        """Our node answers over Thrift on its port (not some other process on that port)."""
        pid = self.process.pid()
        if pid is None or not listens_on(pid, self.port):
            return False
        with MetastoreClient([self.uri], timeout=5.0, rounds=1, retry_delay=0) as client:
            return client.ping()

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
        if self.process.pid() is not None:
            if self.healthy():
                return
            raise StackError(
                f"{self.process.name} is running but does not answer on {self.uri}; "
                f"see {self.process.log_file}, or restart it: lakeward metastore stop"
            )
        if not port_is_free(self.host, self.port):
            raise StackError(
                f"port {self.port} on {self.host} is taken by another process; "
                "choose another with metastore.port (or LAKEWARD_METASTORE__PORT)"
            )
        java = find_java(self.settings.metastore.java_home)
        if not self.backend.schema_ready():
            self.backend.create_schema(java)
            if not port_is_free(self.host, self.port):  # taken while the schema was made
                raise StackError(
                    f"port {self.port} on {self.host} was taken by another process; "
                    "choose another with metastore.port (or LAKEWARD_METASTORE__PORT)"
                )
        self._write_conf()
        command = [
            str(java),
            f"-Xmx{self.settings.metastore.heap}",
            f"-Dlog4j.configurationFile={self.conf_dir / 'log4j2.properties'}",
            f"-Dderby.stream.error.file={self.process.run_dir / 'derby.log'}",
            "-cp",
            f"{self.conf_dir}:{self.backend.classpath()}",
            SERVER_CLASS,
            "-p",
            str(self.port),
        ]
        self.process.start(command, env=java_env(java))
        self.process.wait_until(self.healthy, self.settings.metastore.start_timeout, "ready")

    def stop(self) -> bool:
        return self.process.stop()

    def _write_conf(self) -> None:
        settings = self.settings
        properties = {
            **self.backend.connection_properties(),
            "hive.metastore.warehouse.dir": hadoop_uri(warehouse_uri(settings)),
            # The schema exists already (created eagerly); never create tables lazily.
            "datanucleus.schema.autoCreateAll": "false",
            "hive.metastore.schema.verification": "false",
            "hive.metastore.schema.verification.record.version": "true",
            "datanucleus.fixedDatastore": "true",
            "hive.async.log.enabled": "false",
            "hive.metastore.event.db.notification.api.auth": "false",
        }
        self.conf_dir.mkdir(parents=True, exist_ok=True)
        body = "".join(
            f"  <property><name>{escape(k)}</name><value>{escape(v)}</value></property>\n"
            for k, v in properties.items()
        )
        site = self.conf_dir / "hive-site.xml"
        site.write_text(f'<?xml version="1.0"?>\n<configuration>\n{body}</configuration>\n')
        site.chmod(0o600)  # it may hold the database password
        (self.conf_dir / "log4j2.properties").write_text(LOG4J2)
