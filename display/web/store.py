"""The server's picture of the floor: the latest retained message of every table's topics.

``Store.apply(topic, payload)`` takes one MQTT message as received and returns the text to
push to the browsers (or None when nothing changes). It keeps, per table, the latest
message of each retained topic, ``availability``, and the last few messages of the
non-retained topics (so a page opened between two rolls still shows the last roll), so a
browser that connects gets the whole picture at once (``snapshot``), then every update.

Ordering follows mqtt-api.md "Conventions": a ``seq`` already seen is ignored (a retained
state republished after a reconnect keeps its ``seq``), and a retained topic never goes
back to an older ``seq``. A zero-length retained message deletes a retained state (MQTT
3.1.1, 3.3.1.3): the pages are told the topic is empty.

Every payload is parsed with the contract (``contract.payloads.parse``); one that does not
validate is dropped,
counted by reason in ``dropped`` and logged (rate-limited), and never reaches a browser.
The browser receives one JSON text per message::

    {"t": "msg", "table": "t1", "topic": "craps/board", "retained": true, "payload": {...}}

``payload`` is the object as parsed (``contract.payloads.relayed``: the fields it came
with, unknown ones included, in the contract's form), ``"online"``/``"offline"`` for
``availability``, or null for a retained state that was deleted.
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any, Final

import structlog

from contract.payloads import TABLE_ID_PATTERN, TOPICS, PayloadError, parse, relayed

log = structlog.get_logger("lammer.web")

MAX_TABLES: Final = 2000
RECENT: Final = 12
"""Messages kept per non-retained topic for a page that connects later."""
_SEEN: Final = 4096
_TABLE_ID = re.compile(TABLE_ID_PATTERN)
_IGNORED_PREFIXES: Final = ("request/", "response/")


def wire(kind: str, **fields: Any) -> str:
    """One message to the browsers, as compact JSON text."""
    return json.dumps({"t": kind, **fields}, separators=(",", ":"), allow_nan=False)


@dataclass
class TableEntry:
    """What the server knows of one table."""

    table: str
    availability: str | None = None
    availability_text: str | None = None
    retained: dict[str, tuple[int, str]] = field(default_factory=dict)
    recent: dict[str, deque[tuple[int, str]]] = field(default_factory=dict)
    last_heard: float = 0.0
    _seen: set[int] = field(default_factory=set)
    _order: deque[int] = field(default_factory=deque)

    def seen(self, seq: int) -> bool:
        """Whether ``seq`` was taken already; remembers it if not (bounded memory)."""
        if seq in self._seen:
            return True
        self._seen.add(seq)
        self._order.append(seq)
        if len(self._order) > _SEEN:
            self._seen.discard(self._order.popleft())
        return False

    def snapshot(self) -> list[str]:
        """Every message a page needs to draw this table now, oldest ``seq`` first."""
        out = [] if self.availability_text is None else [self.availability_text]
        items = list(self.retained.values())
        for messages in self.recent.values():
            items.extend(messages)
        out.extend(text for _, text in sorted(items))
        return out


class Store:
    """Every table under ``<prefix>/`` as the browsers are shown it."""

    def __init__(self, prefix: str, *, max_tables: int = MAX_TABLES) -> None:
        self.prefix = prefix
        self.max_tables = max_tables
        self.tables: dict[str, TableEntry] = {}
        self.dropped: Counter[str] = Counter()
        self.ignored: Counter[str] = Counter()
        self._last_log = 0.0

    def apply(self, topic: str, payload: bytes) -> tuple[str, str] | None:
        """Take one received message: ``(table, text for the browsers)``, or None."""
        head = self.prefix + "/"
        if not topic.startswith(head):
            self.ignored["other_prefix"] += 1
            return None
        table, _, sub = topic[len(head) :].partition("/")
        if not sub or not _TABLE_ID.match(table):
            return self._drop("bad_topic", topic, "not <prefix>/<table id>/<topic>")
        if sub.startswith(_IGNORED_PREFIXES):
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
            data = relayed(parse(sub, payload, table=table))
        except PayloadError as exc:
            return self._drop(exc.reason, topic, exc.detail)
        try:
            text = wire("msg", table=table, topic=sub, retained=retained, payload=data)
        except ValueError as exc:  # a number JSON cannot carry, found only now
            return self._drop("not_json", topic, str(exc))
        entry = self._entry(table)
        seq: int = data["seq"]
        if retained and seq <= entry.retained.get(sub, (0, ""))[0]:
            return None  # older than what is drawn
        if entry.seen(seq):
            return None
        entry.last_heard = time.time()
        if retained:
            entry.retained[sub] = (seq, text)
        else:
            entry.recent.setdefault(sub, deque(maxlen=RECENT)).append((seq, text))
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
            entry.availability = entry.availability_text = None
            return table, wire(
                "msg", table=table, topic="availability", retained=True, payload=None
            )
        if payload not in (b"online", b"offline"):
            return self._drop("invalid", topic, "availability is neither online nor offline")
        entry = self._entry(table)
        value = payload.decode()
        entry.last_heard = time.time()
        entry.availability = value
        text = wire("msg", table=table, topic="availability", retained=True, payload=value)
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
            return [] if entry is None else entry.snapshot()
        return [text for entry in self.tables.values() for text in entry.snapshot()]

    def counters(self) -> dict[str, Any]:
        """The drop and ignore counters, for the pit and ``/api/health``."""
        return {
            "dropped": dict(self.dropped),
            "dropped_total": sum(self.dropped.values()),
            "ignored": dict(self.ignored),
        }
