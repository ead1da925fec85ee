"""``lammer records run``: the floor's records service (the I/O around the pure parts).

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
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import aiomqtt
import psycopg
import structlog

from contract.feed import Event, Feed, Gap, Message, Other, Refused, Resend
from contract.floor import integrity_topic
from contract.follow import resent_mark
from contract.nodes import Nodes
from contract.session import FLOOR_KEEPALIVE, observe_disconnect
from contract.tasks import cancel_and_wait
from foundation.backoff import DEFAULT_INITIAL, DEFAULT_MAXIMUM, Backoff
from foundation.tls import client_context
from metrics.endpoint import MetricsServer
from metrics.settings import MetricsSettings
from records import backfill as bf
from records.errors import MessageError, StoreUnreachable
from records.integrity import Finding
from records.messages import Message as Stored
from records.messages import parse
from records.metrics import records_registry
from records.migrate import migrate
from records.observe import GamingDay, TableWatch
from records.publish import integrity_payload
from records.store import Item, Missing, Operation, Store, refused

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
STORE_BACKOFF: Final = Backoff(initial=0.2, maximum=5.0)
"""Seconds before a batch is written again after the store went away: 0.4 s doubling to
5 s, jittered (``foundation.backoff``); each try first opens a new connection."""
BROKER_BACKOFF: Final = Backoff(initial=DEFAULT_INITIAL, maximum=DEFAULT_MAXIMUM)
"""Seconds before the next round once every broker node failed, as every lammer link."""
WARN_EVERY: Final = 60.0
"""Seconds at least between two "message dropped" lines of one table and kind of reason: a
flood of junk must not flood the log (the counts in the next line say how many came)."""
TOPIC_SHOWN: Final = 80
"""Characters of a refused message's topic in a log line (a topic may be 64 KiB long)."""

REFRESH: Final = 900.0
"""Seconds at least between two publications of a table's integrity topic whose alarms
stand unchanged and only their figures (hits, rounds) moved: 96 a day at most, no log
line (docs/floor/integrity.md)."""
RECENT_SECONDS: Final = 60.0
RECENT_ITEMS: Final = 50_000
"""What the service wrote in the last ``RECENT_SECONDS`` (``RECENT_ITEMS`` at most) is
written again on every new database connection (docs/floor/records.md, "A standby"): a
primary that died before its standby received its last commits (asynchronous streaming
replication) loses nothing the service acknowledged to the broker."""

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
    backfill_days: int = 1
    """Gaming days a backfill reaches back (``records.backfill``): 1, from the start of the
    current one; 0, no backfill."""
    backfill_tables: int = bf.TABLES
    """Tables backfilled at once."""


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
        jobs = bf.load(conn)
        self.backfill = bf.Backfill(
            jobs=jobs,
            max_tables=settings.backfill_tables,
            budget=bf.budget_for(settings.mqtt_user),
        )
        """What is asked from the tables' journals (``records.backfill``)."""
        self._known = set(self.positions) | {job.base for job in jobs}
        """Tables seen by an earlier run: no first-seen backfill."""
        self.watches: dict[str, TableWatch] = {}
        self.published: dict[str, list[tuple[str, str, str, str]]] = {}
        """Per table, the alarms last published: (bet, row, window, side)."""
        self.figures: dict[str, list[tuple[str, str, str, str, int, int]]] = {}
        """Per table, the figures last published: the alarms' hits and rounds."""
        self.refreshed: dict[str, float] = {}
        """Per table, when (``clock``) its integrity topic was last published."""
        self.clock: Callable[[], float] = time.monotonic
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
        self.recent: deque[tuple[float, list[Item]]] = deque()
        """The batches committed in the last ``RECENT_SECONDS``: written again after a
        reconnect (``reconnect``)."""
        self._recent_items = 0
        self.rewritten = 0
        self._backfilled: set[tuple[str, int]] = set()
        """(table, seq) of the backfill's messages not yet committed: the watch counts
        them as they are stored and evaluates once a batch, not once each."""
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
            elif self.backfill.claims(base, rel, payload, now):
                self._keep(table, rel, payload, now)  # below the feed's position: its own
                if self.pending and isinstance(last := self.pending[-1], Stored):
                    self._backfilled.add((last.table, last.seq))
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
                    self._first_seen(event, now)
                    self._keep(_table_of(event.table), event.topic, event.payload, now)
                case Other():
                    self._keep(_table_of(event.table), event.topic, event.payload, now)
                case Gap() if event.reason in ("unanswered", "overflow") and self._backfills():
                    # Too long for the feed (the service was away longer than the broker
                    # kept its queue): asked from the journal, paced (records.backfill).
                    self._start(
                        event.table, top=event.to_seq, floor=event.from_seq, reason=bf.GAP, now=now
                    )
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
                case Refused():
                    # The feed checked it first (contract.feed.admit): no seq taken, so
                    # the genuine message of that seq is still awaited and asked for.
                    self.dropped += 1
                    reason = f"{event.topic[:TOPIC_SHOWN]}: {event.reason}: {event.detail}"
                    self._warn(_table_of(event.table), reason, now, key=event.reason)
        return asks

    def _backfills(self) -> bool:
        return self.settings.backfill_days > 0

    def _first_seen(self, event: Message, now: float) -> None:
        """The first live message of a table no earlier run saw: what the table published
        before it (up to its ``prev_seq``) is asked from its journal."""
        if event.retained or event.table in self._known:
            return
        self._known.add(event.table)
        top = event.body.get("prev_seq")
        if self._backfills() and isinstance(top, int) and not isinstance(top, bool) and top >= 1:
            self._start(event.table, top=top, floor=1, reason=bf.FIRST_SEEN, now=now)

    def _start(self, base: str, *, top: int, floor: int, reason: str, now: float) -> None:
        since = bf.day_start(self.settings.day, datetime.now(UTC), self.settings.backfill_days)
        job = bf.Job(base=base, top=top, floor=floor, next_seq=top, since=since, reason=reason)
        for item in self.backfill.start(job, now):
            if isinstance(item, Resend):
                continue  # start asks nothing: the ticker does
            self._queue(item)

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
        for out in self.backfill.tick(now):
            if isinstance(out, Resend):
                asks.append(out)
            else:
                self._queue(out)
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
        self._remember(batch.items)
        later: dict[str, tuple[set[str], str]] = {}  # backfilled: evaluated once a batch
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
                if families and (item.table, item.seq) in self._backfilled:
                    kinds, latest = later.setdefault(item.table, (set(), item.ts))
                    kinds.update(families)
                    later[item.table] = (kinds, max(latest, item.ts))
                elif families:
                    self._integrity(item.table, self._watch(item.table).evaluate(item.ts, families))
        if newest:
            stamp = time.time()
            self.stored_ts = {**self.stored_ts, **{t: (ts, stamp) for t, ts in newest.items()}}
        for table, (kinds, latest) in later.items():
            self._integrity(table, self._watch(table).evaluate(latest, sorted(kinds)))
        for item in batch.items:
            if isinstance(item, Stored):
                self._backfilled.discard((item.table, item.seq))

    def committed(self, batch: Batch) -> None:
        """After ``commit``, in the event loop: the positions are the store's, and the
        messages the batch released are acknowledged to the broker."""
        self.positions.update(batch.positions or {})
        for ack in batch.acks:
            ack.send()

    def _remember(self, items: list[Item]) -> None:
        """Keep what a committed batch wrote, as ``reconnect`` writes it again: messages,
        gaps and backfill jobs, all idempotent (not an availability or a request: written
        again, each would be a row more)."""
        now = time.monotonic()
        kept: list[Item] = [i for i in items if isinstance(i, Stored | Missing | Operation)]
        if kept:
            self.recent.append((now, kept))
            self._recent_items += len(kept)
        while self.recent and (
            self.recent[0][0] < now - RECENT_SECONDS or self._recent_items > RECENT_ITEMS
        ):
            self._recent_items -= len(self.recent.popleft()[1])

    def reconnect(self) -> None:
        """A new database connection in place of a lost one (blocking: a thread); on it,
        what was committed in the last ``RECENT_SECONDS`` is written again: the server
        answering now may be a standby promoted after the primary died, without the
        primary's last commits (idempotent by (table, seq) where nothing was lost)."""
        with contextlib.suppress(psycopg.Error):
            self.conn.close()
        try:
            conn = _connect(self.settings.dsn)
            conn.autocommit = False
        except psycopg.Error as exc:
            raise refused(exc, "a new connection") from exc
        self.conn = self.store.conn = conn
        items = [item for _, batch in self.recent for item in batch]
        if items or self.positions:
            results = self.store.write_batch(items, self.positions or None)
            again = sum(
                r is True for i, r in zip(items, results, strict=True) if isinstance(i, Stored)
            )
            self.rewritten += again
            log.info(
                "store reconnected",
                written_again=len(items),
                were_lost=again,
                server=_server(conn),
            )

    def _integrity(self, table: str, findings: list[Finding], *, force: bool = False) -> None:
        """Publish ``table``'s integrity topic again when an alarm is raised, changes (its
        bet, row, window or side) or clears, and log it then: once, not at every result
        while the table stays in alarm (a log line per result would bury the change that
        matters). The figures of alarms that stand (the
        hits, the rounds) go on the topic again at most once per ``REFRESH`` seconds,
        without a log line. ``force``: publish whatever the last one was (the start)."""
        alarms: list[tuple[str, str, str, str]] = sorted(
            {(f.bet, f.row, f.window, f.side) for f in findings}
        )
        figures: list[tuple[str, str, str, str, int, int]] = sorted(
            (f.bet, f.row, f.window, f.side, f.observed, f.trials) for f in findings
        )
        before = self.published.get(table)
        now = self.clock()
        if not force and before == alarms:
            stale = self.figures.get(table) != figures
            if not stale or now - self.refreshed.get(table, -REFRESH) < REFRESH:
                return
        elif before != alarms and findings:
            log.warning(
                "integrity alarm",
                table=table,
                alarms=[f"{f.bet} {f.row} {f.window} {f.side}" for f in findings],
            )
        elif before != alarms and before:
            log.info("integrity alarms cleared", table=table)
        self.published[table] = alarms
        self.figures[table] = figures
        self.refreshed[table] = now
        self.outbox.append((table, integrity_payload(table, findings, now_ts())))

    def _warn(self, table: str, reason: str, now: float, *, key: str | None = None) -> None:
        """One line per table and kind of reason each ``WARN_EVERY`` at most, with the counts
        so far."""
        seen = (table, key or reason.split(":")[0])
        last = self._warned.get(seen)
        if last is None or now - last >= WARN_EVERY:
            self._warned[seen] = now
            log.warning(
                "message dropped",
                table=table,
                reason=reason,
                dropped=self.dropped,
                refused=sum(self.feed.refused.values()),
            )

    def status(self) -> dict[str, Any]:
        """What the service has done since it started: messages stored, messages dropped
        (refused by the contract before the feed, ``refused`` by reason, or not storable),
        transactions, what waits to be stored, and the tables it follows."""
        return {
            "stored": self.stored,
            "dropped": self.dropped,
            "refused": dict(self.feed.refused),
            "refused_total": sum(self.feed.refused.values()),
            "batches": self.batches,
            "pending": sum(not isinstance(i, Ack) for i in self.pending),
            "tables": len(self.feed.positions()),
        }


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
