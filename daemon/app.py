"""One table, wired: drivers -> journal -> rules -> journal (outbox) -> MQTT.

Everything runs on one asyncio loop under one ``TaskGroup``. The order of work for every
device frame is the guarantee the table relies on:

1. the fact is written to the journal (one SQLite transaction, ``synchronous=FULL``);
2. the rules' table machine turns it into a new state and outcomes (pure, no I/O);
3. every message those outcomes and state changes publish is written to the journal's
   outbox, with its ``seq`` and ``ts``;
4. only then does the driver acknowledge the frame (its ACK is sent when the loop asks
   for the next event), so an ACK means the event is durable, and a crash before it
   makes the device send the frame again;
5. the MQTT link publishes the outbox in order whenever the broker is reachable.

Steps 1 to 3 contain no ``await``: no request or other frame can interleave with them.
A stickperson's decision is checked by the rules first and journaled only when legal; a
rejected request is journaled too, with its reason, and answered with an error.

On start the table is rebuilt by replaying the journal through the same rules with the
recorded times, so the state (open round, craps series, pending roll, alarms) is exactly
what it was, and ``seq`` goes on from where it stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.metadata
import json
import signal
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, assert_never

import structlog

from daemon import payloads
from daemon.config import TableConfig
from daemon.journal import Journal
from daemon.mqtt import Backoff, MqttLink
from daemon.notify import Notifier
from daemon.records import from_record, to_record
from daemon.requests import RequestError, parse_request, response_body
from drivers.driver import DeviceDriver
from drivers.events import BadFrameReceived, Connected, Disconnected, DriverEvent, Received
from rules import bust_bonus, craps, table
from rules.errors import DecisionError, RulesError
from rules.events import (
    AlarmCleared,
    AlarmRaised,
    Decision,
    Device,
    DeviceConnected,
    DeviceDisconnected,
    DeviceFact,
    DiceRolled,
    NoRoll,
    Outcome,
    RollCheck,
)

log = structlog.get_logger("lammer.daemon")

Clock = Callable[[], datetime]

REPLAY_EXTENSION_S = 30.0
"""Seconds of start time asked of systemd (EXTEND_TIMEOUT_USEC) at each step of a long
journal replay (systemd/lammer@.service: READY comes only after the replay)."""


def lammer_version() -> str:
    """The installed lammer's version (``info``, ``--version``)."""
    try:
        return importlib.metadata.version("lammer")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - run from a checkout
        return "unknown"


def utc_now() -> datetime:
    """The daemon's clock: UTC, millisecond resolution (as ``ts`` is published)."""
    now = datetime.now(UTC)
    return now.replace(microsecond=now.microsecond // 1000 * 1000)


@dataclass
class Health:
    """What the watchdog looks at: the loop runs and the journal answers."""

    journal_ok: bool = True
    last_error: str | None = None


class TableDaemon:
    """The table daemon for one configuration. ``await run()`` until cancelled."""

    def __init__(
        self,
        config: TableConfig,
        *,
        clock: Clock = utc_now,
        notifier: Notifier | None = None,
        replay_extend_every: int = 50_000,
    ) -> None:
        self.config = config
        self.clock = clock
        # A long replay asks systemd for more start time every this many records (about
        # a second's work), so TimeoutStartSec bounds a stuck start, not a long journal.
        self.replay_extend_every = replay_extend_every
        self.notifier = notifier if notifier is not None else Notifier.from_env()
        self.health = Health()
        self.log = log.bind(table=config.table.id)
        self.journal: Journal | None = None
        self.mqtt: MqttLink | None = None
        self.state: table.TableState | None = None
        # The body (without seq and ts) last queued for each retained state topic, so an
        # unchanged state is not published again.
        self._published_state: dict[str, dict[str, Any]] = {}
        # The last frame journaled from each device, (link seq, raw bytes). A frame can be
        # journaled and its ACK never reach the device (the daemon died between the two,
        # or the ACK was lost and the daemon died before the resend); after a restart the
        # device sends it again, and the driver must ACK it without delivering it twice
        # (link-layer.md: "must not process it twice").
        self._last_frames: dict[Device, tuple[int, bytes]] = {}
        c = config
        self._info_body = payloads.build_info(
            version=lammer_version(),
            game=c.table.game,
            craps_paytable=c.bonus_craps.paytable,
            decks=c.bust_bonus.decks,
            dealer_hits_soft_17=c.bust_bonus.dealer_hits_soft_17,
        ).body

    # ------------------------------------------------------------------ lifecycle

    async def run(self) -> None:
        """Open the journal, replay it, then run drivers and MQTT until cancelled."""
        # Every line logged inside names the table, the drivers' and the MQTT link's
        # included (issue 5, "Logs": each line bound to table, device and round or roll);
        # tasks started here copy the context.
        with structlog.contextvars.bound_contextvars(table=self.config.table.id):
            await self._run()

    async def _run(self) -> None:
        journal = Journal.open(self.config.journal_path)
        self.journal = journal
        try:
            self._replay()
            self._on_start()
            mqtt = self._make_mqtt(journal)
            self.mqtt = mqtt
            try:
                async with asyncio.TaskGroup() as tg:
                    tg.create_task(mqtt.run(), name="mqtt")
                    for device, driver in self._make_drivers():
                        tg.create_task(self._pump(device, driver), name=f"driver-{device}")
                    tg.create_task(self._watchdog(), name="watchdog")
                    self.notifier.ready()
                    self.notifier.status("running")
                    self.log.info("table running", game=self.config.table.game)
            finally:
                self.notifier.stopping()
                await mqtt.close()
        finally:
            journal.close()
            self.log.info("table stopped")

    def _make_mqtt(self, journal: Journal) -> MqttLink:
        m = self.config.mqtt
        return MqttLink(
            host=m.host,
            port=m.port,
            client_id=self.config.client_id,
            base_topic=self.config.base_topic,
            outbox=journal,
            on_request=self.handle_request,
            username=m.username,
            password=m.read_password(),
            tls=m.tls,
            keepalive=m.keepalive,
            backoff=Backoff(initial=m.reconnect_initial, maximum=m.reconnect_max),
        )

    def _make_drivers(self) -> list[tuple[Device, DeviceDriver]]:
        drivers: list[tuple[Device, DeviceDriver]] = []
        for device in table.devices_for(self.config.table.game):
            section = self.config.shuffler if device == "shuffler" else self.config.dice_reader
            assert section is not None  # load_config checks the game's device is configured
            drivers.append(
                (
                    device,
                    DeviceDriver(
                        device=device,
                        url=section.port,
                        baudrate=section.baudrate,
                        bytesize=section.bytesize,
                        parity=section.parity,
                        stopbits=section.stopbits,
                        xonxoff=section.xonxoff,
                        rtscts=section.rtscts,
                        ack_deadline=section.ack_deadline,
                        silence_timeout=section.silence_timeout,
                        reconnect_initial=section.reconnect_initial,
                        reconnect_max=section.reconnect_max,
                        last_frame=self._last_frames.get(device),
                    ),
                )
            )
        return drivers

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

    def _replay(self) -> None:
        """Rebuild the table from the journal, exactly, with the recorded times."""
        assert self.journal is not None
        state: table.TableState | None = None
        facts = 0
        for count, record in enumerate(self.journal.records(), start=1):
            if count % self.replay_extend_every == 0:
                self.notifier.extend_timeout(REPLAY_EXTENSION_S)
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
            link_seq, raw = record.record.get("link_seq"), record.record.get("raw")
            if isinstance(link_seq, int) and isinstance(raw, str):
                self._last_frames[_device_of(event)] = (link_seq, raw.encode("ascii", "replace"))
            try:
                state, _ = table.apply(state, event, at=record.ts)
                facts += 1
            except RulesError as exc:  # pragma: no cover - a decision is journaled only when legal
                self.log.error("journal record not replayable", seq=record.seq, error=str(exc))
        self.state = state if state is not None else self._initial_state(self.clock())
        self.log.info(
            "journal replayed",
            events=facts,
            last_seq=self.journal.last_seq,
            round=table.open_round_id(self.state),
        )

    def _on_start(self) -> None:
        """After a restart no device is connected yet, whatever the journal last said."""
        assert self.state is not None
        for device, device_state in self.state.devices:
            if device_state.connected:
                self.ingest(DeviceDisconnected(device=device, reason="lammer restarted"))
        self._publish_state(self.clock())

    # ------------------------------------------------------------------ devices

    async def _pump(self, device: Device, driver: DeviceDriver) -> None:
        """Journal, apply and publish every event of one driver, in order."""
        dlog = self.log.bind(device=device)
        async for event in driver.events():
            self._on_driver_event(device, event, dlog)
            # Returning to the driver's iterator sends the ACK: the fact is durable now.

    def _on_driver_event(self, device: Device, event: DriverEvent, dlog: Any) -> None:
        match event:
            case Connected(url=url):
                dlog.info("device connected", url=url)
                self.ingest(DeviceConnected(device=device))
            case Disconnected(url=url, reason=reason):
                dlog.warning("device disconnected", url=url, reason=reason)
                self.ingest(DeviceDisconnected(device=device, reason=reason))
            case BadFrameReceived(raw=raw, reason=reason):
                dlog.warning("bad frame", reason=reason, size=len(raw))
                dlog.debug("bad frame bytes", raw=raw.hex())
                self._journal(
                    "device",
                    {"bad_frame": {"device": device, "raw": raw.hex(), "reason": reason}},
                )
            case Received(fact=fact, seq=link_seq, raw=raw):
                self.ingest(fact, link_seq=link_seq, raw=raw)
            case _:
                assert_never(event)

    def ingest(self, fact: DeviceFact, *, link_seq: int | None = None, raw: bytes = b"") -> None:
        """Journal one device fact, apply it, and queue what it publishes. No ``await``."""
        assert self.state is not None
        at = self.clock()
        record: dict[str, Any] = {"event": to_record(fact)}
        if link_seq is not None:
            record["link_seq"] = link_seq
            record["raw"] = raw.decode("ascii", "replace")
        # One transaction (one fsync) for the fact and everything it publishes.
        with self._batch():
            seq = self._journal("device", record, at=at)
            flog = self.log.bind(seq=seq, **_context(fact))
            flog.info("device event", fact=type(fact).__name__, **_public_fields(fact))
            try:
                self.state, outcomes = table.apply(self.state, fact, at=at)
            except RulesError as exc:  # a fact never raises by design; keep running if it does
                flog.error("rules rejected a device fact", error=str(exc))
                return
            self._publish(outcomes, at)

    # ------------------------------------------------------------------ requests

    async def handle_request(self, name: str, payload: bytes) -> None:
        """A stickperson's request from MQTT: check, journal, apply, answer. No ``await``
        between the check and the journal."""
        assert self.state is not None
        at = self.clock()
        request_id = _request_id(payload)
        rlog = self.log.bind(request=name, request_id=request_id)
        try:
            decision = parse_request(name, payload, at=at)
            new_state, outcomes = table.apply(self.state, decision, at=at)
        except (RequestError, DecisionError) as exc:
            rlog.warning("request rejected", error=str(exc))
            # Journaled for the record (who asked what, and why it was refused); replay
            # skips it: a "decision" record without an "event" changes nothing.
            with self._batch():
                self._journal(
                    "decision",
                    {
                        "rejected": {
                            "name": name,
                            "payload": payload.decode("utf-8", "replace"),
                            "error": str(exc),
                        }
                    },
                    at=at,
                )
                self._respond(name, request_id, str(exc), at)
            return
        with self._batch():
            seq = self._journal("decision", {"event": to_record(decision)}, at=at)
            self.state = new_state
            self._publish(outcomes, at)
            self._respond(name, request_id, None, at)
        rlog.info(
            "decision applied",
            seq=seq,
            decision=type(decision).__name__,
            roll=decision.roll_id,
            operator=decision.operator,
        )

    def _respond(
        self, name: str, request_id: str | int | None, error: str | None, at: datetime
    ) -> None:
        body = response_body(name, request_id, error)
        self._queue(f"response/{name}", body, retained=False, at=at)

    # ------------------------------------------------------------------ publishing

    def _batch(self) -> contextlib.AbstractContextManager[None]:
        assert self.journal is not None
        return self.journal.batch()

    def _journal(self, kind: str, record: dict[str, Any], *, at: datetime | None = None) -> int:
        assert self.journal is not None
        try:
            seq = self.journal.append(kind, record, ts=at or self.clock())
        except Exception as exc:
            self.health.journal_ok = False
            self.health.last_error = str(exc)
            raise
        self.health.journal_ok = True
        return seq

    def _queue(self, topic: str, body: dict[str, Any], *, retained: bool, at: datetime) -> None:
        assert self.journal is not None
        body = {"table": self.config.table.id, **body}
        self.journal.append_publish(topic, body, retained=retained, ts=at)
        if retained:
            self._published_state[topic] = _strip(body)
        if self.mqtt is not None:
            self.mqtt.notify()

    def _publish(self, outcomes: tuple[Outcome, ...], at: datetime) -> None:
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
                topic, retained, body = payloads.outcome_message(outcome)
            except ValueError as exc:
                # A bug between the rules and the payload contract must not stop the table:
                # keep the outcome in the journal for review and go on.
                # Only what names the outcome: the payload model refuses an outcome
                # precisely when it may carry a card still face down (a flagged result
                # with a hand), so its fields stay in the protected journal.
                self.log.error(
                    "outcome not publishable",
                    error=str(exc),
                    outcome=type(outcome).__name__,
                    **_context(outcome),
                )
                self._journal(
                    "daemon", {"unpublishable": to_record(outcome), "error": str(exc)}, at=at
                )
                continue
            self.log.info("outcome", topic=topic, **_outcome_fields(outcome))
            self._queue(topic, body, retained=retained, at=at)
        self._publish_state(at)

    def _publish_state(self, at: datetime) -> None:
        """Queue every retained state topic whose content changed."""
        assert self.state is not None
        for topic, body in self._state_bodies().items():
            if self._published_state.get(topic) != _strip({"table": self.config.table.id, **body}):
                self._queue(topic, body, retained=True, at=at)

    def _state_bodies(self) -> dict[str, dict[str, Any]]:
        assert self.state is not None
        state = self.state
        alarms = [
            {"code": a.code, "device": a.device, "message": a.message, "since": a.since}
            for a in table.alarms(state)
        ]
        devices: dict[str, dict[str, Any]] = {
            name: {"connected": d.connected, "status": d.status}
            | ({"mode": d.mode} if name == "shuffler" else {})
            for name, d in state.devices
        }
        bodies: dict[str, dict[str, Any]] = {
            "info": self._info_body,
            "state": payloads.state_body(game=state.game, devices=devices, alarms=alarms),
            "alarms": payloads.alarms_body(alarms),
        }
        if state.craps is not None:
            bodies["craps/board"] = payloads.craps_board_body(craps.board(state.craps))
        if state.bust is not None:
            bodies["bust_bonus/state"] = payloads.bust_bonus_state_body(bust_bonus.view(state.bust))
        return bodies

    # ------------------------------------------------------------------ health

    async def _watchdog(self) -> None:
        """Feed systemd's watchdog only while the pipeline is healthy.

        Healthy means: the event loop turns on time (this task woke up no later than
        ``[watchdog] stall_timeout`` after it meant to: a loop stuck in a blocking call
        or a runaway task fails that), and the journal answers a query. A device that is
        unplugged or a broker that is down is not unhealthy: a restart would not help, and
        alarms already say so. Every task of the pipeline runs in one TaskGroup, so a
        task that dies stops the daemon and systemd restarts it (Restart=on-failure).
        """
        interval = self.notifier.watchdog_interval
        if interval is None or not self.config.watchdog.enabled:
            return
        stall = self.config.watchdog.stall_timeout
        loop = asyncio.get_running_loop()
        due = loop.time()
        while True:
            lag = loop.time() - due
            if lag > stall:
                self.health.last_error = f"event loop stalled {lag:.1f} s"
            healthy = lag <= stall and self.health.journal_ok and self._journal_answers()
            if healthy:
                self.notifier.watchdog()
            else:
                self.log.error("unhealthy: not feeding the watchdog", error=self.health.last_error)
            due = loop.time() + interval
            await asyncio.sleep(interval)

    def _journal_answers(self) -> bool:
        assert self.journal is not None
        try:
            next(iter(self.journal.records(self.journal.last_seq)), None)
        except Exception as exc:
            self.health.last_error = str(exc)
            return False
        return True


# ---------------------------------------------------------------------- helpers


def _strip(body: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k not in ("seq", "ts")}


def _replayable(kind: str, data: dict[str, Any]) -> DeviceFact | Decision | None:
    """The fact or decision a journal record holds, or None (bad frames, publishes...)."""
    if kind not in ("device", "decision") or "event" not in data:
        return None
    event: DeviceFact | Decision = from_record(data["event"])
    return event


def _device_of(event: DeviceFact | Decision) -> Device:
    """The device a journaled frame came from (the facts without a ``device`` field are
    the dice reader's rolls and the shuffler's game frames)."""
    device: Device | None = getattr(event, "device", None)
    if device is not None:
        return device
    return "dice_reader" if isinstance(event, DiceRolled | NoRoll | RollCheck) else "shuffler"


def _request_id(payload: bytes) -> str | int | None:
    """The request's own id, echoed as it came (a string or an integer, never a bool:
    daemon/requests.py); None when it cannot be read."""
    try:
        body = json.loads(payload)
    except (ValueError, UnicodeDecodeError):
        return None
    value = body.get("request_id") if isinstance(body, dict) else None
    if isinstance(value, str | int) and not isinstance(value, bool):
        return value
    return None


def _context(fact: DeviceFact | Outcome) -> dict[str, Any]:
    """Log context of a fact or an outcome: the round or the roll it belongs to."""
    ctx: dict[str, Any] = {}
    if (round_id := getattr(fact, "round_id", None)) is not None:
        ctx["round"] = round_id
    if (roll_id := getattr(fact, "roll_id", None)) is not None:
        ctx["roll"] = roll_id
    return ctx


# Fields of a fact that may be logged at info: never a card (shuffler-icd.md, "Card data
# is secret until it is face up"). Cards reach the log only as counts.
_SECRET_FIELDS = frozenset({"cards", "card"})


def _public_fields(fact: DeviceFact) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    for name in getattr(fact, "__dataclass_fields__", {}):
        if name in ("round_id", "roll_id"):
            continue
        value = getattr(fact, name)
        if name == "cards":
            fields["card_count"] = len(value)
        elif name not in _SECRET_FIELDS:
            fields[name] = value if isinstance(value, str | int | bool | None) else str(value)
    return fields


def _outcome_fields(outcome: Outcome) -> dict[str, Any]:
    """Outcomes are published, so whatever they carry is already public."""
    fields: dict[str, Any] = {}
    for name in getattr(outcome, "__dataclass_fields__", {}):
        value = getattr(outcome, name)
        fields[name] = value if isinstance(value, str | int | bool | None) else str(value)
    return fields


def install_signal_handlers(task: asyncio.Task[None]) -> None:
    """SIGTERM and SIGINT cancel the daemon's task: a clean stop (offline published,
    journal closed)."""
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, task.cancel)
