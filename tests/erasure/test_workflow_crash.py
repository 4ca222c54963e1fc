"""Crash-resume: the worker process is killed with SIGKILL at every transition and in the
middle of the purge, restarted each time, and the request still completes with every
other user's records byte-identical (checked over the whole generated lake)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

from fastapi import FastAPI
from fastapi.testclient import TestClient

from lakeward.erasure import report
from lakeward.erasure.requests import (
    APPROVED,
    AWAITING_APPROVAL,
    COMPLETED,
    PURGING,
    REPORT_READY,
    VERIFYING,
)
from lakeward.erasure.workflow import ErasureWorkflow
from lakeward.failpoints import FAILPOINTS_ENV
from lakeward.http.erasure_requests import erasure_requests_router
from lakeward.storage import load_storage
from tests.erasure.workflow_helpers import (
    busiest_users,
    fingerprint,
    make_lake,
    remaining,
    smtp_server,
    workflow_settings,
)


def worker(data_dir: Path, failpoint: str | None) -> subprocess.CompletedProcess[str]:
    """``lakeward erasure worker --once`` in its own process, killed at ``failpoint``."""
    env = {**os.environ, "LAKEWARD_CONFIG": str(data_dir / "lakeward.toml")}
    env.pop(FAILPOINTS_ENV, None)
    if failpoint:
        env[FAILPOINTS_ENV] = failpoint
    return subprocess.run(
        [sys.executable, "-m", "lakeward", "erasure", "worker", "--once",
         "--data-dir", str(data_dir)],
        capture_output=True, text=True, timeout=300, env=env, check=False,
    )  # fmt: skip


def test_killed_at_every_transition_and_mid_purge_it_completes(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    with smtp_server() as (mailbox, port):
        settings = workflow_settings(data_dir, port)
        database_url = make_lake(settings, records=1200)
        storage = load_storage(settings)
        bucket = settings.lake.data_bucket
        gone = busiest_users(settings, 3)
        before = fingerprint(storage, bucket, database_url, set(gone))
        flow = ErasureWorkflow(settings)
        created, _ = flow.request(gone, "dpo@example.com")

        def killed_at(point: str, state: str) -> None:
            result = worker(data_dir, point)
            assert result.returncode == -signal.SIGKILL, (point, result.stdout, result.stderr)
            assert flow.store.get(created.id).state == state, point

        killed_at("after:REPORT_READY", REPORT_READY)
        killed_at("after:AWAITING_APPROVAL", AWAITING_APPROVAL)
        assert mailbox.messages == []  # killed before the email went
        assert worker(data_dir, None).returncode == 0
        [mail] = mailbox.wait_for(1)

        link = urlsplit(mailbox.links(mail)["approve"])
        app = FastAPI()
        app.include_router(erasure_requests_router(flow, credentials=None))  # type: ignore[arg-type]
        TestClient(app).post(link.path, data={"token": link.query.removeprefix("token=")})
        assert flow.store.get(created.id).state == APPROVED

        killed_at("after:PURGING", PURGING)
        killed_at("before-write", PURGING)  # in the middle of a rewrite
        killed_at("written", PURGING)  # an object rewritten, its progress not yet recorded
        killed_at("target-done", PURGING)
        assert flow.store.targets(created.id, "done")  # some progress survived the kills
        killed_at("after:VERIFYING", VERIFYING)
        killed_at("after:COMPLETED", COMPLETED)
        assert len(mailbox.messages) == 1  # killed before the outcome email
        assert worker(data_dir, None).returncode == 0
        outcome = mailbox.wait_for(2)[1]

        assert "COMPLETED" in outcome["Subject"]
        assert remaining(storage, bucket, database_url, set(gone)) == 0
        assert fingerprint(storage, bucket, database_url, set(gone)) == before
        assert all(not h for h in flow.index.store.find(gone).values())
        leftovers = [k for k in storage.keys(bucket, "") if ".lakeward-tmp-" in k]
        assert leftovers == []
        certificate = json.loads(
            storage.get(bucket, report.report_prefix(created.id) + "certificate.json")
        )
        assert certificate["state"] == COMPLETED
        states = [t["to"] for t in certificate["transitions"]]
        assert states[-3:] == [PURGING, VERIFYING, COMPLETED]
        flow.close()
