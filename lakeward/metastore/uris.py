"""Where a stack's metastore nodes listen, in the order clients should try them.

Kept apart from node.py (which launches the JVM) so that clients such as the SQL
service learn the URIs without loading what starts a node.
"""

from __future__ import annotations

from lakeward.config import Settings
from lakeward.errors import StackError


def metastore_uris(settings: Settings) -> list[str]:
    """Every node's URI, the preferred node first (``lakeward metastore failover --node N``).

    Clients try the URIs in this order and fail over to the next one.
    """
    metastore = settings.metastore
    if metastore.port is None:
        raise StackError("the metastore port is not known yet; start the stack with: lakeward up")
    uris = [f"thrift://{metastore.host}:{metastore.port + i}" for i in range(metastore.nodes)]
    preferred = metastore.preferred_node
    if preferred is not None and 1 <= preferred <= len(uris):
        uris.insert(0, uris.pop(preferred - 1))
    return uris
