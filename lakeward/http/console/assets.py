"""The console's scripts, styles and vendored files: compressed, named by their content,
cached by browsers for a year.

A page names each asset by ``asset_url(name)``, ``/console/assets/<hash>/<name>``, where
the hash is of the file's bytes: a new release changes the address, so a browser may keep
an asset forever (``immutable``) and never asks again. The bytes are gzip-compressed once,
when first asked for, and sent compressed to a browser that accepts gzip (plotly.js: 4.8 MB
as shipped, 1.4 MB sent).
"""

from __future__ import annotations

import gzip
import hashlib
import mimetypes
import threading
from dataclasses import dataclass
from pathlib import Path

from fastapi import Request
from fastapi.responses import Response

from lakeward.errors import ResourceNotFound

_FOREVER = "public, max-age=31536000, immutable"
_TYPES = {".js": "text/javascript", ".css": "text/css", ".json": "application/json"}
# Files smaller than this gain little from compression and are sent as they are.
_SMALL = 1024


@dataclass(frozen=True)
class _Asset:
    path: Path
    digest: str  # of the bytes as shipped: the asset's address
    media_type: str


class Assets:
    """The console's assets by name (``console.js``, ``plotly.min.js``, ``topojson/x.json``)."""

    def __init__(self, prefix: str, files: dict[str, Path], folders: dict[str, Path]) -> None:
        """``files`` by name; each folder's files as ``<folder>/<file>``, all at one address
        (``url("<folder>/")``), as a library that fetches them by name from a base needs."""
        self.prefix = prefix
        self._assets: dict[str, _Asset] = {}
        self._compressed: dict[str, bytes] = {}
        self._lock = threading.Lock()
        for name, path in files.items():
            if path.is_file():
                self._add(name, path, hashlib.sha256(path.read_bytes()).hexdigest()[:16])
        for folder, directory in folders.items():
            paths = sorted(directory.glob("*")) if directory.is_dir() else []
            whole = hashlib.sha256()
            for path in paths:
                whole.update(path.name.encode() + b"\0" + path.read_bytes())
            self._assets[folder + "/"] = _Asset(directory, whole.hexdigest()[:16], "")
            for path in paths:
                self._add(f"{folder}/{path.name}", path, whole.hexdigest()[:16])

    def _add(self, name: str, path: Path, digest: str) -> None:
        media = _TYPES.get(path.suffix) or mimetypes.guess_type(path.name)[0]
        self._assets[name] = _Asset(path, digest, media or "application/octet-stream")

    def url(self, name: str) -> str:
        """Where a page loads the asset (or a folder's, for ``"<folder>/"``); an asset not
        installed keeps an address of its own, which answers that it is not installed."""
        asset = self._assets.get(name)
        return f"{self.prefix}/assets/{asset.digest if asset else 'missing'}/{name}"

    def known(self, name: str) -> bool:
        return name in self._assets and not name.endswith("/")

    def response(self, request: Request, digest: str, name: str) -> Response:
        asset = self._assets.get(name)
        if asset is None or name.endswith("/"):
            raise ResourceNotFound(f"the console has no asset {name}")
        headers = {
            # An old page asking for an earlier release's asset gets today's, uncached.
            "Cache-Control": _FOREVER if digest == asset.digest else "no-cache",
            "X-Content-Type-Options": "nosniff",
            "Vary": "Accept-Encoding",
            "ETag": f'"{asset.digest}"',
        }
        if request.headers.get("if-none-match") == headers["ETag"]:
            return Response(status_code=304, headers=headers)
        body = asset.path.read_bytes()
        if len(body) >= _SMALL and "gzip" in request.headers.get("accept-encoding", ""):
            body = self._gzipped(name, body)
            headers["Content-Encoding"] = "gzip"
        return Response(body, media_type=asset.media_type, headers=headers)

    def _gzipped(self, name: str, body: bytes) -> bytes:
        with self._lock:  # compressed once, whichever request comes first
            found = self._compressed.get(name)
            if found is None:
                found = self._compressed[name] = gzip.compress(body, compresslevel=9, mtime=0)
            return found
