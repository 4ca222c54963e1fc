"""file:// eTags are reused while a file is unchanged, and never stale after a change."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from lakeward.storage.local import LocalStorage

HOUR_NS = 3600 * 10**9


def md5(data: bytes) -> str:
    return hashlib.md5(data, usedforsecurity=False).hexdigest()


def rewrite_in_place(path: Path, data: bytes, mtime_ns: int) -> None:
    """Another program's write: same file (inode), then the given mtime."""
    with open(path, "r+b") as out:
        out.write(data)
    os.utime(path, ns=(mtime_ns, mtime_ns))


def test_etag_follows_writes_by_lakeward_and_by_others(tmp_path: Path) -> None:
    lake = LocalStorage((tmp_path / "lake").as_uri(), "us-east-1")
    lake.ensure_bucket("bkt")
    assert lake.put("bkt", "k", b"first").etag == md5(b"first")
    assert lake.stat("bkt", "k").etag == md5(b"first")
    path = tmp_path / "lake" / "bkt" / "k"
    # Same size, later mtime: seen at once.
    later = path.stat().st_mtime_ns + 10**9
    rewrite_in_place(path, b"again", later)
    assert lake.stat("bkt", "k").etag == md5(b"again")
    assert [o.etag for o in lake.list("bkt")] == [md5(b"again")]
    # A rename of another file over it: a new inode.
    other = tmp_path / "other"
    other.write_bytes(b"third")
    os.utime(other, ns=(later, later))
    os.replace(other, path)
    assert lake.stat("bkt", "k").etag == md5(b"third")
    # Deleted and created again with the same size and mtime (the inode may be reused).
    lake.delete("bkt", "k")
    path.write_bytes(b"forth")
    os.utime(path, ns=(later, later))
    assert lake.stat("bkt", "k").etag == md5(b"forth")


def test_a_fresh_file_is_hashed_again_until_it_settles(tmp_path: Path) -> None:
    lake = LocalStorage((tmp_path / "lake").as_uri(), "us-east-1")
    path = tmp_path / "lake" / "bkt" / "k"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"one")
    fresh = path.stat().st_mtime_ns
    assert lake.stat("bkt", "k").etag == md5(b"one")
    # Rewritten within the same timestamp tick: size, inode and mtime all equal.
    rewrite_in_place(path, b"two", fresh)
    assert lake.stat("bkt", "k").etag == md5(b"two")
    # An old file is cached: the same state again is not re-read ...
    old = fresh - HOUR_NS
    os.utime(path, ns=(old, old))
    assert lake.stat("bkt", "k").etag == md5(b"two")
    rewrite_in_place(path, b"333", old)
    assert lake.stat("bkt", "k").etag == md5(b"two"), "cached by (device, inode, size, mtime)"
    # ... and any later write of it has a later mtime, which is seen.
    rewrite_in_place(path, b"444", fresh)
    assert lake.stat("bkt", "k").etag == md5(b"444")
