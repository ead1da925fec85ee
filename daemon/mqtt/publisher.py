"""Publishing from the journal's outbox: in order, each message marked once acknowledged.

On each connection the session hands the publisher its client: it republishes every
retained message of ``Outbox.retained()`` byte for byte (a broker restarted without
persistence holds the current state again at once, with the original ``seq`` and ``ts``,
mqtt-api.md, Conventions), then drains ``Outbox.pending()`` in ``seq`` order, QoS 1,
``window`` publishes awaiting their PUBACK at once, and ``mark_published`` each message
only once the broker acknowledged it. A message acknowledged that the journal cannot mark
(a full disk) is kept in memory as published and never sent again; the marks are tried
again, nothing waits behind them (``availability`` and newer messages go out at once), and
``on_journal_error`` tells the daemon (``JOURNAL_FAULT``). A message the client refuses (a
topic or a payload MQTT cannot carry) is set aside in the journal with the reason
(``Outbox.set_aside``) and the queue goes on.

Within one connection each message is published once; across a reconnect a message whose
PUBACK was lost is published again (QoS 1 is at least once), and a display drops the
``seq`` it has already seen (mqtt-api.md).

Copies (the user property ``resent`` = ``true``, mqtt-api.md 1.3; never retained, so the
broker's retained state never goes back to an older one):

* ``request/resend`` (``daemon.resend``): the shell hands them to ``resend()``; they go out
  one window at a time *after* each batch of the table's own pending messages, so a resend
  never holds a result back.
* ``floor_resend`` (docs/floor/cluster.md): a floor node may acknowledge a QoS 1 message
  and die before every subscriber has it. A floor subscriber fills such a hole itself
  (``contract.feed``: the next message's ``prev_seq`` shows it, and ``request/resend``
  brings it back), except at the very end of the stream. So when the floor bridge says
  ``0`` (``bridge_dropped``), the newest message acknowledged in the last
  ``floor_resend`` seconds is published again (one copy per drop, not the window: the
  copies of the whole window were 55-110 per drop, nearly all duplicates), before any
  message queued after the ``0``. The mark does not cross the 3.1.1 bridge; floor
  subscribers go by ``seq``.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from dataclasses import replace
from typing import Final

import aiomqtt
import structlog
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from contract.tasks import cancel_and_wait
from daemon.errors import JournalError, JournalValueError
from daemon.outbox import Outbox, OutboxMessage
from daemon.resend import RESENT_PROPERTY

log = structlog.get_logger("lammer.mqtt")

RESEND_MAX: Final = 2000
"""At most this many recent messages are kept for ``floor_resend`` (a table makes a few a
second at most; the bound holds whatever the window)."""


def resent_properties() -> Properties:
    """The PUBLISH properties of a ``request/resend`` copy and of a ``floor_resend`` copy:
    the user property ``resent`` = ``true`` (mqtt-api.md 1.3)."""
    properties = Properties(PacketTypes.PUBLISH)  # type: ignore[no-untyped-call]
    properties.UserProperty = [RESENT_PROPERTY]
    return properties


class Publisher:
    """The outbox's messages and their copies, published on the connection it is given.

    ``window`` is how many QoS 1 publishes may await their PUBACK at once (order is kept:
    they are written in ``seq`` order on one connection and marked in that order);
    ``timeout`` bounds each acknowledgement. ``wake`` is set when there is something new
    to publish; ``retry_every`` is how long the drain waits before marking again what the
    journal refused.
    """

    def __init__(
        self,
        *,
        base: str,
        outbox: Outbox,
        wake: asyncio.Event,
        window: int,
        timeout: float,
        retry_every: float,
        floor_resend: float = 0.0,
        on_journal_error: Callable[[], None] | None = None,
        on_published: Callable[[list[OutboxMessage]], None] | None = None,
    ) -> None:
        self._base = base
        self._outbox = outbox
        self._wake = wake
        self._window = window
        self._timeout = timeout
        self._retry_every = retry_every
        self._floor_resend = floor_resend
        self._on_journal_error = on_journal_error
        self._on_published = on_published
        """Told of the outbox messages the broker acknowledged, in seq order (the metrics)."""
        # Acknowledged by the broker, not yet marked in the journal (it refused): never
        # published again, marked as soon as the journal writes.
        self._unmarked: set[int] = set()
        self._unmarkable: set[int] = set()  # published, refused by the outbox as unknown
        # What the broker acknowledged lately, (monotonic time, message), oldest first.
        self._recent: deque[tuple[float, OutboxMessage]] = deque(maxlen=RESEND_MAX)
        self._again: list[OutboxMessage] = []  # floor copies, before anything newer
        self._copies: deque[OutboxMessage] = deque()  # request/resend copies, in order
        self.published = 0
        """Outbox messages the broker has acknowledged since the start."""
        self.resent = 0
        """Messages published again because the floor bridge dropped (``floor_resend``)."""
        self.copies_sent = 0
        """Copies published for ``request/resend``."""

    @property
    def backlog(self) -> int:
        """``request/resend`` copies queued and not yet published."""
        return len(self._copies)

    def resend(self, messages: list[OutboxMessage]) -> None:
        """Publish ``messages`` again (``request/resend``): same topics and bytes, never
        retained, marked ``resent``, after the copies queued before them, and never ahead
        of the table's own pending messages."""
        self._copies.extend(replace(m, retained=False) for m in messages)
        self._wake.set()

    def retry_in(self) -> float | None:
        """Seconds until the marks the journal refused are tried again; None: none wait."""
        return self._retry_every if self._unmarked else None

    async def republish_retained(self, client: aiomqtt.Client) -> None:
        """The retained state, as stored (original seq and ts), before anything newer:
        after this, pending messages bring it up to date in order."""
        await self._publish_all(client, self._outbox.retained(), mark=False)

    async def step(self, client: aiomqtt.Client) -> bool:
        """Publish what is due next: the floor's copies, else a window of pending messages
        then one window of ``request/resend`` copies; False when nothing was due."""
        if self._again:
            await self._publish_again(client)
            return True
        if self._unmarked:
            self._mark_unmarked()  # what the journal refused before, tried again
        skip = self._unmarked | self._unmarkable
        batch = [m for m in self._outbox.pending(self._window + len(skip)) if m.seq not in skip]
        batch = batch[: self._window]
        if not batch:
            if self._copies:
                await self._publish_copies(client)
                return True
            return False
        await self._publish_all(client, batch, mark=True)
        if self._unmarked:
            # The journal refuses to mark them (a full disk): the broker has them, so they
            # are never sent again and are marked once the journal writes. Nothing waits
            # behind this: availability and what the journal still queues go out at once,
            # so displays are told offline at once and nothing delivered is sent twice.
            log.warning(
                "mqtt: the journal cannot mark messages published", waiting=len(self._unmarked)
            )
            if self._on_journal_error is not None:
                self._on_journal_error()
        if self._copies:
            await self._publish_copies(client)  # one window between batches of results
        return True

    def bridge_dropped(self, topic: str) -> None:
        """The floor bridge said ``0`` on ``topic``: queue the newest message acknowledged
        in the last ``floor_resend`` seconds to go out again, first."""
        now = time.monotonic()
        since = now - self._floor_resend
        while self._recent and self._recent[0][0] < since:
            self._recent.popleft()
        queued = {m.seq for m in self._again}
        # The newest only: a subscriber learns the table's latest seq from it and asks for
        # whatever else it lacks (contract.feed, request/resend).
        newest = [m for _, m in self._recent][-1:]
        again = [m for m in newest if m.seq not in queued]
        if again:
            self._again.extend(again)
            self._again.sort(key=_by_seq)
            self._wake.set()
        log.warning(
            "floor bridge down: publishing the newest message again",
            bridge=topic,
            seconds=self._floor_resend,
            messages=len(again),
            first_seq=again[0].seq if again else None,
            last_seq=again[-1].seq if again else None,
        )

    async def _publish_again(self, client: aiomqtt.Client) -> None:
        again, self._again = self._again, []
        copies = [replace(m, retained=False) for m in again]
        try:
            # Marked as a request/resend copy is (mqtt-api.md 1.3): a non-retained copy of
            # a retained topic without the mark breaks the contract for a local display.
            await self._publish_all(client, copies, mark=False, properties=resent_properties())
        except BaseException:
            # Not sent (the connection dropped): they go on the next connection, first.
            self._again = sorted({m.seq: m for m in again + self._again}.values(), key=_by_seq)
            raise
        self.resent += len(copies)

    async def _publish_copies(self, client: aiomqtt.Client) -> None:
        """One window of ``request/resend`` copies, marked ``resent``; on a dropped
        connection they stay first in line for the next one."""
        chunk = [self._copies.popleft() for _ in range(min(self._window, len(self._copies)))]
        try:
            await self._publish_all(client, chunk, mark=False, properties=resent_properties())
        except BaseException:
            self._copies.extendleft(reversed(chunk))
            raise
        self.copies_sent += len(chunk)

    async def _publish_all(
        self,
        client: aiomqtt.Client,
        messages: list[OutboxMessage],
        *,
        mark: bool,
        properties: Properties | None = None,
    ) -> None:
        for start in range(0, len(messages), self._window):
            chunk = messages[start : start + self._window]
            # Tasks start in creation order, and each hands its packet to paho at once,
            # so the packets go out in seq order; PUBACKs are awaited in that order too.
            tasks = [
                asyncio.create_task(
                    client.publish(
                        f"{self._base}/{m.topic}",
                        m.payload,
                        qos=1,
                        retain=m.retained,
                        properties=properties,
                    )
                )
                for m in chunk
            ]
            acked: list[int] = []
            try:
                async with asyncio.timeout(self._timeout) as window:
                    for message, task in zip(chunk, tasks, strict=True):
                        try:
                            await task
                        except (ValueError, TypeError) as exc:
                            # The client refuses this message (a topic or payload MQTT cannot
                            # carry): no retry can send it, so it must not hold the queue.
                            self._set_aside(message, exc, mark=mark)
                            continue
                        acked.append(message.seq)
                        # Each PUBACK may take the whole timeout, not the chunk.
                        window.reschedule(asyncio.get_running_loop().time() + self._timeout)
            finally:
                # What the broker acknowledged is marked (one transaction), also when the
                # connection dropped behind it.
                if mark and acked:
                    self._acknowledged(chunk, acked)
                await cancel_and_wait(tasks)

    def _acknowledged(self, chunk: list[OutboxMessage], acked: list[int]) -> None:
        """Count, report, mark and remember the outbox messages the broker acknowledged."""
        self.published += len(acked)
        done = set(acked)
        if self._on_published is not None:
            self._on_published([m for m in chunk if m.seq in done])
        self._unmarked.update(acked)
        self._mark_unmarked()
        if self._floor_resend:
            now = time.monotonic()
            self._recent.extend((now, m) for m in chunk if m.seq in done)

    def _mark_unmarked(self) -> bool:
        """Mark what the broker acknowledged and the journal has not recorded yet; False
        while the journal refuses."""
        try:
            self._outbox.mark_published(*sorted(self._unmarked))
        except JournalValueError as exc:
            # A seq the outbox does not hold (a bug, never a full disk): it can never be
            # marked, and waiting on it would take the table offline for nothing. The
            # others are marked one by one.
            log.error("mqtt: a message published cannot be marked", error=str(exc))
            for seq in sorted(self._unmarked):
                try:
                    self._outbox.mark_published(seq)
                except JournalValueError:
                    self._unmarked.discard(seq)
                    self._unmarkable.add(seq)  # published: never again
                except JournalError:
                    return False
                else:
                    self._unmarked.discard(seq)
            return True
        except JournalError:
            return False
        self._unmarked.clear()
        return True

    def _set_aside(self, message: OutboxMessage, exc: Exception, *, mark: bool) -> None:
        reason = f"refused by the MQTT client: {exc}"
        log.error(
            "mqtt message refused; set aside in the journal",
            seq=message.seq,
            topic=message.topic[:100],
            size=len(message.payload),
            error=str(exc),
        )
        if mark:
            self._outbox.set_aside(message.seq, reason)


def _by_seq(message: OutboxMessage) -> int:
    return message.seq
