"""The Hive Metastore: Thrift client, nodes, and the databases behind them.

The client is imported on first use: the Thrift bindings take a while to load,
and commands such as ``lakeward status`` look at the nodes without them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lakeward.metastore.client import MetastoreClient
    from lakeward.metastore.tables import Column, TableInfo

__all__ = ["Column", "MetastoreClient", "TableInfo"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from lakeward.metastore import client

        return getattr(client, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
