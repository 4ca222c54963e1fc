"""Progress of long steps: Rich bars on a terminal, nothing in a library call.

Service code reports through a ``Progress`` object and never prints; the CLI
hands it a ``RichProgress``. Spark jobs report their tasks as they finish,
read from Spark's status tracker by a small polling thread.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark import SparkContext


class Step:
    """One step being reported; ``advance`` moves its bar."""

    def advance(self, amount: float = 1) -> None:
        pass

    def update(self, completed: float | None = None, total: float | None = None) -> None:
        pass


class Progress:
    """Reports nothing; the base of reporters."""

    @contextmanager
    def step(self, description: str, total: float | None = None) -> Iterator[Step]:
        yield Step()

    @contextmanager
    def spark_job(self, spark: SparkContext, description: str) -> Iterator[None]:
        """Report the Spark jobs run inside the block as one bar of their tasks."""
        with self.step(description) as step:
            group = f"lakeward-{id(step)}"
            spark.setJobGroup(group, description)
            stop = threading.Event()
            watcher = threading.Thread(
                target=_watch_spark, args=(spark, group, step, stop), daemon=True
            )
            watcher.start()
            try:
                yield
            finally:
                stop.set()
                watcher.join()
                spark.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]


def _watch_spark(spark: SparkContext, group: str, step: Step, stop: threading.Event) -> None:
    tracker = spark.statusTracker()
    done_before = total_before = 0  # tasks of jobs that have finished
    seen: dict[int, tuple[int, int]] = {}
    while True:
        finished = stop.wait(0.25)
        try:
            for job_id in tracker.getJobIdsForGroup(group):
                job = tracker.getJobInfo(job_id)
                if job is None:
                    continue
                done = total = 0
                for stage_id in job.stageIds:
                    stage = tracker.getStageInfo(stage_id)
                    if stage is not None:
                        done += stage.numCompletedTasks
                        total += stage.numTasks
                seen[job_id] = (done, total)
            done_before = sum(d for d, _ in seen.values())
            total_before = sum(t for _, t in seen.values())
            step.update(completed=done_before, total=max(total_before, 1))
        except Exception:  # the tracker is advisory; never fail a job over it
            pass
        if finished:
            step.update(completed=max(total_before, 1), total=max(total_before, 1))
            return


class _RichStep(Step):
    def __init__(self, bar: Any, task: Any) -> None:
        self._bar = bar
        self._task = task

    def advance(self, amount: float = 1) -> None:
        self._bar.advance(self._task, amount)

    def update(self, completed: float | None = None, total: float | None = None) -> None:
        self._bar.update(self._task, completed=completed, total=total)


class RichProgress(Progress):
    """Rich progress bars, one line per step, left on screen when done."""

    def __init__(self) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            TextColumn,
            TimeElapsedColumn,
        )
        from rich.progress import Progress as Bars

        self._bars = Bars(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
        )

    def __enter__(self) -> RichProgress:
        self._bars.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._bars.stop()

    @contextmanager
    def step(self, description: str, total: float | None = None) -> Iterator[Step]:
        task = self._bars.add_task(description, total=total)
        step = _RichStep(self._bars, task)
        yield step
        current = self._bars.tasks[task].total or self._bars.tasks[task].completed or 1
        self._bars.update(task, completed=current, total=current)
