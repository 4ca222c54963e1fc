"""What every Glue operation shares: the catalog a call names, Glue's IAM check, the
metastore's errors as Glue's, and Glue's paging.

A table is read and changed with the metastore's own Thrift calls (``get_table``,
``alter_table``, ``add_partitions``...) through the catalog's failover client, each
mutation with a check of whether it took (a create whose answer was lost is neither
applied twice nor reported failed). The metastore's errors become Glue's:
``NoSuchObjectException`` is ``EntityNotFoundException``, ``AlreadyExistsException``
stays itself, ``InvalidObjectException`` and ``MetaException`` (a definition the
metastore rejects) are ``InvalidInputException`` with the metastore's reason.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from pymetastore.hive_metastore import ttypes as hive
from thrift.Thrift import TException

from lakeward.access import Authorizer
from lakeward.access.arns import glue_arns
from lakeward.errors import (
    AccessDenied,
    ExpiredToken,
    InvalidRequest,
    LakewardError,
    MetastoreError,
    ResourceNotFound,
    TableNotFound,
)
from lakeward.metastore.client import MetastoreClient
from lakeward.query.catalogs import ACCOUNT_ID, Catalogs
from lakeward.query.catalogs.hive import HiveCatalog
from lakeward.query.model import JsonDict

MAX_RESULTS = 1000  # Glue's page limit for tables and partitions
_NAME = re.compile(r"[a-z0-9_]+")


class AlreadyExists(InvalidRequest):
    """Glue's AlreadyExistsException."""


class ConcurrentModification(LakewardError):
    """Glue's ConcurrentModificationException: the table changed between read and write."""

    http_status = 400


def _token(offset: int) -> str:
    return base64.urlsafe_b64encode(f"glue:{offset}".encode()).decode()


def _offset(token: str | None) -> int:
    if not token:
        return 0
    try:
        kind, _, value = base64.urlsafe_b64decode(token.encode()).decode().partition(":")
        if kind != "glue":
            raise ValueError(kind)
        return int(value)
    except (ValueError, UnicodeDecodeError):
        raise InvalidRequest("NextToken is not valid") from None


def paged(
    items: list[Any], request: JsonDict, limit: int = MAX_RESULTS
) -> tuple[list[Any], JsonDict]:
    start = _offset(request.get("NextToken"))
    size = min(int(request.get("MaxResults") or limit), limit)
    page = items[start : start + size]
    more = start + size < len(items)
    return page, ({"NextToken": _token(start + size)} if more else {})


def hive_pattern(expression: str) -> re.Pattern[str]:
    """GetTables' ``Expression`` as the metastore reads a name pattern: ``*`` is any
    characters, ``|`` separates alternatives, the rest is a regular expression."""
    alternatives = [p.strip().replace("*", ".*") for p in expression.split("|")]
    try:
        return re.compile("|".join(f"(?:{p})" for p in alternatives), re.IGNORECASE)
    except re.error as exc:
        raise InvalidRequest(f"Expression {expression!r} is not a valid pattern: {exc}") from None


def check_name(name: str, what: str) -> str:
    lowered = name.lower()
    if not _NAME.fullmatch(lowered):
        raise InvalidRequest(
            f"{what} {name!r} is not valid: the metastore takes letters, digits and _ only"
        )
    return lowered


class GlueBase:
    def __init__(self, catalogs: Catalogs, access: Authorizer, default_catalog: str) -> None:
        self.catalogs = catalogs
        self.access = access
        self.default_catalog = default_catalog

    # -- where a call goes --------------------------------------------------------------

    def _catalog(self, request: JsonDict) -> tuple[str, MetastoreClient, str]:
        """(catalog name, its metastore client, the CatalogId to answer with)."""
        given = request.get("CatalogId")
        name = self.default_catalog if given in (None, ACCOUNT_ID) else str(given)
        try:
            name = self.catalogs.canonical(name)
            backend = self.catalogs.catalog(name)
        except ResourceNotFound:
            raise ResourceNotFound(f"Catalog {given} not found") from None
        if not isinstance(backend, HiveCatalog):
            raise InvalidRequest(f"catalog {name} is not a Hive metastore catalog")
        return name, backend.client, given or ACCOUNT_ID

    def _authorize(self, action: str, catalog: str, database: str, table: str | None = None) -> str:
        """Authorize on the catalog, database (and table) ARNs; the caller's name."""
        who: object = None
        for arn in glue_arns(catalog, database, table):
            who = self.access.authorize(action, arn)
        return str(getattr(who, "name", None) or "lakeward")

    @contextmanager
    def _metastore(self, what: str) -> Iterator[None]:
        """The metastore's errors as Glue's."""
        try:
            yield
        except hive.NoSuchObjectException as exc:
            raise ResourceNotFound(_message(exc, f"{what} not found")) from None
        except hive.AlreadyExistsException as exc:
            raise AlreadyExists(_message(exc, f"{what} already exists")) from None
        except (hive.InvalidObjectException, hive.InvalidOperationException) as exc:
            raise InvalidRequest(f"{what}: {_message(exc, 'rejected by the metastore')}") from None
        except hive.MetaException as exc:
            raise InvalidRequest(f"{what}: {_message(exc, 'rejected by the metastore')}") from None
        except TException as exc:
            raise MetastoreError(f"metastore call on {what} failed: {_message(exc, '')}") from None

    def _raw_table(self, client: MetastoreClient, database: str, name: str) -> Any:
        with self._metastore(f"Table {name} in database {database}"):
            self._raw_database(client, database)
            return client.raw_read("get_table", database, name)

    def _raw_database(self, client: MetastoreClient, database: str) -> Any:
        with self._metastore(f"Database {database}"):
            return client.raw_read("get_database", database)


def _message(exc: Exception, default: str) -> str:
    return str(getattr(exc, "message", None) or default)


def error_code(exc: Exception) -> str:
    """Glue's name for an error (botocore raises the exception class of that name)."""
    if isinstance(exc, AlreadyExists):
        return "AlreadyExistsException"
    if isinstance(exc, ConcurrentModification):
        return "ConcurrentModificationException"
    if isinstance(exc, ExpiredToken):
        return "ExpiredTokenException"
    if isinstance(exc, AccessDenied):
        return "AccessDeniedException"
    if isinstance(exc, (ResourceNotFound, TableNotFound)):
        return "EntityNotFoundException"
    if isinstance(exc, InvalidRequest):
        return "InvalidInputException"
    return "InternalServiceException"


def detail(exc: LakewardError) -> JsonDict:
    return {"ErrorCode": error_code(exc), "ErrorMessage": exc.message}
