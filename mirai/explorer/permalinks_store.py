"""Permalinks of the explorer page: a page state (JSON) stored under a short id in SQLite.

The id is derived from the state's canonical JSON, so saving the same state twice gives the same id.
In broker mode the same ids and texts are kept in Redis instead (`mirai.explorer.broker.permalinks`).

    >>> import tempfile, pathlib
    >>> store = PermalinkStore(pathlib.Path(tempfile.mkdtemp()) / "p.sqlite3")
    >>> pid = store.save({"code": "x", "panes": []})
    >>> store.load(pid)
    {'code': 'x', 'panes': []}
    >>> store.save({"panes": [], "code": "x"}) == pid
    True
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sqlite3
import time
from pathlib import Path
from typing import Protocol

ENV_VAR = "MIRAI_EXPLORER_PERMALINKS_DB"
MAX_STATE_BYTES = 1 << 20
ID_LENGTH = 10
_ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_SCHEMA = """
CREATE TABLE IF NOT EXISTS permalinks (
    id TEXT PRIMARY KEY,
    state TEXT NOT NULL,
    created_at REAL NOT NULL
)
"""


def default_db_path() -> Path:
    """$MIRAI_EXPLORER_PERMALINKS_DB, else permalinks.sqlite3 in the user's cache dir for mirai."""
    explicit = os.environ.get(ENV_VAR)
    if explicit:
        return Path(explicit).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache) / "mirai" / "permalinks.sqlite3"


def is_valid_id(pid: str) -> bool:
    """Ids are base62, as `save` makes them."""
    return 4 <= len(pid) <= 32 and all(c in _ALPHABET for c in pid)


class Permalinks(Protocol):
    """What the permalink routes use: `PermalinkStore`, or broker mode's `RedisPermalinkStore`."""

    def save(self, state: dict) -> str: ...

    def load(self, pid: str) -> dict | None: ...


class StateTooLarge(ValueError):
    """A state whose JSON exceeds MAX_STATE_BYTES."""


class PermalinkStore:
    """Saves and loads page states; one short-lived SQLite connection per call (thread-safe)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._connect() as db:
            db.execute(_SCHEMA)

    @contextlib.contextmanager
    def _connect(self):
        """A connection for one call: committed on success, rolled back on error, always closed
        (sqlite3's own context manager commits but leaves the connection open)."""
        db = sqlite3.connect(self.path, timeout=10)
        try:
            with db:
                yield db
        finally:
            db.close()

    def save(self, state: dict) -> str:
        """Stores `state` and returns its id (the same id for the same state)."""
        text = canonical_text(state)
        with self._connect() as db:
            for pid in candidate_ids(text):
                row = db.execute("SELECT state FROM permalinks WHERE id = ?", (pid,)).fetchone()
                if row is None:
                    db.execute(
                        "INSERT INTO permalinks (id, state, created_at) VALUES (?, ?, ?)",
                        (pid, text, time.time()),
                    )
                    return pid
                if row[0] == text:
                    return pid
        raise RuntimeError("no free permalink id")  # unreachable in practice

    def load(self, pid: str) -> dict | None:
        """The state saved under `pid`, or None."""
        with self._connect() as db:
            row = db.execute("SELECT state FROM permalinks WHERE id = ?", (pid,)).fetchone()
        return None if row is None else json.loads(row[0])


def canonical_text(state: dict) -> str:
    """The JSON a state is stored as (keys sorted); StateTooLarge past MAX_STATE_BYTES."""
    text = json.dumps(state, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    if len(text.encode()) > MAX_STATE_BYTES:
        raise StateTooLarge(f"state is {len(text.encode())} bytes, limit {MAX_STATE_BYTES}")
    return text


def candidate_ids(text: str) -> list[str]:
    """The ids a state's text may get, in order: the first one not held by another state is its
    id (a longer one only in the astronomically unlikely case of a collision)."""
    digest = _base62(hashlib.sha256(text.encode()).digest())
    return [digest[:length] for length in range(ID_LENGTH, len(digest) + 1)]


def _base62(data: bytes) -> str:
    n = int.from_bytes(data, "big")
    out = []
    while n:
        n, r = divmod(n, 62)
        out.append(_ALPHABET[r])
    return "".join(reversed(out)) or "0"
