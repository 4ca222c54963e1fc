"""A short soak: boto3 clients run SELECTs, CTAS, INSERTs, views and S3 puts (people's
records among them, erased through approval meanwhile; IAM users and policies changed too;
console sessions opening the seed's dashboard) against a server of its own over the session
stack while its workers, its supervisor or all of them are killed with SIGKILL, a worker
paused, or, as root, the file system of the server's state filled, every few seconds (a
fixed seed); then every invariant of bench/_soak.py must hold, and ``down`` must leave
nothing behind.

bench/soak.py runs the same scenario for as long as asked, with its figures.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from bench._soak import DISK_FAULT, SERVER_FAULTS, Soak, leftovers, small_disk, summary, unmount
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
    settings.data_dir.mkdir(parents=True)
    disk = small_disk(settings.data_dir, 256)  # None but as root (a tmpfs is mounted)
    write_state(settings)
    server = Stack(settings)
    server.start_server()
    soak = Soak(settings, seed=SEED, clients=3, every=5.0, disk=disk)
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
        left = leftovers(settings, soak.seen)
        if disk is not None and (still := unmount(disk)):
            left.append(still)
    assert {f.kind for f in report.faults} == {*SERVER_FAULTS, *([DISK_FAULT] if disk else [])}
    kills = [f for f in report.faults if f.kind != "worker_pause"]
    assert all(f.back_after is not None for f in kills), kills
    succeeded = {s.kind for s in report.statements if s.state == "SUCCEEDED"}
    assert succeeded == {"select", "ctas", "insert", "view"}
    assert sum(1 for p in report.puts if p.acknowledged) > 0
    assert sum(1 for o in report.people.objects if o.acknowledged) > 0
    assert any(e.state == "COMPLETED" for e in report.people.erasures), report.people.erasures
    assert report.iam.users > 0
    assert report.console.renders > 0
    assert all(verdict == "held" for verdict in invariants.values()), invariants
    assert left == []
