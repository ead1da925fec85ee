"""The server's picture of the floor: the latest retained message of every table's topics.

``Store.apply(topic, payload)`` takes one MQTT message as received and returns the text to
push to the browsers (or None when nothing changes). It keeps, per table, the latest
message of each retained topic, ``availability``, and the last few messages of the
non-retained topics (so a page opened between two rolls still shows the last roll), so a
browser that connects gets the whole picture at once (``snapshot``), then every update.

Ordering is ``contract.feed``'s (the project's one seq-order-and-dedup memory):
``Store.receive(topic, payload, now=..., retained=...)`` gives every table's message to the
store's ``Feed``, which releases each ``seq`` once, in order, holds back what came too early,
asks the table to resend a gap (the ``Resend`` actions collect in ``resends``, for the
follower to publish as the ``display`` user, which may publish ``request/resend``) and says
what will not come: a ``Gap``, kept per table and pushed to the pages (the pit shows it to
staff; it is never dropped silently). ``tick(now)`` lets the feed's waits run out.
``apply(topic, payload)`` draws one message the feed released: a retained topic never goes
back to an older ``seq``. A zero-length retained message deletes a retained state (MQTT
3.1.1, 3.3.1.3): the pages are told the topic is empty.

The integrity alarms (``lammer-floor/integrity/<table>``, contract.floor, retained):
``lammer records`` publishes a table's when its outcomes stop looking like the par sheet,
and an empty list (or deletes the retained message) when they look right again. The
latest of each table is kept and sent to the pages (the pit draws each on its table, with
its sentence and since when); one that does not validate is dropped and counted.

The software status (``lammer-floor/software/<table>``, contract.floor, retained, from
``lammer authenticate``): the latest of each table is kept and sent to the pages,
which show a ``SOFTWARE`` alarm (with the first component that differs) for a table whose
status is not ``approved``.

The floor's bridges (``lammer-floor/bridge/<controller>``, contract.floor): ``1`` connected,
``0`` lost (the bridge's will). With ``controllers`` (controller -> table ids, from the
floor-controller declarations) the pit marks a lost controller's tables "controller
unreachable since hh:mm"; ``since`` is when this server learned it (for a ``0`` found
retained at connect: at the latest then).

Every payload is checked with the contract by the feed itself before it can take a seq
(``contract.feed.admit``: the topic one the daemon publishes, the payload valid for it and
naming its table); one refused is dropped, counted by reason in ``dropped`` (and in
``refused``, the feed's count) and logged (rate-limited), and never reaches a browser.
The browser receives one JSON text per message::

    {"t": "msg", "table": "t1", "topic": "craps/board", "retained": true, "payload": {...}}
    {"t": "gap", "table": "t1", "from_seq": 12, "to_seq": 14, "reason": "unanswered", "at": ...}
    {"t": "bridge", "controller": "ctl1", "connected": false, "since": ..., "tables": [...]}
    {"t": "integrity", "table": "t1", "ts": "...", "alarms": [{"message": ..., ...}]}
    {"t": "software", "table": "t1", "ts": "...", "status": "unknown", "differs": ..., ...}

(``at`` and ``since``: Unix seconds.)

``payload`` is the object as parsed (``contract.payloads.relayed``: the fields it came
with, unknown ones included, in the contract's form), ``"online"``/``"offline"`` for
``availability``, or null for a retained state that was deleted.
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter, deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

import structlog
from pydantic import ValidationError

from contract.feed import Event, Feed, Gap, Message, Other, Refused, Resend
from contract.floor import (
    BRIDGE_STATUS_ROOT,
    INTEGRITY_ROOT,
    SOFTWARE_ROOT,
    IntegrityBody,
    SoftwareBody,
)
from contract.payloads import (
    TABLE_ID_PATTERN,
    TOPICS,
    Envelope,
    PayloadError,
    PayloadModel,
    decode,
    describe,
    parse,
    relayed,
)
from contract.topics import HISTORY, HISTORY_TOPICS, is_exchange

log = structlog.get_logger("lammer.web")

MAX_TABLES: Final = 2000
RECENT: Final = 12
"""Messages kept per non-retained topic for a page that connects later."""
GAPS: Final = 20
"""Gaps kept per table for a page that connects later (the newest)."""
MAX_RESENDS: Final = 256
"""Resend requests waiting for the follower at most (the feed asks again when they are lost)."""
_TABLE_ID = re.compile(TABLE_ID_PATTERN)


def _iso(at: float) -> str:
    """A wall-clock time as the contract writes ``ts`` (UTC, milliseconds, ``Z``)."""
    stamp = datetime.fromtimestamp(at, tz=UTC)
    return stamp.strftime("%Y-%m-%dT%H:%M:%S.") + f"{stamp.microsecond // 1000:03d}Z"


def _floor_body(model: type[PayloadModel], payload: bytes, table: str) -> dict[str, Any]:
    """A floor topic's payload (an integrity or a software status) parsed with the contract
    (``PayloadError`` if it is not one, or names another table or none): what it came with,
    in the contract's form."""
    data = decode(payload)
    if data.get("table") != table:
        raise PayloadError("wrong_table", f"names table {str(data.get('table'))[:80]!r}")
    try:
        return relayed(model.model_validate(data))
    except ValidationError as exc:
        raise PayloadError("invalid", describe(exc)) from None


def wire(kind: str, **fields: Any) -> str:
    """One message to the browsers, as compact JSON text."""
    return json.dumps({"t": kind, **fields}, separators=(",", ":"), allow_nan=False)


@dataclass
class TableEntry:
    """What the server knows of one table."""

    table: str
    availability: str | None = None
    availability_text: str | None = None
    availability_since: str | None = None
    retained: dict[str, tuple[int, str]] = field(default_factory=dict)
    recent: dict[str, deque[tuple[int, str]]] = field(default_factory=dict)
    history: dict[str, deque[tuple[int, str]]] = field(default_factory=dict)
    last_heard: float = 0.0
    gaps: deque[str] = field(default_factory=lambda: deque(maxlen=GAPS))

    def snapshot(self) -> list[str]:
        """Every message a page needs to draw this table now, oldest ``seq`` first, then
        the gaps."""
        out = [] if self.availability_text is None else [self.availability_text]
        items = list(self.retained.values())
        for messages in self.recent.values():
            items.extend(messages)
        for messages in self.history.values():
            items.extend(messages)
        # A result is in history and in retained (or recent): sent once, oldest first.
        out.extend(text for _, text in sorted(dict(items).items()))
        out.extend(self.gaps)
        return out


@dataclass
class BridgeEntry:
    """A controller's floor bridge as last heard: connected, and since when (Unix s)."""

    controller: str
    connected: bool
    since: float
    text: str


class Store:
    """Every table under ``<prefix>/`` as the browsers are shown it."""

    def __init__(
        self,
        prefix: str,
        *,
        max_tables: int = MAX_TABLES,
        feed: Feed | None = None,
        controllers: Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        self.prefix = prefix
        self.max_tables = max_tables
        self.tables: dict[str, TableEntry] = {}
        self.dropped: Counter[str] = Counter()
        self.ignored: Counter[str] = Counter()
        self.feed = feed if feed is not None else Feed(max_tables=max_tables)
        """The seq order and gap filling of every table (keyed ``<prefix>/<table id>``)."""
        self.resends: deque[Resend] = deque(maxlen=MAX_RESENDS)
        """Resend requests the feed asked for, to publish (``Resend.topic``, ``payload``)."""
        self.controllers = {name: list(tables) for name, tables in (controllers or {}).items()}
        self.bridges: dict[str, BridgeEntry] = {}
        self.integrity: dict[str, str] = {}
        """Table id -> the text of its integrity alarms (only tables that have some)."""
        self.software: dict[str, str] = {}
        """Table id -> the text of its software status (``lammer authenticate``'s)."""
        self.gaps = 0
        """Gaps reported since start (every table)."""
        self._last_log = 0.0

    def receive(
        self, topic: str, payload: bytes, *, now: float, retained: bool = False
    ) -> list[tuple[str | None, str]]:
        """Take one MQTT message as received, through the feed: ``(table, text)`` for the
        browsers, in order (table None: for every page, a bridge's status)."""
        if topic.startswith(BRIDGE_STATUS_ROOT):
            return self._bridge(topic[len(BRIDGE_STATUS_ROOT) :], payload)
        if topic.startswith(INTEGRITY_ROOT):
            return self._integrity(topic[len(INTEGRITY_ROOT) :], payload)
        if topic.startswith(SOFTWARE_ROOT):
            return self._software(topic[len(SOFTWARE_ROOT) :], payload)
        head = self.prefix + "/"
        if not topic.startswith(head):
            self.ignored["other_prefix"] += 1
            return []
        table, _, sub = topic[len(head) :].partition("/")
        if not sub or not _TABLE_ID.match(table):
            self._drop("bad_topic", topic, "not <prefix>/<table id>/<topic>")
            return []
        if table not in self.tables and len(self.tables) >= self.max_tables:
            self._drop("too_many_tables", topic, f"more than {self.max_tables}")
            return []
        # The feed checks every payload with the contract before it can take a seq
        # (contract.feed.admit): another client's junk on an open broker, or a forged seq
        # ahead of the table's, comes back as ``Refused`` and is dropped and counted here.
        events = self.feed.receive(head + table, sub, payload, now=now, retained=retained)
        return self._handle(events)

    def tick(self, now: float) -> list[tuple[str | None, str]]:
        """Time passed: the feed asks for gaps whose wait is over, or gives them up."""
        return self._handle(self.feed.tick(now))

    def _handle(self, events: Sequence[Event]) -> list[tuple[str | None, str]]:
        out: list[tuple[str | None, str]] = []
        for event in events:
            match event:
                case Message():
                    # Parsed once, by the feed's check: drawn from its typed message.
                    topic = f"{event.table}/{event.topic}"
                    update = self.apply(topic, event.payload, parsed=event.parsed)
                    if update is not None:
                        out.append(update)
                case Other():
                    update = self.apply(f"{event.table}/{event.topic}", event.payload)
                    if update is not None:
                        out.append(update)
                case Resend():
                    self.resends.append(event)
                case Gap():
                    out.append(self._gap(event))
                case Refused():
                    self._drop(event.reason, f"{event.table}/{event.topic}", event.detail)
        return out

    def _gap(self, gap: Gap) -> tuple[str, str]:
        table = gap.table[len(self.prefix) + 1 :]
        self.gaps += 1
        text = wire(
            "gap",
            table=table,
            from_seq=gap.from_seq,
            to_seq=gap.to_seq,
            reason=gap.reason,
            at=time.time(),
        )
        self._entry(table).gaps.append(text)
        log.warning(
            "messages will not come",
            table=table,
            from_seq=gap.from_seq,
            to_seq=gap.to_seq,
            reason=gap.reason,
        )
        return table, text

    def _bridge(self, controller: str, payload: bytes) -> list[tuple[str | None, str]]:
        if not controller or "/" in controller or len(controller) > 64:
            self._drop("bad_topic", BRIDGE_STATUS_ROOT + controller[:64], "not a controller")
            return []
        if payload not in (b"0", b"1"):
            if not payload:  # the retained status deleted: nothing known any more
                self.bridges.pop(controller, None)
            return []
        connected = payload == b"1"
        entry = self.bridges.get(controller)
        if entry is not None and entry.connected == connected:
            return []  # the same state, again (a node's retained copy after a move)
        if entry is None and len(self.bridges) >= self.max_tables:
            return []
        since = time.time()
        text = wire(
            "bridge",
            controller=controller,
            connected=connected,
            since=since,
            tables=self.controllers.get(controller, []),
        )
        self.bridges[controller] = BridgeEntry(controller, connected, since, text)
        if not connected:
            log.warning("controller unreachable", controller=controller)
        return [(None, text)]

    def _integrity(self, table: str, payload: bytes) -> list[tuple[str | None, str]]:
        """A table's integrity alarms (retained; an empty list or no payload: none)."""
        topic = INTEGRITY_ROOT + table[:64]
        if not _TABLE_ID.match(table):
            self._drop("bad_topic", topic, "not lammer-floor/integrity/<table id>")
            return []
        if table not in self.integrity and len(self.integrity) >= self.max_tables:
            self._drop("too_many_tables", topic, f"more than {self.max_tables}")
            return []
        alarms: list[dict[str, Any]] = []
        ts = None
        if payload:
            try:
                data = _floor_body(IntegrityBody, payload, table)
            except PayloadError as exc:
                self._drop(exc.reason, topic, exc.detail)
                return []
            alarms, ts = data["alarms"], data["ts"]
        if not alarms:
            if self.integrity.pop(table, None) is None:
                return []  # nothing was drawn: nothing to clear
            return [(table, wire("integrity", table=table, ts=ts, alarms=[]))]
        text = wire("integrity", table=table, ts=ts, alarms=alarms)
        if self.integrity.get(table) == text:
            return []  # the same, again (a node's retained copy after a move)
        self.integrity[table] = text
        log.warning("integrity alarm", table=table, alarms=[a["message"] for a in alarms])
        return [(table, text)]

    def _software(self, table: str, payload: bytes) -> list[tuple[str | None, str]]:
        """A table's software status (retained; no payload: none known)."""
        topic = SOFTWARE_ROOT + table[:64]
        if not _TABLE_ID.match(table):
            self._drop("bad_topic", topic, "not lammer-floor/software/<table id>")
            return []
        if table not in self.software and len(self.software) >= self.max_tables:
            self._drop("too_many_tables", topic, f"more than {self.max_tables}")
            return []
        if not payload:
            if self.software.pop(table, None) is None:
                return []
            return [(table, wire("software", table=table, status=None))]
        try:
            data = _floor_body(SoftwareBody, payload, table)
        except PayloadError as exc:
            self._drop(exc.reason, topic, exc.detail)
            return []
        text = wire("software", **data)
        if self.software.get(table) == text:
            return []
        self.software[table] = text
        if data["status"] != "approved":
            log.warning("software not approved", table=table, message=data["message"])
        return [(table, text)]

    def apply(  # noqa: C901  the relay's admission steps in order, each an early return
        self, topic: str, payload: bytes, *, parsed: Envelope | None = None
    ) -> tuple[str, str] | None:
        """Draw one message the feed released (``receive``): ``(table, text for the
        browsers)``, or None. No seq memory of its own but the retained topics' (one
        never goes back to an older ``seq``): the feed already dropped what was seen.
        ``parsed``: the feed's typed message of ``payload`` (``Message.parsed``), not
        parsed again; without it, ``payload`` is parsed here."""
        head = self.prefix + "/"
        if not topic.startswith(head):
            self.ignored["other_prefix"] += 1
            return None
        table, _, sub = topic[len(head) :].partition("/")
        if not sub or not _TABLE_ID.match(table):
            return self._drop("bad_topic", topic, "not <prefix>/<table id>/<topic>")
        if is_exchange(sub):
            self.ignored["request_response"] += 1
            return None
        if sub != "availability" and sub not in TOPICS:
            # The contract lets the daemon add topics: not an error, just not drawn.
            self.ignored["unknown_topic"] += 1
            return None
        entry = self.tables.get(table)
        if entry is None:
            if len(self.tables) >= self.max_tables:
                return self._drop("too_many_tables", topic, f"more than {self.max_tables}")
            entry = None
        if sub == "availability":
            return self._availability(entry, table, topic, payload)
        retained = TOPICS[sub][1]
        if not payload:
            if not retained or entry is None or sub not in entry.retained:
                return None
            del entry.retained[sub]
            text = wire("msg", table=table, topic=sub, retained=True, payload=None)
            return table, text
        try:
            message = parse(sub, payload, table=table) if parsed is None else parsed
        except PayloadError as exc:
            return self._drop(exc.reason, topic, exc.detail)
        data = relayed(message)
        try:
            text = wire("msg", table=table, topic=sub, retained=retained, payload=data)
        except ValueError as exc:  # a number JSON cannot carry, found only now
            return self._drop("not_json", topic, str(exc))
        entry = self._entry(table)
        seq = message.seq
        if retained and seq <= entry.retained.get(sub, (0, ""))[0]:
            return None  # older than what is drawn
        entry.last_heard = time.time()
        if retained:
            entry.retained[sub] = (seq, text)
        else:
            entry.recent.setdefault(sub, deque(maxlen=RECENT)).append((seq, text))
        if sub in HISTORY_TOPICS:
            entry.history.setdefault(sub, deque(maxlen=HISTORY)).append((seq, text))
        return table, text

    def _entry(self, table: str) -> TableEntry:
        entry = self.tables.get(table)
        if entry is None:
            entry = self.tables[table] = TableEntry(table)
        return entry

    def _availability(
        self, entry: TableEntry | None, table: str, topic: str, payload: bytes
    ) -> tuple[str, str] | None:
        if not payload:
            if entry is None or entry.availability is None:
                return None
            entry.availability = entry.availability_text = entry.availability_since = None
            return table, wire(
                "msg", table=table, topic="availability", retained=True, payload=None
            )
        if payload not in (b"online", b"offline"):
            return self._drop("invalid", topic, "availability is neither online nor offline")
        entry = self._entry(table)
        value = payload.decode()
        now = time.time()
        entry.last_heard = now
        # "offline since hh:mm" on the pit: availability carries no time of its own, so the
        # server says when it first heard this value (kept while the value stays the same).
        if value != entry.availability or entry.availability_since is None:
            entry.availability_since = _iso(now)
        entry.availability = value
        text = wire(
            "msg",
            table=table,
            topic="availability",
            retained=True,
            payload=value,
            since=entry.availability_since,
        )
        entry.availability_text = text
        return table, text

    def _drop(self, reason: str, topic: str, detail: str) -> tuple[str, str] | None:
        """Count and log a dropped payload; None (nothing for the browsers)."""
        self.dropped[reason] += 1
        now = time.monotonic()
        if now - self._last_log >= 1.0:  # a flood must not flood the log too
            self._last_log = now
            log.warning(
                "payload dropped",
                topic=topic[:200],
                reason=reason,
                detail=detail[:200],
                dropped=sum(self.dropped.values()),
            )
        return None

    def snapshot(self, table: str | None = None) -> list[str]:
        """What a page that connects now is sent: one table's picture, or every table's."""
        if table is not None:
            entry = self.tables.get(table)
            integrity = [self.integrity[table]] if table in self.integrity else []
            software = [self.software[table]] if table in self.software else []
            return ([] if entry is None else entry.snapshot()) + integrity + software
        bridges = [entry.text for entry in self.bridges.values()]
        tables = [text for entry in self.tables.values() for text in entry.snapshot()]
        return bridges + tables + list(self.integrity.values()) + list(self.software.values())

    def counters(self) -> dict[str, Any]:
        """The drop and ignore counters, for the pit and ``/api/health``."""
        return {
            "dropped": dict(self.dropped),
            "dropped_total": sum(self.dropped.values()),
            "ignored": dict(self.ignored),
            "gaps": self.gaps,
            "duplicates_dropped": self.feed.dropped,
            "refused": dict(self.feed.refused),
            "refused_total": sum(self.feed.refused.values()),
        }
