"""The erasure report: what a request would purge, planned from the index, and its renderings.

The plan turns the index's holdings into executor targets: one per object
(the positions of every requested id merged), one per relational table, one
per configured Delta/Iceberg/Hudi table. Objects inside a table format's
directory are never planned as objects: a rewrite there would corrupt the
table, so they are listed as held by the table instead.

Reports are saved in the lake under ``reports/erasure/<request id>/`` of the
data bucket: ``report.json`` (its SHA-256 is the digest approval links are
bound to), ``report.txt`` and ``report.html``; the certificate joins them.
"""

from __future__ import annotations

import hashlib
import html
import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from lakeward.config import ErasureTable, Settings
from lakeward.erasure.executors import (
    CSV,
    DELTA,
    FILE_NAME,
    HUDI,
    ICEBERG,
    JSON_LINES,
    PARQUET,
    RELATIONAL,
    Executors,
    Target,
)
from lakeward.erasure.index import Holding
from lakeward.erasure.mappers import (
    DATABASE_LAYER,
    LAKE_LAYER,
    SIDECAR_SUFFIX,
    DatasetMapper,
    Mappers,
    RelationalMapper,
)
from lakeward.erasure.requests import Request
from lakeward.erasure.service import ErasureIndexService
from lakeward.errors import LakewardError, ObjectNotFound
from lakeward.metastore.uris import metastore_uris
from lakeward.storage import Storage
from lakeward.storage.paths import public_uri

REPORTS_PREFIX = "reports/erasure/"
_FORMAT_LAYERS = {"jsonl": JSON_LINES, "csv": CSV, "parquet": PARQUET, "filename": FILE_NAME,
                  "sidecar": FILE_NAME}  # fmt: skip
# A directory holding one of these is the root of a table format's table.
_TABLE_MARKERS = {"_delta_log/": DELTA, ".hoodie/": HUDI, "metadata/": ICEBERG}


def hash_id(user_id: str) -> str:
    """How the certificate names a data subject: it proves which ids, without holding them."""
    return hashlib.sha256(user_id.encode("utf-8")).hexdigest()


def report_prefix(request_id: str) -> str:
    return f"{REPORTS_PREFIX}{request_id}/"


class TableGuard:
    """Tells whether an object lies inside a Delta, Hudi or Iceberg table's directory."""

    def __init__(self, storage: Storage) -> None:
        self.storage = storage
        self._roots: dict[tuple[str, str], str | None] = {}

    def format_of(self, bucket: str, key: str) -> tuple[str, str] | None:
        """(format, table directory) of the table holding an object, or None."""
        parts = key.split("/")[:-1]
        for depth in range(len(parts), 0, -1):
            directory = "/".join(parts[:depth]) + "/"
            found = self._root(bucket, directory)
            if found is not None:
                return found, directory
        return None

    def _root(self, bucket: str, directory: str) -> str | None:
        cached = (bucket, directory)
        if cached not in self._roots:
            self._roots[cached] = None
            for marker, kind in _TABLE_MARKERS.items():
                keys = self.storage.keys(bucket, directory + marker)
                if kind == ICEBERG:
                    keys = [k for k in keys if k.endswith(".metadata.json")]
                if keys:
                    self._roots[cached] = kind
                    break
        return self._roots[cached]


def table_target(settings: Settings, table: ErasureTable) -> Target:
    if table.format == ICEBERG and table.catalog == "metastore":
        catalog = table.catalog_url or ",".join(metastore_uris(settings))
        return Target(ICEBERG, table.location, connection=catalog, id_columns=(table.id_column,))
    if table.format == ICEBERG:
        catalog = table.catalog_url or f"sqlite:///{settings.data_dir / 'erasure' / 'iceberg.db'}"
        return Target(ICEBERG, table.location, connection=catalog, id_columns=(table.id_column,))
    return Target(table.format, table.location, id_columns=(table.id_column,))


def plan(
    service: ErasureIndexService, executors: Executors, user_ids: Sequence[str]
) -> tuple[list[Target], dict[str, Any]]:
    """The targets of a purge of ``user_ids`` and the layers section of its report."""
    mappers = service.mappers()
    storage = service.storage
    guard = TableGuard(storage)
    found = service.store.find(list(user_ids))
    objects: dict[str, Target] = {}
    layers: dict[str, list[dict[str, Any]]] = {LAKE_LAYER: [], DATABASE_LAYER: [], "tables": []}
    inside_tables: list[dict[str, Any]] = []
    for user_id, holdings in found.items():
        for holding in holdings:
            if holding.layer == DATABASE_LAYER:
                target = _relational_target(mappers.relational, holding.location)
            else:
                target = _object_target(
                    service.settings, storage, mappers.dataset(holding.dataset), holding
                )
                within = guard.format_of(target.bucket, target.key)
                if within is not None:
                    table_name = public_uri(service.settings, target.bucket, within[1])
                    inside_tables.append({"uri": target.uri, "format": within[0],
                                          "table": table_name,
                                          "user_id": user_id})  # fmt: skip
                    continue
            for one in _with_sidecar(target, holding, mappers):
                known = objects.get(one.uri)
                objects[one.uri] = one if known is None else _merge(known, one)
    targets = list(objects.values())
    for target in targets:
        layer = DATABASE_LAYER if target.layer == RELATIONAL else LAKE_LAYER
        layers[layer].append(target.as_dict() | {"records": len(target.positions) or None})
    for table in service.settings.erasure.tables:
        target = table_target(service.settings, table)
        entry: dict[str, Any] = {
            "name": table.name,
            "format": table.format,
            "location": table.location,
        }
        try:
            entry["rows"] = executors.count(target, user_ids)
        except LakewardError as exc:
            entry["rows"], entry["note"] = None, exc.message
        except Exception as exc:  # the format library's own error, whatever it is
            entry["rows"], entry["note"] = None, f"could not read the table: {exc}"
        layers["tables"].append(entry)
        if table.format != HUDI and entry["rows"]:
            targets.append(target)
    if inside_tables:
        layers["inside_table_formats"] = inside_tables
    return targets, layers


def _object_target(
    settings: Settings, storage: Storage, mapper: DatasetMapper, holding: Holding
) -> Target:
    bucket, key = split_uri(storage, holding.location)
    uri = public_uri(settings, bucket, key)  # the name reports and certificates show
    etag: str | None = holding.etag
    try:
        info = storage.stat(bucket, key)
    except ObjectNotFound:
        info = None  # reported as missing by the purge, not fatal
    size = info.size if info else 0
    if mapper.format == "sidecar":
        # The described object is the user's whole; its eTag is not the sidecar's.
        etag = info.etag if info else None
    compression: str | None = "auto"
    if mapper.compression == "gzip" or key.endswith(".gz"):
        compression = "gzip"
    elif mapper.compression == "none":
        compression = None
    return Target(
        _FORMAT_LAYERS[mapper.format], uri, bucket, key, etag, size,
        positions=tuple(holding.positions), id_columns=tuple(mapper.id_columns),
        compression=compression,
    )  # fmt: skip


def _with_sidecar(target: Target, holding: Holding, mappers: Mappers) -> list[Target]:
    """An object described by a sidecar goes with its sidecar, which names the users too."""
    if holding.layer == DATABASE_LAYER or mappers.dataset(holding.dataset).format != "sidecar":
        return [target]
    sidecar = target.key + SIDECAR_SUFFIX
    uri = target.uri + SIDECAR_SUFFIX
    return [target, Target(FILE_NAME, uri, target.bucket, sidecar, holding.etag)]


def _relational_target(relational: Sequence[RelationalMapper], location: str) -> Target:
    for mapper in relational:
        if mapper.location == location:
            return Target(RELATIONAL, location, connection=mapper.url,
                          id_columns=(mapper.column,))  # fmt: skip
    raise LakewardError(f"the index names {location}, which no relational mapper declares")


def _merge(a: Target, b: Target) -> Target:
    positions = tuple(sorted(set(a.positions) | set(b.positions)))
    return Target.from_dict(a.as_dict() | {"positions": positions})


def split_uri(storage: Storage, uri: str) -> tuple[str, str]:
    """(bucket, key) of an object URI of this lake."""
    root = storage.root + "/"
    if not uri.startswith(root):
        raise LakewardError(f"{uri} is not in the lake at {storage.root}")
    bucket, _, key = uri[len(root) :].partition("/")
    return bucket, key


def document(
    request: Request, layers: dict[str, Any], retained: list[dict[str, str]]
) -> dict[str, Any]:
    """The report of a request, as saved in ``report.json``."""
    lake = layers.get(LAKE_LAYER, [])
    return {
        "request_id": request.id,
        "user_ids": request.user_ids,
        "requester": request.requester,
        "reason": request.reason,
        "dry_run": request.dry_run,
        "made_at": datetime.now(UTC).isoformat(),
        "layers": layers,
        "totals": {
            "objects": len(lake),
            "bytes": sum(e.get("size") or 0 for e in lake),
            "records": sum(e.get("records") or 0 for e in lake),
            "tables": len(layers.get(DATABASE_LAYER, [])) + len(layers.get("tables", [])),
        },
        "retained": retained,
    }


def encode(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False).encode("utf-8") + b"\n"


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def render_text(doc: dict[str, Any]) -> str:
    lines = [
        f"Erasure request {doc['request_id']}" + (" (dry run)" if doc["dry_run"] else ""),
        f"User ids: {', '.join(doc['user_ids'])}",
        f"Requested by: {doc['requester']}" + (f" ({doc['reason']})" if doc["reason"] else ""),
        f"Objects: {doc['totals']['objects']}, {doc['totals']['bytes']} bytes, "
        f"{doc['totals']['records']} records; tables: {doc['totals']['tables']}",
        "",
        "Lake objects:",
    ]
    for e in doc["layers"].get(LAKE_LAYER, []):
        where = f"positions {_positions(e['positions'])}" if e["positions"] else "whole object"
        lines.append(f"  {e['uri']}  [{e['layer']}] {where}; {e['size']} bytes, eTag {e['etag']}")
    lines.append("Relational tables:")
    for e in doc["layers"].get(DATABASE_LAYER, []):
        lines.append(f"  {e['uri']}")
    lines.append("Table formats:")
    for e in doc["layers"].get("tables", []):
        rows = "unknown" if e.get("rows") is None else e["rows"]
        lines.append(f"  {e['name']} ({e['format']}) {e['location']}: {rows} rows")
    for e in doc["layers"].get("inside_table_formats", []):
        lines.append(f"  inside a {e['format']} table (not rewritten as an object): {e['uri']}")
    lines.append("Copies that may keep the data alive:")
    for r in doc["retained"]:
        lines.append(f"  {r['copy']}: {r['kind']} ({r['state']})")
    return "\n".join(lines) + "\n"


def _positions(positions: Sequence[int]) -> str:
    shown = ", ".join(str(p) for p in positions[:20])
    return shown + (f" and {len(positions) - 20} more" if len(positions) > 20 else "")


def render_html(doc: dict[str, Any]) -> str:
    e = html.escape
    title = f"Erasure request {doc['request_id']}"
    rows = "".join(
        f"<tr><td>{e(x['layer'])}</td><td><code>{e(x['uri'])}</code></td>"
        f"<td>{e(_positions(x['positions']) or 'whole object')}</td>"
        f"<td>{x['size']}</td><td><code>{e(str(x['etag']))}</code></td></tr>"
        for x in doc["layers"].get(LAKE_LAYER, []) + doc["layers"].get(DATABASE_LAYER, [])
    )
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{e(title)}</title></head>"
        f"<body><h1>{e(title)}</h1><pre>{e(render_text(doc))}</pre>"
        "<table border='1'><tr><th>layer</th><th>location</th><th>positions</th>"
        f"<th>bytes</th><th>eTag</th></tr>{rows}</table></body></html>\n"
    )


def save(storage: Storage, bucket: str, request_id: str, doc: dict[str, Any]) -> str:
    """Write the report's three renderings; returns the digest of ``report.json``."""
    data = encode(doc)
    prefix = report_prefix(request_id)
    storage.put(bucket, prefix + "report.json", data)
    storage.put(bucket, prefix + "report.txt", render_text(doc).encode("utf-8"))
    storage.put(bucket, prefix + "report.html", render_html(doc).encode("utf-8"))
    return digest(data)


def retained_copies(
    storage: Storage, settings: Settings, covered: Sequence[str]
) -> list[dict[str, str]]:
    """Places that may keep copies alive and that the purge does not touch: never ignored."""
    copies: list[dict[str, str]] = []
    if storage.keeps_versions:
        copies.append({"copy": storage.root, "kind": "object versions (if the bucket is "
                       "versioned, older versions keep the data until deleted)",
                       "state": "retained"})  # fmt: skip
    else:
        copies.append({"copy": storage.root, "kind": "object versions (file:// keeps none)",
                       "state": "removed"})  # fmt: skip
    for table in settings.erasure.tables:
        if table.format == HUDI:
            copies.append({"copy": table.location, "state": "retained",
                           "kind": "Hudi table: needs its own DELETE and cleaner run"})  # fmt: skip
    bucket = settings.lake.data_bucket
    try:
        tops = storage.children(bucket, "")
    except LakewardError:
        tops = []
    for top in tops:
        prefix = f"{bucket}/{top}/"
        if top == REPORTS_PREFIX.split("/")[0]:
            continue
        if not any(c.startswith(prefix) or prefix.startswith(c) for c in covered):
            copies.append({"copy": public_uri(settings, bucket, top + "/"),
                           "kind": "zone not indexed (raw copies are not searched)",
                           "state": "retained"})  # fmt: skip
    return copies
