"""The BI layer (the QuickSight analogue): data sources over the SQL service's catalogs,
datasets with field operations, extracts in the lake, visuals, analyses and dashboards.

``BiService`` (service.py) is the one entry point; the JSON API (lakeward/http/bi.py),
the console and ``lakeward up`` call it. docs/bi.md describes the objects and the API.
"""

from lakeward.bi.model import (
    Analysis,
    AnalysisSpec,
    Column,
    ConversionIssue,
    Dashboard,
    Dataset,
    DatasetSpec,
    DataSource,
    Extract,
    Series,
    Share,
    Sheet,
    Visual,
)
from lakeward.bi.permissions import ACTIONS, Caller
from lakeward.bi.service import BiService, Preview

__all__ = [
    "ACTIONS",
    "Analysis",
    "AnalysisSpec",
    "BiService",
    "Caller",
    "Column",
    "ConversionIssue",
    "Dashboard",
    "DataSource",
    "Dataset",
    "DatasetSpec",
    "Extract",
    "Preview",
    "Series",
    "Share",
    "Sheet",
    "Visual",
]
