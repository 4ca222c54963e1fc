"""JSON lines: the ids' lines become ``{}``; every other line stays byte-identical.

Replacing a line by ``{}`` (rather than dropping it) keeps every other
record's line number, so the index entries of other users stay valid and the
object needs no re-indexing. Byte offsets of later lines do move; nothing in
lakeward keys records by offset. ``lakeward erasure vacuum`` drops the
placeholders later, re-indexing the objects it compacts.

Newlines are found with numpy over the whole buffer, so the cost of a purge is
close to that of copying the object.
"""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from lakeward.erasure.executors.base import JSON_LINES, Executor, Outcome, Target, gzipped
from lakeward.erasure.indexers import id_path, id_text
from lakeward.erasure.mappers import COMPOSITE_SEPARATOR as SEPARATOR
from lakeward.erasure.mappers import composite_id
from lakeward.errors import ObjectChangedSincePlan, ObjectNotFound

PLACEHOLDER = b"{}"
NEWLINE = 10


def id_of(record: Any, columns: Sequence[str]) -> str | None:
    """A record's id as the index reads it (composite ids joined), or None."""
    parts = []
    for column in columns:
        node = record
        for part in id_path(column):
            node = node.get(part) if isinstance(node, dict) else None
        text = id_text(node)
        if text is None:
            return None
        parts.append(text)
    return composite_id(parts)


def line_bounds(data: bytes) -> np.ndarray[Any, np.dtype[np.int64]]:
    """Start offsets of every line, plus the end of the data (a final line may lack ``\\n``)."""
    newlines = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == NEWLINE)
    starts = np.concatenate(([0], newlines + 1)).astype(np.int64)
    if starts[-1] != len(data):
        starts = np.append(starts, len(data))  # the last line has no newline
    return starts


def blank_lines(
    data: bytes, positions: Iterable[int], bounds: np.ndarray[Any, np.dtype[np.int64]] | None = None
) -> bytes:
    """``data`` with each listed 0-based line replaced by ``{}`` (its newline kept)."""
    bounds = line_bounds(data) if bounds is None else bounds
    lines = len(bounds) - 1
    pieces: list[bytes | memoryview] = []
    view = memoryview(data)
    done = 0
    for line in sorted(set(positions)):
        if line >= lines:
            raise ObjectChangedSincePlan(f"line {line + 1} is past the end ({lines} lines)")
        start, end = int(bounds[line]), int(bounds[line + 1])
        pieces.append(view[done:start])
        pieces.append(PLACEHOLDER + (b"\n" if data[end - 1 : end] == b"\n" else b""))
        done = end
    pieces.append(view[done:])
    return b"".join(pieces)


def lines_of(data: bytes, user_ids: Sequence[str], columns: Sequence[str]) -> list[int]:
    """The 0-based numbers of lines holding a record of one of the ids (a full scan)."""
    wanted = set(user_ids)
    # Cheap filter first: a line can only hold an id whose JSON text appears in it.
    needles = [json.dumps(p)[1:-1].encode() for u in wanted for p in u.split(SEPARATOR)[:1]]
    found = []
    for number, line in enumerate(data.split(b"\n")):
        if not line.strip() or line == PLACEHOLDER or not any(n in line for n in needles):
            continue
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if id_of(record, columns) in wanted:
            found.append(number)
    return found


class JsonLinesExecutor(Executor):
    layer = JSON_LINES

    def decode(self, target: Target, raw: bytes) -> bytes:
        if gzipped(target, raw):
            return gzip.decompress(raw)
        return raw

    def encode(self, target: Target, raw: bytes, data: bytes) -> bytes:
        if gzipped(target, raw):
            # mtime=0 keeps the output a function of the content alone.
            return gzip.compress(data, compresslevel=6, mtime=0)
        return data

    def purge(self, target: Target, user_ids: Sequence[str]) -> Outcome:
        try:
            raw = self.read(target)
        except ObjectNotFound:
            return Outcome(target.uri, self.layer, "missing", note="the object is gone")
        try:
            data = self.decode(target, raw)
        except (OSError, EOFError, zlib.error) as exc:
            raise ObjectChangedSincePlan(f"{target.uri} is not valid gzip: {exc}") from None
        # The index numbers lines from 1; the arithmetic here is 0-based.
        positions = tuple(p - 1 for p in target.positions) or tuple(
            lines_of(data, user_ids, target.id_columns)
        )
        bounds = line_bounds(data)
        positions = self._still_held(target, data, bounds, positions, user_ids)
        if not positions:
            # Purged before (a resumed run): nothing of the ids is left to remove.
            return self.finish(target, raw, None, 0)
        return self.finish(
            target,
            raw,
            self.encode(target, raw, blank_lines(data, positions, bounds)),
            len(positions),
        )

    def _still_held(
        self,
        target: Target,
        data: bytes,
        bounds: np.ndarray[Any, np.dtype[np.int64]],
        positions: Sequence[int],
        user_ids: Sequence[str],
    ) -> tuple[int, ...]:
        """The listed lines still to blank; each must hold one of the ids or be ``{}`` already.

        Any other content means the plan is stale: never blank another user's record.
        """
        wanted = set(user_ids)
        held = []
        for line in sorted(set(positions)):
            if line + 1 >= len(bounds):
                raise ObjectChangedSincePlan(f"{target.uri}: line {line + 1} is past the end")
            text = data[int(bounds[line]) : int(bounds[line + 1])]
            if text.rstrip(b"\r\n") == PLACEHOLDER:
                continue
            try:
                found = id_of(json.loads(text), target.id_columns)
            except ValueError:
                found = None
            if found not in wanted:
                raise ObjectChangedSincePlan(
                    f"{target.uri}: line {line + 1} does not hold a record of the ids"
                )
            held.append(line)
        return tuple(held)

    def count(self, target: Target, user_ids: Sequence[str]) -> int:
        raw = self.current(target)
        if raw is None:
            return 0
        return len(lines_of(self.decode(target, raw), user_ids, target.id_columns))
