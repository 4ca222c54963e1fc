"""The master key, and the subkeys derived from it.

One 32-byte master key protects everything lakeward encrypts at rest. It comes
from ``LAKEWARD_MASTER_KEY`` (base64) when set, so that a deployment can keep it
in its own secret store; otherwise from ``<data_dir>/master.key`` (the raw 32
bytes), created on first use. Each use gets its own subkey through HKDF, so that
a key compromised or misused in one place (say, a session token) says nothing
about the others.

To move a file key into the environment: ``base64 < master.key``.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import os
import stat
from collections.abc import Mapping
from pathlib import Path

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from lakeward.errors import ConfigError

ENV_VAR = "LAKEWARD_MASTER_KEY"
KEY_FILE = "master.key"
KEY_BYTES = 32

# Purposes for derive_key; one per kind of thing encrypted or signed.
SECRETS = "secrets"
ACCESS_KEY_SECRETS = "access-keys"
SESSIONS = "sessions"

# HKDF's info string starts with this, so that our subkeys cannot coincide with
# those some other program derives from the same bytes.
_INFO_PREFIX = b"lakeward/v1/"


def load_master_key(data_dir: Path, env: Mapping[str, str] | None = None) -> bytes:
    """The master key: from ``LAKEWARD_MASTER_KEY``, else from (or into) the key file."""
    environ = os.environ if env is None else env
    encoded = environ.get(ENV_VAR)
    if encoded is not None:
        return _from_env(encoded)
    return _from_file(Path(data_dir) / KEY_FILE)


def derive_key(master: bytes, purpose: str) -> bytes:
    """A 32-byte subkey of ``master`` for one ``purpose`` (HKDF-SHA256)."""
    if len(master) != KEY_BYTES:
        raise ValueError(f"a master key is {KEY_BYTES} bytes, not {len(master)}")
    if not purpose:
        raise ValueError("a subkey needs a purpose")
    # No salt: the master key is already uniformly random, which is the case
    # where RFC 5869 says a salt adds nothing.
    hkdf = HKDF(
        algorithm=hashes.SHA256(),
        length=KEY_BYTES,
        salt=None,
        info=_INFO_PREFIX + purpose.encode(),
    )
    return hkdf.derive(master)


def _from_env(encoded: str) -> bytes:
    try:
        key = base64.b64decode(encoded.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise ConfigError(
            f"{ENV_VAR} is not valid base64; set it to 32 random bytes in base64, "
            'e.g. the output of: python -c "import os, base64; '
            'print(base64.b64encode(os.urandom(32)).decode())"'
        ) from None
    if len(key) != KEY_BYTES:
        raise ConfigError(
            f"{ENV_VAR} decodes to {len(key)} bytes; it must be {KEY_BYTES} bytes in base64"
        )
    return key


def _from_file(path: Path) -> bytes:
    try:
        return _read_key_file(path)
    except FileNotFoundError:
        pass
    _create_key_file(path)
    return _read_key_file(path)


def _read_key_file(path: Path) -> bytes:
    # Open once and check that same file, so nothing can be swapped in between.
    with path.open("rb") as f:
        mode = os.fstat(f.fileno()).st_mode
        key = f.read(KEY_BYTES + 1)
    if os.name == "posix" and mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise ConfigError(
            f"the master key file {path} can be accessed by group or others "
            f"(mode {stat.S_IMODE(mode):o}); run: chmod 600 {path}"
        )
    if len(key) != KEY_BYTES:
        raise ConfigError(
            f"the master key file {path} holds {len(key)} bytes, not {KEY_BYTES}; restore "
            f"the original key file, or set {ENV_VAR}. Only if nothing was ever stored with "
            "it, move the file away and a new key is made (anything encrypted with the old "
            "key is then unreadable)."
        )
    return key


def _create_key_file(path: Path) -> None:
    """Write a fresh key next to ``path`` and publish it without overwriting anyone's."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        # The umask can only take bits away; say 0600 outright all the same.
        os.fchmod(fd, 0o600)
        os.write(fd, os.urandom(KEY_BYTES))
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        # A hard link publishes the whole file at once and, unlike a rename, fails
        # when another process got there first; its key is then the one to use.
        with contextlib.suppress(FileExistsError):
            os.link(tmp, path)
    finally:
        tmp.unlink()
    _fsync_dir(path.parent)


def _fsync_dir(directory: Path) -> None:
    # Without this the new name may not survive a power cut, while data
    # encrypted with the key could.
    if os.name != "posix":
        return
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
