"""``lammer records run``: the floor's records service (the I/O around ``records.intake``).

One MQTT connection as the user ``records`` (a persistent session with a stable client id:
what tables publish while the service restarts waits for it on the broker), subscribed to
``<prefix>/+/#`` for each prefix; one PostgreSQL connection. Each message is checked
(``records.messages``), stored once (``records.store``), counted by its table's watch
(``records.observe``) and, when a table's alarms change, the table's integrity topic is
published again (``records.publish``, retained, QoS 1). Checked first: the feed admits a
message only once the contract's parse accepts it (``contract.feed.admit``), so one it
refuses (wrong types, an oversized field, another table's id, an unknown topic, a ``seq``
that is not a positive integer) never takes a seq from the table's genuine message; it is
logged (once per table and reason a minute) and counted (``Records.status``). Order,
duplicates and gaps are ``contract.feed.Feed``'s, the contract's one subscriber library:
it releases each table's messages once and in seq order, asks the table for what is
missing (``request/resend``, published here as the operator ``records``) and gives up on
what cannot come with a ``Gap`` the store records with its reason. Its positions are
kept in the store, so a restart asks for what came meanwhile. What came before a table was
first seen, and a gap too long for the feed, is asked from the table's journal by
``records.backfill``, paced; the messages it brings are checked and stored like the rest,
never through the feed.

What it decides (which items to store, which tables to backfill, the resend requests, the
batches' bounds, the alarms to publish, the warnings and the counts) is
``records.intake.Intake``'s, without a connection (tested without a database or a broker:
``tests/records/test_intake.py``); ``Records`` here adds the store's calls (the replay at
start, a batch's transaction, a new connection and what it writes again), and the rest of
this module is the broker and the tasks.

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
restarts it, and the broker keeps what was not acknowledged meanwhile. On every new
connection the last minute's batches are written again (``RECENT_SECONDS``): with a
multi-host DSN and ``target_session_attrs=read-write`` the new connection may reach a
standby promoted without the old primary's last commits.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import time
from collections.abc import Callable, Sequence
from typing import Any, Final

import aiomqtt
import psycopg
import structlog

from contract.feed import Resend
from contract.floor import integrity_topic
from contract.nodes import Nodes
from contract.session import FLOOR_KEEPALIVE, observe_disconnect
from contract.tasks import cancel_and_wait
from foundation.backoff import DEFAULT_INITIAL, DEFAULT_MAXIMUM, Backoff
from foundation.tls import client_context
from metrics.endpoint import MetricsServer
from records import backfill as bf
from records.errors import StoreUnreachable
from records.intake import WATCHED, Ack, Batch, Intake, Settings
from records.metrics import records_registry
from records.migrate import migrate
from records.store import Store, refused

log = structlog.get_logger("lammer.records")

OPERATOR: Final = "records"
"""The ``operator`` of the service's resend requests (every request names one)."""

_REPLAY = """
SELECT table_id, topic, payload FROM message
WHERE topic = ANY(%s) ORDER BY table_id, seq
"""

STORE_BACKOFF: Final = Backoff(initial=0.2, maximum=5.0)
"""Seconds before a batch is written again after the store went away: 0.4 s doubling to
5 s, jittered (``foundation.backoff``); each try first opens a new connection."""
BROKER_BACKOFF: Final = Backoff(initial=DEFAULT_INITIAL, maximum=DEFAULT_MAXIMUM)
"""Seconds before the next round once every broker node failed, as every lammer link."""


class Records(Intake):
    """``records.intake.Intake`` on a store: what it decides, written by one connection
    (the store's calls only: the rest is the intake's)."""

    def __init__(self, settings: Settings, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn
        self.store = Store(conn)
        super().__init__(settings, positions=self.store.positions(), jobs=bf.load(conn))

    def replay(self) -> None:
        """Rebuild every table's watch from the store, and queue its integrity topic."""
        # A server-side cursor: the store may hold months of a floor, streamed, not loaded.
        with self.conn.transaction(), self.conn.cursor(name="replay") as cursor:
            cursor.itersize = 10_000
            cursor.execute(_REPLAY, (list(WATCHED),))
            refused = self.replay_rows(cursor)
        self.replayed(refused)

    def commit(self, batch: Batch) -> None:
        """Store a batch in one transaction, then count what was new (blocking: a thread).
        Raises ``StoreUnreachable`` (write it again) or ``StoreError``."""
        results = (
            self.store.write_batch(batch.items, batch.positions)
            if batch.items or batch.positions
            else []
        )
        self.written(batch, results)

    def reconnect(self) -> None:
        """A new database connection in place of a lost one (blocking: a thread); on it,
        what was committed in the last ``RECENT_SECONDS`` is written again (``again``): the
        server answering now may be a standby promoted after the primary died, without the
        primary's last commits (idempotent by (table, seq) where nothing was lost)."""
        with contextlib.suppress(psycopg.Error):
            self.conn.close()
        try:
            conn = _connect(self.settings.dsn)
            conn.autocommit = False
        except psycopg.Error as exc:
            raise refused(exc, "a new connection") from exc
        self.conn = self.store.conn = conn
        again = self.again()
        if again is not None:
            items, positions = again
            lost = self.rewrote(items, self.store.write_batch(items, positions))
            log.info(
                "store reconnected",
                written_again=len(items),
                were_lost=lost,
                server=_server(conn),
            )


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
        if records is not None:
            log.info("records stopped", **records.status())
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
                delay = STORE_BACKOFF.delay(attempt, rng)
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


def _server(conn: psycopg.Connection[Any]) -> str:
    """The host and port a connection reached (of a multi-host DSN: the primary)."""
    info = conn.info
    return f"{info.host}:{info.port}"


def _connect(dsn: str) -> psycopg.Connection[Any]:
    return psycopg.connect(dsn, autocommit=True)


async def _serve(records: Records, stop: asyncio.Event) -> None:
    s = records.settings
    rng = random.Random()  # noqa: S311  reconnect jitter, not a secret
    nodes = Nodes([(s.mqtt_host, s.mqtt_port), *s.other_nodes], rng, BROKER_BACKOFF.delay)
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
                keepalive=FLOOR_KEEPALIVE,
                tls_context=client_context(s.mqtt_ca_file),
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
            # MQTT 3.1.1 (a floor's nats-server speaks no other): a resent copy's MQTT 5
            # mark never comes here, and the feed expects that (contract.feed, "The end
            # of a stream": the answer released after the copy ends the quiet period).
            asks = records.handle(
                message.topic.value,
                data,
                time.monotonic(),
                retained=bool(message.retain),
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
