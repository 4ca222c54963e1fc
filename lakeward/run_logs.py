"""The stack's process logs (``<data dir>/run/*.log``) kept to a size by settings.

Each background process writes its log through a descriptor opened for appending
(``process.py``), which it keeps while it runs, so the file cannot be renamed from under
it. A log grown past ``logs.max_bytes`` is copied aside to ``<name>.log.1`` (older copies
move up to ``.2`` ... ``.<logs.keep>``, the oldest dropped) and then emptied in place: the
writer's next line lands at the new end, since every write of an appending descriptor goes
to the end. Lines written between the copy and the emptying are lost: a moment's worth,
once per rotation.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

log = logging.getLogger(__name__)


def rotate_logs(run_dir: Path, max_bytes: int, keep: int) -> list[Path]:
    """Rotate each log in ``run_dir`` larger than ``max_bytes``; the logs rotated."""
    rotated = []
    for path in sorted(run_dir.glob("*.log")):
        try:
            if path.stat().st_size <= max_bytes:
                continue
            if keep:
                for number in range(keep - 1, 0, -1):
                    older = path.with_name(f"{path.name}.{number}")
                    if older.exists():
                        older.replace(path.with_name(f"{path.name}.{number + 1}"))
                shutil.copyfile(path, path.with_name(f"{path.name}.1"))
            with open(path, "r+b") as emptied:
                emptied.truncate(0)
        except OSError as exc:  # a process stopped meanwhile, a full disk: try again later
            log.warning("could not rotate %s: %s", path, exc)
            continue
        rotated.append(path)
    return rotated
