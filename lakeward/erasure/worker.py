"""The erasure worker's steps: report, approval mail, purge, verification, certificate.

Every step reads its request's state from the database, does work that is safe to
repeat, and records its result with a compare-and-set on the state (see workflow.py,
whose ``ErasureWorkflow`` takes these steps).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from typing import Any

from lakeward.access import Authorizer
from lakeward.config import Settings
from lakeward.erasure import approval, report
from lakeward.erasure.executors import OBJECT_LAYERS, RELATIONAL, Executors, Target
from lakeward.erasure.index import IndexedObject
from lakeward.erasure.indexers import read_object
from lakeward.erasure.mappers import DatasetMapper
from lakeward.erasure.requests import (
    APPROVED,
    AWAITING_APPROVAL,
    COMPLETED,
    DONE,
    ERROR,
    EXPIRED,
    FAILED,
    PURGING,
    REPORT_READY,
    REQUESTED,
    STOPPED,
    TODO,
    VERIFYING,
    Request,
    RequestStore,
    TargetRow,
)
from lakeward.erasure.requests.model import now
from lakeward.erasure.service import ErasureIndexService
from lakeward.errors import (
    InvalidRequest,
    LakewardError,
    MailError,
    NeedsOwnDelete,
    ObjectNotFound,
)
from lakeward.failpoints import failpoint

log = logging.getLogger(__name__)

WORKER = "worker"
MAX_RETRY_DELAY = timedelta(minutes=10)
# Progress is recorded in batches (one transaction each): a crash loses at most the
# record of a batch, and those targets are re-planned (finding nothing) on resume.
FLUSH_EVERY = 32
FLUSH_SECONDS = 0.5


class WorkflowSteps:
    """What a worker does with the requests; state comes from ``ErasureWorkflow``."""

    settings: Settings
    index: ErasureIndexService
    store: RequestStore
    access: Authorizer
    executors: Executors
    signer: approval.LinkSigner
    bucket: str
    worker: str

    def report_text(self, request_id: str) -> str:
        """The readable rendering of a request's report."""
        key = report.report_prefix(request_id) + "report.txt"
        try:
            return self.index.storage.get(self.bucket, key).decode("utf-8")
        except ObjectNotFound:
            return "(the report is not made yet)"

    def saved_file(self, request_id: str, name: str) -> bytes | None:
        """One of the files kept for a request (``report.json``, ``report.html``,
        ``certificate.json``), or None while it is not made."""
        try:
            return self.index.storage.get(self.bucket, report.report_prefix(request_id) + name)
        except ObjectNotFound:
            return None

    def run_pending(self) -> int:
        """Take every step that can be taken now, for every request; returns how many."""
        steps = 0
        for current in self.store.active():
            if not self.store.claim(current.id, self.worker):
                continue  # another worker is on it
            try:
                while self.step(current.id):
                    steps += 1
            finally:
                self.store.release(current.id, self.worker)
        for done in self.store.unsent_outcomes():
            if self.store.claim(done.id, self.worker):
                try:
                    steps += self._notify_outcome(self.store.get(done.id))
                finally:
                    self.store.release(done.id, self.worker)
        return steps

    def run_forever(self, stop: threading.Event, poll: float = 1.0) -> None:
        """Take steps until ``stop`` is set, looking for work every ``poll`` seconds."""
        while not stop.is_set():
            try:
                self.run_pending()
            except LakewardError as exc:
                log.error("erasure worker: %s", exc)
            except Exception:
                # A worker outlives any one bad step; the request is tried again next round.
                log.exception("erasure worker: unexpected error")
            stop.wait(poll)

    def step(self, request_id: str) -> bool:
        """One step of a request; False when it waits (for approval, a retry) or is done."""
        current = self.store.get(request_id)
        handler = {
            REQUESTED: self._make_report,
            REPORT_READY: self._ask_approval,
            AWAITING_APPROVAL: self._await_approval,
            APPROVED: self._start_purge,
            PURGING: self._purge,
            VERIFYING: self._verify,
        }.get(current.state)
        if handler is None:
            return False
        moved = handler(current)
        if moved:
            failpoint(f"after:{self.store.get(request_id).state}")
        return moved

    def _make_report(self, current: Request) -> bool:
        targets, layers = report.plan(self.index, self.executors, current.user_ids)
        covered = [m.prefix for m in self.index.mappers().datasets]
        retained = report.retained_copies(self.index.storage, self.settings, covered)
        doc = report.document(current, layers, retained)
        digest = report.save(self.index.storage, self.bucket, current.id, doc)
        self.store.set_targets(current.id, [t.as_dict() for t in targets])
        note = f"{len(targets)} places to purge"
        try:
            self.store.move(current.id, REQUESTED, REPORT_READY, WORKER, note,
                            user_ids=current.user_ids, report_digest=digest)  # fmt: skip
        except InvalidRequest:
            return True  # joined by more ids while the report was made: make it again
        return True

    def _ask_approval(self, current: Request) -> bool:
        if current.dry_run:
            return False  # a dry run ends with its report
        self.store.move(current.id, REPORT_READY, AWAITING_APPROVAL, WORKER,
                        next_attempt_at=now(), attempts=0)  # fmt: skip
        return True

    def _await_approval(self, current: Request) -> bool:
        moment = now()
        if current.approval_expires_at is not None and moment >= current.approval_expires_at:
            self.store.move(
                current.id, AWAITING_APPROVAL, EXPIRED, WORKER, "approval links expired"
            )
            return True
        due = current.next_attempt_at is None or current.next_attempt_at <= moment
        if current.approval_sent_at is None and due:
            self._send_approval(current, moment)
        return False

    def _send_approval(self, current: Request, moment: datetime) -> None:
        assert current.report_digest is not None
        expires = approval.expiry(self.settings, moment)
        links = approval.approval_links(self.settings, self.signer, current.id,
                                        current.report_digest, expires)  # fmt: skip
        body = approval.approval_body(self.report_text(current.id), links, expires)
        try:
            subject = f"Erasure request {current.id} needs your approval"
            approval.send_mail(
                self.settings.erasure, self.settings.erasure.approvers, subject, body
            )
        except MailError as exc:
            # Nothing moves without approval: the request waits and the mail is tried again.
            delay = min(timedelta(seconds=5 * 2**current.attempts), MAX_RETRY_DELAY)
            self.store.update(current.id, attempts=current.attempts + 1, last_error=exc.message,
                              next_attempt_at=moment + delay)  # fmt: skip
            log.warning("erasure request %s: %s; retrying in %s", current.id, exc, delay)
            return
        self.store.update(current.id, approval_sent_at=moment, approval_expires_at=expires,
                          last_error=None)  # fmt: skip

    def _start_purge(self, current: Request) -> bool:
        self.store.move(current.id, APPROVED, PURGING, WORKER)
        return True

    def _purge(self, current: Request) -> bool:
        rows = {row.seq: row for row in self.store.targets(current.id, TODO)}
        stop = threading.Event()
        if current.stop_requested:
            stop.set()
        by_uri = {row.target["uri"]: row.seq for row in rows.values()}
        targets = [Target.from_dict(row.target) for row in rows.values()]
        results = self.executors.run(targets, current.user_ids, stop=stop, replan=self._replan,
                                     workers=self.settings.erasure.purge_workers)  # fmt: skip
        finished: list[tuple[int, str, dict[str, Any]]] = []
        touched: list[Target] = []
        flushed = time.monotonic()

        def flush() -> None:
            # The index first, the progress second: a target recorded as done is
            # always one the index no longer lists for the ids.
            self._reindex_many(touched)
            if self.store.finish_targets(current.id, finished):
                stop.set()
            finished.clear()
            touched.clear()
            failpoint("target-done")
            self.store.claim(current.id, self.worker)  # still ours: extend the lease

        for target, result in results:
            seq = by_uri[target.uri]
            failpoint("written")
            if isinstance(result, Exception):
                message = getattr(result, "message", None) or f"{type(result).__name__}: {result}"
                state = "needs-own-delete" if isinstance(result, NeedsOwnDelete) else "error"
                finished.append((seq, ERROR, {"error": message, "state": state}))
            else:
                finished.append((seq, DONE, result.as_dict()))
                touched.append(target)
            if len(finished) >= FLUSH_EVERY or time.monotonic() - flushed >= FLUSH_SECONDS:
                flush()
                flushed = time.monotonic()
        flush()
        if stop.is_set() and self.store.targets(current.id, TODO):
            self._write_certificate(self.store.get(current.id), STOPPED)
            self.store.move(current.id, PURGING, STOPPED, WORKER, "stopped during the purge")
            return True
        self.store.move(current.id, PURGING, VERIFYING, WORKER)
        return True

    def _replan(self, target: Target) -> Target:
        """A target made again from the object as it is now: its eTag, positions by scan."""
        try:
            info = self.index.storage.stat(target.bucket, target.key)
        except ObjectNotFound:
            return Target.from_dict(target.as_dict() | {"etag": None, "positions": ()})
        return Target.from_dict(target.as_dict() | {"etag": info.etag, "size": info.size,
                                                    "positions": ()})  # fmt: skip

    def _reindex_many(self, targets: Sequence[Target]) -> None:
        """Bring the index up to date with what the purge changed, objects in one batch."""
        storage = self.index.storage
        mappers = self.index.mappers()
        to_read: list[tuple[Target, DatasetMapper]] = []
        for target in targets:
            mapper = mappers.dataset_for(target.bucket, target.key)
            if target.layer not in OBJECT_LAYERS:
                self._reindex(target)
            elif not storage.exists(target.bucket, target.key):
                # The index keys objects by the storage's URI; target.uri is the S3 name.
                self.index.store.remove_object(storage.uri(target.bucket, target.key))
            elif mapper is not None:
                to_read.append((target, mapper))

        def read(item: tuple[Target, DatasetMapper]) -> IndexedObject | None:
            target, mapper = item
            try:
                return read_object(storage, mapper, target.bucket, target.key)
            except (LakewardError, OSError):
                return None

        workers = self.settings.erasure.purge_workers
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="reindex") as pool:
            read_back = list(pool.map(read, to_read))
        for (target, _mapper), indexed in zip(to_read, read_back, strict=True):
            if indexed is None:
                # Changed again or unreadable now: the service's own path records why.
                self.index.index_object(target.bucket, target.key)
        batch = [indexed for indexed in read_back if indexed is not None]
        if batch:
            self.index.store.bulk_load(batch)

    def _reindex(self, target: Target) -> None:
        """Bring the index up to date with what the purge changed."""
        if target.layer in OBJECT_LAYERS:
            if self.index.storage.exists(target.bucket, target.key):
                self.index.index_object(target.bucket, target.key)
            else:
                storage = self.index.storage
                self.index.store.remove_object(storage.uri(target.bucket, target.key))
        elif target.layer == RELATIONAL:
            names = [m.name for m in self.index.mappers().relational if m.location == target.uri]
            self.index.index_relational(names)
        elif target.uri.startswith(self.index.storage.root + "/"):
            # A table in the lake: its data files were replaced through the format, and an
            # indexed dataset may cover them.
            bucket, key = report.split_uri(self.index.storage, target.uri.rstrip("/"))
            self.index.reindex(prefix=f"{bucket}/{key}/")

    def _verify(self, current: Request) -> bool:
        remaining: list[dict[str, Any]] = []
        rows = self.store.targets(current.id)

        def count(row: TargetRow) -> int:
            target = Target.from_dict(row.target | {"etag": None, "positions": ()})
            try:
                return self.executors.count(target, current.user_ids)
            except NeedsOwnDelete:
                return -1

        workers = self.settings.erasure.purge_workers
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="verify") as pool:
            counts = list(pool.map(count, rows))
        updates = []
        for row, left in zip(rows, counts, strict=True):
            updates.append((row.seq, row.status, dict(row.outcome or {}) | {"remaining": left}))
            if left != 0 or row.status != DONE:
                remaining.append({"uri": row.target["uri"], "remaining": left,
                                  "status": row.status})  # fmt: skip
        self.store.finish_targets(current.id, updates)
        in_index = sum(len(h) for h in self.index.store.find(current.user_ids).values())
        ok = not remaining and in_index == 0
        final = COMPLETED if ok else FAILED
        self._write_certificate(self.store.get(current.id), final, in_index)
        note = (
            "zero records remain"
            if ok
            else (f"{len(remaining)} places still hold records or failed; {in_index} index entries")
        )
        self.store.move(current.id, VERIFYING, final, WORKER, note)
        return True

    def _write_certificate(self, current: Request, final: str, in_index: int | None = None) -> None:
        rows = self.store.targets(current.id)
        history = self.store.history(current.id)
        finished = now().isoformat()
        prefix = report.report_prefix(current.id)
        try:
            saved = json.loads(self.index.storage.get(self.bucket, prefix + "report.json"))
            retained = list(saved.get("retained", []))
        except ObjectNotFound:
            retained = []
        places = []
        for row in rows:
            outcome = row.outcome or {}
            retained.extend(outcome.get("retained", []))
            places.append({k: v for k, v in (outcome | {"uri": row.target["uri"],
                          "layer": row.target["layer"], "status": row.status}).items()
                          if k != "retained"})  # fmt: skip
        doc = {
            "request_id": current.id,
            "state": final,
            "user_id_sha256": [report.hash_id(u) for u in current.user_ids],
            "report_digest": current.report_digest,
            "approver": current.decided_by,
            "requested_at": current.created_at.isoformat(),
            # The final state is recorded right after the certificate is stored.
            "transitions": [
                {"to": t.to_state, "at": t.at.isoformat(), "by": t.actor} for t in history
            ]
            + [{"to": final, "at": finished, "by": WORKER}],
            "finished_at": finished,
            "objects": [p for p in places if p["layer"] in OBJECT_LAYERS],
            "tables": [p for p in places if p["layer"] not in OBJECT_LAYERS],
            "index_entries_remaining": in_index,
            "retained": retained,
        }
        self.index.storage.put(self.bucket, prefix + "certificate.json", report.encode(doc))

    def _notify_outcome(self, current: Request) -> int:
        moment = now()
        if current.next_attempt_at is not None and current.next_attempt_at > moment:
            return 0
        config = self.settings.erasure
        to = [a for a in [current.requester, current.contact] if a and "@" in a]
        to += [a for a in config.approvers if a not in to]
        body = f"Erasure request {current.id} ended {current.state}.\n\n"
        body += "\n".join(f"{t.at.isoformat()}  {t.to_state}  {t.actor}  {t.note}"
                          for t in self.store.history(current.id))  # fmt: skip
        try:
            certificate: tuple[str, bytes] | None = None
            try:
                key = report.report_prefix(current.id) + "certificate.json"
                certificate = ("certificate.json", self.index.storage.get(self.bucket, key))
            except ObjectNotFound:
                pass
            if config.smtp_host and to:
                approval.send_mail(config, to, f"Erasure request {current.id}: {current.state}",
                                   body, certificate)  # fmt: skip
            if config.webhook_url:
                approval.post_webhook(
                    config.webhook_url, {"request_id": current.id, "state": current.state}
                )
        except MailError as exc:
            delay = min(timedelta(seconds=5 * 2**current.attempts), MAX_RETRY_DELAY)
            self.store.update(current.id, attempts=current.attempts + 1, last_error=exc.message,
                              next_attempt_at=moment + delay)  # fmt: skip
            return 0
        self.store.update(current.id, outcome_sent_at=moment, next_attempt_at=None)
        return 1
