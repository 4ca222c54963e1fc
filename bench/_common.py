"""What the benchmarks share: output, statistics, the machine's load, other benchmarks, ports.

Imported by the scripts beside it (``from _common import ...``; a script's own folder
is first on ``sys.path``). It imports nothing from lakeward, so a benchmark that
measures lakeward as committed at another revision can still use it.
"""

from __future__ import annotations

import os
import random
import socket
import subprocess
import sys
import time
from dataclasses import dataclass

TICK = os.sysconf("SC_CLK_TCK")
"""Jiffies per second, the unit of /proc's CPU times."""


def say(text: str = "") -> None:
    print(text, flush=True)


# --- statistics -------------------------------------------------------------------------


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0-100), interpolating linearly between ranks."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    rank = (len(ordered) - 1) * q / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


@dataclass
class Summary:
    n: int
    p50: float
    p90: float
    p99: float
    mean: float
    min: float
    max: float

    @classmethod
    def of(cls, values: list[float]) -> Summary:
        if not values:
            nan = float("nan")
            return cls(0, nan, nan, nan, nan, nan, nan)
        return cls(
            len(values),
            percentile(values, 50),
            percentile(values, 90),
            percentile(values, 99),
            sum(values) / len(values),
            min(values),
            max(values),
        )

    def cells(self) -> str:
        """The figures as a table row (under ``HEADER``), in the values' own unit."""
        return (
            f"{self.p50:9.1f} {self.p90:9.1f} {self.p99:9.1f} {self.mean:9.1f}"
            f" {self.min:9.1f} {self.max:10.1f} {self.n:7d}"
        )

    def line(self) -> str:
        """The figures of values in seconds, as one line in milliseconds."""
        return (
            f"p50 {ms(self.p50)}  p90 {ms(self.p90)}  p99 {ms(self.p99)}  mean {ms(self.mean)}"
            f"  (min {ms(self.min)}, max {ms(self.max)}, {self.n} runs)"
        )


HEADER = f"{'p50':>9} {'p90':>9} {'p99':>9} {'mean':>9} {'min':>9} {'max':>10} {'n':>7}"


# --- the machine ------------------------------------------------------------------------


def machine_busy() -> int:
    """Jiffies the whole machine has spent busy (not idle, not waiting on I/O)."""
    with open("/proc/stat") as handle:
        user, nice, system, _idle, _iowait, irq, softirq, steal = (
            int(x) for x in handle.readline().split()[1:9]
        )
    return user + nice + system + irq + softirq + steal


def process_table() -> dict[int, tuple[int, int]]:
    """pid -> (parent pid, user+system jiffies) of every process."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                rest = handle.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        table[int(entry)] = (int(rest[1]), int(rest[11]) + int(rest[12]))
    return table


def tree_ticks(table: dict[int, tuple[int, int]], roots: list[int]) -> dict[int, int]:
    """Jiffies of ``roots`` and all their descendants, from a ``process_table()``."""
    members = {r for r in roots if r in table}
    changed = True
    while changed:
        changed = False
        for pid, (parent, _ticks) in table.items():
            if parent in members and pid not in members:
                members.add(pid)
                changed = True
    return {pid: table[pid][1] for pid in members}


def tree_cpu(root: int) -> float:
    """CPU seconds used so far by a process and its live descendants (a server's
    supervisor and its worker processes)."""
    return sum(tree_ticks(process_table(), [root]).values()) / TICK


def other_benchmarks(pattern: str) -> list[str]:
    """Command lines of running processes that match ``pattern`` (``pgrep -af``)."""
    found = subprocess.run(["pgrep", "-af", pattern], capture_output=True, text=True, check=False)
    return [line for line in found.stdout.splitlines() if line.strip()]


def wait_for_other_benchmarks(pattern: str, limit: float, interval: float = 30.0) -> None:
    """Wait until no process matches ``pattern``; exit with status 2 after ``limit`` s."""
    clock = time.monotonic()
    while running := other_benchmarks(pattern):
        waited = time.monotonic() - clock
        if waited >= limit:
            say(f"another benchmark still runs after {waited:.0f} s; giving up: {running}")
            sys.exit(2)
        say(f"waiting for another benchmark to finish ({waited:.0f} s so far): {running[0]}")
        time.sleep(interval)


# --- ports ------------------------------------------------------------------------------


def free_port(taken: set[int] | None = None) -> int:
    """A port the OS picks (ephemeral range): away from the 9083/8950+ other stacks probe."""
    while True:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        if taken is None:
            return port
        if port not in taken:
            taken.add(port)
            return port


def free_ports(count: int) -> int:
    """The first of ``count`` consecutive free ports (metastore nodes listen on a block)."""
    while True:
        first = random.randrange(20_000, 40_000)
        if all(_is_free(port) for port in range(first, first + count)):
            return first


def _is_free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True
