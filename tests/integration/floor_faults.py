"""Floor faults for a controller's bridge, and a clock on its tables' broker (issue 28).

``FaultyNode`` is what a controller's bridge dials instead of a floor node: a TCP listener
on 127.0.0.1 (the name the floor's certificates hold) that, in its ``mode``,

* ``floor``: forwards each connection to a real node (TLS end to end, the node's own);
* ``wrong_ca``: completes TLS itself with a certificate another CA signed (a CA
  replacement half done: the bridge refuses it at the handshake);
* ``silent``: accepts TCP, reads, and never answers (a node hung before TLS);
* ``reset``: reads the first bytes (the ClientHello) and resets the connection (RST);
* ``flap``: forwards to the node, and ends every connection 0.1 to 1.5 s after it opened
  (a floor link that comes and goes, mid-handshake or after CONNECT).

Changing the mode ends every open connection, so the bridge meets the new mode at once.
``attempts[mode]`` counts the connections met in each mode.

``LocalClock`` publishes a message every ``every`` s on the tables' broker as a table's
daemon and times it to a local subscriber (``display``): what the table's screens see,
whatever the floor link does. It runs as a process of its own (this module's ``__main__``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import signal
import socket
import ssl
import struct
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any, Literal

import aiomqtt

from contract.floor import BRIDGE_STATUS_ROOT

Mode = Literal["floor", "wrong_ca", "silent", "reset", "flap"]
FAULTS: tuple[Mode, ...] = ("wrong_ca", "silent", "reset", "flap")


class FaultyNode:
    """A stand-in for one floor node whose behaviour the test switches (module docstring)."""

    def __init__(self, node: tuple[str, int], foreign_cert: Path, foreign_key: Path) -> None:
        self.node = node
        self.mode: Mode = "floor"
        self.attempts: Counter[str] = Counter()
        self.port = 0
        self._tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self._tls.load_cert_chain(foreign_cert, foreign_key)
        self._server: asyncio.Server | None = None
        self._impostor: asyncio.Server | None = None
        self._impostor_at: tuple[str, int] = ("127.0.0.1", 0)
        self._open: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._rng = random.Random(28)

    async def start(self, port: int = 0) -> None:
        """Listen on ``port`` of 127.0.0.1 (0: a free one; ``port`` says which)."""
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", port)
        self.port = self._server.sockets[0].getsockname()[1]
        # wrong_ca: forwarded to a TLS listener of its own, which speaks TLS with the
        # foreign certificate (no start_tls on a proxied stream).
        self._impostor = await asyncio.start_server(
            self._sink, "127.0.0.1", 0, ssl=self._tls, ssl_handshake_timeout=10
        )
        self._impostor_at = self._impostor.sockets[0].getsockname()[:2]

    def switch(self, mode: Mode) -> None:
        """Behave as ``mode`` from now on; every open connection is ended."""
        self.mode = mode
        for writer in list(self._open):
            _abort(writer)
        self._open.clear()

    async def close(self) -> None:
        """Stop listening and end every connection."""
        self.switch("floor")
        for server in (self._server, self._impostor):
            if server is not None:
                server.close()
                await server.wait_closed()
        # Every connection was just ended (switch): its task ends on its own; one that
        # does not within 5 s is cancelled.
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=5)
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        mode = self.mode
        self.attempts[mode] += 1
        self._open.add(writer)
        try:
            if mode == "silent":
                while await reader.read(4096):
                    pass
            elif mode == "reset":
                await reader.read(64)
                _abort(writer)
            elif mode == "wrong_ca":
                await self._forward(reader, writer, flap=False, to=self._impostor_at)
            else:
                await self._forward(reader, writer, flap=mode == "flap")
        except (OSError, ssl.SSLError, asyncio.IncompleteReadError):
            pass
        finally:
            self._open.discard(writer)
            _abort(writer)
            self._tasks.discard(task)

    async def _sink(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError, ssl.SSLError):
            while await reader.read(4096):
                pass
        writer.close()

    async def _forward(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        flap: bool,
        to: tuple[str, int] | None = None,
    ) -> None:
        up_reader, up_writer = await asyncio.open_connection(*(to or self.node))
        self._open.add(up_writer)

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            while data := await src.read(65536):
                dst.write(data)
                await dst.drain()

        try:
            pumps = [pump(reader, up_writer), pump(up_reader, writer)]
            if flap:
                async with asyncio.timeout(self._rng.uniform(0.1, 1.5)):
                    await asyncio.gather(*pumps)
            else:
                await asyncio.gather(*pumps)
        except TimeoutError:
            pass
        finally:
            self._open.discard(up_writer)
            _abort(up_writer)


def _abort(writer: asyncio.StreamWriter) -> None:
    """End a connection with a reset (SO_LINGER 0), not a goodbye."""
    with contextlib.suppress(OSError):
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


class LocalClock:
    """Times messages on the tables' broker from a table's daemon to a local display, in a
    process of its own (``python -m tests.integration.floor_faults``), so the test's own
    work (the stand-in node's TLS pumping, the floor subscriber) never shows in its
    figures. It writes one JSON line per message sent, per message received and per bridge
    status heard; this object reads them back."""

    def __init__(
        self,
        host: str,
        port: int,
        topic: str,
        publisher: tuple[str, str],
        reader: tuple[str, str],
        *,
        folder: Path,
        every: float = 0.1,
    ) -> None:
        self.argv = [
            sys.executable, "-m", "tests.integration.floor_faults", host, str(port), topic,
            publisher[0], reader[0], str(every),
        ]  # fmt: skip
        self.passwords = f"{publisher[1]}\n{reader[1]}\n"
        self.out = folder / f"clock-{uuid.uuid4().hex[:6]}.jsonl"
        self.process: subprocess.Popen[bytes] | None = None
        self._lines: list[dict[str, Any]] = []
        self._read = 0

    def _spawn(self) -> subprocess.Popen[bytes]:
        with self.out.open("wb") as out:
            return subprocess.Popen(
                self.argv, stdin=subprocess.PIPE, stdout=out, stderr=subprocess.STDOUT
            )

    async def start(self) -> None:
        """Start it; returns once it publishes."""
        self.process = self._spawn()
        assert self.process.stdin is not None
        self.process.stdin.write(self.passwords.encode())
        self.process.stdin.close()
        deadline = time.monotonic() + 60
        while not self.sent:
            assert self.process.poll() is None, self.out.read_text()
            assert time.monotonic() < deadline, "the clock never published"
            await asyncio.sleep(0.05)

    async def stop(self) -> None:
        """Stop publishing (SIGINT); it waits (bounded) for its last messages, then exits."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            for _ in range(600):  # 30 s at most
                if self.process.poll() is not None:
                    break
                await asyncio.sleep(0.05)
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()

    def _events(self) -> list[dict[str, Any]]:
        with self.out.open("rb") as f:
            f.seek(self._read)
            data = f.read()
        end = data.rfind(b"\n") + 1
        self._read += end
        for line in data[:end].splitlines():
            with contextlib.suppress(ValueError):
                self._lines.append(json.loads(line))
        return self._lines

    @property
    def sent(self) -> dict[int, float]:
        """seq -> when sent (the clock's monotonic time)."""
        return {e["sent"]: e["t"] for e in self._events() if "sent" in e}

    @property
    def seq(self) -> int:
        """The last seq sent."""
        return max(self.sent, default=0)

    @property
    def latency(self) -> dict[int, float]:
        """seq -> seconds to the local subscriber."""
        return {e["got"]: e["s"] for e in self._events() if "got" in e}

    @property
    def statuses(self) -> list[tuple[str, bytes]]:
        """The bridges' status, as a daemon hears it: (topic, payload)."""
        return [(e["status"], e["payload"].encode()) for e in self._events() if "status" in e]

    def late(self, bound: float) -> list[tuple[int, float]]:
        """Messages that took more than ``bound`` s, or never arrived (``inf``)."""
        latency = self.latency
        return [
            (seq, latency.get(seq, float("inf")))
            for seq in sorted(self.sent)
            if latency.get(seq, float("inf")) > bound
        ]

    def figures(self) -> str:
        """p50, p99 and max of the local latency, in ms."""
        values = sorted(self.latency.values())
        if not values:
            return "no message arrived"

        def p(q: float) -> float:
            return values[min(len(values) - 1, int(q * len(values)))] * 1e3

        return (
            f"{len(values)}/{len(self.sent)} messages, p50 {p(0.5):.1f} ms, "
            f"p99 {p(0.99):.1f} ms, max {values[-1] * 1e3:.1f} ms"
        )


async def _clock(argv: list[str]) -> None:  # noqa: C901  one process: connect, publish, read, hear
    host, port, topic, pub_user, reader_user, every = argv
    pub_password, reader_password = sys.stdin.read().split("\n")[:2]
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGINT, stop.set)
    sent: dict[int, float] = {}
    got: set[int] = set()
    all_in = asyncio.Event()

    def say(**fields: Any) -> None:
        sys.stdout.write(json.dumps(fields) + "\n")
        sys.stdout.flush()

    async def read(sub: aiomqtt.Client) -> None:
        async for message in sub.messages:
            now = time.monotonic()
            with contextlib.suppress(ValueError, KeyError, TypeError):
                seq = int(json.loads(message.payload)["seq"])
                if seq in sent and seq not in got:
                    got.add(seq)
                    say(got=seq, s=now - sent[seq])
                    if stop.is_set() and len(got) == len(sent):
                        all_in.set()

    async def hear(pub: aiomqtt.Client) -> None:
        async for message in pub.messages:
            payload = message.payload
            body = payload.decode() if isinstance(payload, bytes) else ""
            say(status=str(message.topic), payload=body)

    seq = 0
    while not stop.is_set():
        try:
            async with (
                aiomqtt.Client(
                    host, int(port), identifier=reader_user, username=reader_user,
                    password=reader_password, timeout=10,
                ) as sub,
                aiomqtt.Client(
                    host, int(port), identifier=pub_user, username=pub_user,
                    password=pub_password, timeout=10,
                ) as pub,
            ):  # fmt: skip
                await sub.subscribe(topic, qos=1)
                await pub.subscribe(f"{BRIDGE_STATUS_ROOT}+", qos=1)
                tasks = [asyncio.create_task(read(sub)), asyncio.create_task(hear(pub))]
                try:
                    while not stop.is_set():
                        seq += 1
                        sent[seq] = time.monotonic()
                        say(sent=seq, t=sent[seq])
                        await pub.publish(topic, json.dumps({"seq": seq, "clock": True}), qos=1)
                        with contextlib.suppress(TimeoutError):
                            await asyncio.wait_for(stop.wait(), float(every))
                    if len(got) < len(sent):
                        with contextlib.suppress(TimeoutError):
                            await asyncio.wait_for(all_in.wait(), 5)
                finally:
                    for task in tasks:
                        task.cancel()
                    await asyncio.gather(*tasks, return_exceptions=True)
        except aiomqtt.MqttError as exc:
            # The tables' broker did not answer in 10 s (the issue's hang): said, and the
            # clock goes on with a new connection; what it sent stays unanswered.
            say(error=str(exc), at=time.monotonic())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.5)


if __name__ == "__main__":
    asyncio.run(_clock(sys.argv[1:]))
