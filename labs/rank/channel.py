"""Length-prefixed messages between the worker, the zygote and the ranks.

A message is a JSON header (a dict) plus an optional binary payload (a tensor
written by ``torch.save``). On the wire: ``>II`` header length and payload
length, then both. Stdlib only: this file is also mounted into the sandbox.

Everything read from a sandbox is hostile until proven otherwise, so readers
cap both lengths and treat malformed frames as a protocol error, never a crash.
"""

from __future__ import annotations

import json
import os
import struct
from typing import Any

FRAME = struct.Struct(">II")
MAX_HEADER = 1 << 20


class ProtocolError(Exception):
    """A peer sent something that is not a well-formed message."""


def encode(meta: dict[str, Any], payload: bytes = b"") -> bytes:
    head = json.dumps(meta, separators=(",", ":")).encode()
    return FRAME.pack(len(head), len(payload)) + head + payload


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def send(fd: int, meta: dict[str, Any], payload: bytes = b"") -> None:
    write_all(fd, encode(meta, payload))


def _read_exact(fd: int, n: int) -> bytes | None:
    chunks = []
    while n:
        chunk = os.read(fd, min(n, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def recv(fd: int, max_payload: int) -> tuple[dict[str, Any], bytes] | None:
    """Block for one message; None at end of stream."""
    head = _read_exact(fd, FRAME.size)
    if head is None:
        return None
    hlen, plen = FRAME.unpack(head)
    _check(hlen, plen, max_payload)
    body = _read_exact(fd, hlen + plen)
    if body is None:
        return None
    return _decode(body[:hlen]), body[hlen:]


def _check(hlen: int, plen: int, max_payload: int) -> None:
    if hlen > MAX_HEADER or plen > max_payload:
        raise ProtocolError(f"message too large ({hlen} + {plen} bytes)")


def _decode(head: bytes) -> dict[str, Any]:
    try:
        meta = json.loads(head)
    except ValueError as exc:
        raise ProtocolError(f"malformed message header: {exc}") from None
    if not isinstance(meta, dict):
        raise ProtocolError("message header is not an object")
    return meta


class Reader:
    """Incremental parser for a non-blocking fd: feed bytes, take messages."""

    def __init__(self, max_payload: int):
        self.max_payload = max_payload
        self.buffer = bytearray()

    def feed(self, data: bytes) -> list[tuple[dict[str, Any], bytes]]:
        self.buffer += data
        out = []
        while len(self.buffer) >= FRAME.size:
            hlen, plen = FRAME.unpack_from(self.buffer)
            _check(hlen, plen, self.max_payload)
            end = FRAME.size + hlen + plen
            if len(self.buffer) < end:
                break
            meta = _decode(bytes(self.buffer[FRAME.size : FRAME.size + hlen]))
            out.append((meta, bytes(self.buffer[FRAME.size + hlen : end])))
            del self.buffer[:end]
        return out
