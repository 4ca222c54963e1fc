"""The one exception tree of lakeward.

Every error a user can cause or meet is a ``LakewardError``: it carries a plain
sentence for the user, the HTTP status the server answers with, and the exit
code the CLI ends with. Nothing else should reach a user as a stack trace.

    LakewardError
    ├── ConfigError              a setting is wrong (names the key and where it came from)
    ├── StorageError             the lake could not be read or written
    │   ├── ObjectNotFound
    │   ├── InvalidKey           a bucket name, key or prefix the lake cannot store
    │   └── PreconditionFailed   a conditional write or delete found the object changed
    ├── MetastoreError           the Hive Metastore is unreachable or refused a call
    │   └── TableNotFound
    ├── JavaError                Java is missing or too old
    ├── StackError               the stack's processes (start, stop, ports, pid files)
    │   └── Unavailable          a part of the server is restarting; try again
    ├── InputError               input data does not have the expected layout
    │   ├── Unparseable          an object the erasure indexer cannot read as its format
    │   └── ObjectKeptChanging   an object that changed during every attempt to index it
    ├── InvalidRequest           a request refused as malformed or not allowed
    │   └── PayloadTooLarge      a request body over its limit
    ├── ResourceNotFound         a catalog, database, table, query or workgroup that is not there
    ├── AccessDenied             the caller may not do this
    │   ├── Unauthenticated      not signed in, or wrong credentials
    │   └── LinkRefused          an erasure approval link forged, expired, used or misdirected
    ├── TooManyRequests          over a limit; try again later
    ├── QueryFailed              an engine could not run a statement
    │   └── QueryCancelled       the execution was stopped before it finished
    ├── SecretIntegrityError     a stored secret did not authenticate
    ├── ObjectChangedSincePlan   an erasure target is no longer what its report describes
    ├── NeedsOwnDelete           a table format whose own tooling must delete (reported)
    └── MailError                the SMTP server could not be reached or refused a message
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


class InvalidKey(StorageError, ValueError):
    """A bucket name, key or prefix that the lake cannot store: the caller's mistake."""

    http_status = 400


class PreconditionFailed(StorageError):
    """A conditional write or delete found the object changed (or gone) since it was read."""

    http_status = 412


class MetastoreError(LakewardError):
    http_status = 502


class TableNotFound(MetastoreError):
    http_status = 404


class JavaError(LakewardError):
    exit_code = 3


class StackError(LakewardError):
    exit_code = 3


class Unavailable(StackError):
    """A part of the server is (re)starting: the same call succeeds again shortly."""

    http_status = 503


class InputError(LakewardError):
    http_status = 400
    exit_code = 4


class Unparseable(InputError):
    """An object the indexer cannot read as its dataset's format (goes to the dead letters)."""


class ObjectKeptChanging(InputError):
    """An object that changed during every attempt to index it."""


class InvalidRequest(LakewardError):
    """A request refused as malformed or not allowed (Athena's InvalidRequestException)."""

    http_status = 400


class PayloadTooLarge(InvalidRequest):
    http_status = 413


class ResourceNotFound(LakewardError):
    http_status = 404


class MetadataNotFound(ResourceNotFound):
    """A database or table that Athena's metadata calls do not find (its MetadataException,
    the only error PyAthena's SQLAlchemy dialect reads as "no such table")."""


class AccessDenied(LakewardError):
    http_status = 403


class ExpiredToken(AccessDenied):
    """Temporary credentials past their expiry: clients ask for new ones on this."""

    http_status = 400


class Unauthenticated(AccessDenied):
    """Not signed in, or the credentials are wrong."""

    http_status = 401


class LinkRefused(AccessDenied):
    """An approval link that is forged, expired, used, or for another request or report."""


class TooManyRequests(LakewardError):
    http_status = 429


class QueryFailed(LakewardError):
    """An engine could not run a statement; the message is the execution's failure reason."""

    http_status = 400


class QueryCancelled(QueryFailed):
    """The execution was interrupted (``Engine.interrupt``) before it finished."""


class SecretIntegrityError(LakewardError):
    """A stored version did not authenticate: altered, moved, or sealed under another key."""


class ObjectChangedSincePlan(LakewardError):
    """An erasure target is not the object its report was made from: re-plan it from the index."""

    http_status = 409


class NeedsOwnDelete(LakewardError):
    """A table format lakeward cannot delete from; its own tooling must (reported, not run)."""

    http_status = 501


class MailError(LakewardError):
    """The SMTP server could not be reached or refused the message."""

    http_status = 502
