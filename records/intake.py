"""What the records service decides (``records.service`` is the I/O around it): no
connection, no broker; the clocks are attributes a test replaces.

``Intake`` takes what the broker delivers (``handle``) and what time brings (``tick``) and
decides: the feed's events (``contract.feed``) into the items the store is to write
(messages, gaps, backfill jobs: ``pending``), the tables first seen and the gaps too long
for the feed that start a backfill (``records.backfill``), the resend requests to publish,
the batches a transaction writes (``take``: their bounds, the positions that go with them,
the acknowledgements they release), what a written batch means once the store answered
(``written``: what was new, counted by the tables' watches, and the integrity alarms to
publish, said once: ``outbox``), what a new connection writes again (``again``), the
warnings about what was dropped (at most one a table and reason a minute) and the figures
of ``status``. ``records.service.Records`` adds the store: it writes what ``take`` gives
and hands the store's answers back.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import structlog

from contract.feed import RESEND_TOPIC, Event, Feed, Gap, Message, Other, Refused, Resend
from contract.payloads import PayloadError
from contract.topics import Topic, is_request
from metrics.settings import MetricsSettings
from records import backfill as bf
from records.errors import MessageError
from records.integrity import Finding
from records.messages import Message as Stored
from records.messages import parse, released
from records.observe import GamingDay, TableWatch
from records.publish import integrity_payload
from records.store import Item, Missing, Operation

log = structlog.get_logger("lammer.records")

CLIENT_ID: Final = "lammer-records"

WATCHED: Final = tuple(
    topic.value
    for topic in (
        Topic.INFO,
        Topic.COVER_ALL_RESULT,
        Topic.BUST_BONUS_RESULT,
        Topic.CRAPS_RESULT,
        Topic.CRAPS_REVERSAL,
        Topic.CRAPS_ROLL,
    )
)
"""The topics the integrity watches count (``records.observe``)."""

BATCH: Final = 200
"""Messages a transaction stores at most (docs/floor/records.md: the figures)."""
WARN_EVERY: Final = 60.0
"""Seconds at least between two "message dropped" lines of one table and kind of reason: a
flood of junk must not flood the log (the counts in the next line say how many came)."""
WARNED_MAX: Final = 1024
"""Tables and kinds whose last warning is remembered: a publisher naming ever new tables
costs no more memory than this."""
MANY_TABLES: Final = "*"
"""The table a warning names once ``WARNED_MAX`` others were warned of within the minute."""
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


def utc_now() -> datetime:
    """The current time, in UTC."""
    return datetime.now(UTC)


def stamp(when: datetime) -> str:
    """``when`` (UTC) as the contract writes a time."""
    return when.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def now_ts() -> str:
    """The current time as the contract writes it."""
    return stamp(utc_now())


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


Result = list[tuple[int, int]] | bool
"""The store's answer for one item of a batch (``Store.write_batch``): a message, whether
it was new; a ``Missing``, the (from, to) ranges recorded as gaps."""


def table_of(base: str) -> str:
    """The table id of a base topic (its last level)."""
    return base.rsplit("/", 1)[-1]


class Intake:
    """The service's state and decisions without the store: the feed, what waits to be
    stored, the backfills and one watch per table (the module docstring)."""

    def __init__(
        self, settings: Settings, *, positions: dict[str, int], jobs: list[bf.Job]
    ) -> None:
        """``positions``: the feed's positions as the store keeps them; ``jobs``: the
        backfills an earlier run left."""
        if settings.batch < 1:
            raise ValueError("a batch holds one message at least")
        self.settings = settings
        self.positions = positions
        """The feed's positions as the store keeps them (committed)."""
        self.feed = Feed(
            start=self.positions,
            wait=settings.resend_wait,
            timeout=settings.resend_timeout,
            ident="records",
        )
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
        """The service's clock (seconds, monotonic): the integrity topic's refresh and what
        a new connection writes again."""
        self.wall: Callable[[], datetime] = utc_now
        """The wall clock (UTC): the integrity topic's ``ts``, a backfill's first gaming
        day, when a table's newest message was stored."""
        self.outbox: list[tuple[str, dict[str, Any]]] = []
        """Integrity topics to publish: (table, payload), oldest first."""
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
        reconnect (``again``)."""
        self._recent_items = 0
        self.rewritten = 0
        self._backfilled: set[tuple[str, int]] = set()
        """(table, seq) of the backfill's messages not yet committed: the watch counts
        them as they are stored and evaluates once a batch, not once each."""
        self._warned: dict[tuple[str, str], float] = {}

    def replay_rows(self, rows: Iterable[tuple[str, str, Any]]) -> Counter[str]:
        """Every table's watch rebuilt from the store's messages of ``WATCHED`` topics
        (``rows``: table, topic, payload, in seq order); those the contract refuses, by
        table, topic and what is wrong (``replayed`` says it)."""
        refused: Counter[str] = Counter()
        for table, topic, payload in rows:
            try:
                self._watch(table).replay(topic, payload)
            except PayloadError as exc:
                refused[f"{table} {topic}: {exc.detail[:200]}"] += 1
        return refused

    def replayed(self, refused: Counter[str]) -> None:
        """After ``replay_rows``: what was refused said once, and every table's integrity
        topic queued, whatever was published before (the floor's picture at start)."""
        if refused:
            # Stored under a looser contract than this one (the store checks every message
            # as it writes it): not counted, said once, not once a row.
            log.warning("stored messages not replayed", count=refused.total(), first=min(refused))
        for table, watch in self.watches.items():
            self._integrity(table, watch.evaluate(stamp(self.wall())), force=True)

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
            if is_request(rel):
                # Requests carry no seq and are not the table's: kept for their operator
                # (not the resend asks, ours or a display's, bare or at a user's own level
                # (mqtt-api.md 1.4): they decide nothing).
                if rel != RESEND_TOPIC and not rel.startswith(RESEND_TOPIC + "/"):
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
                    self._queue(released(table_of(event.table), event))
                case Other():
                    self._keep(table_of(event.table), event.topic, event.payload, now)
                case Gap() if event.reason in ("unanswered", "overflow") and self._backfills():
                    # Too long for the feed (the service was away longer than the broker
                    # kept its queue): asked from the journal, paced (records.backfill).
                    self._start(
                        event.table, top=event.to_seq, floor=event.from_seq, reason=bf.GAP, now=now
                    )
                case Gap():
                    reason = f"{event.reason}: {GAP_REASONS.get(event.reason, event.reason)}"
                    table = table_of(event.table)
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
                    self._warn(table_of(event.table), reason, now, key=event.reason)
        return asks

    def _backfills(self) -> bool:
        return self.settings.backfill_days > 0

    def _first_seen(self, event: Message, now: float) -> None:
        """The first live message of a table no earlier run saw: what the table published
        before it (up to its ``prev_seq``) is asked from its journal."""
        if event.retained or event.table in self._known:
            return
        self._known.add(event.table)
        top = event.parsed.prev_seq
        if self._backfills() and top is not None:
            self._start(event.table, top=top, floor=1, reason=bf.FIRST_SEEN, now=now)

    def _start(self, base: str, *, top: int, floor: int, reason: str, now: float) -> None:
        since = bf.day_start(self.settings.day, self.wall(), self.settings.backfill_days)
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
            self._warn(table, str(exc), now, key=exc.kind)
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

    def written(self, batch: Batch, results: list[Result]) -> None:
        """The store wrote ``batch`` in one transaction (``results``, one an item): count
        what was new, feed it to the watches and queue the alarms that changed (blocking
        callers: the writer's thread)."""
        self.batches += 1
        stored = 0
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
            stored += 1
            newest[item.table] = item.ts
            if item.topic in WATCHED:
                families = self._watch(item.table).feed(item.body)
                if families and (item.table, item.seq) in self._backfilled:
                    kinds, latest = later.setdefault(item.table, (set(), item.ts))
                    kinds.update(families)
                    later[item.table] = (kinds, max(latest, item.ts))
                elif families:
                    self._integrity(item.table, self._watch(item.table).evaluate(item.ts, families))
        if newest:
            when = self.wall().timestamp()
            self.stored_ts = {**self.stored_ts, **{t: (ts, when) for t, ts in newest.items()}}
        # Counted after the times: a scrape, which reads the count first, never sees a
        # message counted whose time is not yet there.
        self.stored += stored
        for table, (kinds, latest) in later.items():
            self._integrity(table, self._watch(table).evaluate(latest, sorted(kinds)))
        for item in batch.items:
            if isinstance(item, Stored):
                self._backfilled.discard((item.table, item.seq))

    def committed(self, batch: Batch) -> None:
        """After the batch committed, in the event loop: the positions are the store's, and the
        messages the batch released are acknowledged to the broker."""
        self.positions.update(batch.positions or {})
        for ack in batch.acks:
            ack.send()

    def _remember(self, items: list[Item]) -> None:
        """Keep what a committed batch wrote, as ``again`` gives it to write again: messages,
        gaps and backfill jobs, all idempotent (not an availability or a request: written
        again, each would be a row more)."""
        now = self.clock()
        kept: list[Item] = [i for i in items if isinstance(i, Stored | Missing | Operation)]
        if kept:
            self.recent.append((now, kept))
            self._recent_items += len(kept)
        while self.recent and (
            self.recent[0][0] < now - RECENT_SECONDS or self._recent_items > RECENT_ITEMS
        ):
            self._recent_items -= len(self.recent.popleft()[1])

    def again(self) -> tuple[list[Item], dict[str, int] | None] | None:
        """What a new connection writes again: what was committed in the last
        ``RECENT_SECONDS``, and the committed positions; None when there is nothing."""
        items = [item for _, batch in self.recent for item in batch]
        if items or self.positions:
            return items, self.positions or None
        return None

    def rewrote(self, items: list[Item], results: list[Result]) -> int:
        """The store wrote ``items`` again (``again``): how many of its messages were new,
        lost by the server that answers now (counted in ``rewritten``)."""
        lost = sum(r is True for i, r in zip(items, results, strict=True) if isinstance(i, Stored))
        self.rewritten += lost
        return lost

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
        self.outbox.append((table, integrity_payload(table, findings, stamp(self.wall()))))

    def _warn(self, table: str, reason: str, now: float, *, key: str) -> None:
        """One line per table and kind of reason (``key``, from a fixed few) each
        ``WARN_EVERY`` at most, with the counts so far. The tables remembered are bounded
        (``WARNED_MAX``): past that, one line a minute speaks for every other table."""
        seen = (table, key)
        if seen not in self._warned and len(self._warned) >= WARNED_MAX:
            self._warned = {k: t for k, t in self._warned.items() if now - t < WARN_EVERY}
            if len(self._warned) >= WARNED_MAX:
                seen = (MANY_TABLES, key)
        last = self._warned.get(seen)
        if last is None or now - last >= WARN_EVERY:
            self._warned[seen] = now
            log.warning(
                "message dropped",
                table=seen[0],
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
