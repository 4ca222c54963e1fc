"""Counts read straight from the JHU files: the ground truth the BI numbers are checked against."""

from __future__ import annotations

import csv
import io

from tests.helpers import JHU_DIR


def rows(measure: str) -> list[dict[str, str]]:
    text = (JHU_DIR / f"time_series_covid19_{measure}_global.csv").read_text()
    return list(csv.DictReader(io.StringIO(text)))


def count(measure: str, country: str, day: str = "9/10/20") -> int:
    """A country's count on a day (M/D/YY, as in the files), summed over its rows."""
    return sum(int(r[day]) for r in rows(measure) if r["Country/Region"] == country)


def locations() -> set[tuple[str, str]]:
    """(province, country) of every location in any of the three files (the combined table's)."""
    return {
        (r["Province/State"], r["Country/Region"])
        for measure in ("confirmed", "deaths", "recovered")
        for r in rows(measure)
    }
