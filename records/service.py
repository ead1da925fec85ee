"""``lammer records run``: the floor's records service (the I/O around the pure parts).

One MQTT connection as the user ``records`` (a persistent session with a stable client id:
what tables publish while the service restarts waits for it on the broker), subscribed to
``<prefix>/+/#`` for each prefix; one PostgreSQL connection. Each message is checked
(``records.messages``), stored once (``records.store``), counted by its table's watch
(``records.observe``) and, when a table's alarms change, the table's integrity topic is
published again (``records.publish``, retained, QoS 1). Order, duplicates and gaps are
``contract.feed.Feed``'s, the contract's one subscriber library: it releases each table's
messages once and in seq order, asks the table for what is missing (``request/resend``,
published here as the operator ``records``) and gives up on what cannot come with a
``Gap`` the store records with its reason. Its positions are kept in the store, so a
restart asks for what came meanwhile.

At start: the migrations (``records.migrate``), then the watches rebuilt from the store,
and each table's integrity topic published once, so the floor's picture is current.

A broker that goes away is reconnected to with a jittered backoff; a message that is not
the contract's is logged (once per table and reason a minute) and dropped, never stored.
A database that refuses a write stops the service with a clear error: systemd restarts
it, and the broker keeps the session's messages meanwhile. The MQTT client acknowledges a
message when it arrives, before it is stored, so a message that arrived as the service
died is lost from the live feed: the feed, restarted at its kept position, asks the
table for it when the next message shows the hole (``prev_seq``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import ssl
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import aiomqtt
import psycopg
import structlog

from contract.feed import Event, Feed, Gap, Message, Other, Resend
from contract.floor import integrity_topic
from contract.follow import resent_mark
from records.errors import MessageError
from records.integrity import Finding
from records.messages import Message as Stored
from records.messages import parse
from records.migrate import migrate
from records.observe import GamingDay, TableWatch
from records.publish import integrity_payload
from records.store import Store

log = structlog.get_logger("lammer.records")

CLIENT_ID: Final = "lammer-records"
OPERATOR: Final = "records"
"""The ``operator`` of the service's resend requests (every request names one)."""

WATCHED: Final = (
    "info",
    "cover_all/result",
    "bust_bonus/result",
    "craps/result",
    "craps/reversal",
    "craps/roll",
)

_REPLAY = """
SELECT table_id, topic, payload FROM message
WHERE topic = ANY(%s) ORDER BY table_id, seq
"""

GAP_REASONS: Final = {
    "gone": "the table's journal no longer holds them",
    "not_resent": "the table answered the resend and did not send them (never published)",
    "unanswered": "the table did not answer the resend requests in time",
    "overflow": "too many messages waited behind them",
}
"""``contract.feed.Gap`` reasons as the store records them."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    """Where the service reads and writes."""

    mqtt_host: str
    mqtt_port: int
    mqtt_user: str | None
    mqtt_password: str | None
    prefixes: tuple[str, ...]
    dsn: str
    day: GamingDay = field(default_factory=GamingDay)
    mqtt_ca_file: Path | None = None
    """MQTT over TLS (the floor's listeners speak nothing else): the CA that verifies the
    broker's certificate and name; None for plain MQTT (a controller's loopback)."""
    client_id: str = CLIENT_ID
    resend_wait: float = 1.0
    """How long a message that came early waits before its gap is asked for (the feed's)."""
    resend_timeout: float = 5.0
    tick: float = 1.0


def now_ts() -> str:
    """The current time as the contract writes it."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


class Records:
    """The service's state: the store, the feed and one watch per table."""

    def __init__(self, settings: Settings, conn: psycopg.Connection[Any]) -> None:
        self.settings = settings
        self.conn = conn
        self.store = Store(conn)
        self.positions = self.store.positions()
        self.feed = Feed(
            start=self.positions,
            wait=settings.resend_wait,
            timeout=settings.resend_timeout,
            ident="records",
        )
        self.watches: dict[str, TableWatch] = {}
        self.published: dict[str, list[tuple[str, str, str, str, int]]] = {}
        self.outbox: list[tuple[str, dict[str, Any]]] = []
        self.stored = 0
        self.dropped = 0
        self.lock = asyncio.Lock()
        """One database user at a time: the consumer and the ticker share the connection."""
        self._warned: dict[tuple[str, str], float] = {}

    def replay(self) -> None:
        """Rebuild every table's watch from the store, and queue its integrity topic."""
        # A server-side cursor: the store may hold months of a floor, streamed, not loaded.
        with self.conn.transaction(), self.conn.cursor(name="replay") as cursor:
            cursor.itersize = 10_000
            cursor.execute(_REPLAY, (list(WATCHED),))
            for table, topic, payload in cursor:
                self._watch(table).feed(topic, payload)
        for table, watch in self.watches.items():
            self._integrity(table, watch.evaluate(now_ts()), force=True)

    def _watch(self, table: str) -> TableWatch:
        watch = self.watches.get(table)
        if watch is None:
            watch = self.watches[table] = TableWatch(table, self.settings.day)
        return watch

    def split(self, topic: str) -> tuple[str, str, str] | None:
        """(base topic, table, topic under the base) of a received topic, or None."""
        for prefix in self.settings.prefixes:
            if topic.startswith(prefix + "/"):
                table, _, rest = topic[len(prefix) + 1 :].partition("/")
                if table and rest:
                    return f"{prefix}/{table}", table, rest
        return None

    def handle(
        self,
        topic: str,
        payload: bytes,
        now: float,
        *,
        retained: bool = False,
        resent: bool = False,
    ) -> list[Resend]:
        """One received message through the feed; the resend requests to publish."""
        where = self.split(topic)
        if where is None:
            return []
        base, table, rel = where
        if rel.startswith("request/"):
            # Requests carry no seq and are not the table's: kept for their operator (not
            # the resend asks, ours or a display's: they decide nothing).
            if rel != "request/resend":
                self._keep(table, rel, payload, now)
            return []
        return self._events(
            self.feed.receive(base, rel, payload, now=now, retained=retained, resent=resent), now
        )

    def _events(self, events: list[Event], now: float) -> list[Resend]:
        asks: list[Resend] = []
        for event in events:
            match event:
                case Message():
                    self._keep(_table_of(event.table), event.topic, event.payload, now)
                case Other():
                    self._keep(_table_of(event.table), event.topic, event.payload, now)
                case Gap():
                    self._gap(_table_of(event.table), event)
                case Resend():
                    asks.append(event)
        return asks

    def _keep(self, table: str, rel: str, payload: bytes, now: float) -> None:
        try:
            received = parse(table, rel, payload)
        except MessageError as exc:
            self.dropped += 1
            self._warn(table, str(exc), now)
            return
        new = self.store.write(received)
        if not isinstance(received, Stored) or not new:
            return
        self.stored += 1
        if rel in WATCHED:
            families = self._watch(table).feed(rel, received.payload)
            if families:
                self._integrity(table, self._watch(table).evaluate(received.ts, families))

    def tick(self, now: float) -> list[Resend]:
        """Time passed: the feed's asks and gaps; its positions kept when they moved."""
        asks = self._events(self.feed.tick(now), now)
        positions = self.feed.positions()
        if positions != self.positions:
            self.store.keep_positions(positions)
            self.positions = positions
        return asks

    def _gap(self, table: str, gap: Gap) -> None:
        # Only the seqs not stored: a range given up may hold messages that did arrive
        # (a retained state before the stream started, say).
        reason = f"{gap.reason}: {GAP_REASONS.get(gap.reason, gap.reason)}"
        have = set(self.store.stored_seqs(table, gap.from_seq, gap.to_seq))
        start: int | None = None
        for seq in range(gap.from_seq, gap.to_seq + 2):
            missing = seq <= gap.to_seq and seq not in have
            if missing and start is None:
                start = seq
            elif not missing and start is not None:
                self.store.record_gap(table, start, seq - 1, reason)
                log.warning(
                    "gap recorded", table=table, from_seq=start, to_seq=seq - 1, reason=reason
                )
                start = None

    def _integrity(self, table: str, findings: list[Finding], *, force: bool = False) -> None:
        key: list[tuple[str, str, str, str, int]] = sorted(
            (f.bet, f.row, f.window, f.side, f.observed) for f in findings
        )
        if not force and self.published.get(table) == key:
            return
        if findings and self.published.get(table) != key:
            log.warning(
                "integrity alarm",
                table=table,
                alarms=[f"{f.bet} {f.row} {f.window} {f.side}" for f in findings],
            )
        self.published[table] = key
        self.outbox.append((table, integrity_payload(table, findings, now_ts())))

    def _warn(self, table: str, reason: str, now: float) -> None:
        key = (table, reason.split(":")[0])
        if now - self._warned.get(key, -1e9) >= 60:
            self._warned[key] = now
            log.warning("message dropped", table=table, reason=reason, dropped=self.dropped)


async def run(settings: Settings, stop: asyncio.Event | None = None) -> None:
    """Run until ``stop`` is set (or forever); the database and the broker as settings say."""
    stop = stop or asyncio.Event()
    conn: psycopg.Connection[Any] = await asyncio.to_thread(_connect, settings.dsn)
    try:
        applied = await asyncio.to_thread(migrate, conn)
        if applied:
            log.info("migrations applied", numbers=[m.number for m in applied])
        conn.autocommit = False
        records = Records(settings, conn)
        await asyncio.to_thread(records.replay)
        await _serve(records, stop)
    finally:
        await asyncio.to_thread(conn.close)


def tls_context(ca_file: Path | None) -> ssl.SSLContext | None:
    """TLS 1.2 at least, the broker's certificate and name verified with ``ca_file``."""
    if ca_file is None:
        return None
    context = ssl.create_default_context(cafile=str(ca_file))
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    return context


def _connect(dsn: str) -> psycopg.Connection[Any]:
    return psycopg.connect(dsn, autocommit=True)


async def _serve(records: Records, stop: asyncio.Event) -> None:
    s = records.settings
    attempt = 0
    rng = random.Random()  # noqa: S311  reconnect jitter, not a secret
    while not stop.is_set():
        try:
            async with aiomqtt.Client(
                s.mqtt_host,
                s.mqtt_port,
                identifier=s.client_id,
                username=s.mqtt_user,
                password=s.mqtt_password,
                clean_session=False,
                keepalive=15,
                tls_context=tls_context(s.mqtt_ca_file),
            ) as client:
                attempt = 0
                for prefix in s.prefixes:
                    await client.subscribe(f"{prefix}/+/#", qos=1)
                log.info("subscribed", prefixes=list(s.prefixes))
                await _session(records, client, stop)
        except aiomqtt.MqttError as exc:
            attempt += 1
            delay = min(5.0, 0.5 * 2 ** min(attempt, 4)) * (0.5 + rng.random() / 2)
            log.warning("broker unreachable", error=str(exc), retry_in=round(delay, 2))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), delay)


async def _session(records: Records, client: aiomqtt.Client, stop: asyncio.Event) -> None:  # noqa: C901  one consumer loop over the feed's event kinds, each a call
    flushing = asyncio.Lock()  # the consumer and the ticker both flush: one at a time

    async def flush() -> None:
        async with flushing:
            await _flush()

    async def _flush() -> None:
        while records.outbox:
            table, payload = records.outbox[0]
            await client.publish(
                integrity_topic(table), json.dumps(payload).encode(), qos=1, retain=True
            )
            records.outbox.pop(0)  # only once published: a lost connection keeps it

    async def send(asks: list[Resend]) -> None:
        for ask in asks:
            await client.publish(ask.topic, ask.payload(OPERATOR), qos=1)

    async def ticker() -> None:
        while True:
            async with records.lock:
                asks = await asyncio.to_thread(records.tick, time.monotonic())
            await send(asks)
            await flush()
            await asyncio.sleep(records.settings.tick)

    async def consume() -> None:
        async for message in client.messages:
            payload = message.payload
            data = payload if isinstance(payload, bytes) else str(payload).encode()
            async with records.lock:
                asks = await asyncio.to_thread(
                    records.handle,
                    message.topic.value,
                    data,
                    time.monotonic(),
                    retained=bool(message.retain),
                    resent=resent_mark(message),
                )
            await send(asks)
            await flush()

    tasks = [
        asyncio.create_task(consume()),
        asyncio.create_task(ticker()),
        asyncio.create_task(stop.wait()),
    ]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    for task in done:
        if not task.cancelled() and (error := task.exception()) is not None:
            raise error


def _table_of(base: str) -> str:
    """The table id of a base topic (its last level)."""
    return base.rsplit("/", 1)[-1]


def prefixes_of(values: Sequence[str]) -> tuple[str, ...]:
    """The prefixes given, each checked: one or more topic levels, no wildcard."""
    out = []
    for value in values:
        if (
            not value
            or any(c in value for c in "+#")
            or value.startswith("/")
            or value.endswith("/")
        ):
            raise ValueError(f"{value!r} is not a topic prefix (levels without + or #)")
        out.append(value)
    return tuple(out)
