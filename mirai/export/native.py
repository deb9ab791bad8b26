"""Small native libraries that mirai compiles itself with g++, cached by what goes into them.

Two live here: the GPU-less capture shim (mirai/export/capture/native) and the CPU stand-in for the CUDA
driver (mirai/export/hostdriver/native). Each is built once per source and flags into the cache folder
(`MIRAI_CACHE_DIR`, else `$XDG_CACHE_HOME/mirai`, else `~/.cache/mirai`), atomically, so concurrent
processes never load a half-written file.

    >>> cache_dir().is_dir()
    True
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path

from mirai import process


def cache_dir() -> Path:
    root = os.environ.get("MIRAI_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "mirai"
    )
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path


def build_library(
    source: Path, name: str, flags: Sequence[str], *, stage: str, key_extra: bytes = b""
) -> Path:
    """Compile `source` into a shared library `<name>-<key>.so` (or reuse the cached one)."""
    cxx = os.environ.get("CXX", "g++")
    key = hashlib.sha256(
        source.read_bytes() + "\0".join([cxx, *flags]).encode() + key_extra
    ).hexdigest()[:16]
    out = cache_dir() / f"{name}-{key}.so"
    if out.exists():
        return out
    tmp = out.with_suffix(f".{os.getpid()}.tmp")
    process.run(
        [cxx, "-std=c++17", "-shared", "-fPIC", str(source), "-o", str(tmp), *flags],
        stage=stage,
        timeout=300,
    )
    os.replace(tmp, out)
    return out
