"""File-name objects (one user per object, the user id in its name): deleted whole."""

from __future__ import annotations

from collections.abc import Sequence

from lakeward.erasure.executors.base import FILE_NAME, Executor, Outcome, Target
from lakeward.errors import ObjectChangedSincePlan, ObjectNotFound, PreconditionFailed


class FileNameExecutor(Executor):
    layer = FILE_NAME

    def purge(self, target: Target, user_ids: Sequence[str]) -> Outcome:
        try:
            info = self.storage.stat(target.bucket, target.key)
        except ObjectNotFound:
            # Already gone: deleted by an earlier, interrupted run or by its owner.
            return Outcome(target.uri, self.layer, "missing", note="the object is gone")
        try:
            if target.etag is None:
                self.storage.delete(target.bucket, target.key)
            else:
                self.storage.delete_if_match(target.bucket, target.key, target.etag)
        except PreconditionFailed as exc:
            raise ObjectChangedSincePlan(str(exc)) from None
        return Outcome(
            target.uri,
            self.layer,
            "deleted",
            removed=1,
            before_etag=info.etag,
            before_size=info.size,
        )

    def count(self, target: Target, user_ids: Sequence[str]) -> int:
        return 1 if self.storage.exists(target.bucket, target.key) else 0
