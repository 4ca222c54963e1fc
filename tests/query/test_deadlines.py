"""The executions' timeouts, run from one thread (query/deadlines.py)."""

from __future__ import annotations

import threading

from lakeward.query.deadlines import Deadlines


def test_deadlines_run_in_order_unless_cleared_and_one_failing_stops_none() -> None:
    deadlines = Deadlines("test-deadlines")
    ran: list[str] = []
    last = threading.Event()

    def fail() -> None:
        raise RuntimeError("an action that fails")

    deadlines.set("late", 0.3, lambda: (ran.append("late"), last.set()))
    deadlines.set("cleared", 0.1, lambda: ran.append("cleared"))
    deadlines.set("failing", 0.05, fail)
    deadlines.set("early", 0.1, lambda: ran.append("early"))  # set after a later one
    deadlines.clear("cleared")
    deadlines.clear("never set")
    assert last.wait(10)
    deadlines.close()
    assert ran == ["early", "late"]


def test_a_deadline_set_again_runs_once_at_its_new_time() -> None:
    deadlines = Deadlines("test-deadlines")
    ran: list[str] = []
    done = threading.Event()
    deadlines.set("query", 3600, lambda: ran.append("first"))
    deadlines.set("query", 0.01, lambda: (ran.append("second"), done.set()))
    assert done.wait(10)
    deadlines.set("marker", 0.05, done.set)
    done.clear()
    assert done.wait(10)
    deadlines.close()
    assert ran == ["second"]


def test_closing_forgets_the_deadlines_and_ends_the_thread() -> None:
    deadlines = Deadlines("test-deadlines-closed")
    ran = threading.Event()
    deadlines.set("query", 0.2, ran.set)
    deadlines.close()
    assert "test-deadlines-closed" not in {t.name for t in threading.enumerate()}
    assert not ran.wait(0.5)
