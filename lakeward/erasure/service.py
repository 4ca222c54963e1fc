"""``ErasureIndexService``: the one core the CLI, the HTTP API and the event handlers call.

    service = ErasureIndexService(settings)
    service.index_object("lakeward-data", "gdpr/reviews/jsonl/.../part-0.jsonl", sequencer)
    service.remove_object("lakeward-data", key, sequencer)
    service.find(["Yk2sd4..."])            # authorized as erasure:Find per user id
    BatchIndexBuild(service).run()         # authorized as erasure:BuildIndex on the index
    service.reindex(prefix="lakeward-data/gdpr/")   # in-process rebuild, resumable per object

Real-time updates call ``index_object`` / ``remove_object`` with the event's
sequencer; they never raise for a bad object: an unparseable object is cleared
from the index and goes to the dead letters, an object outside every indexed
prefix is counted (``ignored_outside_prefixes``) and ignored.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from lakeward.access import AllowAll, Authorizer, arns
from lakeward.access.arns import erasure_user_arn
from lakeward.config import Settings
from lakeward.erasure.index.store import Holding, IndexedObject, IndexStatus, IndexStore
from lakeward.erasure.indexers import index_relational, read_object
from lakeward.erasure.mappers import DatasetMapper, Mappers, RelationalMapper, merge_mappers
from lakeward.errors import InvalidRequest, ObjectKeptChanging, ObjectNotFound, Unparseable
from lakeward.progress import Progress
from lakeward.storage import Storage, load_storage

FIND_ACTION = "erasure:Find"
BUILD_INDEX_ACTION = "erasure:BuildIndex"
INDEX_ARN = arns.ERASURE_INDEX
MAX_FIND_IDS = 1000
MAX_ID_LENGTH = 1024
BATCH_ENTRIES = 200_000  # record entries a rebuild holds before loading them

Outcome = Literal["indexed", "stale", "outside", "dead_letter", "missing", "removed"]


def index_location(settings: Settings) -> str | Path:
    """The index database: ``erasure.database_url``, or SQLite in the data dir."""
    return settings.erasure.database_url or settings.data_dir / "erasure" / "index.db"


@dataclass(frozen=True)
class UserFindings:
    user_id: str
    holdings: list[Holding]

    @property
    def records(self) -> int:
        """Records counted across every location (whole objects count as one)."""
        return sum(h.records if h.records is not None else 1 for h in self.holdings)


@dataclass
class ReindexReport:
    objects_indexed: int = 0
    objects_unchanged: int = 0
    objects_removed: int = 0
    entries: int = 0
    dead_letters: list[tuple[str, str]] = field(default_factory=list)


def check_user_ids(user_ids: Sequence[str]) -> list[str]:
    """User ids as given, checked for what an id cannot be (they are data, never parsed)."""
    if not user_ids:
        raise InvalidRequest("give at least one user id")
    if len(user_ids) > MAX_FIND_IDS:
        raise InvalidRequest(f"at most {MAX_FIND_IDS} user ids per lookup, not {len(user_ids)}")
    for user_id in user_ids:
        if not user_id:
            raise InvalidRequest("a user id is empty")
        if len(user_id) > MAX_ID_LENGTH:
            raise InvalidRequest(f"a user id is longer than {MAX_ID_LENGTH} characters")
        if "\x00" in user_id:
            raise InvalidRequest(f"user id {user_id!r} contains a NUL character")
    return list(user_ids)


class ErasureIndexService:
    def __init__(
        self,
        settings: Settings,
        *,
        store: IndexStore | None = None,
        storage: Storage | None = None,
        access: Authorizer | None = None,
    ) -> None:
        self.settings = settings
        self.store = store or IndexStore(index_location(settings))
        self._storage = storage
        self.access: Authorizer = access or AllowAll()

    @property
    def storage(self) -> Storage:
        if self._storage is None:
            self._storage = load_storage(self.settings)
        return self._storage

    def close(self) -> None:
        self.store.close()

    # -- mappers -------------------------------------------------------------

    def mappers(self) -> Mappers:
        """The settings' data mappers plus the registered ones (re-read on each call)."""
        return merge_mappers(self.settings, self.store.registered())

    def register(self, mapper: DatasetMapper | RelationalMapper) -> None:
        self.store.register_dataset(mapper)

    # -- real-time updates ---------------------------------------------------

    def index_object(
        self, bucket: str, key: str, sequencer: str | None = None, mappers: Mappers | None = None
    ) -> Outcome:
        """Index an object created or replaced in the lake; never raises for its content.

        ``mappers``: the data mappers to use, when the caller holds them already (the
        real-time indexer re-reads them every few seconds, not on every object).
        """
        return self.index_objects([(bucket, key, sequencer)], mappers)[0]

    def index_objects(
        self, changed: Sequence[tuple[str, str, str | None]], mappers: Mappers | None = None
    ) -> list[Outcome]:
        """``index_object`` for several (bucket, key, sequencer): one transaction writes them."""
        mappers = mappers or self.mappers()
        outcomes: list[Outcome] = []
        ready: list[tuple[int, IndexedObject, str | None]] = []
        for bucket, key, sequencer in changed:
            mapper = mappers.dataset_for(bucket, key)
            if mapper is None:
                self.store.count("ignored_outside_prefixes")
                outcomes.append("outside")
                continue
            read = self._read(mapper, bucket, key, sequencer)
            if isinstance(read, IndexedObject):
                ready.append((len(outcomes), read, sequencer))
                outcomes.append("stale")  # until written
            else:
                outcomes.append(read)
        written = self.store.replace_objects([(indexed, seq) for _, indexed, seq in ready])
        for (n, _, _), fresh in zip(ready, written, strict=True):
            outcomes[n] = "indexed" if fresh else "stale"
        return outcomes

    def _read(
        self, mapper: DatasetMapper, bucket: str, key: str, sequencer: str | None
    ) -> IndexedObject | Outcome:
        """The object's entries, or what became of it when it could not be read."""
        uri = self.storage.uri(bucket, key)
        try:
            return read_object(self.storage, mapper, bucket, key)
        except ObjectNotFound:
            # Gone already: its removal event follows (or came first and left a tombstone).
            self.store.count("objects_missing_when_indexed")
            return "missing"
        except (Unparseable, ObjectKeptChanging) as exc:
            self.store.add_dead_letter(uri, f"{mapper.name}: {exc.message}")
            # What the index held for the old content is no longer true.
            self.store.replace_object(IndexedObject(uri, mapper.name, None), sequencer)
            return "dead_letter"

    def remove_object(
        self, bucket: str, key: str, sequencer: str | None = None, mappers: Mappers | None = None
    ) -> Outcome:
        """Drop the entries of an object removed from the lake."""
        if (mappers or self.mappers()).dataset_for(bucket, key) is None:
            self.store.count("ignored_outside_prefixes")
            return "outside"
        removed = self.store.remove_object(self.storage.uri(bucket, key), sequencer)
        return "removed" if removed else "stale"

    def index_relational(self, names: Iterable[str] | None = None) -> int:
        """Re-read relational layers (all, or those named); returns the entries written."""
        wanted = set(names) if names is not None else None
        written = 0
        for mapper in self.mappers().relational:
            if wanted is not None and mapper.name not in wanted:
                continue
            try:
                indexed = index_relational(mapper)
            except Unparseable as exc:
                self.store.add_dead_letter(mapper.location, exc.message)
                continue
            self.store.replace_object(indexed)
            written += len(indexed.locations)
        return written

    # -- rebuild -------------------------------------------------------------

    def reindex(
        self, prefix: str = "", progress: Progress | None = None, batch_size: int = 200
    ) -> ReindexReport:
        """Index every object of every dataset under ``prefix`` (``bucket/key prefix``) here.

        Resumable per object: an object whose stored eTag is its current one is
        skipped. Objects the index holds that are no longer in the lake are
        removed. Relational layers are re-read when no prefix is given.
        """
        progress = progress or Progress()
        report = ReindexReport()
        for mapper in self.mappers().datasets:
            if not (mapper.prefix.startswith(prefix) or prefix.startswith(mapper.prefix)):
                continue
            self._reindex_dataset(mapper, prefix, progress, batch_size, report)
        if not prefix:
            report.entries += self.index_relational()
        return report

    def _reindex_dataset(self, mapper: DatasetMapper, prefix: str, progress: Progress,
                         batch_size: int, report: ReindexReport) -> None:  # fmt: skip
        key_prefix = max(mapper.key_prefix, prefix.partition("/")[2], key=len)
        # What the realtime indexer writes from now on is newer than this pass's reads.
        as_of = datetime.now(UTC)
        stored = {row.uri: row.etag for row in self.store.objects(dataset=mapper.name)}
        seen: set[str] = set()
        batch: list[IndexedObject] = []
        infos = [
            i
            for i in self.storage.list(mapper.bucket, key_prefix)
            if mapper.covers(i.bucket, i.key)
        ]
        with progress.step(f"indexing {mapper.name}", total=len(infos)) as step:
            for info in infos:
                seen.add(info.uri)
                step.advance()
                if stored.get(info.uri) == info.etag:
                    report.objects_unchanged += 1
                    continue
                try:
                    batch.append(
                        read_object(self.storage, mapper, info.bucket, info.key, info.etag)
                    )
                except ObjectNotFound:
                    continue
                except (Unparseable, ObjectKeptChanging) as exc:
                    self.store.add_dead_letter(info.uri, f"{mapper.name}: {exc.message}")
                    report.dead_letters.append((info.uri, exc.message))
                    batch.append(IndexedObject(info.uri, mapper.name, None))
                # Flushed by objects and by entries, so memory stays flat on big objects.
                if len(batch) >= batch_size or sum(len(b.entries) for b in batch) >= BATCH_ENTRIES:
                    report.entries += self.store.bulk_load(batch, as_of)
                    report.objects_indexed += len(batch)
                    batch = []
            report.entries += self.store.bulk_load(batch, as_of)
            report.objects_indexed += len(batch)
        scope = self.storage.uri(mapper.bucket, key_prefix)
        for uri in stored:
            if uri not in seen and uri.startswith(scope):
                report.objects_removed += self.store.remove_object(uri, as_of=as_of)

    # -- lookups -------------------------------------------------------------

    def find(self, user_ids: Sequence[str]) -> list[UserFindings]:
        """Every location of each user's data, across storage layers (authorized per id)."""
        wanted = check_user_ids(user_ids)
        for user_id in wanted:
            self.access.authorize(FIND_ACTION, erasure_user_arn(user_id))
        found = self.store.find(wanted)
        return [UserFindings(u, found[u]) for u in dict.fromkeys(wanted)]

    def status(self) -> IndexStatus:
        return self.store.status()
