"""One table's messages exactly once and in ``seq`` order, whatever the brokers do.

A subscriber that must see everything (the pit, the terminal display, the records
service) does not trust the transport: it orders by ``seq``, drops what it has seen, and
asks the table for what it lost (``request/resend``, mqtt-api.md 1.3). ``Feed`` is that
logic, sans-IO (no asyncio, no clock: ``now`` is passed in, in seconds of any monotonic
clock); ``contract.follow`` is the thin asyncio helper for an aiomqtt client.

How a loss is seen. A table's ``seq`` numbers every record of its journal, messages or
not, so the seqs of its messages are not consecutive. Every JSON payload carries
``prev_seq``, the seq of the message the table published before it (null for the first
of its journal): a message whose ``prev_seq`` is above the last seq released means the
messages in between (at least the one at ``prev_seq``) have not arrived.

Per table (keyed by its base topic, ``<prefix>/<table id>``), ``Feed``:

1. releases a message whose ``prev_seq`` is at or below the last seq released (or null),
   and every held message that follows it in turn;
2. drops a seq at or below the last released (a retained state republished after a
   reconnect keeps its original seq, a copy asked by another subscriber, a QoS 1 repeat);
3. holds back a message that comes too early, for ``wait`` seconds (a broker that
   reorders delivers the missing one meanwhile), then asks for the gap: a ``Resend``
   action per range of at most ``RESEND_SPAN + 1`` seqs, at most ``max_chunks`` at once;
4. learns from the answer (``response/resend``, matched by its ``request_id``): a range
   whose answer came and whose ``sent`` messages all arrived is complete (what is still
   missing in it never will come); ``missing_before`` says what the journal no longer
   has;
5. gives up on what cannot come, and says so with a ``Gap`` (table, from, to, reason)
   that the consumer must record: ``gone`` (no longer in the table's journal),
   ``not_resent`` (the table answered, the message did not come: it was never
   published), ``unanswered`` (``max_asks`` rounds or ``patience`` seconds without it),
   ``overflow`` (more than ``max_held`` messages waiting behind it).

Where a subscriber starts. Without a position, the first message received live (not
from the broker's retained store) is where the table's stream starts; the retained
states that the broker hands over at subscription are released as they come (they are
the current state, each the latest of its topic, or were when the broker stored them),
also when one comes after the first live message (a floor node interleaves them) with a
seq older than the stream's start (a topic that changes seldom: a table's ``state``); one
handed over ahead of live messages older than it is not released again when the stream
reaches it, but counts there (no gap asked for it). When
that first live message's ``prev_seq`` is above the newest retained state released, the
table published more since that state than the broker handed over: the stream starts at
that state instead, and the gap fill brings what follows it. A consumer that persisted
``positions()`` passes them back as ``start`` and resumes exactly there (gaps asked for,
retained states it has already seen dropped). A table restarted with its id but a new
journal goes on above its old seqs (mqtt-api.md), its first message with ``prev_seq``
null: released in order, nothing asked.

Memory is bounded: per table the last seq released, at most ``max_held`` messages held
and at most ``MAX_EARLY`` seqs of retained states released before the stream started;
at most ``max_tables`` tables (messages of more are ignored and counted).

After a burst: the catch-up. A broker may hand over retained states older than the
table's (a floor node just restarted has not caught up with the others: one may hand a new
pit a table's ``state`` at seq 11 while the table is at 94), and a
quiet table publishes nothing that would show it. So ``catchup_after`` seconds (plus this
feed's share of ``catchup_spread``) after the first retained state of a table's burst,
unless a live message of the table came meanwhile (it shows where the table is), the feed
asks for the seq after the newest state it released (or its position): a ``Resend`` of
``newest + 1 .. newest + 1``, and the stream starts after that state. The answer's
``prev_seq`` shows what the table published since, and the gap fill asks for it at once
(no ``wait``: nothing revealed by that answer is still on its way). Bounded: once per burst
and at most once per ``CATCHUP_AGAIN`` seconds per table, never for a table ``offline``
or with a gap being filled; another subscriber's answer seen first starts the stream the
same way and spares this feed its own.

The end of a stream: the tail probe. A loss at the very end of a stream has nothing after
it to show it by ``prev_seq``. So when a table has released nothing new for
``probe_after`` seconds (plus this feed's share of ``probe_spread``, below), the feed asks
once for the seq after its last: a ``Resend`` of ``last + 1 .. last + 1``. The table's
answer (``response/resend``) is itself a message with a ``seq`` and a ``prev_seq``: if
the ``prev_seq`` is beyond what the feed released, the ordinary gap fill takes over; if
not, nothing was lost. The answer's ``sent`` and ``missing_before`` are not used (a range
past the table's last seq is answered ``sent`` 0, and a journal that began above it would
say ``missing_before``: neither says anything was lost). Bounded: one probe per quiet
period per table. A quiet period starts at the release of a new message of the table's
own (not a ``resent`` copy, not a ``response/resend``: answering the probe is not
new play, or every quiet table would be probed for ever) and ends with the probe, or
earlier with any ``response/resend`` released (another subscriber's probe answered: it
shows the stream up to it, so this feed need not ask). A copy whose marking was lost on
the way (the floor's 3.1.1 bridges drop it) is released before the answer that revealed
its loss, so that answer ends the quiet period all the same. No probe for a table the
feed has released nothing new of since it started (the retained states handed over
before a fresh stream starts do not count; a newer one after a ``start`` position does),
one that is ``offline`` (its ``availability``), or one with a gap being filled; a probe
refused (the table's rate limit, no link) or not answered is not asked again in that
quiet period. Each feed adds to ``probe_after`` a fixed share of
``probe_spread`` of its own (from ``ident`` and the table), so the subscribers of one
table do not all ask in the same second (the table serves 4 resends a second, 8 at
once, all clients together), and the first answer spares the others their probe.
A loss after the probe (the table's next message, lost too) waits for what follows it.

Checked before it counts. Every payload but ``availability``'s (no seq) and an empty one (a
retained state deleted) is checked against the contract (``admit``: the topic is one the
daemon publishes, ``TOPICS`` or ``response/<name>``; the payload 64 KiB at most, a JSON
object, valid for its topic's model, ``seq`` a positive integer, ``table`` the topic's
table) before it can touch the table's position: a message refused there (another client's
junk, a forged seq ahead of the table's) is returned as a ``Refused`` event with its reason,
counted in ``refused``, and changes nothing else, so the genuine message of that seq is
still awaited and the gap fill asks the table for it. One check for every consumer (the
records service, ``lammer web``, the terminal display), each of which logs and counts the
``Refused`` event its own way. A topic the daemon adds in a later contract version is
refused by an older consumer until it is updated (and its seq ends as a gap,
``unanswered``): a subscriber cannot tell it from a forged one.
"""

from __future__ import annotations

import json
import uuid
import zlib
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal, TypeGuard

from contract.payloads import TOPICS, Envelope, PayloadError, decode, validate
from contract.requests import RESEND_SPAN, ResponseMessage, request_topic
from contract.topics import Topic, is_request, request, response, response_name

RESEND_TOPIC: Final = request("resend")
ANSWER_TOPIC: Final = response("resend")
MAX_EARLY: Final = 1024
"""Retained states released before a table's stream started, remembered at most."""
PROBE_AFTER: Final = 30.0
"""Seconds a table has released nothing new before the tail probe. Longer than a craps table
at play is silent (the journal's sizing, docs/operators/journal-and-disk.md, counts a roll
every 20 s, each a roll, a board and a state), so play is seldom probed and a slow table at
most once between two rolls; short enough that a loss at the end of a stream is known within
a minute instead of at the table's next event (hours at night). It matches
``floor_resend``'s 30 s."""
PROBE_SPREAD: Final = 15.0
"""Seconds at most added to ``PROBE_AFTER``, a share fixed per feed and table, so that
the subscribers of one table do not ask in the same second."""
CATCHUP_AFTER: Final = 0.5
"""Seconds after a table's first retained state of a burst before its catch-up: the rest
of the burst comes meanwhile (a broker hands a subscription's retained messages over
together, right after its SUBACK)."""
CATCHUP_SPREAD: Final = 2.0
"""Seconds at most added to ``CATCHUP_AFTER``, a share fixed per feed and table: a pit of
200 tables asks 100 a second, and of one table's subscribers the first to ask spares the
others (its answer reaches them all). Short, so that with the gap fill that follows, a
stale state is replaced within 5 s of the connection."""
CATCHUP_AGAIN: Final = 10.0
"""Seconds at least between two catch-ups of one table: retained states that trickle in
are one burst; a reconnect later is a new one."""

GapReason = Literal["gone", "not_resent", "unanswered", "overflow"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Message:
    """A table's message, released in ``seq`` order, once. ``topic`` is relative to the
    table's base topic; ``payload`` the exact bytes; ``body`` the JSON object they hold;
    ``parsed`` the contract's typed message (``contract.payloads.TOPICS``' model, or
    ``ResponseMessage``), which a consumer matches on instead of parsing ``payload`` again;
    ``retained`` true when it came from the broker's retained store; ``resent`` true when
    it came as a ``request/resend`` copy (when the marking survived the brokers)."""

    table: str
    topic: str
    seq: int
    payload: bytes
    body: Mapping[str, Any]
    parsed: Envelope
    retained: bool = False
    resent: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Gap:
    """Seqs ``from_seq`` to ``to_seq`` of ``table`` that will not come: some messages of
    the table may be missing there (the range may also hold seqs that were never
    messages). The consumer must record it."""

    table: str
    from_seq: int
    to_seq: int
    reason: GapReason


@dataclass(frozen=True, slots=True, kw_only=True)
class Resend:
    """An action: publish ``payload(operator)`` on ``topic_for(user)``."""

    table: str
    from_seq: int
    to_seq: int
    request_id: str

    @property
    def topic(self) -> str:
        """The bare ``<table>/request/resend``: a terminal's, or any client's on a broker
        without logins. A logged-in reader publishes on ``topic_for(its user)``."""
        return f"{self.table}/{RESEND_TOPIC}"

    def topic_for(self, user: str | None) -> str:
        """Where ``user`` (the MQTT user name the client logged in with; None: no login)
        publishes the request: ``<table>/request/resend/<user>`` (mqtt-api.md 1.4: the
        broker lets each read-only user publish at its own name only)."""
        return request_topic(self.table, "resend", user)

    def payload(self, operator: str) -> bytes:
        """The request as JSON (mqtt-api.md "Requests": ``operator`` is required)."""
        body = {
            "operator": operator,
            "request_id": self.request_id,
            "from_seq": self.from_seq,
            "to_seq": self.to_seq,
        }
        return json.dumps(body, separators=(",", ":")).encode()


@dataclass(frozen=True, slots=True, kw_only=True)
class Other:
    """A message under a table's base topic that has no ``seq`` (``availability``): passed
    on as it came, outside the ordering."""

    table: str
    topic: str
    payload: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class Refused:
    """A message the contract refuses (``admit``): it changed nothing (no seq taken, no
    table's position moved). ``reason`` is ``PayloadError``'s category (``too_large``,
    ``not_json``, ``invalid``, ``wrong_table``, ``unknown_topic``), ``detail`` says what is
    wrong (naming the field). The consumer logs and counts it."""

    table: str
    topic: str
    payload: bytes
    reason: str
    detail: str


Event = Message | Gap | Resend | Other | Refused
"""What ``Feed`` returns, in the order the consumer must handle it."""


def admit(table_id: str, topic: str, payload: bytes) -> Envelope:
    """A payload published on ``<base>/<topic>`` of the table ``table_id``, checked against
    the contract before it may count (module docstring, "Checked before it counts"): its
    topic one the daemon publishes (``TOPICS``, ``response/<name>``), the payload valid for
    its model (``contract.payloads.parse_as``: 64 KiB at most, a JSON object, every field
    typed and bounded, ``seq`` a positive integer, ``prev_seq`` one or null) and naming
    ``table_id``. Raises ``PayloadError`` saying why not."""
    return admitted(table_id, topic, payload)[1]


def model_of(topic: str) -> type[Envelope]:
    """The model of a topic the daemon publishes (``TOPICS``, ``response/<name>``);
    ``PayloadError`` (``unknown_topic``) for any other."""
    if topic in TOPICS:
        return TOPICS[topic][0]
    if response_name(topic) is not None:
        return ResponseMessage
    raise PayloadError("unknown_topic", f"{topic[:80]!r} is not a topic of the contract")


def admitted(table_id: str, topic: str, payload: bytes) -> tuple[dict[str, Any], Envelope]:
    """``admit``, with the JSON object the payload holds: decoded once, for a consumer
    that keeps it (the records store) beside the typed message."""
    model = model_of(topic)
    data = decode(payload)
    message = validate(model, data, table=table_id)
    if getattr(message, "table", None) != table_id:  # every model has one: belt and braces
        raise PayloadError("wrong_table", f"names no table or another than {table_id!r}")
    return data, message


@dataclass(slots=True)
class _Ask:
    from_seq: int
    to_seq: int
    request_id: str
    answered: bool = False
    refused: bool = False
    sent: int = 0
    seen: set[int] = field(default_factory=set)

    def complete(self) -> bool:
        return self.answered and not self.refused and len(self.seen) >= self.sent


@dataclass(slots=True)
class _Table:
    name: str
    last: int | None = None
    first: int | None = None
    """The seq at which the stream started live (None: not yet, or resumed from a
    position: then what is older was seen before)."""
    held: dict[int, Message] = field(default_factory=dict)
    held_prev: dict[int, int | None] = field(default_factory=dict)
    early: set[int] = field(default_factory=set)
    gone_below: int | None = None
    known: int = 0
    gap_since: float | None = None
    asks: int = 0
    round: list[_Ask] = field(default_factory=list)
    asked_at: float = 0.0
    quiet_since: float | None = None
    """When the table's last new message was released (None: none live yet)."""
    probed: bool = False
    """The tail of this quiet period is asked for, or shown by a resend answer."""
    offline: bool = False
    share: float = 0.0
    """This feed's fixed share (0 to 1) of the spreads, for this table."""
    catchup_due: float | None = None
    """When the catch-up is due (None: none waits)."""
    catchup_at: float | None = None
    """When the last catch-up was asked."""
    catchup_id: str | None = None
    """The ``request_id`` of the last catch-up."""


class Feed:
    """The ordering and gap filling of the module docstring, for any number of tables.

    ``wait``: how long a message that came too early is held before the gap is asked
    for; ``timeout``: how long an ask may take (answer and copies) before it is asked
    again; ``max_asks`` rounds of asking and ``patience`` seconds at most per gap;
    ``max_chunks`` resend requests per round; ``max_held`` messages held per table;
    ``start``: ``{table: last seq}`` a consumer persisted (``positions()``); ``ident``:
    what makes this feed's ``request_id`` its own (random by default); ``probe_after``:
    seconds a table has released nothing new before the tail probe (None: no probe),
    ``probe_spread``: at most that many seconds more, a fixed share per feed and table;
    ``catchup_after``: seconds after a burst of retained states before the catch-up (None:
    no catch-up), ``catchup_spread``: at most that many seconds more, likewise.
    """

    def __init__(
        self,
        *,
        wait: float = 1.0,
        timeout: float = 5.0,
        max_asks: int = 5,
        patience: float = 60.0,
        max_chunks: int = 4,
        max_held: int = 10_000,
        max_tables: int = 10_000,
        start: Mapping[str, int] | None = None,
        ident: str | None = None,
        probe_after: float | None = PROBE_AFTER,
        probe_spread: float = PROBE_SPREAD,
        catchup_after: float | None = CATCHUP_AFTER,
        catchup_spread: float = CATCHUP_SPREAD,
    ) -> None:
        if wait < 0 or timeout <= 0 or max_asks < 1 or max_chunks < 1 or max_held < 1:
            raise ValueError("wait >= 0, timeout > 0, max_asks, max_chunks, max_held >= 1")
        if (probe_after is not None and probe_after <= 0) or probe_spread < 0:
            raise ValueError("probe_after > 0 (or None) and probe_spread >= 0")
        if (catchup_after is not None and catchup_after < 0) or catchup_spread < 0:
            raise ValueError("catchup_after >= 0 (or None) and catchup_spread >= 0")
        self.probe_after = probe_after
        self.probe_spread = probe_spread
        self.probes = 0
        """Tail probes asked (``Resend`` of one seq past the last released)."""
        self.catchup_after = catchup_after
        self.catchup_spread = catchup_spread
        self.catchups = 0
        """Catch-ups asked (``Resend`` of one seq past the newest state, after a burst)."""
        self.wait = wait
        self.timeout = timeout
        self.max_asks = max_asks
        self.patience = patience
        self.max_chunks = max_chunks
        self.max_held = max_held
        self.max_tables = max_tables
        self._ident = ident or uuid.uuid4().hex[:8]
        self._asked = 0
        self._tables: dict[str, _Table] = {}
        self.ignored = 0
        """Messages ignored: no table room left."""
        self.dropped = 0
        """Messages dropped as already seen."""
        self.refused: Counter[str] = Counter()
        """Messages the contract refused (``admit``), by reason: they changed nothing."""
        for name, last in (start or {}).items():
            self._tables[name] = self._new_table(name, last)

    # -- reading -------------------------------------------------------------------------

    def positions(self) -> dict[str, int]:
        """``{table: last seq released or given up}``: persist it to resume (``start``)."""
        return {t.name: t.last for t in self._tables.values() if t.last is not None}

    def held(self, table: str) -> int:
        """Messages of ``table`` held back, waiting for a gap to fill."""
        t = self._tables.get(table)
        return 0 if t is None else len(t.held)

    def next_deadline(self) -> float | None:
        """When ``tick`` has something to do at the earliest (None: nothing waits)."""
        times = []
        for t in self._tables.values():
            if t.round:
                times.append(t.asked_at + self.timeout)
            elif t.gap_since is not None:
                times.append(t.gap_since + self.wait)
            elif (catchup := _catchup_at(t)) is not None:
                times.append(catchup)
            elif (probe := self._probe_at(t)) is not None:
                times.append(probe)
        return min(times, default=None)

    # -- feeding -------------------------------------------------------------------------

    def receive(
        self,
        table: str,
        topic: str,
        payload: bytes,
        *,
        now: float,
        retained: bool = False,
        resent: bool = False,
    ) -> list[Event]:
        """A message received on ``<table>/<topic>``; returns what to do, in order."""
        if is_request(topic):
            return []  # another client's request: not the table's
        checked = self._check(table, topic, payload)
        if isinstance(checked, Refused):
            return [checked]
        t = self._table(table)
        if t is None:
            self.ignored += 1
            return []
        if checked is None:
            return [_other(t, topic, payload)]
        # Admitted (``_check``): a JSON object whose seq is a positive integer, prev_seq
        # one or null.
        body, parsed = checked
        seq, prev = parsed.seq, parsed.prev_seq
        out: list[Event] = []
        self._burst(t, now, retained=retained, resent=resent)
        if topic == ANSWER_TOPIC:
            self._answer(t, body)
        for ask in t.round:
            if ask.from_seq <= seq <= ask.to_seq:
                ask.seen.add(seq)
        message = Message(table=table, topic=topic, seq=seq, payload=payload, body=body,
                          parsed=parsed, retained=retained, resent=resent)  # fmt: skip
        if retained and _before_stream(t, seq):
            # The broker's retained states at subscription: the current state, before the
            # stream starts (module docstring); released once each, bounded.
            if seq not in t.early and len(t.early) < MAX_EARLY:
                t.early.add(seq)
                out.append(message)
            else:
                self.dropped += 1
            return out
        if t.last is None and not _after_newest_state(t, seq, prev):
            t.last = t.first = seq  # the stream starts here
            out.append(message)
        elif t.last is not None and (seq <= t.last or seq in t.held):
            self.dropped += 1
        else:
            self._hold(t, message, prev, now)
        self._advance(t, now, out)
        self._quiet(t, out, now)
        return out

    def _check(
        self, table: str, topic: str, payload: bytes
    ) -> tuple[dict[str, Any], Envelope] | Refused | None:
        """Checked before anything counts (``admitted``): junk must not take the seq of the
        real message. ``availability`` and an empty payload (a retained state deleted)
        carry no seq (None): passed on as ``Other``, the consumer checks them."""
        if not payload or topic == Topic.AVAILABILITY:
            return None
        try:
            return admitted(table.rsplit("/", 1)[-1], topic, payload)
        except PayloadError as exc:
            self.refused[exc.reason] += 1
            return Refused(
                table=table, topic=topic, payload=payload, reason=exc.reason, detail=exc.detail
            )

    def _hold(self, t: _Table, message: Message, prev: int | None, now: float) -> None:
        """Hold ``message`` until what comes before it is released or given up."""
        if t.last is None:
            # Messages came after the newest retained state and before this one (a floor
            # node that restarted may hand over states older than the table's): the stream
            # starts at that state, and the gap fill brings what follows it.
            t.last = max(t.early)
            t.first = t.last + 1
        t.held[message.seq] = message
        t.held_prev[message.seq] = prev
        if message.topic == ANSWER_TOPIC and message.body.get("request_id") == t.catchup_id:
            # The answer to this feed's catch-up: nothing it reveals is still on its way
            # (published before the subscription): the gap is asked at once.
            t.gap_since = now - self.wait if t.gap_since is None else t.gap_since

    def tick(self, now: float) -> list[Event]:
        """Time passed: ask for gaps whose wait is over, give up on what cannot come,
        probe the tail of a table quiet for ``probe_after``."""
        out: list[Event] = []
        for t in self._tables.values():
            if t.held or t.round:
                start = len(out)
                self._advance(t, now, out)
                self._quiet(t, out[start:], now)
            elif (catchup := _catchup_at(t)) is not None and now >= catchup:
                out.append(self._catchup(t, now))
            elif (probe := self._probe_at(t)) is not None and now >= probe:
                last = _last(t)  # _probe_at checked it is set
                t.probed = True  # once: its answer, refused or not, is not asked again
                self.probes += 1
                self._asked += 1
                out.append(
                    Resend(
                        table=t.name,
                        from_seq=last + 1,
                        to_seq=last + 1,
                        request_id=f"feed-{self._ident}-{self._asked}",
                    )
                )
        return out

    # -- inside --------------------------------------------------------------------------

    def _table(self, name: str) -> _Table | None:
        t = self._tables.get(name)
        if t is None:
            if len(self._tables) >= self.max_tables:
                return None
            t = self._tables[name] = self._new_table(name)
        return t

    def _new_table(self, name: str, last: int | None = None) -> _Table:
        # A fixed share of the spreads per feed and table (crc32: the same in every run).
        share = zlib.crc32(f"{self._ident}/{name}".encode()) / 2**32
        return _Table(name, last=last, share=share)

    def _probe_at(self, t: _Table) -> float | None:
        """When the tail probe of ``t`` is due (None: none is, module docstring)."""
        if (
            self.probe_after is None
            or t.quiet_since is None
            or t.probed
            or t.offline
            or t.last is None
            or t.held
            or t.round
        ):
            return None
        return t.quiet_since + self.probe_after + t.share * self.probe_spread

    def _burst(self, t: _Table, now: float, *, retained: bool, resent: bool) -> None:
        """A retained state came (a subscription's burst): the catch-up is due soon, once
        per burst (module docstring, "After a burst"). A live message shows where the table
        is: no catch-up is needed then."""
        if not retained:
            if not resent:
                t.catchup_due = None
            return
        if self.catchup_after is None or t.catchup_due is not None:
            return
        if t.catchup_at is not None and now - t.catchup_at < CATCHUP_AGAIN:
            return
        t.catchup_due = now + self.catchup_after + t.share * self.catchup_spread

    def _catchup(self, t: _Table, now: float) -> Resend:
        """Ask for the seq after the newest state released: the answer's ``prev_seq``
        shows what the table published since (module docstring, "After a burst")."""
        if t.last is None:
            # The stream starts after the newest retained state (at least one came).
            t.last = max(t.early)
            t.first = t.last + 1
        t.catchup_due = None
        t.catchup_at = now
        self.catchups += 1
        self._asked += 1
        t.catchup_id = f"feed-{self._ident}-{self._asked}"
        return Resend(table=t.name, from_seq=t.last + 1, to_seq=t.last + 1, request_id=t.catchup_id)

    def _quiet(self, t: _Table, events: list[Event], now: float) -> None:
        """Start a quiet period at a new message of the table's own released, end it at a
        resend answer released (module docstring, "The end of a stream")."""
        for event in events:
            if not isinstance(event, Message) or event.resent or event.body.get("resent"):
                continue  # a copy is old news (an unmarked one is, see the docstring)
            if event.topic == ANSWER_TOPIC:
                t.probed = True  # the stream is shown up to this answer: no probe needed
            else:
                t.quiet_since = now
                t.probed = False

    def _answer(self, t: _Table, body: Mapping[str, Any]) -> None:
        request_id = body.get("request_id")
        for ask in t.round:
            if ask.request_id != request_id:
                continue
            ask.answered = True
            if body.get("status") != "ok":
                ask.refused = True  # rate-limited or busy: asked again after the timeout
                return
            sent, missing = body.get("sent"), body.get("missing_before")
            ask.sent = sent if isinstance(sent, int) and sent >= 0 else 0
            if _is_seq(missing) and missing > ask.from_seq:
                t.gone_below = max(t.gone_below or 0, min(missing, ask.to_seq + 1))
            return

    def _advance(self, t: _Table, now: float, out: list[Event]) -> None:
        before = (t.last, max(t.known, t.last or 0))
        self._release(t, out)
        if not t.held:
            _settled(t)
            return
        if (t.last, max(t.known, t.last or 0)) != before:
            t.asks = 0  # progress: the asks count again for what is left
        if len(t.held) > self.max_held:
            self._give_up(t, "overflow", out, now)
            return
        if t.gap_since is None:
            t.gap_since = now
        if t.round:
            if all(ask.complete() for ask in t.round):
                t.round = []  # answered in full, a longer gap: ask on for the rest at once
            elif now < t.asked_at + self.timeout:
                return
            else:
                t.round = []  # no full answer in time: ask again, or give up
        elif now < t.gap_since + self.wait:
            return
        if t.asks >= self.max_asks or now - t.gap_since >= self.patience:
            self._give_up(t, "unanswered", out, now)
            return
        self._ask(t, now, out)

    def _release(self, t: _Table, out: list[Event]) -> None:
        while t.held:
            last = _last(t)  # a table holds messages only after its first
            seq = min(t.held)
            prev = t.held_prev[seq]
            if prev is None or prev <= last:
                message = t.held.pop(seq)
                del t.held_prev[seq]
                t.last = seq
                if seq in t.early:
                    # Released as a retained state before the stream reached it (module
                    # docstring): not again, but the stream goes on after it.
                    t.early.discard(seq)
                    self.dropped += 1
                else:
                    out.append(message)
                continue
            # A gap: the message at prev (and maybe others after t.last) is missing.
            if t.gone_below is not None and t.gone_below - 1 > last:
                end = min(t.gone_below - 1, prev)
                out.append(Gap(table=t.name, from_seq=last + 1, to_seq=end, reason="gone"))
                t.last = end
                continue
            known = _known(t)
            if prev <= known:
                # Every message the table has up to `known` arrived: prev's is not coming
                # (the table never published it: it was set aside).
                out.append(Gap(table=t.name, from_seq=last + 1, to_seq=prev, reason="not_resent"))
                t.last = prev
                continue
            return

    def _ask(self, t: _Table, now: float, out: list[Event]) -> None:
        """One round: a ``Resend`` for every hole among the held messages (each at most
        1,000 seqs, ``max_chunks`` at most), what is known complete left out."""
        t.round = []
        for first, last in _holes(t):
            start = first
            while start <= last and len(t.round) < self.max_chunks:
                end = min(last, start + RESEND_SPAN - 1)  # 1,000 seqs a request at most
                self._asked += 1
                ask = _Ask(start, end, f"feed-{self._ident}-{self._asked}")
                # What arrived already counts: held messages are in the table's answer too.
                ask.seen.update(s for s in t.held if start <= s <= end)
                t.round.append(ask)
                out.append(
                    Resend(table=t.name, from_seq=start, to_seq=end, request_id=ask.request_id)
                )
                start = end + 1
        t.asks += 1
        t.asked_at = now

    def _give_up(self, t: _Table, reason: GapReason, out: list[Event], now: float) -> None:
        last = _last(t)  # called only while messages are held
        target = t.held_prev[min(t.held)]
        if target is None:
            raise RuntimeError(f"{t.name}: a held message has no prev_seq")
        out.append(Gap(table=t.name, from_seq=last + 1, to_seq=target, reason=reason))
        t.last = target
        _settled(t)
        self._release(t, out)
        if t.held:
            # A further gap behind: its own wait starts now, with a deadline
            # (``next_deadline``), or a consumer that sleeps until it (``contract.follow``)
            # would never ask for it while the table is quiet.
            t.gap_since = now


def _last(t: _Table) -> int:
    """The last seq released of a table whose stream has started: the case of every caller
    (a table holds messages, asks and is probed only after its first)."""
    if t.last is None:
        raise RuntimeError(f"{t.name}: no message released yet")
    return t.last


def _known(t: _Table) -> int:
    """The highest seq up to which every message the table still has has arrived
    (asks answered in full, following on from what was known before)."""
    known = max(t.known, _last(t))  # called only once a first message arrived
    for ask in sorted(t.round, key=lambda a: a.from_seq):
        if ask.from_seq > known + 1 or not ask.complete():
            break
        known = max(known, ask.to_seq)
    t.known = known
    return known


def _holes(t: _Table) -> list[tuple[int, int]]:
    """``(first, last)`` seq ranges where messages are missing: before each held
    message whose ``prev_seq`` is neither released nor held."""
    holes: list[tuple[int, int]] = []
    before = _last(t)  # called only once a first message arrived
    for seq in sorted(t.held):
        prev = t.held_prev[seq]
        if prev is not None and prev > before:
            first = before + 1 if holes else max(before, t.known) + 1
            if first <= prev:
                holes.append((first, prev))
        before = seq
    return holes


def _settled(t: _Table) -> None:
    t.gap_since = None
    t.asks = 0
    t.round = []
    t.known = 0
    if t.gone_below is not None and t.last is not None and t.gone_below <= t.last + 1:
        t.gone_below = None


def _catchup_at(t: _Table) -> float | None:
    """When the catch-up of ``t`` is due (None: none is): not while a gap is filled
    (its answers show the table's latest seq) nor while the table is ``offline``."""
    if t.catchup_due is None or t.offline or t.held or t.round:
        return None
    return t.catchup_due


def _other(t: _Table, topic: str, payload: bytes) -> Other:
    if topic == Topic.AVAILABILITY:
        t.offline = payload.strip() == b"offline"  # no probe: it could not answer
    return Other(table=t.name, topic=topic, payload=payload)


def _before_stream(t: _Table, seq: int) -> bool:
    """Whether a retained message of ``seq`` is a state from before ``t``'s stream: the
    stream has not started, or started live above it (a floor node hands retained states
    over interleaved with live messages; a topic that changes seldom, a table's ``state``,
    is older than the stream). Not when resumed from a position: what is older was seen."""
    return t.last is None or (t.first is not None and seq < t.first)


def _after_newest_state(t: _Table, seq: int, prev: int | None) -> bool:
    """Whether the first live message of a stream not yet started shows messages after the
    newest retained state released (its ``prev_seq`` above it): then the stream starts at
    that state, not at this message."""
    newest = max(t.early, default=None)
    return newest is not None and prev is not None and prev > newest and seq > newest


def _is_seq(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1
