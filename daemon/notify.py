"""systemd's notify protocol (sd_notify(3)), without libsystemd.

``Notifier.from_env()`` reads ``NOTIFY_SOCKET`` (a path, or ``@name`` for an abstract
socket), ``WATCHDOG_USEC`` and ``WATCHDOG_PID``. Not under systemd (no ``NOTIFY_SOCKET``)
every method is a no-op, so the daemon calls them unconditionally.

The unit is ``Type=notify``: the daemon sends ``ready()`` once the journal is replayed and
its loops run, ``watchdog()`` at ``watchdog_interval`` only while
the pipeline is healthy, ``status(text)`` for ``systemctl status``, and ``stopping()``
when it shuts down. Sending never blocks and never raises: a lost notification must not
stop the table (the socket is non-blocking; a failure is reported by the return value).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from typing import Self


def _address(value: str) -> str | None:
    """The socket address of ``NOTIFY_SOCKET``: a path, or ``@name`` (abstract)."""
    if value.startswith("@"):
        return "\0" + value[1:]  # Linux abstract namespace
    if value.startswith("/"):
        return value
    return None  # vsock and other forms are not used by lammer's units


class Notifier:
    """Sends notifications to systemd, or does nothing when not started by it."""

    def __init__(self, address: str | None, *, watchdog_usec: int | None = None) -> None:
        """``address`` as in ``NOTIFY_SOCKET`` (``None``: inactive). Prefer ``from_env``."""
        self._address = _address(address) if address else None
        self._watchdog_usec = watchdog_usec if watchdog_usec and watchdog_usec > 0 else None
        self._sock: socket.socket | None = None
        if self._address is not None:
            self._sock = socket.socket(
                socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC | socket.SOCK_NONBLOCK
            )

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Notifier:
        """A notifier for the environment systemd set up (``os.environ`` by default).

        The watchdog applies only when ``WATCHDOG_PID`` is unset or names this process
        (sd_watchdog_enabled(3)).
        """
        env = os.environ if environ is None else environ
        usec: int | None = None
        raw = env.get("WATCHDOG_USEC", "")
        pid = env.get("WATCHDOG_PID", "")
        if raw.isdigit() and (not pid or (pid.isdigit() and int(pid) == os.getpid())):
            usec = int(raw)
        return cls(env.get("NOTIFY_SOCKET") or None, watchdog_usec=usec)

    @property
    def active(self) -> bool:
        """True when running under systemd with a notify socket."""
        return self._sock is not None

    @property
    def watchdog_interval(self) -> float | None:
        """Seconds between ``watchdog()`` calls (half of ``WATCHDOG_USEC``, as
        sd_watchdog_enabled(3) advises), or None when systemd does not watch us."""
        if self._watchdog_usec is None or self._sock is None:
            return None
        return self._watchdog_usec / 2_000_000

    def notify(self, *fields: str) -> bool:
        """Send ``KEY=value`` fields in one datagram; True when sent (or inactive)."""
        if self._sock is None or self._address is None:
            return True
        message = "\n".join(fields).encode("utf-8")
        try:
            self._sock.sendto(message, self._address)
        except OSError:
            return False
        return True

    def ready(self) -> bool:
        """``READY=1``: start-up finished (journal replayed, loops running)."""
        return self.notify("READY=1")

    def stopping(self) -> bool:
        """``STOPPING=1``: shutting down."""
        return self.notify("STOPPING=1")

    def status(self, text: str) -> bool:
        """``STATUS=text``, shown by ``systemctl status`` (one line; newlines become spaces)."""
        return self.notify("STATUS=" + " ".join(text.splitlines()))

    def watchdog(self) -> bool:
        """``WATCHDOG=1``: the pipeline is healthy. Send only when it is."""
        return self.notify("WATCHDOG=1")

    def extend_timeout(self, seconds: float) -> bool:
        """``EXTEND_TIMEOUT_USEC``: more time to start or stop (a long journal replay)."""
        return self.notify(f"EXTEND_TIMEOUT_USEC={max(0, round(seconds * 1_000_000))}")

    def close(self) -> None:
        """Close the socket (idempotent)."""
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
