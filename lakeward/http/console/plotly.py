"""Which plotly.js a page loads: the smallest bundle that draws its charts.

The ``plotly`` package ships the full plotly.js (4.8 MB); evaluating it is most of a
dashboard's first load in a new browser profile. plotly.js's own partial bundles, of the
same version, draw the console's charts in a third of that: ``plotly-geo`` (scatter and
scattergeo: maps and lines) and ``plotly-basic`` (scatter and bar: lines and bars).
``./dev.sh install`` puts them in ``static/vendor/plotly/<version>/``; without them, or for
a sheet with both a map and bars, the full bundle is loaded.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from importlib.util import find_spec
from pathlib import Path

from lakeward.http.console.base import STATIC

FULL = "plotly.min.js"
# Each partial bundle, with the visual types it draws (tables are drawn without plotly).
PARTS = {
    "plotly-basic.min.js": frozenset({"line", "bar", "table"}),
    "plotly-geo.min.js": frozenset({"map", "line", "table"}),
}
_VERSION = re.compile(rb"plotly\.js v(\d+\.\d+\.\d+)")


def full_bundle() -> Path:
    """plotly.js as the ``plotly`` package ships it (found without importing plotly)."""
    spec = find_spec("plotly")
    origin = spec.origin if spec else None
    return Path(origin or ".").parent / "package_data" / FULL


def shipped_version() -> str:
    """The version of the plotly.js the ``plotly`` package ships (from its header)."""
    with open(full_bundle(), "rb") as file:
        found = _VERSION.search(file.read(400))
    if found is None:
        raise ValueError(f"no plotly.js version in the header of {full_bundle()}")
    return found[1].decode()


def partial_bundles() -> dict[str, Path]:
    """The partial bundles installed for the shipped version, by name."""
    try:
        folder = STATIC / "vendor" / "plotly" / shipped_version()
    except (OSError, ValueError):
        return {}
    return {name: folder / name for name in PARTS if (folder / name).is_file()}


def bundle_for(types: Iterable[str], installed: Iterable[str]) -> str:
    """The smallest installed bundle that draws every visual type of a sheet."""
    wanted, present = set(types), set(installed)
    for name, draws in PARTS.items():
        if name in present and wanted <= draws:
            return name
    return FULL
