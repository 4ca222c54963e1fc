"""The Glue Data Catalog API over lakeward's catalogs (the metastores the SQL service reads).

Glue's databases, tables and partitions are the metastore's, read and changed over the
same Thrift clients as SQL DDL uses, so what a Glue client sees is what the SQL service
and Spark see, at once. ``CatalogId`` names a registered catalog; the account id STS
reports (and no id at all) is the default catalog, as Athena's ``awsdatacatalog`` is the
account's Glue catalog. Each call is authorized with Glue's own action on the catalog,
database and table ARNs the SQL DDL checks, and audited.
"""

from lakeward.glue.service import GlueService

__all__ = ["GlueService"]
