"""The Hive Metastore: Thrift client, nodes, and the databases behind them."""

from lakeward.metastore.client import Column, MetastoreClient, TableInfo

__all__ = ["Column", "MetastoreClient", "TableInfo"]
