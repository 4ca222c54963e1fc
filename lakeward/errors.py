"""The one exception tree of lakeward.

Every error a user can cause or meet is a ``LakewardError``: it carries a plain
sentence for the user, the HTTP status the server answers with, and the exit
code the CLI ends with. Nothing else should reach a user as a stack trace.

    LakewardError
    ├── ConfigError          a setting is wrong (names the key and where it came from)
    ├── StorageError         the lake could not be read or written
    │   └── ObjectNotFound
    ├── MetastoreError       the Hive Metastore is unreachable or refused a call
    │   └── TableNotFound
    ├── JavaError            Java is missing or too old
    ├── StackError           the stack's processes (start, stop, ports, pid files)
    ├── InputError           input data does not have the expected layout
    ├── InvalidRequest       a request refused as malformed or not allowed
    │   └── PayloadTooLarge  a request body over its limit
    ├── ResourceNotFound     a catalog, database, table, query or workgroup that is not there
    ├── AccessDenied         the caller may not do this
    │   └── Unauthenticated  not signed in, or wrong credentials
    └── TooManyRequests      over a limit; try again later
"""

from __future__ import annotations


class LakewardError(Exception):
    """Base of all errors lakeward reports to users."""

    http_status = 500
    exit_code = 1

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class ConfigError(LakewardError):
    http_status = 400
    exit_code = 2


class StorageError(LakewardError):
    http_status = 502


class ObjectNotFound(StorageError):
    http_status = 404


class MetastoreError(LakewardError):
    http_status = 502


class TableNotFound(MetastoreError):
    http_status = 404


class JavaError(LakewardError):
    exit_code = 3


class StackError(LakewardError):
    exit_code = 3


class InputError(LakewardError):
    http_status = 400
    exit_code = 4


class InvalidRequest(LakewardError):
    """A request refused as malformed or not allowed (Athena's InvalidRequestException)."""

    http_status = 400


class PayloadTooLarge(InvalidRequest):
    http_status = 413


class ResourceNotFound(LakewardError):
    http_status = 404


class AccessDenied(LakewardError):
    http_status = 403


class TooManyRequests(LakewardError):
    http_status = 429


class Unauthenticated(AccessDenied):
    """Not signed in, or the credentials are wrong."""

    http_status = 401
