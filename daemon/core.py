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
  (``daemon.bad_frames``); ``noise(device, raw, size)`` likewise for bytes outside any
  frame (``NoiseSeen``), in the same bounds;
* ``tick()`` from the shell's timer, every second: alarms that clear after a quiet time
  (``TimePassed``, journaled only when it changed the table, so a replay clears them at
  the same times) and the bad-frame counts of intervals that are over;
* the host's facts (``watch_clock``, ``disk_checked``, ``broker_login``,
  ``software_checked``, the journal's faults): applied like a device fact, journaled only
  when they changed the table.

A stickperson's request is the request desk's (``daemon.desk.RequestDesk``), which
decides it on this table. What the table and the desk write goes through one
``daemon.ledger.Ledger`` (``ledger``): the table's memory (``daemon.replay.Memory``: its
state, each device's last frame, the retained bodies last published) is one value that an
event's transaction keeps or, when the journal refuses it, puts back. The journal's upkeep
(rotation at a new gaming day, retention, snapshots, ``seq`` above the broker's) is
``daemon.upkeep.JournalUpkeep``'s (``upkeep``).

Each returns how many messages it queued, so the async shell (``daemon.app``) knows when
to wake the MQTT link. Nothing here reads a clock but the injected one, starts a task or
touches the network; the shell owns drivers, MQTT, signals and the watchdog.

Log lines (structlog) are bound to the table and to the device, round or roll; no card
still face down is logged at info (``daemon.logs.fact_fields``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import structlog

from contract.payloads import Publication
from daemon.bad_frames import BadFrameBudget
from daemon.clock import Clock, format_ts, utc_now
from daemon.config import TableConfig
from daemon.journal import Journal
from daemon.ledger import Ledger
from daemon.logs import TxLog, event_context, fact_fields
from daemon.publications import info_publication
from daemon.records import to_record
from daemon.replay import Memory, Replay, Settings, reconfigure, start_record
from daemon.upkeep import JournalUpkeep
from rules import table
from rules.errors import RulesError
from rules.events import (
    BadFrameSeen,
    BrokerLoginChecked,
    CleanStart,
    ClockJumped,
    Device,
    DeviceDisconnected,
    DeviceFact,
    DeviceHello,
    DiskSpaceChecked,
    JournalRefused,
    JournalWritable,
    ModeReported,
    NoiseSeen,
    SoftwareChecked,
    TimePassed,
)
from rules.table import HostFact

log = structlog.get_logger("lammer.daemon")

CLOCK_JUMP_LIMIT = 2.0
"""Seconds the wall clock may move against the steady clock between two looks before it
is a jump (``CLOCK_JUMP``)."""

LastFrame = tuple[int, bytes]
"""A device's last journaled frame: its link sequence number and its bytes."""


def rules_settings(config: TableConfig) -> Settings:
    """What of ``config`` the rules depend on (journaled with each start)."""
    return Settings(
        game=config.table.game,
        craps_paytable=config.bonus_craps.paytable,
        decks=config.bust_bonus.decks,
        dealer_hits_soft_17=config.bust_bonus.dealer_hits_soft_17,
    )


def table_info(config: TableConfig, version: str, digest: str | None) -> Publication:
    """The retained ``info`` of ``config``'s table: its ``[table]`` section (id, game), the
    daemon's version, the game's pay tables, the installed software's digest."""
    return info_publication(
        table=config.table,
        version=version,
        craps_paytable=config.bonus_craps.paytable,
        decks=config.bust_bonus.decks,
        dealer_hits_soft_17=config.bust_bonus.dealer_hits_soft_17,
        digest=digest,
    )


@dataclass
class Health:
    """What the watchdog looks at: why the journal did not answer, when it did not."""

    last_error: str | None = None


class TableCore:
    """The table's state, its journal and what it publishes. See the module docstring."""

    def __init__(
        self,
        config: TableConfig,
        journal: Journal,
        *,
        version: str,
        software_digest: str | None = None,
        clock: Clock = utc_now,
        on_replay_progress: Callable[[], object] | None = None,
        replay_progress_every: int = 50_000,
    ) -> None:
        """Rebuild the table of ``config`` from ``journal`` (the live segment, open and
        writable): from its latest snapshot, replaying only what follows.

        ``on_replay_progress`` is called every ``replay_progress_every`` records of the
        replay (the shell asks systemd for more start time there).
        """
        self.config = config
        self.journal = journal
        """The live segment: the same object across rotations (``Journal.replace_file``),
        so it is also the MQTT link's outbox."""
        self.clock = clock
        self.version = version
        self.table_id = config.table.id
        self.health = Health()
        self.log = TxLog(log.bind(table=self.table_id))
        """Lines logged inside a journal transaction come out when it commits (a refused
        transaction is tried again: its lines would say twice what did not happen)."""
        self.settings = rules_settings(config)
        self.software_digest = software_digest
        """The installed software's digest computed at start (``contract.software``), or
        None when not computed (a core built by a test)."""
        self.bad_frames = BadFrameBudget()
        """Which bad frames are journaled and logged in full, and the counts of the rest."""
        memory = self._load(on_replay_progress, replay_progress_every)
        self.upkeep = JournalUpkeep(
            journal,
            config.journal,
            table=self.table_id,
            settings=self.settings.to_json(),
            snapshot=self.snapshot,
            clock=clock,
            log=self.log,
        )
        """Rotation, retention, snapshots, ``seq`` continuity (``daemon.upkeep``)."""
        info = table_info(config, version, software_digest)
        self.ledger = Ledger(
            journal, memory, upkeep=self.upkeep, table_id=self.table_id, info=info, log=self.log
        )
        """The table's memory and the journal transactions that change it."""
        self._clean_start = self._stopped_cleanly()
        """The last run ended with ``close()``: its stop and snapshot are the last records."""
        self._clock_seen: tuple[datetime, float] | None = None

    # ------------------------------------------------------------------ replay

    @property
    def state(self) -> table.TableState:
        """The table as it is."""
        return self.ledger.memory.state

    @property
    def last_frames(self) -> Mapping[Device, LastFrame]:
        """Each device's last journaled frame, as the journal holds it. A frame can be
        journaled and its ACK never reach the device (the daemon died between the two);
        after a restart the device sends it again, and the driver, which starts from this,
        must ACK it without delivering it twice (link-layer.md)."""
        return self.ledger.memory.last_frames

    def snapshot(self) -> dict[str, object]:
        """The body a snapshot of the table would have now."""
        return self.ledger.memory.snapshot()

    def _load(self, on_progress: Callable[[], object] | None, every: int) -> Memory:
        """The table rebuilt: the latest snapshot of the live segment, then the records
        after it (all of them when there is no snapshot), with the recorded times."""
        snapshot = self.journal.latest_snapshot()
        if snapshot is None:
            replay, after = Replay(self.settings), 0
        else:
            replay, after = Replay.restore(snapshot.record), snapshot.seq
        for count, record in enumerate(self.journal.records(after), start=1):
            if on_progress is not None and count % every == 0:
                on_progress()
            replay.apply(record)
        for seq, error in replay.errors:  # pragma: no cover - decisions are journaled legal
            self.log.error("journal record not replayable", seq=seq, error=error)
        self.replayed = replay.events
        """How many events the start replayed after its snapshot."""
        # A fresh table (a new journal, or another game) is begun again at the start record's
        # time by start(), as a replay of the journal begins it (daemon.replay).
        self._fresh = replay.state is None or replay.state.game != self.settings.game
        # A rotation a crash cut short is finished by start() with the table as the journal
        # left it (its snapshot is what a replay of the sealed segment gives); the daemon's
        # own settings apply after it, from the start record on.
        self._finish_later = self.journal.last_kind() == "seal"
        if not (self._finish_later and replay.state is not None):
            replay.finish(self.settings, self.clock())
        memory = replay.memory()
        self.log.info(
            "journal replayed",
            snapshot=None if snapshot is None else snapshot.seq,
            events=replay.events,
            last_seq=self.journal.last_seq,
            round=table.open_round_id(memory.state),
        )
        return memory

    def _stopped_cleanly(self) -> bool:
        last = self.journal.last_seq
        if last < 2 or self.upkeep.snapshot_seq != last:
            return False
        before = next(iter(self.journal.records(last - 2)), None)
        return before is not None and before.kind == "daemon" and "stop" in before.record

    def start(self) -> int:
        """Begin: a new journal gets its first segment header, a rotation a crash left
        half done is finished, the start is journaled with the table's settings, and no
        device is connected yet, whatever the journal last said; then every retained state
        topic whose content changed goes out."""
        at = self.clock()
        if self.journal.last_seq == 0:
            # The table begins with its journal (a replay starts it at the first record).
            self.ledger.remember(state=self.settings.initial_state(at))
            self.upkeep.begin(at)
        elif self.journal.last_kind() == "seal":
            self.upkeep.finish_rotation(at)
        if self._finish_later:
            state = reconfigure(self.state, self.settings, at)
            self.ledger.remember(state=state, settings=self.settings)
            self._finish_later = False
        self.ledger.write("daemon", start_record(self.version, self.settings), at=at)
        if self._fresh:
            # Its alarms begin now, not at load.
            self.ledger.remember(state=self.settings.initial_state(at))
            self._fresh = False
        queued = self._host_fact(CleanStart(), at) if self._clean_start else 0
        for device, device_state in self.state.devices:
            if device_state.connected:
                queued += self.ingest(
                    device, DeviceDisconnected(device=device, reason="lammer restarted")
                )
        with self.ledger.batch():
            queued += self.ledger.queue_state(self.clock())
        return queued

    def close(self) -> None:
        """A clean stop: a ``stop`` record, then a snapshot of the table as it is, so the
        next start replays nothing and knows the stop was clean."""
        at = self.clock()
        with self.ledger.batch():
            self.ledger.write("daemon", {"stop": {"version": self.version}}, at=at)
            self.upkeep.snapshot(at)

    # ------------------------------------------------------------------ devices

    def ingest(
        self,
        device: Device,
        fact: DeviceFact,
        *,
        link_seq: int | None = None,
        raw: bytes = b"",
        probe: bool = False,
    ) -> int:
        """Journal one device fact, apply it, and queue what it publishes (one
        transaction). Returns the number of messages queued.

        ``probe``: the frame answers the driver's silence probe. A ``HELLO`` from the same
        device and a ``MODE`` the table already knows change nothing: such a frame is
        journaled marked as a probe reply, without an event for the replay (it is not a
        restart: it neither clears ``UNEXPECTED_FRAME`` nor ends the memory of closed
        rounds), and logged at debug. Any other probe reply is applied like any frame."""
        at = self.clock()
        self.upkeep.rotate_if_new_day(at)
        if probe and link_seq is not None and self._answers_as_known(device, fact):
            with self.ledger.batch():
                seq = self.ledger.write(
                    "device",
                    {
                        "device": device,
                        "probe": True,
                        "link_seq": link_seq,
                        "raw": raw.decode("ascii", "replace"),
                    },
                    at=at,
                )
                self.ledger.remember(last_frames={**self.last_frames, device: (link_seq, raw)})
            self.log.debug("probe reply", seq=seq, device=device, fact=type(fact).__name__)
            return 0
        record: dict[str, Any] = {"device": device, "event": to_record(fact)}
        if probe:
            record["probe"] = True
        if link_seq is not None:
            record["link_seq"] = link_seq
            record["raw"] = raw.decode("ascii", "replace")
        with self.ledger.batch():
            seq = self.ledger.write("device", record, at=at)
            if link_seq is not None:
                self.ledger.remember(last_frames={**self.last_frames, device: (link_seq, raw)})
            flog = self.log.bind(seq=seq, device=device, **event_context(fact))
            flog.info("device event", fact=type(fact).__name__, **fact_fields(fact))
            try:
                state, outcomes = table.apply(self.state, fact, at=at)
            except RulesError as exc:  # a fact never raises by design; keep running if it does
                flog.error("rules rejected a device fact", error=str(exc))
                return 0
            self.ledger.remember(state=state)
            queued = self.ledger.publish(outcomes, at)
            self.upkeep.snapshot_if_due(at)
            return queued

    def _answers_as_known(self, device: Device, fact: DeviceFact) -> bool:
        """A probe reply that says what the table knows already: the device's HELLO as
        before, or the shuffler's MODE as before."""
        try:
            known = self.state.device(device)
        except KeyError:
            return False
        if isinstance(fact, DeviceHello):
            return known.hello == fact
        if isinstance(fact, ModeReported):
            return known.mode == fact.game
        return False

    def bad_frame(self, device: Device, raw: bytes, reason: str) -> int:
        """A bad frame, already NAKed: the rules learn of it (``LINK_ERRORS``), and it is
        kept for review in full (its bytes and why, one warning line) up to a rate, then
        counted (``daemon.bad_frames``). Returns the number of messages queued."""
        return self._unreadable(device, raw, reason, BadFrameSeen(device=device), len(raw))

    def noise(self, device: Device, raw: bytes, size: int) -> int:
        """Bytes outside any frame (``size`` of them, the first in ``raw``): the rules learn
        of it (``LINK_ERRORS`` when no good frame comes between), and they are kept for
        review as a bad frame is, within the same bounds. Returns the messages queued."""
        reason = f"{size} byte{'s' if size != 1 else ''} outside any frame (noise)"
        return self._unreadable(device, raw, reason, NoiseSeen(device=device), size)

    def _unreadable(
        self, device: Device, raw: bytes, reason: str, fact: BadFrameSeen | NoiseSeen, size: int
    ) -> int:
        at = self.clock()
        new_state, outcomes = table.apply(self.state, fact, at=at)
        changed = new_state != self.state
        full, report = self.bad_frames.admit(device, reason, size, at)
        if not (full or changed or report):
            return 0  # counted: nothing to journal, the table is as it was
        with self.ledger.batch():
            if report is not None:
                self._report_bad_frames(report, at)
            if full:
                # The bytes may hold a secret card (a damaged HAND): journal, never log them.
                seq = self.ledger.write(
                    "device",
                    {
                        "device": device,
                        "event": to_record(fact),
                        "bad_frame": {"device": device, "raw": raw.hex(), "reason": reason},
                    },
                    at=at,
                )
                what = "noise" if isinstance(fact, NoiseSeen) else "bad frame"
                self.log.warning(what, seq=seq, device=device, reason=reason, size=size)
            elif changed:  # the replay needs it; the bytes are counted, not kept
                self.ledger.write("device", {"device": device, "event": to_record(fact)}, at=at)
            self.ledger.remember(state=new_state)
            return self.ledger.publish(outcomes, at) if outcomes else 0

    def tick(self) -> int:
        """The host's timer (the shell calls it every second): a new gaming day rotates
        the journal (``upkeep.take_expired`` then names the segments past the retention),
        alarms that clear after a quiet time clear, and the bad-frame counts of intervals
        that are over are kept (the request desk's counts are its own: ``RequestDesk.
        flush_drops``, from the same timer, just before). Journals the
        ``TimePassed`` only when it changed the table. Returns the number of messages
        queued."""
        at = self.clock()
        self.upkeep.rotate_if_new_day(at)
        fact = TimePassed()
        new_state, outcomes = table.apply(self.state, fact, at=at)
        reports = self.bad_frames.due(at)
        if new_state == self.state and not reports:
            return 0
        with self.ledger.batch():
            for report in reports:
                self._report_bad_frames(report, at)
            if new_state == self.state:
                return 0
            self.ledger.write("daemon", {"event": to_record(fact)}, at=at)
            self.ledger.remember(state=new_state)
            return self.ledger.publish(outcomes, at) if outcomes else 0

    def watch_clock(self, monotonic: float) -> int:
        """Compare the wall clock with the steady one (``monotonic``, seconds): a jump of
        more than ``CLOCK_JUMP_LIMIT`` between two calls is journaled and raises
        ``CLOCK_JUMP`` (the shell calls this every second). Returns the messages queued."""
        at = self.clock()
        last, self._clock_seen = self._clock_seen, (at, monotonic)
        if last is None:
            return 0
        wall = (at - last[0]).total_seconds()
        jump = wall - (monotonic - last[1])
        if abs(jump) <= CLOCK_JUMP_LIMIT:
            return 0
        self.log.warning("the wall clock jumped", seconds=round(jump, 3))
        return self._host_fact(ClockJumped(milliseconds=round(jump * 1000)), at)

    def _host_fact(self, fact: HostFact, at: datetime) -> int:
        """Apply a host fact; journal it (kind ``daemon``) only when it changed the table."""
        new_state, outcomes = table.apply(self.state, fact, at=at)
        if new_state == self.state:
            return 0
        with self.ledger.batch():
            self.ledger.write("daemon", {"event": to_record(fact)}, at=at)
            self.ledger.remember(state=new_state)
            return self.ledger.publish(outcomes, at) if outcomes else 0

    def _report_bad_frames(self, report: dict[str, object], at: datetime) -> None:
        self.log.warning("bad frames counted, not kept in full", **report)
        self.ledger.write("device", {"bad_frames": report}, at=at)

    # ------------------------------------------------------------------ host facts

    def journal_fault_over(self, since: datetime, error: str, held: int) -> int:
        """The journal works again after refusing since ``since``: the outage goes into
        the record (when, why, how many events waited) and ``JOURNAL_FAULT`` clears, in
        one transaction. Returns the messages queued."""
        at = self.clock()
        with self.ledger.batch():
            self.ledger.write(
                "daemon",
                {
                    "journal_fault": {
                        "since": format_ts(since),
                        "until": format_ts(at),
                        "error": error,
                        "held": held,
                    }
                },
                at=at,
            )
            return self._host_fact(JournalWritable(), at)

    def journal_refused(self, error: str) -> int:
        """Raise ``JOURNAL_FAULT`` (``JournalRefused``): the shell calls this once the
        reserve's room is free (``daemon.disk``). Returns the messages queued."""
        return self._host_fact(JournalRefused(error=error), self.clock())

    def journal_writable(self) -> int:
        """Clear a ``JOURNAL_FAULT`` left by a daemon stopped while its journal refused (a
        start writes its records, so the journal writes). Returns the messages queued."""
        return self._host_fact(JournalWritable(), self.clock())

    def broker_login(self, *, refused: bool, user: str | None) -> int:
        """The broker refused the table's login after the start, or takes it again
        (``MQTT_LOGIN_REFUSED``). Returns the messages queued."""
        return self._host_fact(BrokerLoginChecked(refused=refused, user=user), self.clock())

    def software_checked(self, record: dict[str, object], problem: str | None) -> int:
        """The installed software read at start: its digest journaled (kind
        ``daemon``, ``software``), and ``SOFTWARE`` raised when ``problem`` (it matches no
        approved manifest), cleared otherwise. Returns the messages queued."""
        at = self.clock()
        with self.ledger.batch():
            self.ledger.write("daemon", {"software": record}, at=at)
            return self._host_fact(SoftwareChecked(problem=problem), at)

    def disk_checked(self, free_bytes: int, needed_bytes: int, hours: int) -> int:
        """The free space on the journal's disk against what ``hours`` of its growth need
        (``DISK_LOW``, ``daemon.disk``). Returns the messages queued."""
        fact = DiskSpaceChecked(free_bytes=free_bytes, needed_bytes=needed_bytes, hours=hours)
        return self._host_fact(fact, self.clock())

    # ------------------------------------------------------------------ health

    def journal_answers(self) -> bool:
        """True when the journal answers a query (the watchdog's check)."""
        try:
            next(iter(self.journal.records(self.journal.last_seq)), None)
        except Exception as exc:
            self.health.last_error = str(exc)
            return False
        return True
