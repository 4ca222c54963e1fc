"""Soak and chaos: hours of mixed work against a server while its processes are killed.

    .venv/bin/python bench/soak.py --data-dir DIR [--hours 1 | --minutes 5] [--seed N]
        [--clients 4] [--every 6] [--standby] [--disk-mib 256] [--json FILE]

On the running stack of ``--data-dir`` (``lakeward up``), on loopback only:

1. starts a server of its own over the stack's metastore and lake (its state, audit
   log and processes in a temporary directory; two workers; with ``--standby``, a
   standby supervisor too), so that the stack's own server is never killed;
2. runs the scenario of bench/_soak.py for the time asked: ``--clients`` boto3 clients
   running SELECTs with known answers, CTAS, INSERTs and views, and putting objects of up
   to 256 KiB and objects of people's records through lakeward's S3 endpoint; a thread
   asking for people's erasure and approving it (bench/_soak_people.py); a thread
   changing IAM users and policies (bench/_soak_iam.py); while every ``--every``
   s (on average) one fault is injected, by a random choice from ``--seed``: a worker,
   the supervisor, or the supervisor and all its workers killed with SIGKILL, a worker
   paused for 1-4 s, and, on a stack of several metastore nodes, one node killed (and
   started again 3 s later), and, with ``--disk-mib`` (as root), the file system of the
   server's state (a tmpfs of that size) filled to 0-4 MiB free for 3-10 s;
3. checks every invariant, drops what the run made, stops the server and looks for
   what it left behind (processes, its port, temporary directories);
4. prints statements, puts and erasures per minute, the faults by kind with the longest time
   until the server answered again, the keeper's memory and descriptors, and each
   invariant: "held" or what broke it. The exit status is 1 if any did not hold.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import say  # noqa: E402
from bench._soak import Soak, leftovers, small_disk, summary, unmount  # noqa: E402
from lakeward.config import load_settings  # noqa: E402
from lakeward.http.supervisor import read_workers  # noqa: E402
from lakeward.process import free_port  # noqa: E402
from lakeward.stack import Stack, write_state  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, required=True, help="a running stack's")
    length = parser.add_mutually_exclusive_group()
    length.add_argument("--hours", type=float)
    length.add_argument("--minutes", type=float)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--every", type=float, default=6.0, help="seconds between faults")
    parser.add_argument("--json", type=Path, help="write the report here too")
    parser.add_argument(
        "--standby", action="store_true", help="the server keeps a standby (server.standby)"
    )
    parser.add_argument(
        "--disk-mib",
        type=int,
        default=256,
        help="the server's state on a file system of this size, filled for a while as a "
        "fault (mounting it needs root; 0: no disk fault)",
    )
    args = parser.parse_args()
    seconds = 3600 * args.hours if args.hours else 60 * (args.minutes or 5)

    stack = load_settings(data_dir=args.data_dir, env={})
    if stack.server.host not in ("127.0.0.1", "localhost", "::1"):
        parser.error(f"the stack's server listens on {stack.server.host}: loopback only")
    if stack.metastore.port is None:
        parser.error(f"{args.data_dir} has no running stack: run lakeward up first")
    own = Path(tempfile.mkdtemp(prefix="lakeward-soak-"))
    disk = small_disk(own, args.disk_mib)
    lake = stack.lake.model_copy(update={"root": stack.lake_root})
    server = stack.server.model_copy(
        update={"port": free_port("127.0.0.1", 18990), "workers": 2, "standby": args.standby}
    )
    settings = stack.model_copy(update={"data_dir": own, "lake": lake, "server": server})
    write_state(settings)
    processes = Stack(settings)
    say(f"a server of the soak's own on port {server.port}, its state in {own}")
    processes.start_server()
    soak = Soak(
        settings, seed=args.seed, clients=args.clients, every=args.every, disk=disk, stack=stack
    )
    try:
        while not all(w["state"] == "running" for w in read_workers(settings)):
            soak.stopping.wait(0.2)
        say(f"{seconds:g} s of work, seed {args.seed}, a fault every {args.every:g} s")
        report = soak.run(seconds)
        soak.check()
        for line in summary(report):
            say(line)
        if args.json:
            args.json.write_text(json.dumps(asdict(report), indent=2, default=str))
        say("dropping the run's tables and objects")
        soak.clean_up()
    finally:
        processes.server_process.stop()
    left = leftovers(settings, soak.seen)
    if disk is not None and (still := unmount(disk)):
        left.append(still)
    shutil.rmtree(own, ignore_errors=True)  # the server's own state: made for this run
    verdict = "held" if not left else "; ".join(left[:5])
    report.invariants["nothing is left behind after down"] = verdict
    say(f"invariant: nothing is left behind after down: {verdict}")
    return 0 if all(v == "held" for v in report.invariants.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
