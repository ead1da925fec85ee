"""The device side of link-layer.md, on the drivers' own codec (never on the driver class).

``DeviceLink`` numbers and sends a device's frames and reads the host's ``ACK``, ``NAK``
and ``QUERY``; it does not know about ports (it is given a ``write`` coroutine and is fed
the bytes that arrive), so tests drive it over anything.

What the link layer says, and how it is done here:

* Sequence numbers: 1 after power-up or after the device sends ``HELLO`` (the ``HELLO``
  itself is 1), then +1 per new frame, wrapping from 9999 back to 1.
* Stop-and-wait: the next frame goes out only once the current one is acknowledged. One
  worker task sends the queue in order; ``send()`` waits for its frame's ``ACK``.
* Retransmission: without an ``ACK`` within 500 ms, or on a ``NAK`` (of this sequence
  number, or ``NAK,0``), the same frame again with the same number, up to 5 times; after
  that every 2 s until acknowledged (a ``NAK`` then does not hurry it). ``LinkTimings``
  holds the three figures so tests inject short ones.
* ``QUERY``: answered with ``HELLO`` then the configuration (the last ``MODE`` the
  shuffler sent; nothing for the dice reader), queued ahead of every frame not yet sent
  (an earlier answer still queued is dropped: this one supersedes it). A frame already in
  flight is finished first (stop-and-wait), but resent at once with fresh retries: a
  ``QUERY`` says a host has just (re)opened the line, so there is no point waiting out a
  2 s slow retry. If that frame is a ``HELLO``, it is the answer, and only the
  configuration follows it.

``sent`` is the link's own record of every frame acknowledged, in order, each once: the
end-to-end tests compare it with what the driver delivered. ``ACK`` of another sequence
number than the frame in flight (a late ``ACK`` of a duplicate) is ignored.
"""

from __future__ import annotations

import asyncio
import collections
import random
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Final

import structlog

from drivers.errors import FrameError
from drivers.link import MAX_SEQ, BadFrame, next_seq
from drivers.messages import (
    Ack,
    Decoded,
    DeviceMessage,
    MessageDecoder,
    Nak,
    Query,
    encode_body,
)
from rules.events import ModeReported
from simulators.faults import Faults, hit, plan_transmission
from simulators.scripts import DeviceKind, Send

ACK_TIMEOUT: Final = (
    0.5  # link-layer.md: "Without an ACK within 500 ms ... sends the same frame again"
)
FAST_RETRIES: Final = 5  # link-layer.md: "up to 5 times"
SLOW_INTERVAL: Final = 2.0  # link-layer.md: "after that it keeps resending every 2 s"

Writer = Callable[[bytes], Awaitable[None]]
"""Where the link's bytes go (a port's ``write``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LinkTimings:
    """The device's retransmission timers (link-layer.md); tests inject short ones."""

    ack_timeout: float = ACK_TIMEOUT
    fast_retries: int = FAST_RETRIES
    slow_interval: float = SLOW_INTERVAL

    def __post_init__(self) -> None:
        if not self.ack_timeout > 0 or not self.slow_interval > 0:
            raise ValueError(
                f"link timings must be positive: ack_timeout={self.ack_timeout}, "
                f"slow_interval={self.slow_interval}"
            )
        if self.fast_retries < 0:
            raise ValueError(f"fast_retries={self.fast_retries} must be >= 0")


@dataclass(slots=True)
class _Entry:
    step: Send
    done: asyncio.Future[DeviceMessage] | None


class DeviceLink:
    """One device's end of the line: numbering, stop-and-wait, retransmission, ``QUERY``.

    Start it with ``async with link:`` (or ``start()``/``stop()``); ``power_up()`` queues
    ``HELLO`` and the configuration; ``send()`` queues a frame and waits for its ``ACK``;
    ``feed()`` takes whatever bytes arrived from the host.
    """

    def __init__(
        self,
        *,
        device: DeviceKind,
        hello: Send,
        config: Sequence[Send] = (),
        write: Writer,
        faults: Faults | None = None,
        rng: random.Random | None = None,
        timings: LinkTimings | None = None,
        first_seq: int = 1,
    ) -> None:
        if hello.kind != "HELLO":
            raise ValueError(f"hello must be a HELLO frame, not {hello.kind}")
        if not 1 <= first_seq <= MAX_SEQ:
            raise ValueError(f"first_seq={first_seq}: expected 1..{MAX_SEQ}")
        self.device: DeviceKind = device
        self.hello = hello
        self.config: list[Send] = list(config)
        """What follows ``HELLO`` in a ``QUERY`` answer: the last ``MODE`` sent."""
        self._write = write
        self.faults = faults or Faults()
        self.rng = rng or random.Random()  # noqa: S311  simulated link faults and timing, not a secret
        self.timings = timings or LinkTimings()
        self.sent: list[DeviceMessage] = []
        """Every frame acknowledged, in order, each once."""
        self.transmissions = 0
        """Frames put on the wire, retransmissions and duplicates included."""
        self.applied: collections.Counter[str] = collections.Counter()
        """How many transmissions each wire fault shaped (``crc``, ``split``, ...)."""
        self.acks_dropped = 0
        self._lose_acks = 0  # scripted losses (``drop_ack`` steps) still to come
        """ACKs ignored by the ``drop_ack`` fault."""
        self.queries = 0
        """``QUERY`` frames answered."""
        self._next = first_seq
        self._queue: collections.deque[_Entry] = collections.deque()
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._signals: asyncio.Queue[str] = asyncio.Queue()
        self._in_flight: int | None = None
        self._in_flight_kind: str | None = None
        self._decoder = MessageDecoder(sender="host")
        self._task: asyncio.Task[None] | None = None
        self.log = structlog.get_logger("lammer.sim.link").bind(device=device)

    # Lifecycle ------------------------------------------------------------------------

    async def __aenter__(self) -> DeviceLink:
        self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def start(self) -> None:
        """Start the sending worker (idempotent)."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name=f"lammer-sim {self.device} link"
            )

    async def stop(self) -> None:
        """Stop the worker; frames still queued are abandoned (their waiters cancelled)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                if (current := asyncio.current_task()) is not None and current.cancelling():
                    raise
        while self._queue:
            entry = self._queue.popleft()
            if entry.done is not None and not entry.done.done():
                entry.done.cancel()

    # What the device does ---------------------------------------------------------------

    def power_up(self) -> None:
        """Queue ``HELLO`` and the configuration ahead of everything not yet sent
        (power-up or reconnect, shuffler-icd.md ``HELLO``)."""
        self._push_front([self.hello, *self.config])

    async def send(self, step: Send) -> DeviceMessage:
        """Queue one frame and wait until the host acknowledges it; the message as sent.

        Raises ``FrameError`` if the frame does not validate (nothing is sent then).
        """
        future: asyncio.Future[DeviceMessage] = asyncio.get_running_loop().create_future()
        self._queue.append(_Entry(step, future))
        self._idle.clear()
        self._wake.set()
        return await future

    async def wait_idle(self) -> None:
        """Wait until every queued frame (``QUERY`` answers too) has been acknowledged."""
        await self._idle.wait()

    @property
    def idle(self) -> bool:
        """Nothing queued and nothing in flight."""
        return self._idle.is_set()

    # What the host says ---------------------------------------------------------------

    def feed(self, data: bytes) -> None:
        """Bytes from the host: ``ACK``, ``NAK`` and ``QUERY`` act; anything else is logged."""
        for item in self._decoder.feed(data):
            if isinstance(item, BadFrame):
                self.log.debug("bad frame from host ignored", raw=item.raw, reason=item.reason)
                continue
            self._on_message(item)

    def _on_message(self, item: Decoded) -> None:
        message = item.message
        match message:
            case Ack(seq=seq) if seq == self._in_flight:
                if self._lose_acks:
                    self._lose_acks -= 1
                    self.acks_dropped += 1
                    self.log.debug("ACK dropped (script)", seq=seq)
                elif hit(self.faults.drop_ack, self.rng):
                    self.acks_dropped += 1
                    self.log.debug("ACK dropped (fault)", seq=seq)
                else:
                    self._signals.put_nowait("ack")
            case Nak(seq=seq) if self._in_flight is not None and seq in (0, self._in_flight):
                self._signals.put_nowait("nak")
            case Query():
                self.queries += 1
                self.log.debug("QUERY: answering HELLO and configuration")
                self._answer_query()
            case _:
                self.log.debug("host frame ignored", raw=item.raw)

    def lose_next_ack(self) -> None:
        """The first ACK of the next frame is lost on the wire (a scripted ``drop_ack``)."""
        self._lose_acks += 1

    def _answer_query(self) -> None:
        # An earlier answer (or power-up) not yet sent is superseded by this one.
        self._queue = collections.deque(e for e in self._queue if e.done is not None)
        if self._in_flight_kind == "HELLO":
            # The HELLO in flight is the answer: resend it at once, then the configuration.
            self._push_front(self.config)
        else:
            self._push_front([self.hello, *self.config])
        if self._in_flight is not None:
            self._signals.put_nowait("query")

    # The worker -----------------------------------------------------------------------

    def _push_front(self, steps: Sequence[Send]) -> None:
        for step in reversed(steps):
            self._queue.appendleft(_Entry(step, None))
        self._idle.clear()
        self._wake.set()

    async def _run(self) -> None:
        while True:
            if not self._queue:
                self._idle.set()
                self._wake.clear()
                await self._wake.wait()
                continue
            entry = self._queue.popleft()
            try:
                message = self._number(entry.step)
            except FrameError as exc:
                self.log.error("frame not sent: it does not validate", reason=exc.reason)
                if entry.done is not None and not entry.done.done():
                    entry.done.set_exception(exc)
                continue
            await self._deliver(message)
            self.sent.append(message)
            if entry.done is not None and not entry.done.done():
                entry.done.set_result(message)

    def _number(self, step: Send) -> DeviceMessage:
        # link-layer.md: "1 after power-up or after the device sends HELLO".
        seq = 1 if step.kind == "HELLO" else self._next
        message = step.message(seq, self.device)
        self._next = next_seq(seq)
        if isinstance(message.fact, ModeReported):
            self.config = [step]  # QUERY is answered with the current MODE
        return message

    async def _deliver(self, message: DeviceMessage) -> None:
        """Send ``message`` until it is acknowledged (link-layer.md stop-and-wait)."""
        body = encode_body(message)
        loop = asyncio.get_running_loop()
        t = self.timings
        while not self._signals.empty():  # leftovers of the previous frame
            self._signals.get_nowait()
        self._in_flight, self._in_flight_kind = message.seq, message.kind
        retries = 0
        try:
            await self._transmit(body)
            deadline = loop.time() + t.ack_timeout
            while True:
                try:
                    async with asyncio.timeout_at(deadline):
                        signal = await self._signals.get()
                except TimeoutError:
                    signal = "timeout"
                if signal == "ack":
                    return
                if signal == "nak" and retries >= t.fast_retries:
                    continue  # slow phase: resend on the 2 s timer only
                if signal == "query":
                    retries = 0
                else:
                    retries += 1
                self.log.debug("retransmit", seq=message.seq, cause=signal, retries=retries)
                await self._transmit(body)
                wait = t.ack_timeout if retries < t.fast_retries else t.slow_interval
                deadline = loop.time() + wait
        finally:
            self._in_flight = self._in_flight_kind = None

    async def _transmit(self, body: str) -> None:
        plan = plan_transmission(body, device=self.device, faults=self.faults, rng=self.rng)
        self.transmissions += 1
        self.applied.update(plan.applied)
        # Frames carry secret cards (shuffler-icd.md): their bytes at debug level only.
        self.log.debug("tx", raw=plan.data, faults=plan.applied or None)
        if plan.split:
            for index in range(len(plan.data)):
                await self._write(plan.data[index : index + 1])
                await asyncio.sleep(self.faults.split_delay)
        else:
            await self._write(plan.data)
