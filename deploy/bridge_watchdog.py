"""The floor bridge's own Mosquitto, run and watched (``lammer bridge-watchdog``).

Why a broker of its own: Debian's Mosquitto 2.0.11 bridged to a floor node it cannot
complete TLS with (a wrong CA, a node that accepts TCP and never answers TLS, one that
resets mid-handshake, a flapping floor) can spin in user space, answer none of its clients
for more than 10 s and ignore SIGTERM. So the bridge runs in a broker of its own
(``bridge.conf`` of ``lammer broker-config --bridge``), beside the tables' broker, which has
no bridge, and this watchdog runs it:

* it starts ``mosquitto -c bridge.conf`` as its child (its log goes to the watchdog's
  stderr: the unit's journal), and starts it again when it exits;
* every ``interval`` s it makes an MQTT round trip through the bridge broker's loopback
  listener (``probe``: CONNECT, SUBSCRIBE to a topic of its own, PUBLISH there, read it
  back, all within ``deadline`` s); after ``failures`` probes in a row without an answer it
  ends the broker, SIGTERM and, when that is ignored for ``grace`` s, SIGKILL, and starts
  it again. Its queue for the floor is on disk (``autosave_on_changes``) and the tables'
  broker keeps what it did not yet take (a persistent session), so a kill loses nothing
  it acknowledged before its last change was saved;
* under systemd (``Type=notify``) it says ``READY=1`` once the broker first answers and
  ``WATCHDOG=1`` on every turn of its loop: its own liveness, not the broker's (the broker's
  is what this process watches).

The probe speaks MQTT 3.1.1 itself over a plain socket (a few packets): no client library
thread or reconnect logic can hide a broker that does not answer. It keeps one connection
(``Prober``): a probe is a PUBLISH and the message back, bounded by ``deadline`` with the
connection opened again first when the last one failed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import structlog

from daemon.notify import Notifier
from deploy import children
from deploy.broker import mosquitto_path
from deploy.broker_config import PROBE_ROOT, read_conf
from foundation.endpoints import Endpoint

log = structlog.get_logger("lammer.bridge_watchdog")

INTERVAL: Final = 2.0
"""Seconds between two probes."""

DEADLINE: Final = 3.0
"""Seconds a probe's whole round trip may take (a loaded controller answers in a few ms)."""

FAILURES: Final = 2
"""Probes in a row without an answer before the broker is ended: one lost to a passing
stall of the machine is not a hung broker."""

GRACE: Final = 5.0
"""Seconds after SIGTERM before SIGKILL (a broker that saves and exits takes well under
one; a spinning 2.0.11 never does)."""

START_WITHIN: Final = 10.0
"""Seconds a (re)started broker has to answer its first probe."""

BACKOFF: Final = 1.0
"""Seconds between a broker's end and its next start."""


class ProbeError(RuntimeError):
    """The broker did not answer the probe as MQTT says it must."""


@dataclass(frozen=True, slots=True)
class Settings:
    """What the watchdog runs and how it probes it."""

    conf: Path
    interval: float = INTERVAL
    deadline: float = DEADLINE
    failures: int = FAILURES
    grace: float = GRACE
    mosquitto: str | None = None


def probe_endpoint(conf_text: str) -> Endpoint:
    """The first ``listener PORT HOST`` of a bridge.conf (the probe's listener)."""
    for key, value in read_conf(conf_text):
        if key == "listener":
            port, _, host = value.partition(" ")
            if port.isdigit() and host:
                return Endpoint(host, int(port))
    raise ValueError("no 'listener PORT HOST' line: not a bridge.conf of lammer broker-config")


def _packet(kind: int, body: bytes) -> bytes:
    size, length = len(body), bytearray()
    while True:
        byte, size = size % 128, size // 128
        length.append(byte | (0x80 if size else 0))
        if not size:
            return bytes([kind]) + bytes(length) + body


def _text(value: str) -> bytes:
    raw = value.encode()
    return len(raw).to_bytes(2, "big") + raw


async def _read_packet(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    kind = (await reader.readexactly(1))[0]
    size, shift = 0, 0
    for _ in range(4):
        byte = (await reader.readexactly(1))[0]
        size |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            break
    return kind, await reader.readexactly(size)


class Prober:
    """MQTT round trips through one broker over one connection, opened (CONNECT, SUBSCRIBE
    to a topic of its own) when needed and kept: a probe is then one PUBLISH and the same
    message back, and the broker's persistence sees no change (a subscription per probe
    would make ``autosave_on_changes`` write its database at every probe). Any failure
    closes the connection; the next probe opens another, within its own deadline."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        self._nonce = f"{os.getpid()}-{time.monotonic_ns()}"
        self._topic = f"{PROBE_ROOT}/{self._nonce}"
        self._stream: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        self._count = 0

    async def probe(self, deadline: float = DEADLINE) -> float:
        """One round trip within ``deadline`` s (connecting first if needed); the seconds
        it took. Raises ``ProbeError``, ``OSError``, ``TimeoutError`` or
        ``asyncio.IncompleteReadError``, the connection closed."""
        started = time.monotonic()
        try:
            async with asyncio.timeout(deadline):
                reader, writer = self._stream or await self._open()
                self._count += 1
                mark = f"{self._nonce}/{self._count}".encode()
                writer.write(_packet(0x30, _text(self._topic) + mark))
                while True:
                    kind, body = await _read_packet(reader)
                    if kind & 0xF0 == 0x30 and body.endswith(mark):
                        break
        except BaseException:
            await self.close()
            raise
        return time.monotonic() - started

    async def _open(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        reader, writer = await asyncio.open_connection(self.endpoint.host, self.endpoint.port)
        self._stream = reader, writer
        connect = b"\x00\x04MQTT\x04\x02" + (30).to_bytes(2, "big") + _text(f"probe-{self._nonce}")
        writer.write(_packet(0x10, connect))
        kind, body = await _read_packet(reader)
        if kind != 0x20 or len(body) != 2 or body[1] != 0:
            raise ProbeError(f"CONNECT refused ({kind:#x} {body.hex()})")
        writer.write(_packet(0x82, b"\x00\x01" + _text(self._topic) + b"\x00"))
        kind, body = await _read_packet(reader)
        if kind != 0x90 or body[-1:] != b"\x00":
            raise ProbeError(f"SUBSCRIBE refused ({kind:#x} {body.hex()})")
        return reader, writer

    async def close(self) -> None:
        """Close the connection, if any (no DISCONNECT: the broker may not answer)."""
        stream, self._stream = self._stream, None
        if stream is not None:
            stream[1].close()
            with contextlib.suppress(OSError, TimeoutError):
                async with asyncio.timeout(1):
                    await stream[1].wait_closed()


async def probe(endpoint: Endpoint, deadline: float = DEADLINE) -> float:
    """One MQTT round trip through the broker at ``endpoint`` within ``deadline`` s, on a
    connection of its own; the seconds it took. Raises as ``Prober.probe``."""
    prober = Prober(endpoint)
    try:
        return await prober.probe(deadline)
    finally:
        await prober.close()


class Watchdog:
    """Runs the bridge broker and ends and restarts it when it stops answering."""

    def __init__(self, settings: Settings, notifier: Notifier | None = None) -> None:
        self.settings = settings
        self.endpoint = probe_endpoint(settings.conf.read_text(encoding="utf-8"))
        self.notifier = notifier or Notifier(None)
        self.starts = 0
        self.kills = 0
        self._stop = asyncio.Event()
        self._process: subprocess.Popen[bytes] | None = None
        self._ready_said = False
        self.prober = Prober(self.endpoint)
        self.answering: int | None = None
        """The pid of the broker that answers the probes, None while none does."""

    def stop(self) -> None:
        """End the loop (SIGTERM, SIGINT): the broker is stopped cleanly on the way out."""
        self._stop.set()

    async def run(self) -> None:
        """Start, watch and restart the broker until ``stop()``."""
        try:
            while not self._stop.is_set():
                reason = await self._watch(self._start())
                await self._end(reason)
                if not self._stop.is_set():
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._stop.wait(), BACKOFF)
        finally:
            await self._end("the watchdog stops")
            self.notifier.stopping()

    def _start(self) -> subprocess.Popen[bytes]:
        binary = self.settings.mosquitto or mosquitto_path()
        # Dies with the watchdog however it dies (PR_SET_PDEATHSIG); same session, so
        # systemd's stop reaches both.
        self._process = subprocess.Popen(  # noqa: S603  the Mosquitto binary and its config file
            [binary, "-c", str(self.settings.conf)],
            **children.supervised(own_session=False),
        )
        self.starts += 1
        log.info("bridge broker started", pid=self._process.pid, starts=self.starts)
        return self._process

    async def _watch(self, process: subprocess.Popen[bytes]) -> str:
        """Probe until the broker exits, stops answering or the watchdog stops; why."""
        settings = self.settings
        started = time.monotonic()
        answered = False
        missed = 0
        while not self._stop.is_set():
            self.notifier.watchdog()
            if process.poll() is not None:
                return f"the bridge broker exited with status {process.returncode}"
            try:
                took = await self.prober.probe(settings.deadline)
            except (OSError, TimeoutError, ProbeError, asyncio.IncompleteReadError) as exc:
                if not answered and time.monotonic() - started < START_WITHIN:
                    await self._pause(0.1)  # still starting: not listening yet
                    continue
                missed += 1
                self.answering = None
                log.warning(
                    "bridge broker did not answer the probe",
                    pid=process.pid,
                    missed=missed,
                    error=repr(exc),
                )
                if missed >= settings.failures:
                    return f"no answer to {missed} probes in a row"
            else:
                missed = 0
                self.answering = process.pid
                if not answered:
                    answered = True
                    ms = round(took * 1e3, 1)
                    log.info("bridge broker answers", pid=process.pid, ms=ms)
                    if not self._ready_said:
                        self._ready_said = True
                        self.notifier.ready()
                    self.notifier.status(f"bridge broker {process.pid} answers")
            await self._pause(settings.interval)
        return "the watchdog stops"

    async def _pause(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stop.wait(), seconds)

    async def _end(self, reason: str) -> None:
        self.answering = None
        await self.prober.close()
        process, self._process = self._process, None
        if process is None:
            return
        if process.poll() is not None:
            log.warning("bridge broker ended", pid=process.pid, reason=reason)
            return
        log.warning("ending the bridge broker", pid=process.pid, reason=reason)
        process.send_signal(signal.SIGTERM)
        if not await _exited(process, self.settings.grace):
            self.kills += 1
            log.error(
                "bridge broker ignored SIGTERM: SIGKILL",
                pid=process.pid,
                grace=self.settings.grace,
                kills=self.kills,
            )
            process.kill()
            await _exited(process, None)


async def _exited(process: subprocess.Popen[bytes], within: float | None) -> bool:
    """Whether ``process`` exits within ``within`` s (None: wait for it); reaped if so.
    Waits on a pidfd (pidfd_open(2)), without a thread or polling."""
    if process.poll() is not None:
        return True
    try:
        fd = os.pidfd_open(process.pid)
    except ProcessLookupError:
        process.wait()
        return True
    loop = asyncio.get_running_loop()
    done = asyncio.Event()
    loop.add_reader(fd, done.set)
    try:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(done.wait(), within)
    finally:
        loop.remove_reader(fd)
        os.close(fd)
    return process.poll() is not None
