"""Messages between `HostRunner` and its worker: a length (8 bytes, little-endian), then a pickle.

Both ends are mirai's own processes, so pickle (which carries torch tensors whole) is safe here.
"""

from __future__ import annotations

import pickle
import struct


def send(stream, message) -> None:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(struct.pack("<Q", len(data)) + data)
    stream.flush()


def receive(stream):
    """The next message, or None at end of stream."""
    header = _read(stream, 8)
    if header is None:
        return None
    (size,) = struct.unpack("<Q", header)
    data = _read(stream, size)
    if data is None:
        return None
    return pickle.loads(data)


def _read(stream, size: int) -> bytes | None:
    chunks, left = [], size
    while left:
        chunk = stream.read(left)
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)
