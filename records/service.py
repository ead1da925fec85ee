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

Batches (docs/floor/records.md). The consumer only orders and checks (the feed
and ``records.messages``, no I/O) and queues what is to be stored; one writer takes what
waits, at most ``Settings.batch`` messages, and stores it in one transaction with the
feed's positions (``Store.write_batch``): the messages that arrived while the previous
transaction committed go together (a group commit, no added wait). Only once a batch has
committed are its messages acknowledged to the broker (PUBACK, QoS 1, sent by hand:
``manual_ack``) and counted by the watches. A message the feed holds back (waiting for a
gap to fill) is acknowledged with the batch that was open when it came, so the broker's
window of unacknowledged messages never stalls the resends it waits for; lost with the
service, it is asked for again by the restarted feed (its kept position is below it).

A broker that goes away is reconnected to with a jittered backoff (what was not
acknowledged comes again on the persistent session: stored once, by (table, seq)); a
message that is not the contract's is logged (once per table and reason a minute) and
dropped, never stored. A database connection that is lost (the server restarted) is
opened again with a jittered backoff and the same batch written again, unacknowledged
meanwhile; a database that refuses a write stops the service with a clear error: systemd
restarts it, and the broker keeps what was not acknowledged meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import ssl
import time
from collections import deque
from collections.abc import Callable, Sequence
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
from contract.nodes import Nodes
from contract.session import observe_disconnect
from contract.tasks import cancel_and_wait
from metrics.endpoint import MetricsServer
from metrics.settings import MetricsSettings
from records.errors import MessageError, StoreUnreachable
from records.integrity import Finding
from records.messages import Message as Stored
from records.messages import parse
from records.metrics import records_registry
from records.migrate import migrate
from records.observe import GamingDay, TableWatch
from records.publish import integrity_payload
from records.store import Item, Missing, Store, refused

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

BATCH: Final = 200
"""Messages a transaction stores at most (docs/floor/records.md: the figures)."""

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
    other_nodes: tuple[tuple[str, int], ...] = ()
    """The floor's other nodes, tried in order after ``mqtt_host``:``mqtt_port`` when it
    fails (``contract.nodes``): the persistent session lives in the cluster, so it goes on
    at whichever node answers."""
    client_id: str = CLIENT_ID
    resend_wait: float = 1.0
    """How long a message that came early waits before its gap is asked for (the feed's)."""
    resend_timeout: float = 5.0
    tick: float = 1.0
    batch: int = BATCH
    """Messages one transaction stores at most (1: a transaction a message)."""
    settle: float = 5.0
    """At a stop, how long the writer may take to store what waits (then the broker keeps
    what was not acknowledged)."""
    metrics: MetricsSettings | None = None
    """Where to serve Prometheus metrics (``records.metrics``); None: nowhere."""


def now_ts() -> str:
    """The current time as the contract writes it."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


@dataclass(frozen=True, slots=True)
class Ack:
    """A received message's acknowledgement to the broker, sent once what came before it
    (and it, when the feed released it) is committed."""

    send: Callable[[], object]


@dataclass(frozen=True, slots=True)
class Batch:
    """What one transaction stores: ``items`` in order, the feed's ``positions`` that moved
    (only when the batch takes everything that waited), and the acknowledgements it
    releases."""

    items: list[Item]
    positions: dict[str, int] | None
    acks: list[Ack]


class Records:
    """The service's state: the store, the feed, what waits to be stored and one watch per
    table."""

    def __init__(self, settings: Settings, conn: psycopg.Connection[Any]) -> None:
        if settings.batch < 1:
            raise ValueError("a batch holds one message at least")
        self.settings = settings
        self.conn = conn
        self.store = Store(conn)
        self.positions = self.store.positions()
        """The feed's positions as the store keeps them (committed)."""
        self.feed = Feed(
            start=self.positions,
            wait=settings.resend_wait,
            timeout=settings.resend_timeout,
            ident="records",
        )
        self.watches: dict[str, TableWatch] = {}
        self.published: dict[str, list[tuple[str, str, str, str, int]]] = {}
        self.outbox: list[tuple[str, dict[str, Any]]] = []
        self.pending: deque[Item | Ack] = deque()
        """Received and released, not yet committed, in order; acks after what they follow."""
        self.ready = asyncio.Event()
        """Set when something waits for the writer."""
        self.idle = asyncio.Event()
        """Set while nothing waits and no batch is being written."""
        self.stored = 0
        self.dropped = 0
        self.batches = 0
        self.stored_ts: dict[str, tuple[str, float]] = {}
        """Each table's newest message stored: its ``ts`` and when it was stored (wall
        clock), replaced whole by the writer's thread (``records.metrics``)."""
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
        ack: Callable[[], object] | None = None,
    ) -> list[Resend]:
        """One received message through the feed, what it releases queued for the writer
        (then ``ack``); the resend requests to publish."""
        asks: list[Resend] = []
        where = self.split(topic)
        if where is not None:
            base, table, rel = where
            if rel.startswith("request/"):
                # Requests carry no seq and are not the table's: kept for their operator
                # (not the resend asks, ours or a display's: they decide nothing).
                if rel != "request/resend":
                    self._keep(table, rel, payload, now)
            else:
                events = self.feed.receive(
                    base, rel, payload, now=now, retained=retained, resent=resent
                )
                asks = self._events(events, now)
        if ack is not None:
            self._queue(Ack(ack))
        return asks

    def _queue(self, item: Item | Ack) -> None:
        self.pending.append(item)
        self.idle.clear()
        self.ready.set()

    def _events(self, events: list[Event], now: float) -> list[Resend]:
        asks: list[Resend] = []
        for event in events:
            match event:
                case Message():
                    self._keep(_table_of(event.table), event.topic, event.payload, now)
                case Other():
                    self._keep(_table_of(event.table), event.topic, event.payload, now)
                case Gap():
                    reason = f"{event.reason}: {GAP_REASONS.get(event.reason, event.reason)}"
                    table = _table_of(event.table)
                    self._queue(
                        Missing(
                            table=table, from_seq=event.from_seq, to_seq=event.to_seq, reason=reason
                        )
                    )
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
        self._queue(received)

    def tick(self, now: float) -> list[Resend]:
        """Time passed: the feed's asks and gaps; the writer woken when positions moved."""
        asks = self._events(self.feed.tick(now), now)
        if self.feed.positions() != self.positions:
            self.idle.clear()
            self.ready.set()
        return asks

    def take(self) -> Batch | None:
        """The next batch: what waits, ``Settings.batch`` messages at most, with the acks
        that follow them; the positions too when it takes everything (they may count
        messages still waiting otherwise). None when nothing is to be done."""
        items: list[Item] = []
        acks: list[Ack] = []
        while self.pending:
            head = self.pending[0]
            if isinstance(head, Ack):
                acks.append(head)
            elif len(items) < self.settings.batch:
                items.append(head)
            else:
                break
            self.pending.popleft()
        positions = None
        if not self.pending:
            moved = {k: v for k, v in self.feed.positions().items() if self.positions.get(k) != v}
            positions = moved or None
        if not items and not acks and positions is None:
            return None
        return Batch(items, positions, acks)

    def commit(self, batch: Batch) -> None:
        """Store a batch in one transaction, then count what was new (blocking: a thread).
        Raises ``StoreUnreachable`` (write it again) or ``StoreError``."""
        results = (
            self.store.write_batch(batch.items, batch.positions)
            if batch.items or batch.positions
            else []
        )
        self.batches += 1
        newest: dict[str, str] = {}
        for item, result in zip(batch.items, results, strict=True):
            if isinstance(item, Missing):
                for first, last in result if isinstance(result, list) else []:
                    log.warning(
                        "gap recorded",
                        table=item.table,
                        from_seq=first,
                        to_seq=last,
                        reason=item.reason,
                    )
                continue
            if not isinstance(item, Stored) or result is not True:
                continue
            self.stored += 1
            newest[item.table] = item.ts
            if item.topic in WATCHED:
                families = self._watch(item.table).feed(item.topic, item.payload)
                if families:
                    self._integrity(item.table, self._watch(item.table).evaluate(item.ts, families))
        if newest:
            stamp = time.time()
            self.stored_ts = {**self.stored_ts, **{t: (ts, stamp) for t, ts in newest.items()}}

    def committed(self, batch: Batch) -> None:
        """After ``commit``, in the event loop: the positions are the store's, and the
        messages the batch released are acknowledged to the broker."""
        self.positions.update(batch.positions or {})
        for ack in batch.acks:
            ack.send()

    def reconnect(self) -> None:
        """A new database connection in place of a lost one (blocking: a thread)."""
        with contextlib.suppress(psycopg.Error):
            self.conn.close()
        try:
            conn = _connect(self.settings.dsn)
            conn.autocommit = False
        except psycopg.Error as exc:
            raise refused(exc, "a new connection") from exc
        self.conn = self.store.conn = conn

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
    records: Records | None = None
    stack = contextlib.AsyncExitStack()  # the metrics listener, when served
    try:
        applied = await asyncio.to_thread(migrate, conn)
        if applied:
            log.info("migrations applied", numbers=[m.number for m in applied])
        conn.autocommit = False
        records = Records(settings, conn)
        await asyncio.to_thread(records.replay)
        if settings.metrics is not None:
            metrics = MetricsServer(records_registry(records), settings.metrics)
            await metrics.start()
            stack.push_async_callback(metrics.stop)
            log.info("metrics served", listen=str(settings.metrics))
        closing = asyncio.Event()
        writer = asyncio.create_task(_writer(records, closing))
        serve = asyncio.create_task(_serve(records, stop))
        try:
            await asyncio.wait({writer, serve}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            serve.cancel()  # the broker: nothing more is received
            closing.set()  # the writer: what waits is written once more, then it ends
            records.ready.set()
            await cancel_and_wait([serve])  # asked again: a cancellation can be lost
            await asyncio.wait({writer})
        for task in (serve, writer):  # the writer's error (a refused write), the broker's
            error = task.exception() if task.done() and not task.cancelled() else None
            if error is not None:
                raise error
    finally:
        await stack.aclose()
        # The writer may have opened another connection (the first one was lost).
        await asyncio.to_thread((records.conn if records is not None else conn).close)


async def _writer(records: Records, closing: asyncio.Event) -> None:
    """Store what waits, a batch at a time, until ``closing``; a lost connection is opened
    again and the same batch written again (nothing of it is acknowledged meanwhile)."""
    rng = random.Random()  # noqa: S311  reconnect jitter, not a secret
    while True:
        batch = records.take()
        if batch is None:
            records.idle.set()
            if closing.is_set():
                return
            await records.ready.wait()
            records.ready.clear()
            continue
        attempt = 0
        while True:
            try:
                await asyncio.to_thread(records.commit, batch)
                break
            except StoreUnreachable as exc:
                attempt += 1
                delay = min(5.0, 0.2 * 2 ** min(attempt, 5)) * (0.5 + rng.random() / 2)
                log.error(
                    "store unreachable",
                    error=str(exc).strip().splitlines()[0],
                    batch=len(batch.items),
                    behind=sum(not isinstance(i, Ack) for i in records.pending),
                    retry_in=round(delay, 2),
                )
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(closing.wait(), delay)
                if closing.is_set():
                    log.warning("stopped with a batch unstored: the broker sends it again")
                    return
                with contextlib.suppress(StoreUnreachable):
                    await asyncio.to_thread(records.reconnect)
        records.committed(batch)


def tls_context(ca_file: Path | None) -> ssl.SSLContext | None:
    """TLS 1.2 at least, the broker's certificate and name verified with ``ca_file``."""
    if ca_file is None:
        return None
    context = ssl.create_default_context(cafile=str(ca_file))
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    return context


def _connect(dsn: str) -> psycopg.Connection[Any]:
    return psycopg.connect(dsn, autocommit=True)


def _backoff(attempt: int, rng: random.Random) -> float:
    """Seconds before round ``attempt`` of every node failing: 0.5 s doubling to 5 s,
    jittered to between half and all of it."""
    step: float = min(5.0, 0.5 * 2.0 ** min(attempt, 4))
    return step * (0.5 + rng.random() / 2)


async def _serve(records: Records, stop: asyncio.Event) -> None:
    s = records.settings
    rng = random.Random()  # noqa: S311  reconnect jitter, not a secret
    nodes = Nodes([(s.mqtt_host, s.mqtt_port), *s.other_nodes], rng, _backoff)
    while not stop.is_set():
        host, port = nodes.current
        try:
            client = aiomqtt.Client(
                host,
                port,
                identifier=s.client_id,
                username=s.mqtt_user,
                password=s.mqtt_password,
                clean_session=False,
                keepalive=15,
                tls_context=tls_context(s.mqtt_ca_file),
            )
            # PUBACK only once stored (module docstring): set before connecting, since a
            # persistent session's waiting messages come right after CONNACK. aiomqtt 2.5
            # has no option of its own: this is paho's, on the client aiomqtt wraps.
            client._client.manual_ack_set(True)
            async with client:
                observe_disconnect(client)  # no "Future exception was never retrieved"
                nodes.connected()
                for prefix in s.prefixes:
                    await client.subscribe(f"{prefix}/+/#", qos=1)
                log.info("subscribed", prefixes=list(s.prefixes), broker=str(nodes))
                await _session(records, client, stop)
        except aiomqtt.MqttError as exc:
            where = str(nodes)
            delay = nodes.failed()
            log.warning(
                "broker unreachable", broker=where, error=str(exc), retry_in=round(delay, 2)
            )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), delay)


class _Connection:
    """One MQTT connection's manual PUBACKs (see ``_serve``)."""

    def __init__(self, client: aiomqtt.Client) -> None:
        self.paho = client._client
        self.open = True

    def acker(self, mid: int, qos: int) -> Callable[[], object] | None:
        """What acknowledges the message ``mid`` (None for QoS 0: nothing to send)."""
        if qos == 0:
            return None

        def ack() -> None:
            # Only on the connection it came by: after a reconnect the broker sends it
            # again (a packet id of an old connection may name another message now).
            if self.open:
                self.paho.ack(mid, qos)

        return ack


async def _session(records: Records, client: aiomqtt.Client, stop: asyncio.Event) -> None:
    flushing = asyncio.Lock()  # the consumer and the ticker both flush: one at a time
    connection = _Connection(client)

    async def flush() -> None:
        async with flushing:
            while records.outbox:
                table, payload = records.outbox[0]
                await client.publish(
                    integrity_topic(table), json.dumps(payload).encode(), qos=1, retain=True
                )
                records.outbox.pop(0)  # only once published: a lost connection keeps it

    async def send(asks: list[Resend]) -> None:
        for ask in asks:
            # At records' own level (mqtt-api.md 1.4): its budget, not the screens'.
            topic = ask.topic_for(records.settings.mqtt_user)
            await client.publish(topic, ask.payload(OPERATOR), qos=1)

    async def ticker() -> None:
        while True:
            await send(records.tick(time.monotonic()))
            await flush()
            await asyncio.sleep(records.settings.tick)

    async def consume() -> None:
        async for message in client.messages:
            payload = message.payload
            data = payload if isinstance(payload, bytes) else str(payload).encode()
            asks = records.handle(
                message.topic.value,
                data,
                time.monotonic(),
                retained=bool(message.retain),
                resent=resent_mark(message),
                ack=connection.acker(message.mid, message.qos),
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
        if stop.is_set():
            # Stopping: what waits is stored and acknowledged before the connection closes
            # (bounded: a store that is down leaves it to the broker).
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(records.idle.wait(), records.settings.settle)
    finally:
        connection.open = False
        # Cancelled again until they end (contract.tasks): a ticker that lost its
        # cancellation to aiomqtt's publish ran on (seen: a stop that hung in a test).
        await cancel_and_wait(tasks)
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
