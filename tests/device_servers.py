"""Serial device servers on loopback, as real processes, and a network the test can cut.

* ``Ser2net``: Debian's ser2net (installed by ``make system-deps``) with a configuration
  file the test writes, serving one serial port (a simulator's pty, by its ``--link``
  name) as raw TCP (``socket://``) or as RFC 2217 (``rfc2217://``). Never the system's
  service: ``-n`` (in the foreground), ``-u`` (no UUCP lock files), its own pid file.
* ``PortManagerServer``: pyserial's own RFC 2217 server (``tests/rfc2217_server.py``).
* ``NetCut``: a TCP relay between the table and a server that the test can cut as a
  network does: the connections stay open and nothing passes (no FIN, no RST: a cable
  pulled, a switch gone), new ones are refused; ``restore`` lets them through again.

Each server serves the device by its path and opens it when a client connects, so a
simulator restarted behind the same ``--link`` name is found again, as a replugged
adapter is. ``kill`` (SIGKILL) and ``start`` again on the same TCP port is the server
crashing and coming back. Nothing here sleeps to let something happen: the starts wait
until the server's own process accepts connections on its port (another process's
listener there is a failure, never taken for it), bounded by ``DEADLINE``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from deploy.broker import START_BOUND_S, PortTaken, free_port, wait_serving

DEADLINE = START_BOUND_S
"""Seconds a server may take to start: a bound on a failure, never what is tested."""

SER2NET = "/usr/sbin/ser2net"
PORT_MANAGER = Path(__file__).with_name("rfc2217_server.py")

Mode = Literal["raw", "rfc2217"]


def _wait_accepting(port: int, proc: subprocess.Popen[bytes], log: Path) -> None:
    """Return once ``proc`` itself accepts connections on ``127.0.0.1:port``. Otherwise
    (it exited, another process listens there, ``DEADLINE`` passed) stop it and fail."""
    deadline = time.monotonic() + DEADLINE
    while True:
        if proc.poll() is not None:
            raise AssertionError(f"the server exited ({proc.returncode}): {log.read_text()}")
        try:
            if wait_serving(proc.pid, "127.0.0.1", port, timeout=0.5):
                return
        except PortTaken as exc:
            _stop(proc, signal.SIGKILL)
            raise AssertionError(f"{exc}, not the server's: {log.read_text()}") from None
        if time.monotonic() > deadline:
            _stop(proc, signal.SIGKILL)
            raise AssertionError(
                f"the server did not listen on {port} within {DEADLINE:.0f} s: {log.read_text()}"
            )


def _stop(proc: subprocess.Popen[bytes] | None, sig: int = signal.SIGTERM) -> None:
    if proc is None or proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(proc.pid, sig)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@dataclass
class Ser2net:
    """ser2net serving ``device`` on ``127.0.0.1:port`` (see the module docstring)."""

    workdir: Path
    device: Path
    mode: Mode
    baud: int = 115200
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None
    starts: int = 0

    @property
    def url(self) -> str:
        """The URL a table's ``port`` takes to reach it."""
        return f"{'socket' if self.mode == 'raw' else 'rfc2217'}://127.0.0.1:{self.port}"

    @property
    def config(self) -> Path:
        """Its configuration file."""
        return self.workdir / f"ser2net-{self.port}.yaml"

    def config_text(self) -> str:
        """One connection (ser2net.yaml(5)): the accepter, the device, the line.

        ``kickolduser``: a new client replaces the old one, as a table reconnecting after
        a network cut needs (a device server keeps the old session until TCP gives up).
        """
        accepter = "tcp" if self.mode == "raw" else "telnet(rfc2217),tcp"
        return (
            "%YAML 1.1\n---\n"
            "connection: &table\n"
            f"    accepter: {accepter},127.0.0.1,{self.port}\n"
            f"    connector: serialdev,{self.device},{self.baud}n81,local\n"
            "    options:\n"
            "      kickolduser: true\n"
        )

    def start(self) -> None:
        """Start it (again, on the same port) and wait until it accepts connections."""
        assert self.proc is None or self.proc.poll() is not None, "ser2net running"
        self.config.write_text(self.config_text())
        self.starts += 1
        log = self.workdir / f"ser2net-{self.port}-{self.starts}.log"
        pid = self.workdir / f"ser2net-{self.port}.pid"
        with log.open("wb") as out:
            self.proc = subprocess.Popen(
                [SER2NET, "-n", "-u", "-c", str(self.config), "-P", str(pid)],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        _wait_accepting(self.port, self.proc, log)

    def kill(self) -> None:
        """SIGKILL: the server crashes (its connections end with it)."""
        _stop(self.proc, signal.SIGKILL)

    def stop(self) -> None:
        """SIGTERM, and reaped."""
        _stop(self.proc)


@dataclass
class PortManagerServer:
    """pyserial's ``PortManager`` serving ``device`` on ``127.0.0.1:port`` (RFC 2217)."""

    workdir: Path
    device: Path
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None
    starts: int = 0

    @property
    def url(self) -> str:
        """The URL a table's ``port`` takes to reach it."""
        return f"rfc2217://127.0.0.1:{self.port}"

    def start(self) -> None:
        """Start it (again, on the same port) and wait until it accepts connections."""
        assert self.proc is None or self.proc.poll() is not None, "server running"
        self.starts += 1
        log = self.workdir / f"portmanager-{self.port}-{self.starts}.log"
        with log.open("wb") as out:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    str(PORT_MANAGER),
                    "--device",
                    str(self.device),
                    "--port",
                    str(self.port),
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        _wait_accepting(self.port, self.proc, log)

    def kill(self) -> None:
        """SIGKILL: the server crashes."""
        _stop(self.proc, signal.SIGKILL)

    def stop(self) -> None:
        """SIGTERM, and reaped."""
        _stop(self.proc)


DeviceServer = Ser2net | PortManagerServer


class NetCut:
    """A relay from ``127.0.0.1:port`` to ``target`` that can be cut (module docstring).

    ``url(scheme)`` is the URL through it. ``connections`` counts the clients it took.
    """

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = free_port()
        self.connections = 0
        self._server: asyncio.Server | None = None
        self._pipes: set[asyncio.Task[None]] = set()
        self._writers: list[asyncio.StreamWriter] = []
        self._open = asyncio.Event()

    def url(self, scheme: str) -> str:
        """``scheme://127.0.0.1:port``."""
        return f"{scheme}://127.0.0.1:{self.port}"

    async def start(self) -> None:
        """Listen and relay."""
        self._open.set()
        self._server = await asyncio.start_server(self._client, "127.0.0.1", self.port)

    async def cut(self) -> None:
        """The network goes: nothing passes either way, the connections stay open, new
        connections are refused."""
        self._open.clear()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def restore(self) -> None:
        """The network comes back: the stale connections are gone (their next packet is
        answered with a reset), new ones pass."""
        await self._drop_all()
        await self.start()

    async def close(self) -> None:
        """Stop listening and close every connection."""
        await self.cut()
        await self._drop_all()

    async def _drop_all(self) -> None:
        for writer in self._writers:
            writer.transport.abort()
        self._writers.clear()
        for task in list(self._pipes):
            task.cancel()
        await asyncio.gather(*self._pipes, return_exceptions=True)
        self._pipes.clear()

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            writer.transport.abort()
            return
        self._writers += [writer, up_writer]
        for source, sink in ((reader, up_writer), (up_reader, writer)):
            task = asyncio.create_task(self._pipe(source, sink))
            self._pipes.add(task)
            task.add_done_callback(self._pipes.discard)

    async def _pipe(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        try:
            while data := await source.read(4096):
                await self._open.wait()  # cut: held here, never delivered
                sink.write(data)
                await sink.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            if self._open.is_set():
                sink.transport.abort()
