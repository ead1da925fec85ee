"""The stickpersons' users file, sessions and the login rate limit.

The users file holds one ``name:roles:hash`` line per user (``#`` starts a comment): the
roles ``pit`` (acknowledges alarms on the pit) and ``stick`` (decides rolls), comma-separated;
the hash an Argon2id string from argon2-cffi (RFC 9106's recommended profile), so the file
says nothing of the passwords and a reader can diff it. A ``name:hash`` line (the format
before roles) is a stickperson: every users file written before keeps working as it did.
``lammer web adduser [--role pit|stick] NAME`` writes it with mode 0600; the server
refuses a users file that others may read, as ssh does with a private key. The file is
read again when it changes, so a user added while the server runs can log in without a restart.

Sessions live in the server's memory only (a restart logs everyone out): a random token in
an HttpOnly, SameSite=Strict cookie, and a CSRF token of its own that every action must
send back in a header (the synchronizer-token pattern of the OWASP CSRF cheat sheet).
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import os
import re
import secrets
import stat
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError

from display.errors import UsersFileError

NAME_PATTERN: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$")
"""A user name: it becomes the ``operator`` of the requests, kept in the table's record."""
ROLES: Final = ("pit", "stick")
"""What a user may do: ``pit`` acknowledges alarms, ``stick`` decides rolls."""
LEGACY_ROLES: Final = frozenset({"stick"})
"""The roles of a ``name:hash`` line: every user before roles existed was a stickperson."""
MIN_PASSWORD: Final = 8
MAX_PASSWORD: Final = 1024

_HASHER = PasswordHasher()


@functools.cache
def dummy_hash() -> str:
    """The hash an unknown name is verified against, so that it costs the same time as a
    wrong password and timing does not tell which names exist. Made at its first use (a
    server's ``Users``), not at import: an Argon2id hash costs ~0.15 s and 0.2 s of CPU, which
    every import of the web package (``lammer web adduser``, a test run) paid before."""
    return _HASHER.hash(secrets.token_urlsafe(16))


def check_name(name: str) -> str:
    """``name`` if it is a valid user name; ``UsersFileError`` otherwise."""
    if not NAME_PATTERN.match(name):
        raise UsersFileError(
            f"user name {name[:70]!r} must be 1-64 letters, digits, '_', '.', '@' or '-', "
            "starting with a letter or digit"
        )
    return name


def check_password(password: str) -> str:
    """``password`` if long enough and printable; ``UsersFileError`` otherwise."""
    if len(password) < MIN_PASSWORD:
        raise UsersFileError(f"the password must have at least {MIN_PASSWORD} characters")
    if len(password) > MAX_PASSWORD:
        raise UsersFileError(f"the password must have at most {MAX_PASSWORD} characters")
    if any(not ch.isprintable() for ch in password):
        raise UsersFileError("the password must not contain control characters")
    return password


def check_roles(roles: Iterable[str]) -> frozenset[str]:
    """The roles as a set if each is one of ``ROLES`` and there is one; ``UsersFileError``."""
    chosen = frozenset(roles)
    unknown = sorted(chosen - set(ROLES))
    if unknown or not chosen:
        raise UsersFileError(
            f"roles must be {' and/or '.join(ROLES)}, got {', '.join(unknown) or 'none'}"
        )
    return chosen


def read_users_roles(path: Path) -> dict[str, tuple[frozenset[str], str]]:
    """``{name: (roles, hash)}`` from a users file; ``UsersFileError`` naming the line."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsersFileError("no such file", path=path) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsersFileError(f"cannot read: {exc}", path=path) from exc
    users: dict[str, tuple[frozenset[str], str]] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, rest = line.partition(":")
        roles = LEGACY_ROLES
        hashed = rest
        if sep and not rest.startswith("$argon2"):
            listed, _, hashed = rest.partition(":")
            try:
                roles = check_roles(r.strip() for r in listed.split(","))
            except UsersFileError as exc:
                raise UsersFileError(str(exc), path=path, line=number) from None
        if not sep or not hashed.startswith("$argon2"):
            raise UsersFileError("expected NAME:ROLES:$argon2id$...", path=path, line=number)
        try:
            check_name(name)
        except UsersFileError as exc:
            raise UsersFileError(str(exc), path=path, line=number) from None
        if name in users:
            raise UsersFileError(f"user {name!r} is listed twice", path=path, line=number)
        users[name] = (roles, hashed)
    return users


def add_user(path: Path, name: str, password: str, roles: Iterable[str] = LEGACY_ROLES) -> bool:
    """Add ``name`` or change its password and roles; True when the user is new. Every
    line is written as ``name:roles:hash`` (older ``name:hash`` lines keep their meaning:
    stick).

    The file is written whole to a temporary file of mode 0600 beside it, then renamed
    over it, so a reader never sees half a file and the mode never widens.
    """
    check_name(name)
    check_password(password)
    chosen = check_roles(roles)
    users = read_users_roles(path) if path.exists() else {}
    new = name not in users
    users[name] = (chosen, _HASHER.hash(password))
    lines = [
        "# lammer web users: NAME:ROLES:argon2id hash (lammer web adduser --role pit|stick NAME)"
    ]
    lines += [
        f"{user}:{','.join(sorted(user_roles))}:{hashed}"
        for user, (user_roles, hashed) in users.items()
    ]
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write("\n".join(lines) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return new


class Users:
    """The users file as the server reads it: reloaded when it changes, never world-readable."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        dummy_hash()  # made now, so the first unknown name is not the one login that costs more
        self._users: dict[str, tuple[frozenset[str], str]] = {}
        self._stamp: tuple[int, int] | None = None
        if path is not None:
            self._reload(path)

    def _reload(self, path: Path) -> None:
        info = path.stat()
        if info.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise UsersFileError(
                "readable or writable by others: chmod 600 it (lammer web adduser writes it so)",
                path=path,
            )
        stamp = (info.st_mtime_ns, info.st_size)
        if stamp != self._stamp:
            self._users = read_users_roles(path)
            self._stamp = stamp

    @property
    def configured(self) -> bool:
        """Whether a users file was given (without one, nobody can log in)."""
        return self.path is not None

    def known_device(self, name: str, token: str | None) -> str | None:
        """The id of the device that ``token`` (its device cookie for ``name``) names, if the
        cookie is one this server gave ``name`` at a good login; else None."""
        entry = self._users.get(name)
        if token is None or entry is None:
            return None
        _, hashed = entry
        device, _, mac = token.partition(".")
        if not _DEVICE_ID.fullmatch(device):
            return None
        return device if hmac.compare_digest(mac, _device_mac(hashed, name, device)) else None

    def device_token(self, name: str, device: str | None = None) -> str:
        """A device cookie's value for ``name`` (a new device id unless ``device`` is given)."""
        device = device or secrets.token_urlsafe(18)
        _, hashed = self._users[name]
        return f"{device}.{_device_mac(hashed, name, device)}"

    def verify(self, name: str, password: str) -> bool:
        """Whether ``password`` is ``name``'s. Slow on purpose (Argon2id): call it in a
        worker thread. Costs the same for an unknown name."""
        if self.path is not None:
            try:
                self._reload(self.path)
            except (OSError, UsersFileError):
                return False  # a broken file logs nobody in; the old users are not kept
        entry = self._users.get(name) if NAME_PATTERN.match(name) else None
        hashed = entry[1] if entry is not None else None
        try:
            return _HASHER.verify(hashed or dummy_hash(), password) and hashed is not None
        except (VerifyMismatchError, VerificationError, InvalidHashError):
            return False

    def roles(self, name: str) -> frozenset[str]:
        """``name``'s roles as the users file says now (read again if it changed, so a
        role taken away counts at once); none for an unknown user or a broken file."""
        if self.path is not None:
            try:
                self._reload(self.path)
            except (OSError, UsersFileError):
                return frozenset()
        entry = self._users.get(name)
        return entry[0] if entry is not None else frozenset()


_DEVICE_ID: Final = re.compile(r"[A-Za-z0-9_-]{24}")


def device_cookie_name(name: str) -> str:
    """The cookie that marks a browser where ``name`` logged in (cookie names cannot hold
    every character a user name may: a digest of the name)."""
    return "lammer_device_" + hashlib.sha256(name.encode()).hexdigest()[:16]


def _device_mac(hashed: str, name: str, device: str) -> str:
    # Keyed by the user's own password hash (secret to the server): the cookie survives a
    # restart, and a new password retires every device cookie of that user.
    return hmac.new(hashed.encode(), f"{name}\n{device}".encode(), hashlib.sha256).hexdigest()


@dataclass
class Session:
    """A logged-in user: the cookie's token, the CSRF token, when it ends."""

    user: str
    token: str
    csrf: str
    expires: float


@dataclass
class Sessions:
    """The logged-in users, in memory; at most ``limit`` (the oldest goes first)."""

    lifetime: float
    limit: int = 1000
    _by_token: dict[str, Session] = field(default_factory=dict)

    def create(self, user: str) -> Session:
        """A new session for ``user`` (a new token at every login: no session fixation)."""
        while len(self._by_token) >= self.limit:
            self._by_token.pop(next(iter(self._by_token)))
        session = Session(
            user=user,
            token=secrets.token_urlsafe(32),
            csrf=secrets.token_urlsafe(32),
            expires=time.monotonic() + self.lifetime,
        )
        self._by_token[session.token] = session
        return session

    def get(self, token: str | None) -> Session | None:
        """The live session of a cookie's token, or None."""
        if not token or len(token) > 100:
            return None
        session = self._by_token.get(token)
        if session is None:
            return None
        if session.expires <= time.monotonic():
            del self._by_token[token]
            return None
        return session

    def end(self, token: str | None) -> None:
        """Log out."""
        if token:
            self._by_token.pop(token, None)


@dataclass
class RateLimit:
    """At most ``attempts`` failed logins per key within ``window`` seconds."""

    attempts: int = 5
    window: float = 300.0
    _failures: dict[str, deque[float]] = field(default_factory=dict)

    def retry_after(self, keys: Iterable[str]) -> float:
        """Seconds to wait before another attempt under any of ``keys`` (0: go ahead)."""
        now = time.monotonic()
        wait = 0.0
        for key in keys:
            failures = self._failures.get(key)
            if not failures:
                continue
            while failures and failures[0] <= now - self.window:
                failures.popleft()
            if len(failures) >= self.attempts:
                wait = max(wait, failures[0] + self.window - now)
        return wait

    def failed(self, keys: Iterable[str]) -> None:
        """Count one failed attempt under each of ``keys``."""
        now = time.monotonic()
        if len(self._failures) > 10_000:  # a flood of names: forget the quiet ones
            self._failures = {k: v for k, v in self._failures.items() if v and v[-1] > now - 60}
        for key in keys:
            self._failures.setdefault(key, deque(maxlen=self.attempts)).append(now)

    def succeeded(self, keys: Iterable[str]) -> None:
        """Forget the failures of ``keys`` after a good login."""
        for key in keys:
            self._failures.pop(key, None)
