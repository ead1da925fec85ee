"""One table's synchronous core: journal -> rules -> journal (outbox), with no ``await``.

``TableCore(config, journal)`` replays the open journal through the rules with the
recorded times, so the table (open round, craps series, pending roll, alarms) is exactly
what it was and ``seq`` goes on where it stopped. Then:

* ``start()`` after a restart: no device is connected yet, whatever the journal last said;
  the retained state goes out;
* ``ingest(device, fact)`` for every device fact, in this order and in one SQLite
  transaction (one fsync): the fact is journaled with its device (and the frame's link
  sequence number and bytes), the rules' table machine turns it into a new state and
  outcomes (pure), and every message they publish is written to the journal's outbox with
  its ``seq`` and ``ts``. The caller acknowledges the frame only after ``ingest`` returns,
  so an ACK means the event is durable (see ``daemon.app``);
* ``bad_frame(device, raw, reason)``: the rules learn of it (``BadFrameSeen``, alarm
  ``LINK_ERRORS``; journaled when it changed the table); its bytes and reason are
  journaled and logged in full up to a rate, then counted per interval
  (``daemon.bad_frames``);
* ``tick()`` from the shell's timer, every second: alarms that clear after a quiet time
  (``TimePassed``, journaled only when it changed the table, so a replay clears them at
  the same times) and the bad-frame counts of intervals that are over;
* ``decide(name, payload)`` for a stickperson's request: checked by the request models
  and by the rules, journaled when legal (with the operator and the time), journaled with
  its reason when refused, and answered on ``response/<name>`` either way.

Each returns how many messages it queued, so the async shell (``daemon.app``) knows when
to wake the MQTT link. Nothing here reads a clock but the injected one, starts a task or
touches the network; the shell owns drivers, MQTT, signals and the watchdog.

Log lines (structlog) are bound to the table and to the device, round or roll; no card
still face down is logged at info (``daemon.logs.fact_fields``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import structlog

from daemon.bad_frames import BadFrameBudget
from daemon.clock import Clock, utc_now
from daemon.config import TableConfig
from daemon.journal import Journal
from daemon.logs import event_context, fact_fields, outcome_fields
from daemon.payloads import Publication
from daemon.publications import info_publication, outcome_publication, state_publications
from daemon.records import from_record, to_record
from daemon.requests import (
    MAX_PAYLOAD,
    DropCounter,
    Incoming,
    RequestError,
    classify,
    malformed_reason,
    parse_request,
    response_publication,
)
from rules import table
from rules.errors import DecisionError, RulesError
from rules.events import (
    AlarmCleared,
    AlarmRaised,
    BadFrameSeen,
    Device,
    DeviceDisconnected,
    DeviceFact,
    Outcome,
    TimePassed,
)

log = structlog.get_logger("lammer.daemon")

LastFrame = tuple[int, bytes]
"""A device's last journaled frame: its link sequence number and its bytes."""


@dataclass
class Health:
    """What the watchdog looks at: the journal answers (and why not, when it does not)."""

    journal_ok: bool = True
    last_error: str | None = None


class TableCore:
    """The table's state, its journal and what it publishes. See the module docstring."""

    def __init__(
        self,
        config: TableConfig,
        journal: Journal,
        *,
        version: str,
        clock: Clock = utc_now,
        on_replay_progress: Callable[[], object] | None = None,
        replay_progress_every: int = 50_000,
    ) -> None:
        """Replay ``journal`` (open, writable) into the table of ``config``.

        ``on_replay_progress`` is called every ``replay_progress_every`` records of the
        replay (the shell asks systemd for more start time there).
        """
        self.config = config
        self.journal = journal
        self.clock = clock
        self.table_id = config.table.id
        self.health = Health()
        self.log = log.bind(table=self.table_id)
        # The body last queued on each retained state topic, so an unchanged state is not
        # published again (republishing after a reconnect is the MQTT link's job).
        self._published_state: dict[str, dict[str, Any]] = {}
        self._info = info_publication(
            table=self.table_id,
            version=version,
            game=config.table.game,
            craps_paytable=config.bonus_craps.paytable,
            decks=config.bust_bonus.decks,
            dealer_hits_soft_17=config.bust_bonus.dealer_hits_soft_17,
        )
        self.dropped = DropCounter()
        """Requests dropped for a name that cannot be answered (mqtt-api.md "Requests")."""
        self.bad_frames = BadFrameBudget()
        """Which bad frames are journaled and logged in full, and the counts of the rest."""
        self.last_frames: dict[Device, LastFrame] = {}
        """Each device's last journaled frame, as the journal holds it. A frame can be
        journaled and its ACK never reach the device (the daemon died between the two);
        after a restart the device sends it again, and the driver, which starts from this,
        must ACK it without delivering it twice (link-layer.md)."""
        self.state = self._replay(on_replay_progress, replay_progress_every)

    # ------------------------------------------------------------------ replay

    def _initial_state(self, at: datetime) -> table.TableState:
        c = self.config
        return table.initial_state(
            c.table.game,
            at=at,
            craps_paytable=c.bonus_craps.paytable,
            decks=c.bust_bonus.decks,
            dealer_hits_soft_17=c.bust_bonus.dealer_hits_soft_17,
        )

    def _replay(self, on_progress: Callable[[], object] | None, every: int) -> table.TableState:
        """The table rebuilt from the journal, exactly, with the recorded times."""
        state: table.TableState | None = None
        facts = 0
        for count, record in enumerate(self.journal.records(), start=1):
            if on_progress is not None and count % every == 0:
                on_progress()
            if state is None:
                state = self._initial_state(record.ts)
            if record.kind == "publish":
                body = record.record.get("payload")
                if record.record.get("retained") and isinstance(body, dict):
                    self._published_state[str(record.record["topic"])] = _strip(body)
                continue
            event = _replayable(record.kind, record.record)
            if event is None:
                continue
            device = record.record.get("device")
            link_seq, raw = record.record.get("link_seq"), record.record.get("raw")
            if isinstance(link_seq, int) and isinstance(raw, str) and isinstance(device, str):
                self.last_frames[device] = (  # type: ignore[index]  # journaled by ingest
                    link_seq,
                    raw.encode("ascii", "replace"),
                )
            try:
                state, _ = table.apply(state, event, at=record.ts)
                facts += 1
            except RulesError as exc:  # pragma: no cover - a decision is journaled only when legal
                self.log.error("journal record not replayable", seq=record.seq, error=str(exc))
        result = state if state is not None else self._initial_state(self.clock())
        self.log.info(
            "journal replayed",
            events=facts,
            last_seq=self.journal.last_seq,
            round=table.open_round_id(result),
        )
        return result

    def start(self) -> int:
        """After a restart no device is connected yet, whatever the journal last said;
        then every retained state topic whose content changed goes out."""
        queued = 0
        for device, device_state in self.state.devices:
            if device_state.connected:
                queued += self.ingest(
                    device, DeviceDisconnected(device=device, reason="lammer restarted")
                )
        with self._batch():
            queued += self._queue_state(self.clock())
        return queued

    # ------------------------------------------------------------------ devices

    def ingest(
        self, device: Device, fact: DeviceFact, *, link_seq: int | None = None, raw: bytes = b""
    ) -> int:
        """Journal one device fact, apply it, and queue what it publishes (one
        transaction). Returns the number of messages queued."""
        at = self.clock()
        record: dict[str, Any] = {"device": device, "event": to_record(fact)}
        if link_seq is not None:
            record["link_seq"] = link_seq
            record["raw"] = raw.decode("ascii", "replace")
        with self._batch():
            seq = self._journal("device", record, at=at)
            if link_seq is not None:
                self.last_frames[device] = (link_seq, raw)
            flog = self.log.bind(seq=seq, device=device, **event_context(fact))
            flog.info("device event", fact=type(fact).__name__, **fact_fields(fact))
            try:
                self.state, outcomes = table.apply(self.state, fact, at=at)
            except RulesError as exc:  # a fact never raises by design; keep running if it does
                flog.error("rules rejected a device fact", error=str(exc))
                return 0
            return self._publish(outcomes, at)

    def bad_frame(self, device: Device, raw: bytes, reason: str) -> int:
        """A bad frame, already NAKed: the rules learn of it (``LINK_ERRORS``), and it is
        kept for review in full (its bytes and why, one warning line) up to a rate, then
        counted (``daemon.bad_frames``). Returns the number of messages queued."""
        at = self.clock()
        fact = BadFrameSeen(device=device)
        new_state, outcomes = table.apply(self.state, fact, at=at)
        changed = new_state != self.state
        full, report = self.bad_frames.admit(device, reason, len(raw), at)
        if not (full or changed or report):
            return 0  # counted: nothing to journal, the table is as it was
        with self._batch():
            if report is not None:
                self._report_bad_frames(report, at)
            if full:
                # The bytes may hold a secret card (a damaged HAND): journal, never log them.
                seq = self._journal(
                    "device",
                    {
                        "device": device,
                        "event": to_record(fact),
                        "bad_frame": {"device": device, "raw": raw.hex(), "reason": reason},
                    },
                    at=at,
                )
                self.log.warning("bad frame", seq=seq, device=device, reason=reason, size=len(raw))
            elif changed:  # the replay needs it; the bytes are counted, not kept
                self._journal("device", {"device": device, "event": to_record(fact)}, at=at)
            self.state = new_state
            return self._publish(outcomes, at) if outcomes else 0

    def tick(self) -> int:
        """The host's timer (the shell calls it every second): alarms that clear after a
        quiet time, and the bad-frame counts of intervals that are over. Journals the
        ``TimePassed`` only when it changed the table. Returns the number of messages
        queued."""
        at = self.clock()
        fact = TimePassed()
        new_state, outcomes = table.apply(self.state, fact, at=at)
        reports = self.bad_frames.due(at)
        if new_state == self.state and not reports:
            return 0
        with self._batch():
            for report in reports:
                self._report_bad_frames(report, at)
            if new_state == self.state:
                return 0
            self._journal("daemon", {"event": to_record(fact)}, at=at)
            self.state = new_state
            return self._publish(outcomes, at) if outcomes else 0

    def _report_bad_frames(self, report: dict[str, object], at: datetime) -> None:
        self.log.warning("bad frames counted, not kept in full", **report)
        self._journal("device", {"bad_frames": report}, at=at)

    # ------------------------------------------------------------------ requests

    def decide(self, incoming: Incoming) -> int:
        """A stickperson's request from MQTT: check, journal, apply, answer. Returns the
        number of messages queued.

        In this order, before anything parses the payload: the name against the known
        requests; an unknown name of the right shape is answered with an error, a name of
        any other shape is dropped and counted (``DropCounter``); a payload over 4 KiB is
        refused with its size, SHA-256 and first bytes kept for the record."""
        at = self.clock()
        name = incoming.name
        if classify(name) == "malformed":
            self._drop(incoming, malformed_reason(name, incoming.name_length), at)
            return 0
        # An unknown name of the right shape is answered on response/<name> by
        # parse_request, with the request's own id when it can be read.
        if incoming.oversize:
            error = f"the request is {incoming.size} bytes; at most {MAX_PAYLOAD} bytes are allowed"
            return self._refuse(incoming, None, error, at)
        try:
            request = parse_request(name, incoming.payload, at=at)
        except RequestError as exc:
            return self._refuse(incoming, exc.request_id, str(exc), at)
        rlog = self.log.bind(request=name, request_id=request.request_id)
        decision = request.decision
        try:
            new_state, outcomes = table.apply(self.state, decision, at=at)
        except DecisionError as exc:
            return self._refuse(incoming, request.request_id, str(exc), at)
        with self._batch():
            seq = self._journal("decision", {"event": to_record(decision)}, at=at)
            self.state = new_state
            queued = self._publish(outcomes, at)
            queued += self._respond(name, request.request_id, None, at)
        rlog.info(
            "decision applied",
            seq=seq,
            decision=type(decision).__name__,
            roll=decision.roll_id,
            operator=decision.operator,
        )
        return queued

    def _refuse(
        self,
        incoming: Incoming,
        request_id: str | int | None,
        error: str,
        at: datetime,
    ) -> int:
        """Journal a refused request for the record (who asked what, and why it was
        refused) and answer it; replay skips it (a decision record without an event)."""
        name = incoming.name
        self.log.bind(request=name, request_id=request_id).warning(
            "request rejected", error=error, size=incoming.size
        )
        with self._batch():
            self._journal("decision", {"rejected": {**incoming.summary(), "error": error}}, at=at)
            return self._respond(name, request_id, error, at)

    def _drop(self, incoming: Incoming, reason: str, at: datetime) -> None:
        """Count a request that cannot be answered; the log and the journal hear of drops
        once a minute at most (a flood of them costs one line and one record a minute)."""
        report = self.dropped.add(incoming, reason, at)
        if report is not None:
            self._report_drops(report, at)

    def flush_drops(self) -> None:
        """Report drops counted since the last report, if a minute has passed (the shell
        calls this from its timer, so a flood that stops is still reported)."""
        at = self.clock()
        report = self.dropped.due(at)
        if report is not None:
            self._report_drops(report, at)

    def _report_drops(self, report: dict[str, object], at: datetime) -> None:
        self.log.warning("requests dropped: names that cannot be answered", **report)
        self._journal("decision", {"dropped_requests": report}, at=at)

    def _respond(
        self, name: str, request_id: str | int | None, error: str | None, at: datetime
    ) -> int:
        return self._queue(response_publication(name, request_id, error, table=self.table_id), at)

    # ------------------------------------------------------------------ publishing

    def _batch(self) -> Any:
        return self.journal.batch()

    def _journal(self, kind: str, record: dict[str, Any], *, at: datetime | None = None) -> int:
        try:
            seq = self.journal.append(kind, record, ts=at or self.clock())
        except Exception as exc:
            self.health.journal_ok = False
            self.health.last_error = str(exc)
            raise
        self.health.journal_ok = True
        return seq

    def _queue(self, publication: Publication, at: datetime) -> int:
        topic, retained, body = publication
        self.journal.append_publish(topic, body, retained=retained, ts=at)
        if retained:
            self._published_state[topic] = body
        return 1

    def _publish(self, outcomes: tuple[Outcome, ...], at: datetime) -> int:
        queued = 0
        for outcome in outcomes:
            if isinstance(outcome, AlarmRaised):
                self.log.warning(
                    "alarm raised",
                    code=outcome.code,
                    alarm_device=outcome.device,
                    message=outcome.message,
                )
                continue  # published below as the `alarms` and `state` topics
            if isinstance(outcome, AlarmCleared):
                self.log.info("alarm cleared", code=outcome.code, alarm_device=outcome.device)
                continue
            try:
                publication = outcome_publication(outcome, table=self.table_id)
            except ValueError as exc:
                # A bug between the rules and the payload contract must not stop the table:
                # keep the outcome in the journal for review and go on. Only what names the
                # outcome is logged: the payload model refuses an outcome precisely when it
                # may carry a card still face down (a flagged result with a hand), so its
                # fields stay in the protected journal.
                self.log.error(
                    "outcome not publishable",
                    error=str(exc),
                    outcome=type(outcome).__name__,
                    **event_context(outcome),
                )
                self._journal(
                    "daemon", {"unpublishable": to_record(outcome), "error": str(exc)}, at=at
                )
                continue
            assert publication is not None  # only the alarm outcomes have none
            self.log.info("outcome", topic=publication.topic, **outcome_fields(outcome))
            queued += self._queue(publication, at)
        return queued + self._queue_state(at)

    def _queue_state(self, at: datetime) -> int:
        """Queue every retained state topic whose content changed."""
        queued = 0
        for publication in (self._info, *state_publications(self.state, table=self.table_id)):
            if self._published_state.get(publication.topic) != publication.body:
                queued += self._queue(publication, at)
        return queued

    # ------------------------------------------------------------------ health

    def journal_answers(self) -> bool:
        """True when the journal answers a query (the watchdog's check)."""
        try:
            next(iter(self.journal.records(self.journal.last_seq)), None)
        except Exception as exc:
            self.health.last_error = str(exc)
            return False
        return True


# ---------------------------------------------------------------------- helpers


def _strip(body: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k not in ("seq", "ts")}


def _replayable(kind: str, data: dict[str, Any]) -> table.TableEvent | None:
    """The fact, decision or timer event a journal record holds, or None (counts of bad
    frames, refused requests, publishes...)."""
    if kind not in ("device", "decision", "daemon") or "event" not in data:
        return None
    event: table.TableEvent = from_record(data["event"])
    return event
