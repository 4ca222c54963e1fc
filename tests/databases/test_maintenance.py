"""Maintenance windows: parsing, the next window, and when a change is due."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from lakeward.config import load_settings
from lakeward.databases import parse_window
from lakeward.errors import ConfigError

# Managed instances take the first free port from a fixed start (5433, 3307), so
# these tests run in the one-process phase, not beside each other.
pytestmark = pytest.mark.serial


def at(day: int, hour: int, minute: int = 0) -> datetime:
    """A moment in the week of Monday 2026-11-16 (day 16 is a Monday, 22 a Sunday)."""
    return datetime(2026, 11, day, hour, minute, tzinfo=UTC)


def test_a_weekly_window_starts_on_its_day() -> None:
    window = parse_window("Sun:03:00-Sun:03:30")
    assert window.next_start(at(18, 12)) == at(22, 3)  # Wednesday -> that Sunday
    assert window.next_start(at(22, 3, 10)) == at(22, 3)  # under way: this one
    assert window.next_start(at(22, 3, 30)) == datetime(2026, 11, 29, 3, tzinfo=UTC)  # over


def test_days_are_rds_style_in_any_case() -> None:
    assert parse_window("sat:23:45-sun:00:15").next_start(at(16, 0)) == at(21, 23, 45)
    assert parse_window("MON:00:00-MON:01:00").next_start(at(22, 12)) == at(23, 0)


def test_a_window_may_span_the_end_of_the_week() -> None:
    window = parse_window("Sun:23:30-Mon:00:30")
    assert window.next_start(at(16, 0, 10)) == at(15, 23, 30)  # Monday 00:10: still open
    assert window.next_start(at(16, 1)) == at(22, 23, 30)


def test_a_daily_window() -> None:
    window = parse_window("22:00-23:00")
    assert window.next_start(at(18, 12)) == at(18, 22)
    assert window.next_start(at(18, 23)) == at(19, 22)
    late = parse_window("23:30-00:30")
    assert late.next_start(at(19, 0, 15)) == at(18, 23, 30)


def test_a_change_is_due_once_the_first_window_after_it_opens() -> None:
    window = parse_window("Sun:03:00-Sun:03:30")
    requested = at(18, 12)
    assert not window.due(requested, at(22, 2, 59))
    assert window.due(requested, at(22, 3))
    assert window.due(requested, at(25, 9))  # nobody looked during the window: still due
    # Requested during the window: applied while it is open.
    assert window.due(at(22, 3, 5), at(22, 3, 6))


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ("Sunday 3am", "not a maintenance window"),
        ("Sun:03:00-03:30", "on both ends"),
        ("Sun:24:00-Mon:00:30", "hours run 00-23"),
        ("Sun:03:00-Sun:03:10", "lasts 10 minutes"),
        ("Sun:03:00-Tue:03:00", "lasts 2880 minutes"),
        ("03:00-03:00", "lasts 0 minutes"),
    ],
)
def test_bad_windows_say_what_is_wrong(text: str, complaint: str) -> None:
    with pytest.raises(ValueError, match=complaint):
        parse_window(text)


def test_a_bad_window_setting_names_the_setting_and_its_origin(tmp_path: object) -> None:
    env = {"LAKEWARD_DATABASES__MAINTENANCE_WINDOW": "Sun:03:00-Sun:03:10"}
    with pytest.raises(ConfigError) as caught:
        load_settings(data_dir=str(tmp_path), env=env)
    message = str(caught.value)
    assert "databases.maintenance_window" in message
    assert "LAKEWARD_DATABASES__MAINTENANCE_WINDOW" in message
    assert "30 minutes to 24 hours" in message
