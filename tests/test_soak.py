"""A short soak: boto3 clients run SELECTs, CTAS, INSERTs, views and S3 puts (people's
records among them, erased through approval meanwhile; IAM users and policies changed too)
against a server of its own over the session stack while its workers, its supervisor or all
of them are killed with SIGKILL, or a worker paused, every few seconds (a fixed seed); then
every invariant of bench/_soak.py must hold, and ``down`` must leave nothing behind.

bench/soak.py runs the same scenario for as long as asked, with its figures.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from bench._soak import SERVER_FAULTS, Soak, leftovers, summary
from lakeward.config import Settings
from lakeward.http.supervisor import read_workers
from lakeward.process import free_port
from lakeward.stack import Stack, write_state
from tests.helpers import over_stack

pytestmark = pytest.mark.spark  # the session stack: its metastore and covid table

SEED = 20261129
SECONDS = 75


def test_a_short_soak_with_kills_holds_every_invariant(stack: Settings, tmp_path: Path) -> None:
    settings = over_stack(stack, tmp_path / "soak")
    settings = settings.model_copy(
        update={
            "server": settings.server.model_copy(
                update={"port": free_port("127.0.0.1", 18990), "workers": 2}
            )
        }
    )
    write_state(settings)
    server = Stack(settings)
    server.start_server()
    soak = Soak(settings, seed=SEED, clients=3, every=5.0)
    try:
        deadline = time.monotonic() + 120
        while not all(w["state"] == "running" for w in read_workers(settings)):
            assert time.monotonic() < deadline, "the server's workers did not start"
            time.sleep(0.1)
        report = soak.run(SECONDS)
        invariants = soak.check()
        print("\n" + "\n".join(summary(report)))
        soak.clean_up()
    finally:
        server.server_process.stop()
    assert {f.kind for f in report.faults} == set(SERVER_FAULTS)
    kills = [f for f in report.faults if f.kind != "worker_pause"]
    assert all(f.back_after is not None for f in kills), kills
    succeeded = {s.kind for s in report.statements if s.state == "SUCCEEDED"}
    assert succeeded == {"select", "ctas", "insert", "view"}
    assert sum(1 for p in report.puts if p.acknowledged) > 0
    assert sum(1 for o in report.people.objects if o.acknowledged) > 0
    assert any(e.state == "COMPLETED" for e in report.people.erasures), report.people.erasures
    assert report.iam.users > 0
    assert all(verdict == "held" for verdict in invariants.values()), invariants
    assert leftovers(settings, soak.seen) == []
