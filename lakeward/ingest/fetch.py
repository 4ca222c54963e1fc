"""Getting source files: from a local directory, a file:// URL or an http(s) mirror."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import unquote, urlparse

import httpx

from lakeward.errors import InputError
from lakeward.progress import Progress

CHUNK = 1 << 20


def is_url(source: str) -> bool:
    return urlparse(source).scheme in ("http", "https")


def local_dir(source: str) -> Path:
    parsed = urlparse(source)
    return Path(unquote(parsed.path)) if parsed.scheme == "file" else Path(source).expanduser()


@contextmanager
def fetched(
    source: str, names: list[str], progress: Progress, what: str = "source"
) -> Iterator[dict[str, Path]]:
    """Local paths of ``names`` found in ``source`` (a directory or base URL).

    Downloads go to a temporary directory that is removed afterwards; local
    files are used where they are.
    """
    if not is_url(source):
        directory = local_dir(source)
        if not directory.is_dir():
            raise InputError(f"the {what} {directory} is not a directory")
        paths = {name: directory / name for name in names}
        missing = [str(p) for p in paths.values() if not p.is_file()]
        if missing:
            raise InputError(f"the {what} lacks {', '.join(missing)}")
        yield paths
        return

    with tempfile.TemporaryDirectory(prefix="lakeward-download-") as tmp:
        paths = {}
        with httpx.Client(follow_redirects=True, timeout=httpx.Timeout(60.0)) as client:
            for name in names:
                url = f"{source.rstrip('/')}/{name}"
                paths[name] = Path(tmp) / name
                _download(client, url, paths[name], progress)
        yield paths


def _download(client: httpx.Client, url: str, target: Path, progress: Progress) -> None:
    try:
        with client.stream("GET", url) as response:
            if response.status_code != 200:
                raise InputError(f"downloading {url} failed: HTTP {response.status_code}")
            size = response.headers.get("content-length")
            with (
                progress.step(f"download {target.name}", total=int(size) if size else None) as step,
                open(target, "wb") as out,
            ):
                for chunk in response.iter_bytes(CHUNK):
                    out.write(chunk)
                    step.advance(len(chunk))
    except httpx.HTTPError as exc:
        raise InputError(
            f"downloading {url} failed ({exc}); offline, point --covid-source "
            "(or LAKEWARD_COVID_SOURCE) at a local copy of the files"
        ) from None


def first_line(path: Path) -> str:
    with open(path, encoding="utf-8-sig", errors="replace", newline="") as handle:
        return handle.readline()
