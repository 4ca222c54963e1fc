"""Synthetic JHU CSSE inputs: the real files with every data row repeated.

Copy 0 of each row is the row as it is; copy k (k >= 1) renames its
Province/State to ``"<orig> #k"`` (``"#k"`` where the original is empty, a
whole country) and keeps the country, coordinates and every count, so the
location keys stay unique and every output table grows exactly ``scale``-fold.
Generation is deterministic, and its time is not part of any measurement.
"""

from __future__ import annotations

import re
from pathlib import Path

FILES = (
    "time_series_covid19_confirmed_global.csv",
    "time_series_covid19_deaths_global.csv",
    "time_series_covid19_recovered_global.csv",
)
# The first CSV field: quoted (with "" for a quote) or bare, then its comma.
_FIRST_FIELD = re.compile(r'^("(?:[^"]|"")*"|[^,"]*),')


def _quote(field: str) -> str:
    if "," in field or '"' in field:
        return '"' + field.replace('"', '""') + '"'
    return field


def _split_rows(path: Path) -> tuple[str, list[tuple[str, str]]]:
    """The header line and, per data row, its Province/State and the rest of the line."""
    with open(path, encoding="utf-8", newline="") as handle:
        lines = handle.read().splitlines(keepends=True)
    header, rows = lines[0], []
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        match = _FIRST_FIELD.match(line)
        if match is None:
            raise ValueError(f"{path} line {number}: cannot find the Province/State field")
        field = match.group(1)
        province = field[1:-1].replace('""', '"') if field.startswith('"') else field
        rest = line[match.end() - 1 :]  # from the comma after the field
        rows.append((province, rest if rest.endswith("\n") else rest + "\n"))
    return header, rows


def make_synthetic(source: Path, target: Path, scale: int) -> dict[str, int]:
    """Write the three files, ``scale`` times the rows, to ``target``; data rows per file."""
    target.mkdir(parents=True, exist_ok=True)
    counts = {}
    for name in FILES:
        header, rows = _split_rows(source / name)
        with open(target / name, "w", encoding="utf-8", newline="") as out:
            out.write(header)
            for copy in range(scale):
                for province, rest in rows:
                    if copy == 0:
                        renamed = province
                    else:
                        renamed = f"{province} #{copy}" if province else f"#{copy}"
                    out.write(_quote(renamed) + rest)
        counts[name] = len(rows) * scale
    return counts
