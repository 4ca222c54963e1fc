"""The server's background services, which run once per stack whatever the worker count.

* the erasure worker (``erasure.run_worker``): the steps that follow an approval;
* the real-time indexer: storage events, the ``file://`` lake's watcher, and the
  notifications posted to the webhook (``POST /events/s3``);
* the BI service's scheduled extract refreshes;
* the rotation of the stack's process logs (``run_logs.py``), every ``LOG_CHECK`` s.

With one process (``create_app`` alone, as in tests) they run in it. Under
``lakeward serve`` they run in the supervisor, beside its workers: a worker that
dies or restarts never stops or doubles them, and the workers relay the webhook's
notifications to the supervisor's indexer (relay.py).
"""

from __future__ import annotations

import threading
from pathlib import Path

from lakeward.access.control import AccessControl
from lakeward.bi.service import BiService
from lakeward.config import Settings
from lakeward.erasure.realtime import RealtimeIndexer
from lakeward.erasure.service import ErasureIndexService
from lakeward.erasure.workflow import ErasureWorkflow
from lakeward.query.service import QueryService
from lakeward.run_logs import rotate_logs

LOG_CHECK = 60.0


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
    ) -> None:
        self.settings = settings
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
        self._stop = threading.Event()
        self._worker: threading.Thread | None = None
        self._logs: threading.Thread | None = None

    def start(self) -> None:
        self.indexer.start()
        self._logs = threading.Thread(target=self._rotate_logs, name="log-rotation", daemon=True)
        self._logs.start()
        if self.settings.erasure.run_worker:
            # Approvals arrive through the server, so it also takes the steps that follow.
            self._worker = threading.Thread(
                target=self.workflow.run_forever, args=(self._stop,), name="erasure-worker"
            )
            self._worker.start()

    def _rotate_logs(self) -> None:
        run_dir = Path(self.settings.data_dir) / "run"
        limits = self.settings.logs
        while not self._stop.wait(LOG_CHECK):
            rotate_logs(run_dir, limits.max_bytes, limits.keep)

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
