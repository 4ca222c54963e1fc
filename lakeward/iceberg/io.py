"""The file IO Iceberg's metadata and data go through when the lake is embedded.

An embedded lake (``file://``) is served by the stack's S3 endpoint, so tables name their
files ``s3://<bucket>/<key>``, as every other engine on the metastore (Spark, Trino, a
pyiceberg client through the endpoint) reads them. Inside the stack the same names are
files under the lake's directory: this IO reads and writes them there, with no HTTP hop,
and keeps the ``s3://`` names in what it writes.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.typedef import EMPTY_DICT, Properties

LAKE_ROOT = "lakeward.lake-root"
"""The property naming the lake's directory (``file:///.../lake``)."""


class LakeFileIO(PyArrowFileIO):
    @staticmethod
    def parse_location(location: str, properties: Properties = EMPTY_DICT) -> tuple[str, str, str]:
        root = properties.get(LAKE_ROOT)
        parts = urlsplit(location)
        if root and parts.scheme in ("s3", "s3a"):
            directory = urlsplit(root).path.rstrip("/")
            return "file", "", f"{directory}/{parts.netloc}{parts.path}"
        return PyArrowFileIO.parse_location(location, properties)
