"""The stack's process logs rotated by size while their processes keep writing."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from lakeward.process import ManagedProcess
from lakeward.run_logs import rotate_logs

# Writes numbered lines to its stdout (the log), one every millisecond, until killed.
WRITER = (
    "import sys, time\nfor n in range(10**9):\n    print(f'line {n}', flush=True)\n"
    "    time.sleep(0.001)\n"
)


def numbers(text: str) -> list[int]:
    return [int(line.split()[1]) for line in text.splitlines() if line.startswith("line ")]


def test_a_log_past_its_size_is_copied_aside_and_emptied_while_its_process_writes(
    tmp_path: Path,
) -> None:
    process = ManagedProcess("writer", tmp_path)
    pid = process.start([sys.executable, "-c", WRITER])
    try:
        for generation in range(4):  # more rotations than copies kept
            while process.log_file.stat().st_size < 20_000:
                time.sleep(0.01)
            assert rotate_logs(tmp_path, max_bytes=10_000, keep=2) == [process.log_file]
            if generation == 0:
                first = (tmp_path / "writer.log.1").read_text()
                assert numbers(first)[0] == 0
        time.sleep(0.2)
    finally:
        subprocess.run(["kill", str(pid)], check=False)
    current = process.log_file.read_text()
    # The writer went on at the start of the emptied file: no hole of zero bytes, no gap
    # but the moment between the copy and the emptying.
    assert "\0" not in current and numbers(current) == sorted(numbers(current))
    newer, older = (tmp_path / "writer.log.1").read_text(), (tmp_path / "writer.log.2").read_text()
    assert numbers(older)[-1] < numbers(newer)[0] < numbers(newer)[-1] < numbers(current)[0]
    assert not (tmp_path / "writer.log.3").exists()  # keep = 2
    # A log under the limit is left alone; keep = 0 only empties.
    assert rotate_logs(tmp_path, max_bytes=10**9, keep=2) == []
    assert rotate_logs(tmp_path, max_bytes=0, keep=0) == [process.log_file]
    assert process.log_file.stat().st_size == 0
