"""The hash chain: the bytes of a record it covers (``canonical``) and how a record's hash
follows the one before (``chain``), from ``GENESIS`` for a table's very first record."""

from __future__ import annotations

import hashlib
import hmac
from typing import Final

GENESIS: Final = bytes(32)
"""What the very first record of a table's journal chains on."""


def canonical(seq: int, ts: str, kind: str, body: str, payload: bytes | None) -> bytes:
    """The bytes of a record the chain covers: what it is, when, and what it says (and, for
    a message, the exact payload published)."""
    head = f"{seq}\n{ts}\n{kind}\n".encode()
    return head + body.encode("utf-8") + b"\n" + (payload or b"")


def chain(previous: bytes, record: bytes, key: bytes | None) -> bytes:
    """The hash of a record that follows ``previous``: SHA-256 over both, or HMAC-SHA-256
    with ``key`` (then only the key's holder can rebuild a chain)."""
    if key is None:
        return hashlib.sha256(previous + record).digest()
    return hmac.new(key, previous + record, hashlib.sha256).digest()
