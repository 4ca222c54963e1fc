"""The server's background services, which run once per stack whatever the worker count.

* the erasure worker (``erasure.run_worker``): the steps that follow an approval;
* the real-time indexer: storage events, the ``file://`` lake's watcher, and the
  notifications posted to the webhook (``POST /events/s3``); with ``catch_up`` (the
  supervisor of ``lakeward serve``), it first catches up with what changed while no
  indexer ran, or was lost in the queue of one killed: a rebuild that reads only the
  objects whose eTag the index does not hold;
* the BI service's scheduled extract refreshes;
* the rotation of the stack's process logs (``run_logs.py``) and the sealing of the
  audit log's old records into archive segments (``access.audit_keep_days``), every
  ``LOG_CHECK`` s.

With one process (``create_app`` alone, as in tests) they run in it. Under
``lakeward serve`` they run in the supervisor, beside its workers: a worker that
dies or restarts never stops or doubles them, and the workers relay the webhook's
notifications to the supervisor's indexer (relay.py).
"""

from __future__ import annotations

import logging
import threading
from datetime import timedelta
from pathlib import Path

from lakeward.access.audit import AuditLog
from lakeward.access.control import AccessControl
from lakeward.bi.service import BiService
from lakeward.config import Settings
from lakeward.erasure.realtime import RealtimeIndexer
from lakeward.erasure.service import ErasureIndexService
from lakeward.erasure.workflow import ErasureWorkflow
from lakeward.query.journal import sweep_table_locks
from lakeward.query.service import QueryService
from lakeward.run_logs import rotate_logs

LOG_CHECK = 60.0

log = logging.getLogger(__name__)


class Background:
    """Starts and stops the stack-wide services; ``bi`` and ``workflow`` may be shared."""

    def __init__(
        self,
        settings: Settings,
        access: AccessControl,
        queries: QueryService,
        *,
        bi: BiService | None = None,
        workflow: ErasureWorkflow | None = None,
        catch_up: bool = False,
    ) -> None:
        self.settings = settings
        self.access = access
        self.indexer = RealtimeIndexer.for_settings(settings)
        self.bi = bi or BiService(settings, access, queries, owner=True)
        self._owns_bi = bi is None
        self.workflow = workflow or ErasureWorkflow(
            settings,
            index=ErasureIndexService(settings, access=access),
            access=access,
            owns_index=True,
        )
        self._owns_workflow = workflow is None
        self._catch_up = catch_up
        self._stop = threading.Event()
        self._worker: threading.Thread | None = None
        self._logs: threading.Thread | None = None

    def start(self) -> None:
        self.indexer.start()
        if self._catch_up:
            threading.Thread(
                target=self._index_catch_up, name="index-catch-up", daemon=True
            ).start()
        self._logs = threading.Thread(target=self._rotate, name="log-rotation", daemon=True)
        self._logs.start()
        if self.settings.erasure.run_worker:
            # Approvals arrive through the server, so it also takes the steps that follow.
            self._worker = threading.Thread(
                target=self.workflow.run_forever, args=(self._stop,), name="erasure-worker"
            )
            self._worker.start()

    def _index_catch_up(self) -> None:
        try:
            report = self.workflow.index.reindex()
        except Exception:  # the index stays as it was; `erasure index build` does the same
            log.exception("catching the erasure index up with the lake failed")
            return
        if report.objects_indexed or report.objects_removed:
            log.warning(
                "erasure index caught up: %d objects indexed, %d removed",
                report.objects_indexed,
                report.objects_removed,
            )

    def _rotate(self) -> None:
        while not self._stop.wait(LOG_CHECK):
            tidy(self.settings, self.access.audit)

    def stop(self) -> None:
        self._stop.set()
        if self._logs is not None:
            self._logs.join(timeout=10)
        if self._worker is not None:
            self._worker.join(timeout=60)
        self.indexer.stop()
        if self._owns_bi:
            self.bi.close()
        if self._owns_workflow:
            self.workflow.close()


def tidy(settings: Settings, audit: AuditLog) -> None:
    """One pass: rotate the process logs, remove the table locks none holds, seal the
    audit records past their keep."""
    rotate_logs(Path(settings.data_dir) / "run", settings.logs.max_bytes, settings.logs.keep)
    sweep_table_locks(settings)
    keep_days = settings.access.audit_keep_days
    if not keep_days:
        return  # every record stays in the database
    try:
        for segment in audit.seal(timedelta(days=keep_days)):
            log.info(
                "audit records %d-%d sealed in %s", segment.first_id, segment.last_id, segment.name
            )
    except Exception:  # the next pass tries again; the records stay meanwhile
        log.exception("sealing the audit log's old records failed")
