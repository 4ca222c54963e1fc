"""Embedded Derby: the default backend, a database in the stack's data dir.

Embedded Derby admits one JVM at a time, so this backend serves one node.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from lakeward.metastore.backends.base import MetastoreBackend


class DerbyBackend(MetastoreBackend):
    name = "derby"

    @property
    def database_dir(self) -> Path:
        return self.work_dir / "derby"

    @property
    def _marker(self) -> Path:
        return self.work_dir / "derby.schema-created"

    def connection_properties(self, creating: bool = False) -> dict[str, str]:
        return {
            "javax.jdo.option.ConnectionURL": (
                f"jdbc:derby:;databaseName={self.database_dir};create={str(creating).lower()}"
            ),
            "javax.jdo.option.ConnectionDriverName": "org.apache.derby.jdbc.EmbeddedDriver",
            "javax.jdo.option.ConnectionUserName": "APP",
            "javax.jdo.option.ConnectionPassword": "mine",
        }

    def schema_ready(self) -> bool:
        return self._marker.is_file() and self.database_dir.is_dir()

    def create_schema(self, java: Path) -> None:
        # A database without the marker is what an interrupted creation left.
        shutil.rmtree(self.database_dir, ignore_errors=True)
        super().create_schema(java)
        self._marker.write_text("created by DataNucleus SchemaTool\n")
