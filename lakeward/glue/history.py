"""Glue's table versions over lakeward's archive of earlier definitions (versions.py).

The newest version is the metastore's current definition; the archived ones precede it.
``restore_version`` goes beyond Glue: it puts an archived definition back, through
UpdateTable, so the definition it replaces is archived in turn.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lakeward.errors import InvalidRequest, LakewardError, ResourceNotFound
from lakeward.glue import shapes
from lakeward.glue.base import GlueBase, detail, paged
from lakeward.glue.versions import TableVersions
from lakeward.query.model import JsonDict

# What of a stored Table an UpdateTable's TableInput takes back.
_TABLE_INPUT = (
    "Name", "Description", "Owner", "LastAccessTime", "Retention", "StorageDescriptor",
    "PartitionKeys", "ViewOriginalText", "ViewExpandedText", "TableType", "Parameters",
)  # fmt: skip


class VersionOperations(GlueBase):
    versions: TableVersions
    update_table: Callable[[JsonDict], JsonDict]  # GlueService's

    def current_version(self, catalog: str, database: str, name: str, raw: Any) -> int:
        archived = self.versions.archived(catalog, database, name, raw.createTime)
        return archived[-1].version + 1 if archived else 1

    def _all_versions(self, r: JsonDict, action: str) -> tuple[list[JsonDict], int]:
        """Every version of the table, newest first, and the current one's number."""
        catalog, client, catalog_id = self._catalog(r)
        database, name = r["DatabaseName"].lower(), r["TableName"].lower()
        self._authorize(action, catalog, database, name)
        raw = self._raw_table(client, database, name)
        archived = self.versions.archived(catalog, database, name, raw.createTime)
        current = archived[-1].version + 1 if archived else 1
        found = [
            {"Table": shapes.glue_table(raw, catalog_id, str(current)), "VersionId": str(current)}
        ]
        for version in reversed(archived):
            table = {**version.table, "CatalogId": catalog_id, "VersionId": str(version.version)}
            found.append({"Table": table, "VersionId": str(version.version)})
        return found, current

    def get_table_versions(self, r: JsonDict) -> JsonDict:
        found, _ = self._all_versions(r, "glue:GetTableVersions")
        page, more = paged(found, r, limit=100)
        return {"TableVersions": page, **more}

    def get_table_version(self, r: JsonDict) -> JsonDict:
        found, current = self._all_versions(r, "glue:GetTableVersion")
        wanted = r.get("VersionId") or str(current)
        for version in found:
            if version["VersionId"] == wanted:
                return {"TableVersion": version}
        raise ResourceNotFound(f"Version {wanted} of table {r['TableName']} not found")

    def delete_table_version(self, r: JsonDict) -> JsonDict:
        errors = self._delete_versions(r, [r["VersionId"]], "glue:DeleteTableVersion")
        if errors:
            raise errors[0][1]
        return {}

    def batch_delete_table_version(self, r: JsonDict) -> JsonDict:
        errors = self._delete_versions(r, list(r["VersionIds"]), "glue:BatchDeleteTableVersion")
        return {
            "Errors": [
                {"TableName": r["TableName"], "VersionId": v, "ErrorDetail": detail(exc)}
                for v, exc in errors
            ]
        }

    def _delete_versions(
        self, r: JsonDict, wanted: list[str], action: str
    ) -> list[tuple[str, LakewardError]]:
        catalog, _, _ = self._catalog(r)
        database, name = r["DatabaseName"].lower(), r["TableName"].lower()
        found, current = self._all_versions(r, action)
        known = {v["VersionId"] for v in found}
        errors: list[tuple[str, LakewardError]] = []
        gone = []
        for version in wanted:
            if version == str(current):
                errors.append((version, InvalidRequest(
                    f"Version {version} is the current version of table {name}; "
                    "it cannot be deleted"
                )))  # fmt: skip
            elif version not in known:
                errors.append((version, ResourceNotFound(f"Version {version} not found")))
            else:
                gone.append(int(version))
        if gone:
            self.versions.delete(catalog, database, name, gone)
        return errors

    def restore_version(self, r: JsonDict) -> JsonDict:
        """Put version ``VersionId`` of the table back as its current definition."""
        version = self.get_table_version(r)["TableVersion"]
        table = version["Table"]
        given = {k: table[k] for k in _TABLE_INPUT if k in table}
        given["Parameters"] = {
            k: v for k, v in given.get("Parameters", {}).items() if k != shapes.LAST_DDL_TIME
        }
        request: JsonDict = {k: r[k] for k in ("CatalogId", "DatabaseName") if k in r}
        self.update_table({**request, "TableInput": given})
        return {"Table": table["Name"], "RestoredVersion": version["VersionId"]}
