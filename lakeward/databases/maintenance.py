"""Maintenance windows: when pending modifications are applied.

The format is RDS's ``ddd:hh24:mi-ddd:hh24:mi`` (a weekly window, UTC, e.g.
``Sun:03:00-Sun:03:30``), or ``hh24:mi-hh24:mi`` for a window every day. Like
RDS, a window lasts at least 30 minutes and at most 24 hours.

There is no scheduler process: a pending modification is due once the first
window that ends after the modification was requested has begun, and it is
applied by whichever command looks first (``lakeward db maintain``,
``db describe``, or ``Instances.ensure`` as ``lakeward up`` calls it). A window
nobody looked at during is therefore applied at the next look after it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_DAY = "|".join(DAYS)
_WINDOW = re.compile(
    rf"^(?:(?P<d1>{_DAY}):)?(?P<h1>\d\d):(?P<m1>\d\d)-(?:(?P<d2>{_DAY}):)?(?P<h2>\d\d):(?P<m2>\d\d)$",
    re.IGNORECASE,
)
_MIN_LENGTH = timedelta(minutes=30)
_MAX_LENGTH = timedelta(hours=24)


@dataclass(frozen=True)
class Window:
    """A window that recurs every ``period``, starting ``offset`` after the period begins."""

    text: str
    period: timedelta  # a week or a day
    offset: timedelta  # from Monday 00:00 (weekly) or from midnight (daily), UTC
    length: timedelta

    def next_start(self, after: datetime) -> datetime:
        """The start of the first window that ends after ``after`` (it may be under way)."""
        after = after.astimezone(UTC)
        midnight = after.replace(hour=0, minute=0, second=0, microsecond=0)
        base = midnight - timedelta(days=after.weekday()) if self.period.days == 7 else midnight
        start = base - self.period + self.offset
        while start + self.length <= after:
            start += self.period
        return start

    def due(self, since: datetime, now: datetime) -> bool:
        """Whether a change requested at ``since`` is due at ``now``."""
        return now >= self.next_start(since)


def parse_window(text: str) -> Window:
    """Parse a window; ``ValueError`` says what is wrong with it."""
    match = _WINDOW.match(text.strip())
    if not match:
        raise ValueError(
            f"{text!r} is not a maintenance window; write ddd:hh24:mi-ddd:hh24:mi in UTC "
            "(e.g. Sun:03:00-Sun:03:30), or hh24:mi-hh24:mi for every day"
        )
    d1, d2 = match["d1"], match["d2"]
    if (d1 is None) != (d2 is None):
        raise ValueError(f"{text!r}: give a day on both ends of the window or on neither")
    h1, m1, h2, m2 = (int(match[k]) for k in ("h1", "m1", "h2", "m2"))
    if h1 > 23 or h2 > 23 or m1 > 59 or m2 > 59:
        raise ValueError(f"{text!r}: hours run 00-23 and minutes 00-59")
    period = timedelta(days=7 if d1 else 1)
    start = timedelta(days=DAYS.index(d1.lower()) if d1 else 0, hours=h1, minutes=m1)
    end = timedelta(days=DAYS.index(d2.lower()) if d2 else 0, hours=h2, minutes=m2)
    length = (end - start) % period
    if not _MIN_LENGTH <= length <= _MAX_LENGTH:
        raise ValueError(
            f"{text!r} lasts {_minutes(length)} minutes; a maintenance window lasts "
            "30 minutes to 24 hours"
        )
    return Window(text=text.strip(), period=period, offset=start, length=length)


def _minutes(delta: timedelta) -> int:
    return int(delta.total_seconds() // 60)
