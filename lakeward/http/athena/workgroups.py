"""CreateWorkGroup, UpdateWorkGroup and DeleteWorkGroup: Athena's shapes onto ``WorkGroup``.

Athena's ``WorkGroupConfiguration`` carries the output location, whether the
workgroup enforces it, ``BytesScannedCutoffPerQuery`` and ``EngineVersion``.
lakeward reads ``EngineVersion.SelectedEngineVersion`` as its engine's name
(``duckdb`` or ``spark``; ``AUTO`` is DuckDB) and takes the settings Athena has
no member for (timeout, concurrency, limit per principal) from
``AdditionalConfiguration``, a JSON object (128 characters at most, Athena's
own limit) such as ``{"TimeoutSeconds": 600, "MaxConcurrent": 2,
"MaxQueued": 10, "MaxPerPrincipal": 1}``. Any other member that would change
what Athena does (encryption, CloudWatch metrics, requester pays, tags, ...)
is refused, naming it, rather than accepted and ignored.
"""

from __future__ import annotations

import json
from typing import Any

from lakeward.errors import InvalidRequest
from lakeward.query.api import SqlApi
from lakeward.query.model import JsonDict, WorkGroup

# AdditionalConfiguration's keys: the WorkGroup field each one sets, and its type.
EXTENSIONS: dict[str, tuple[str, type]] = {
    "TimeoutSeconds": ("timeout_seconds", float),
    "MaxConcurrent": ("max_concurrent", int),
    "MaxQueued": ("max_queued", int),
    "MaxPerPrincipal": ("max_per_principal", int),
}
_ENGINES = {"duckdb": "duckdb", "spark": "spark", "AUTO": "duckdb"}
# Members lakeward honours in each structure; the others are refused if set.
_CONFIGURATION = {
    "ResultConfiguration",
    "EnforceWorkGroupConfiguration",
    "BytesScannedCutoffPerQuery",
    "EngineVersion",
    "AdditionalConfiguration",
    "PublishCloudWatchMetricsEnabled",
    "RequesterPaysEnabled",
}
_UPDATES = (_CONFIGURATION - {"ResultConfiguration"}) | {
    "ResultConfigurationUpdates",
    "RemoveBytesScannedCutoffPerQuery",
}


def additional_configuration(w: WorkGroup) -> str:
    return json.dumps(
        {key: getattr(w, field) for key, (field, _) in EXTENSIONS.items()},
        separators=(",", ":"),
    )


def _unsupported(members: JsonDict, honoured: set[str], where: str) -> None:
    for name, value in members.items():
        if name not in honoured:
            raise InvalidRequest(f"{where}.{name} is not supported by lakeward")
        if name in ("PublishCloudWatchMetricsEnabled", "RequesterPaysEnabled") and value:
            raise InvalidRequest(f"{where}.{name} is not supported by lakeward (only false)")


def _settings(configuration: JsonDict, where: str) -> dict[str, Any]:
    """The ``WorkGroup`` fields a configuration (or its updates) sets."""
    fields: dict[str, Any] = {}
    if "EnforceWorkGroupConfiguration" in configuration:
        fields["enforce_configuration"] = configuration["EnforceWorkGroupConfiguration"]
    if "BytesScannedCutoffPerQuery" in configuration:
        fields["bytes_scanned_cutoff"] = configuration["BytesScannedCutoffPerQuery"]
    if "EngineVersion" in configuration:
        selected = configuration["EngineVersion"].get("SelectedEngineVersion", "AUTO")
        if selected not in _ENGINES:
            raise InvalidRequest(
                f"{where}.EngineVersion.SelectedEngineVersion: {selected!r} is not an engine "
                f"lakeward runs; use one of {', '.join(_ENGINES)}"
            )
        fields["engine"] = _ENGINES[selected]
    if "AdditionalConfiguration" in configuration:
        fields |= _extensions(configuration["AdditionalConfiguration"], where)
    return fields


def _extensions(text: str, where: str) -> dict[str, Any]:
    where = f"{where}.AdditionalConfiguration"
    try:
        given = json.loads(text)
    except ValueError:
        raise InvalidRequest(f"{where} must be a JSON object, not {text!r}") from None
    if not isinstance(given, dict):
        raise InvalidRequest(f"{where} must be a JSON object, not {text!r}")
    fields: dict[str, Any] = {}
    for key, value in given.items():
        if key not in EXTENSIONS:
            raise InvalidRequest(f"{where}: unknown key {key!r}; known: {', '.join(EXTENSIONS)}")
        field, kind = EXTENSIONS[key]
        nullable = key == "MaxPerPrincipal"
        is_number = isinstance(value, int | float) and not isinstance(value, bool)
        if value is None and nullable:
            fields[field] = None
        elif is_number and (kind is float or float(value).is_integer()):
            fields[field] = kind(value)
        else:
            what = "a number" if kind is float else "an integer"
            raise InvalidRequest(
                f"{where}: {key} must be {what}{' or null' if nullable else ''}, not {value!r}"
            )
    return fields


def _output_location(result: JsonDict, where: str) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    for name in result:
        if name not in ("OutputLocation", "RemoveOutputLocation"):
            raise InvalidRequest(f"{where}.{name} is not supported by lakeward")
    if result.get("RemoveOutputLocation"):
        fields["output_location"] = None
    elif "OutputLocation" in result:
        fields["output_location"] = result["OutputLocation"].rstrip("/")
    return fields


def create_work_group(api: SqlApi, r: JsonDict, _: str) -> JsonDict:
    if r.get("Tags"):
        raise InvalidRequest("Tags are not supported by lakeward")
    configuration = r.get("Configuration", {})
    _unsupported(configuration, _CONFIGURATION, "Configuration")
    fields = _settings(configuration, "Configuration")
    fields |= _output_location(
        configuration.get("ResultConfiguration", {}), "Configuration.ResultConfiguration"
    )
    api.create_work_group(WorkGroup(name=r["Name"], description=r.get("Description", ""), **fields))
    return {}


def update_work_group(api: SqlApi, r: JsonDict, _: str) -> JsonDict:
    updates = r.get("ConfigurationUpdates", {})
    _unsupported(updates, _UPDATES, "ConfigurationUpdates")
    fields = _settings(updates, "ConfigurationUpdates")
    if updates.get("RemoveBytesScannedCutoffPerQuery"):
        fields["bytes_scanned_cutoff"] = None
    fields |= _output_location(
        updates.get("ResultConfigurationUpdates", {}),
        "ConfigurationUpdates.ResultConfigurationUpdates",
    )
    if "Description" in r:
        fields["description"] = r["Description"]
    if "State" in r:
        fields["state"] = r["State"]
    api.update_work_group(r["WorkGroup"], **fields)
    return {}


def delete_work_group(api: SqlApi, r: JsonDict, _: str) -> JsonDict:
    api.delete_work_group(r["WorkGroup"], recursive=bool(r.get("RecursiveDeleteOption")))
    return {}
