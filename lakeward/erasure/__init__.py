"""Right to erasure: the index of where each user's data is, and its approved purge.

Layout:

* ``mappers``  -- data mappers: which datasets are indexed, format, id columns
  (settings ``[erasure]`` plus datasets registered in the index database);
* ``index``    -- the index metastore (``IndexStore``: schema, changes, lookups);
* ``indexers`` -- per format, one object (or relational table) -> entries;
* ``service``  -- ``ErasureIndexService``, the core the CLI, HTTP and events call;
* ``demo``     -- ``lakeward demo-data gdpr``, a generated multi-user lake;
* ``realtime`` -- keeping the index current from storage events, a watcher and webhooks;
* ``batch``    -- building the index over an existing lake on Spark (``batch_rows``: the job);
* ``requests``, ``workflow``, ``worker``, ``report``, ``approval`` -- erasure requests
  (``workflow``: what users call; ``worker``: the steps), from the report through the
  emailed approval to the purge, verification and certificate; ``shapes``: their JSON;
* ``executors`` -- the purge, one executor per format and storage layer; ``vacuum``.
"""

from lakeward.erasure.index import Holding, IndexedObject, IndexStore, LocationEntry
from lakeward.erasure.mappers import (
    COMPOSITE_SEPARATOR,
    DatasetMapper,
    Mappers,
    RelationalMapper,
    composite_id,
)
from lakeward.erasure.service import (
    FIND_ACTION,
    ErasureIndexService,
    UserFindings,
    index_location,
)

__all__ = [
    "COMPOSITE_SEPARATOR",
    "FIND_ACTION",
    "DatasetMapper",
    "ErasureIndexService",
    "Holding",
    "IndexStore",
    "IndexedObject",
    "LocationEntry",
    "Mappers",
    "RelationalMapper",
    "UserFindings",
    "composite_id",
    "index_location",
]
