"""What every metastore backend provides: JDBC settings and an eager schema."""

from __future__ import annotations

import subprocess
import zipfile
from abc import ABC, abstractmethod
from pathlib import Path
from typing import TYPE_CHECKING

from lakeward.errors import MetastoreError
from lakeward.jvm import spark_jars

if TYPE_CHECKING:
    from lakeward.config import Settings

SCHEMA_TOOL = "org.datanucleus.store.schema.SchemaTool"


def metastore_jar() -> Path:
    jars = sorted(spark_jars().glob("hive-metastore-*.jar"))
    if not jars:
        raise MetastoreError(
            f"no hive-metastore jar in {spark_jars()}; is pyspark installed whole?"
        )
    return jars[-1]


class MetastoreBackend(ABC):
    """A database the metastore keeps its catalog in."""

    name: str
    writes_version = False  # whether create_schema writes Hive's VERSION row itself

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.work_dir = settings.data_dir / "metastore"

    @abstractmethod
    def connection_properties(self, creating: bool = False) -> dict[str, str]:
        """The ``javax.jdo.option.*`` settings of the metastore's database.

        ``creating`` is true while the schema is being created.
        """

    @abstractmethod
    def schema_ready(self) -> bool:
        """Whether the metastore schema has been created in the database."""

    def check(self) -> None:
        """Fail, naming the setting at fault, when the database cannot serve the metastore."""
        return  # an embedded database has nothing to check

    def ensure_schema(self, java: Path) -> None:
        """Create the schema unless it exists; safe to call from several nodes at once."""
        if not self.schema_ready():
            self.create_schema(java)

    def datanucleus_properties(self) -> dict[str, str]:
        """DataNucleus settings this database needs, for the schema tool and the nodes alike."""
        return {}

    def driver_jars(self) -> list[Path]:
        """JDBC driver jars the metastore needs besides Spark's own jars."""
        return []

    def classpath(self) -> str:
        return ":".join([str(spark_jars() / "*"), *(str(j) for j in self.driver_jars())])

    def create_schema(self, java: Path) -> None:
        """Create every metastore table at once, before any node serves.

        DataNucleus' SchemaTool reads the object mapping (``package.jdo``) from
        the hive-metastore jar and creates the whole schema in one run. Nodes
        then run with ``datanucleus.schema.autoCreateAll`` off: created lazily,
        table by table, the schema races (and deadlocks) once several nodes
        share one database.
        """
        self.work_dir.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(metastore_jar()) as jar:
            mapping = self.work_dir / "package.jdo"
            mapping.write_bytes(jar.read("package.jdo"))
        props = self.work_dir / "schema-tool.properties"
        lines = {
            **self.connection_properties(creating=True),
            # Hive's naming of tables and columns; the metastore expects it.
            "datanucleus.identifierFactory": "datanucleus1",
            "datanucleus.rdbms.useLegacyNativeValueStrategy": "true",
            "datanucleus.schema.autoCreateAll": "true",
            **self.datanucleus_properties(),
        }
        props.write_text("".join(f"{k}={v}\n" for k, v in lines.items()))
        command = [
            str(java), "-cp", self.classpath(), SCHEMA_TOOL,
            "-create", "-api", "JDO", "-props", str(props), str(mapping),
        ]  # fmt: skip
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        props.unlink(missing_ok=True)  # it may hold a password
        if result.returncode != 0 or "completed successfully" not in result.stdout:
            detail = (result.stderr or result.stdout).strip().splitlines()[-5:]
            raise MetastoreError(
                f"creating the metastore schema in the {self.name} database failed:\n    "
                + "\n    ".join(detail)
            )
