"""Audit records survive the server being killed: every call it answered has its record.

A real ``lakeward serve`` (a supervisor and its worker processes) takes signed Athena
calls from several clients at once (their records committed together, in batches);
one worker is killed with SIGKILL in the middle of the load, then, later, every
process of the server at once. A response is sent only after its record is
committed, so each answered request id must be in the log, and the hash chain must
still hold.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from lakeward.access.audit import AuditLog
from lakeward.config import load_settings
from lakeward.http.supervisor import read_workers

KEY, SECRET = "AKIDAUDITCRASHTEST", "audit-crash-test-secret"
CLIENTS = 8


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def signed_call(
    url: str, operation: str, payload: dict[str, object]
) -> tuple[dict[str, str], bytes]:
    body = json.dumps(payload).encode()
    headers = {
        "Content-Type": "application/x-amz-json-1.1",
        "X-Amz-Target": f"AmazonAthena.{operation}",
    }
    request = AWSRequest(method="POST", url=url + "/", data=body, headers=headers)
    SigV4Auth(Credentials(KEY, SECRET), "athena", "us-east-1").add_auth(request)
    return dict(request.headers.items()), body


def test_every_answered_call_has_its_record_after_kill_9(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    settings = load_settings(data_dir=data_dir, env={})
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {
        **os.environ,
        "LAKEWARD_API__ACCESS_KEY_ID": KEY,
        "LAKEWARD_API__SECRET_ACCESS_KEY": SECRET,
    }
    server = subprocess.Popen(
        [sys.executable, "-m", "lakeward", "serve", "--data-dir", str(data_dir),
         "--port", str(port)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while True:
            assert server.poll() is None, server.stderr.read().decode() if server.stderr else ""
            try:
                if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.1)

        answered: list[str] = []
        lock = threading.Lock()
        stop = threading.Event()

        def client() -> None:
            with httpx.Client(base_url=url, timeout=10) as http:
                while not stop.is_set():
                    # Two audited reads: one allowed decision each (root).
                    operation = "ListQueryExecutions" if len(answered) % 2 else "ListNamedQueries"
                    headers, body = signed_call(url, operation, {})
                    try:
                        response = http.post("/", content=body, headers=headers)
                    except httpx.TransportError:
                        # Not answered: in flight on the killed worker (the next call opens
                        # a connection to a live one), or the whole server is gone.
                        time.sleep(0.01)
                        continue
                    if response.status_code != 200:
                        continue  # in flight on the killed worker: not answered
                    with lock:
                        answered.append(response.headers["x-amzn-requestid"])

        threads = [threading.Thread(target=client) for _ in range(CLIENTS)]
        for thread in threads:
            thread.start()

        def answered_at_least(count: int) -> None:
            while len(answered) < count:
                assert time.monotonic() < deadline + 240, f"{len(answered)} calls answered"
                time.sleep(0.01)

        answered_at_least(300)  # under load for a while, then one worker killed mid-flight
        workers = read_workers(settings)
        assert workers, "the supervisor recorded no worker"
        os.kill(int(str(workers[0]["pid"])), signal.SIGKILL)
        answered_at_least(len(answered) + 300)  # the others (and its replacement) go on
        os.killpg(server.pid, signal.SIGKILL)  # then every process of the server at once
        server.wait(10)
        stop.set()
        for thread in threads:
            thread.join(15)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.pid, signal.SIGKILL)
        server.wait(10)

    with AuditLog(data_dir / "access" / "audit.db") as audit:
        recorded = {r.request_id for r in audit.query(limit=100_000)}
        chain = audit.verify()
    missing = [request_id for request_id in answered if request_id not in recorded]
    assert not missing, f"{len(missing)} of {len(answered)} answered calls have no record"
    assert chain.ok, chain
