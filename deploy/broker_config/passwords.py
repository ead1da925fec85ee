"""passwd in mosquitto_passwd 2.0's format: hashing, verifying, reading and rendering."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from collections.abc import Iterable, Mapping
from typing import Final

from deploy.broker_config.model import User

PBKDF2_ITERATIONS: Final = 101
"""mosquitto_passwd 2.0's default (``$7$101$``): PBKDF2-HMAC-SHA512, 12-byte salt,
64-byte hash, both in standard base64. Few iterations; the generated passwords are
192-bit random, far beyond any offline guessing, so the hash adds nothing to defend."""

_SALT_BYTES: Final = 12
_HASH_BYTES: Final = 64


def hash_password(password: str, *, salt: bytes | None = None) -> str:
    """The passwd hash of ``password`` as ``mosquitto_passwd`` 2.0 writes it:
    ``$7$101$<salt>$<hash>`` (a random salt unless given)."""
    salt = secrets.token_bytes(_SALT_BYTES) if salt is None else salt
    if len(salt) != _SALT_BYTES:
        raise ValueError(f"salt must be {_SALT_BYTES} bytes, got {len(salt)}")
    digest = hashlib.pbkdf2_hmac("sha512", password.encode(), salt, PBKDF2_ITERATIONS)
    b64 = base64.b64encode
    return f"$7${PBKDF2_ITERATIONS}${b64(salt).decode()}${b64(digest).decode()}"


def verify_password(password: str, encoded: str) -> bool:
    """Whether ``encoded`` (a ``$7$`` passwd hash, any iteration count) is ``password``'s.
    Anything else (``$6$``, malformed) is False: it is written again as ``$7$``."""
    parts = encoded.split("$")
    if len(parts) != 5 or parts[0] != "" or parts[1] != "7" or not parts[2].isdigit():
        return False
    iterations = int(parts[2])
    if not 1 <= iterations <= 10_000_000:
        return False
    try:
        salt = base64.b64decode(parts[3], validate=True)
        expected = base64.b64decode(parts[4], validate=True)
    except (binascii.Error, ValueError):
        return False
    if len(salt) != _SALT_BYTES or len(expected) != _HASH_BYTES:
        return False
    digest = hashlib.pbkdf2_hmac("sha512", password.encode(), salt, iterations)
    return hmac.compare_digest(digest, expected)


def read_passwd(text: str) -> dict[str, str]:
    """User to hash, as Mosquitto 2.0 reads a password file: ``#`` lines and lines without
    ``:`` skipped, the user up to the first ``:`` and the hash up to the next, both without
    surrounding blanks."""
    users: dict[str, str] = {}
    for raw in text.split("\n"):
        if raw.startswith("#") or ":" not in raw:
            continue
        name, rest = raw.split(":", 1)
        users[name.strip(" \t")] = rest.split(":", 1)[0].strip(" \t\r\n")
    return users


def render_passwd(
    users: Iterable[User], passwords: Mapping[str, str], existing: Mapping[str, str]
) -> str:
    """passwd for ``users``: each one's line from ``existing`` (user to hash) while it still
    verifies against ``passwords``, otherwise hashed anew. Sorted by user, as a reader diffs."""
    lines = []
    for name in sorted(u.name for u in users):
        old = existing.get(name)
        kept = old is not None and verify_password(passwords[name], old)
        hashed = old if kept and old is not None else hash_password(passwords[name])
        lines.append(f"{name}:{hashed}")
    return "".join(f"{line}\n" for line in lines)
