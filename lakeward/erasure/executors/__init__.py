"""Purge executors, one per format and storage layer, and the pool that runs them.

executors = Executors(storage)
outcome = executors.purge(target, ["user-1"])     # one target
for target, result in executors.run(targets, ids, workers=4, stop=event): ...
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

from lakeward.config import Settings
from lakeward.erasure.executors.base import (
    CSV,
    DELTA,
    FILE_NAME,
    HUDI,
    ICEBERG,
    JSON_LINES,
    OBJECT_LAYERS,
    PARQUET,
    RELATIONAL,
    TABLE_LAYERS,
    Executor,
    Outcome,
    Target,
)
from lakeward.errors import InputError, NeedsOwnDelete, ObjectChangedSincePlan
from lakeward.storage import Storage

__all__ = [
    "CSV",
    "DELTA",
    "FILE_NAME",
    "HUDI",
    "ICEBERG",
    "JSON_LINES",
    "OBJECT_LAYERS",
    "PARQUET",
    "RELATIONAL",
    "TABLE_LAYERS",
    "Executor",
    "Executors",
    "NeedsOwnDelete",
    "ObjectChangedSincePlan",
    "Outcome",
    "Target",
    "load_executor",
]

DEFAULT_WORKERS = 4


def load_executor(layer: str, storage: Storage, settings: Settings | None = None) -> Executor:
    """The executor of one layer; imported on demand (deltalake and pyiceberg are heavy)."""
    if layer == JSON_LINES:
        from lakeward.erasure.executors.jsonl import JsonLinesExecutor

        return JsonLinesExecutor(storage)
    if layer == CSV:
        from lakeward.erasure.executors.csvfile import CsvExecutor

        return CsvExecutor(storage)
    if layer == PARQUET:
        from lakeward.erasure.executors.parquet import ParquetExecutor

        return ParquetExecutor(storage)
    if layer == FILE_NAME:
        from lakeward.erasure.executors.filename import FileNameExecutor

        return FileNameExecutor(storage)
    if layer == RELATIONAL:
        from lakeward.erasure.executors.relational import RelationalExecutor

        return RelationalExecutor(storage)
    if layer in (DELTA, ICEBERG, HUDI):
        from lakeward.erasure.executors import tables

        if layer == ICEBERG:
            return tables.IcebergExecutor(storage, settings)
        return tables.DeltaExecutor(storage) if layer == DELTA else tables.HudiExecutor(storage)
    raise InputError(f"no purge executor for the storage layer {layer!r}")


class Executors:
    """One executor per layer, made on first use, and a bounded pool to run them."""

    def __init__(self, storage: Storage, settings: Settings | None = None) -> None:
        self.storage = storage
        self.settings = settings
        self._by_layer: dict[str, Executor] = {}
        self._lock = threading.Lock()

    def of(self, layer: str) -> Executor:
        with self._lock:
            if layer not in self._by_layer:
                self._by_layer[layer] = load_executor(layer, self.storage, self.settings)
            return self._by_layer[layer]

    def purge(self, target: Target, user_ids: Sequence[str]) -> Outcome:
        return self.of(target.layer).purge(target, user_ids)

    def count(self, target: Target, user_ids: Sequence[str]) -> int:
        return self.of(target.layer).count(target, user_ids)

    def run(
        self,
        targets: Sequence[Target],
        user_ids: Sequence[str],
        *,
        workers: int = DEFAULT_WORKERS,
        stop: threading.Event | None = None,
        replan: Callable[[Target], Target] | None = None,
    ) -> Iterator[tuple[Target, Outcome | Exception]]:
        """Purge targets in parallel, yielding each as it finishes (in completion order).

        At most ``workers`` run at once and no new target starts once ``stop`` is
        set. A target whose object changed is re-planned with ``replan`` and
        tried once more; errors are yielded, not raised, so one bad object
        does not stop the others.
        """
        pending = iter(targets)
        with ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="purge") as pool:
            running: dict[Future[Outcome], Target] = {}

            def submit_next() -> bool:
                if stop is not None and stop.is_set():
                    return False
                target = next(pending, None)
                if target is None:
                    return False
                running[pool.submit(self._one, target, user_ids, replan)] = target
                return True

            while len(running) < max(1, workers) and submit_next():
                pass
            while running:
                done, _ = wait(running, return_when=FIRST_COMPLETED)
                for future in done:
                    target = running.pop(future)
                    error = future.exception()
                    if isinstance(error, Exception):
                        yield target, error
                    elif error is not None:
                        raise error  # KeyboardInterrupt and the like end the run
                    else:
                        yield target, future.result()
                    submit_next()

    def _one(
        self,
        target: Target,
        user_ids: Sequence[str],
        replan: Callable[[Target], Target] | None,
    ) -> Outcome:
        try:
            return self.purge(target, user_ids)
        except ObjectChangedSincePlan as exc:
            if replan is None:
                raise
            fresh = replan(target)
            outcome = self.purge(fresh, user_ids)
            outcome.note = (outcome.note + "; " if outcome.note else "") + f"re-planned: {exc}"
            return outcome

    def close(self) -> None:
        for executor in self._by_layer.values():
            close = getattr(executor, "close", None)
            if close is not None:
                close()
