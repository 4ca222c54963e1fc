"""What a covid ETL run reports: per measure (rows read, loaded, quarantined) and per run.

Filled in by the driver (covid.py) and by the Spark side (transform.py), so it
lives apart from both.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field


@dataclass
class MeasureReport:
    measure: str
    table: str
    source: str
    raw_uri: str
    size: int
    sha256: str
    rows_read: int = 0
    rows_loaded: int = 0
    rows_quarantined: int = 0
    rows_without_coordinates: int = 0
    output_rows: int = 0
    bad_date_columns: list[str] = field(default_factory=list)
    untracked_values: int = 0


@dataclass
class EtlReport:
    run_id: str
    measures: list[MeasureReport]
    tables: dict[str, str] = field(default_factory=dict)  # table -> location
    combined_rows: int = 0
    quarantined: int = 0
    timings: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True)
