"""The layout of the JHU CSSE COVID-19 global time series.

``Province/State,Country/Region,Lat,Long,1/22/20,1/23/20,...``: one row per
location, one column per day (dates as M/D/YY), cumulative counts.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from datetime import date, datetime

from lakeward.errors import InputError

LOCATION_COLUMNS = ("Province/State", "Country/Region", "Lat", "Long")


@dataclass(frozen=True)
class Measure:
    name: str  # column name in the tables: confirmed, deaths, recovered
    file_name: str
    table: str
    # JHU stopped tracking some measures; later columns hold 0 or -1, not data.
    tracked_until: date | None = None

    @property
    def new_column(self) -> str:
        return f"new_{self.name}"


MEASURES = (
    Measure("confirmed", "time_series_covid19_confirmed_global.csv", "covid_confirmed_cases"),
    Measure("deaths", "time_series_covid19_deaths_global.csv", "covid_deaths"),
    Measure(
        "recovered",
        "time_series_covid19_recovered_global.csv",
        "covid_recovered",
        tracked_until=date(2021, 8, 4),
    ),
)
COMBINED_TABLE = "covid_cases"
QUARANTINE_TABLE = "covid_quarantine"


@dataclass(frozen=True)
class BadColumn:
    position: int  # 1-based column number in the file
    header: str
    reason: str


@dataclass(frozen=True)
class Header:
    """A validated header: the text of line 1 and its date columns."""

    file: str
    text: str
    columns: list[str]
    dates: list[date | None]  # per date column; None where the header is not a date
    bad_columns: list[BadColumn]

    @property
    def good_dates(self) -> list[date]:
        return [d for d in self.dates if d is not None]


def parse_date_header(text: str) -> date | None:
    try:
        return datetime.strptime(text.strip(), "%m/%d/%y").date()
    except ValueError:
        return None


def parse_header(file: str, line: str) -> Header:
    """Check line 1 against the JHU layout.

    A location column that is missing or renamed, or dates out of order, fail
    the whole file (nothing can be read right from it). A single date header
    that is not a date only makes that column unusable: its values are
    quarantined and the rest of the file is kept.
    """
    text = line.removeprefix("\ufeff").rstrip("\r\n")
    columns = next(csv.reader([text]), [])
    for position, expected in enumerate(LOCATION_COLUMNS, start=1):
        got = columns[position - 1] if len(columns) >= position else None
        if got != expected:
            shown = "missing" if got is None else repr(got)
            raise InputError(
                f"{file}: line 1, column {position} is {shown}, expected {expected!r} "
                f"(the JHU layout is {','.join(LOCATION_COLUMNS)},<dates as M/D/YY>...)"
            )
    if len(columns) == len(LOCATION_COLUMNS):
        raise InputError(f"{file}: line 1 has no date columns after {','.join(LOCATION_COLUMNS)}")

    dates: list[date | None] = []
    bad: list[BadColumn] = []
    previous: tuple[int, date] | None = None
    for position, header in enumerate(columns[len(LOCATION_COLUMNS) :], start=5):
        parsed = parse_date_header(header)
        dates.append(parsed)
        if parsed is None:
            bad.append(BadColumn(position, header, f"date header {header!r} is not a M/D/YY date"))
            continue
        if previous is not None and parsed <= previous[1]:
            raise InputError(
                f"{file}: line 1, column {position} ({header!r}) is not after column "
                f"{previous[0]} ({previous[1]:%-m/%-d/%y}); date columns must be in order"
            )
        previous = (position, parsed)
    if previous is None:
        raise InputError(f"{file}: line 1: none of the date headers is a M/D/YY date")
    return Header(file=file, text=text, columns=columns, dates=dates, bad_columns=bad)
