"""One table, wired: the async shell around the table's synchronous core.

``TableDaemon(config).run()`` opens the journal, builds what the rules would otherwise
build at the first event (``rules.table.warm_up``), builds the ``TableCore`` (which replays
the journal: ``daemon.core``), collects and freezes what the start left (``settle_heap``;
the last two so that a first frame is ACKed within 250 ms like any other, link-layer.md),
then runs under one asyncio ``TaskGroup`` until cancelled: a driver per device, the MQTT
link, the timer (``TableCore.tick`` every second: alarms that clear after a quiet time) and
the watchdog. The order of work for every device frame is the guarantee the table relies on:

1. the driver hands the frame's fact to ``TableCore.ingest``, which journals it, applies
   the rules and writes every message they publish to the journal's outbox, in one SQLite
   transaction (``synchronous=FULL``) and without an ``await``: no request or other frame
   can interleave;
2. only then does the driver acknowledge the frame (its ACK is sent when this loop asks
   for the next event), so an ACK means the event is durable, and a crash before it
   makes the device send the frame again;
3. the MQTT link publishes the outbox in order whenever the broker is reachable.

A stickperson's request from MQTT goes to the table's request desk
(``daemon.desk.RequestDesk.decide``) the same way; what it leaves to do comes back as a
value (``daemon.desk.Answer``): the copies a resend is served, which this shell hands to
the MQTT link, and an admitted ``request/authenticate``, whose files it reads off the event
loop. The desk and the table never hold the link.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeVar, assert_never

import structlog

from contract.manifest import ManifestError, load_manifest, public_keys
from contract.software import (
    Component,
    SoftwareError,
    components,
    first_difference,
    installed_root,
    parse_seed,
    seeded,
    whole_digest,
)
from contract.vocabulary import lammer_version
from daemon.clock import Clock, utc_now
from daemon.config import TableConfig
from daemon.core import TableCore
from daemon.desk import Answer, RequestDesk
from daemon.disk import DISK_CHECK_S, GrowthMeter, Reserve, free_bytes, journal_bytes, reserve_path
from daemon.errors import JournalError, MetricsListenError
from daemon.journal import Journal
from daemon.mqtt import MqttLink
from daemon.notify import Notifier
from daemon.publications import retained_topics
from daemon.requests import Incoming
from daemon.segments import Segment, open_live, remove_segment
from daemon.tally import DeviceCounts, Tally
from drivers.driver import DeviceDriver
from drivers.events import (
    BadFrameReceived,
    Connected,
    Disconnected,
    DriverEvent,
    NoiseReceived,
    Received,
)
from foundation.backoff import Backoff
from rules import table
from rules.events import Device, DeviceConnected, DeviceDisconnected

if TYPE_CHECKING:
    from metrics.endpoint import MetricsServer

log = structlog.get_logger("lammer.daemon")

JOURNAL_RETRY_S = 1.0
"""How often an event the journal refused is tried again."""

JOURNAL_FAULT_LOG_S = 5.0
"""How often a journal that still refuses is logged again."""

ARCHIVE_COMMAND_TIMEOUT_S = 600.0
"""How long an ``[journal] archive_command`` may take for one segment."""

REPLAY_EXTENSION_S = 30.0
"""Seconds of start time asked of systemd (EXTEND_TIMEOUT_USEC) at each step of a long
journal replay (systemd/lammer@.service: READY comes only after the replay)."""

TICK_S: Final = 1.0
"""Seconds between the timer's calls of ``TableCore.tick`` (``LINK_ERRORS`` clears within
a tick of its quiet time)."""

Handled = TypeVar("Handled", int, Answer)
"""What a call of the table or its desk returns: the messages it queued, or a request's
``Answer`` (which holds them)."""


class TableDaemon:
    """The table daemon for one configuration. ``await run()`` until cancelled."""

    def __init__(
        self,
        config: TableConfig,
        *,
        clock: Clock = utc_now,
        notifier: Notifier | None = None,
        replay_extend_every: int = 50_000,
        disk_check_every: float = DISK_CHECK_S,
    ) -> None:
        self.config = config
        self.clock = clock
        # A long replay asks systemd for more start time every this many records (about
        # a second's work), so TimeoutStartSec bounds a stuck start, not a long journal.
        self.replay_extend_every = replay_extend_every
        self.notifier = notifier if notifier is not None else Notifier.from_env()
        self.log = log.bind(table=config.table.id)
        self.reserve = Reserve(reserve_path(config.journal_path))
        self._fault = JournalFault(self.log, self.reserve)
        self._logins: asyncio.Queue[bool] = asyncio.Queue()
        """The broker refused the login (True) or took it again (False), after the start:
        the MQTT link tells, ``_login_watch`` hands it to the table (``MQTT_LOGIN_REFUSED``)."""
        self.disk_check_every = disk_check_every
        self.growth = GrowthMeter()
        self.software_root = installed_root()
        """The folder holding the lammer packages this process runs: what is authenticated."""
        self.software: SoftwareCheck | None = None
        """The installed software as read at start, checked against ``[software]``."""
        self.tally = Tally()
        """What ``[metrics]`` counts as the shell works (``daemon.tally``)."""
        if config.metrics is not None:
            # Loaded now, before the start's heap is settled (``settle_heap``), not after.
            import daemon.metrics  # noqa: F401
            import metrics.endpoint  # noqa: F401

    async def run(self) -> None:
        """Open the journal, replay it, then run drivers and MQTT until cancelled."""
        # Every line logged inside names the table, the drivers' and the MQTT link's
        # included; tasks started here copy the context.
        with structlog.contextvars.bound_contextvars(table=self.config.table.id):
            journal = open_live(self.config.journal_path, key=self.config.journal.read_key())
            core: TableCore | None = None
            try:
                # After the journal opened: a journal that cannot open is the start's one
                # line (the digest is journaled below, with the start).
                self.software = check_software(self.config, self.software_root, self.log)
                core = self.open_core(journal)
                started = time.perf_counter()
                frozen = settle_heap()
                self.log.info(
                    "heap settled", frozen=frozen, seconds=round(time.perf_counter() - started, 3)
                )
                await self._run(core)
            finally:
                gc.unfreeze()  # what run() froze is the collector's again (run in process)
                # The live segment (the same object across rotations).
                journal.close()
                self.log.info("table stopped")

    def open_core(self, journal: Journal) -> TableCore:
        """The table's core on ``journal``, replayed (asking systemd for time as it goes),
        after the rules' tables are built: before the replay, which may need them, and so
        before READY."""
        started = time.perf_counter()
        built = table.warm_up(self.config.table.game)
        self.log.info(
            "rules warmed up",
            game=self.config.table.game,
            built=list(built),
            seconds=round(time.perf_counter() - started, 3),
        )
        return TableCore(
            self.config,
            journal,
            version=lammer_version(),
            software_digest=None if self.software is None else self.software.digest,
            clock=self.clock,
            on_replay_progress=lambda: self.notifier.extend_timeout(REPLAY_EXTENSION_S),
            replay_progress_every=self.replay_extend_every,
        )

    async def _run(self, core: TableCore) -> None:
        desk = RequestDesk(core)
        mqtt = self._make_mqtt(core, desk)
        # Before anything is published: seq goes on above what the broker retains, and
        # what another game of this table id left retained is cleared.
        core.upkeep.continue_after(await mqtt.survey(retained_topics(self.config.table.game)))
        core.start()
        refused = False
        if self.software is not None:
            core.software_checked(self.software.record(), self.software.problem)
            if self.software.problem is not None:
                # A table whose program cannot be verified refuses play: offline,
                # its devices never opened, SOFTWARE on its alarms; requests still answered
                # (a lab can authenticate it remotely).
                refused = True
                mqtt.set_available(False)
                self.log.error(
                    "software not approved: the table stays closed",
                    problem=self.software.problem,
                )
        core.journal_writable()  # a JOURNAL_FAULT a stopped daemon left: the start wrote
        if not self.reserve.ensure():
            self.log.warning(
                "no room for the journal's reserve: a full disk will take the table offline "
                "without a JOURNAL_FAULT alarm",
                path=str(self.reserve.path),
            )
        metrics = self._metrics_server(core, mqtt)
        try:
            if metrics is not None:
                try:
                    await metrics.start()
                except OSError as exc:  # a port in use: the daemon stops with a sentence
                    raise MetricsListenError(str(metrics.settings), exc) from exc
                self.log.info("metrics served", listen=str(metrics.settings))
            async with asyncio.TaskGroup() as tg:
                tg.create_task(mqtt.run(), name="mqtt")
                for device, driver in [] if refused else self._make_drivers(core):
                    tg.create_task(self._pump(core, mqtt, device, driver), name=f"driver-{device}")
                tg.create_task(self._watchdog(core), name="watchdog")
                tg.create_task(self._timer(core, desk, mqtt), name="timer")
                tg.create_task(self._disk_watch(core, mqtt), name="disk")
                tg.create_task(self._login_watch(core, mqtt), name="login")
                self.notifier.ready()
                self.notifier.status("running")
                self.log.info("table running", game=self.config.table.game)
        finally:
            self.notifier.stopping()
            if metrics is not None:
                await metrics.stop()
            await mqtt.close()
            try:
                core.close()  # a snapshot: the next start replays nothing
            except JournalError as exc:
                self.log.error("no snapshot at stop: the journal refused it", error=str(exc))

    def _metrics_server(self, core: TableCore, mqtt: MqttLink) -> MetricsServer | None:
        """The ``[metrics]`` endpoint on this table's own registry, or None (not asked).
        Imported only then: a table without metrics loads neither aiohttp nor
        prometheus_client."""
        if self.config.metrics is None:
            return None
        from daemon.metrics import TableCollector, table_registry
        from metrics.endpoint import MetricsServer

        collector = TableCollector(
            core=core,
            link=mqtt,
            tally=self.tally,
            growth=self.growth,
            journal_path=self.config.journal_path,
            version=core.version,
            devices=table.devices_for(self.config.table.game),
        )
        registry = table_registry(collector, self.tally)
        return MetricsServer(registry, self.config.metrics.settings())

    def _make_mqtt(self, core: TableCore, desk: RequestDesk) -> MqttLink:
        m = self.config.mqtt
        link: MqttLink | None = None

        def built() -> MqttLink:
            if link is None:  # the link calls back only once running, after it is assigned
                raise RuntimeError("the MQTT link called back before it was built")
            return link

        async def on_request(incoming: Incoming) -> None:
            await self._serve(core, desk, built(), incoming)

        def on_journal_error() -> None:
            self._fault.begin("the journal refuses to mark messages published", built(), core)

        link = MqttLink(
            host=m.host,
            port=m.port,
            client_id=self.config.client_id,
            base_topic=self.config.base_topic,
            outbox=core.journal,
            on_request=on_request,
            username=m.username,
            password=m.read_password(),
            tls=m.tls,
            keepalive=m.keepalive,
            backoff=Backoff(initial=m.reconnect_initial, maximum=m.reconnect_max),
            floor_resend=m.floor_resend,
            on_journal_error=on_journal_error,
            on_login=self._logins.put_nowait,
            on_published=self.tally.published,
        )
        return link

    async def _serve(
        self, core: TableCore, desk: RequestDesk, link: MqttLink, incoming: Incoming
    ) -> None:
        """A request from the MQTT link, decided by the desk (durably); the copies a resend
        is served go to the link; an admitted ``request/authenticate`` has its files read
        now, off the event loop (tens of ms: the requests behind it wait, devices do not),
        and is answered with what was read."""
        answer = await self._durably(core, link, lambda: desk.decide(incoming, link))
        if answer.resend:
            link.resend(answer.resend)
        admitted = answer.authenticate
        if admitted is not None:
            seed = admitted.asked.request.seed
            read = await asyncio.to_thread(seeded_answer, self.software_root, seed)
            await self._durably(core, link, lambda: desk.authenticated(admitted, read))

    def _make_drivers(self, core: TableCore) -> list[tuple[Device, DeviceDriver]]:
        drivers: list[tuple[Device, DeviceDriver]] = []
        for device in table.devices_for(self.config.table.game):
            section = self.config.shuffler if device == "shuffler" else self.config.dice_reader
            if section is None:  # load_config refuses a game without its device's section
                raise ValueError(f"no [{device}] section for a {self.config.table.game} table")
            driver = DeviceDriver(
                section.driver_settings(device), last_frame=core.last_frames.get(device)
            )
            drivers.append((device, driver))
        return drivers

    # ------------------------------------------------------------------ devices

    async def _pump(
        self, core: TableCore, mqtt: MqttLink, device: Device, driver: DeviceDriver
    ) -> None:
        """Journal, apply and publish every event of one driver, in order."""
        dlog = self.log.bind(device=device)
        counts = self.tally.device(device)
        async for event in driver.events():
            arrived = time.monotonic()
            count_event(counts, event)
            queued = await self._durably(
                core, mqtt, functools.partial(on_driver_event, core, device, event, dlog)
            )
            if queued and isinstance(event, Received):
                # Nothing is published before this: the link runs at the next await.
                self.tally.frame_queued(core.journal.last_seq, arrived)
            # Returning to the driver's iterator sends the ACK: the fact is durable now.

    async def _durably(
        self, core: TableCore, mqtt: MqttLink, handle: Callable[[], Handled]
    ) -> Handled:
        """Run ``handle`` (a call of the table or its desk: journal, apply, queue) until the
        journal takes it.

        While the journal refuses (a full disk, an I/O error) the event is held: nothing
        is acknowledged (the device sends the frame again: nothing is lost), the table is
        published ``offline`` (a screen shows it closed: no payout can be trusted to the
        record now), and an error is logged every ``JOURNAL_RETRY_S``. When the journal
        takes it again, the outage goes into the record and the table is ``online``.
        Returns what ``handle`` returned."""
        while True:
            if self._fault.since is not None and not self._fault.room():
                # Nothing is written into the reserve's room but the fault's own record:
                # the event waits until space has really returned (the reserve whole
                # again and a margin beyond it: no table reopening into a full disk).
                await self._fault.wait()
                continue
            try:
                handled = handle()
            except JournalError as exc:
                await self._fault.hold(exc, mqtt, core)
                with contextlib.suppress(JournalError):
                    core.journal.reconnect()  # from what is on disk, not a stuck connection
                continue
            if self._fault.since is not None:
                self._fault.over(core, mqtt)  # stays faulted if the record cannot be kept
            if (handled if isinstance(handled, int) else handled.queued) > 0:
                mqtt.notify()
            return handled

    async def _login_watch(self, core: TableCore, mqtt: MqttLink) -> None:
        """What the MQTT link says of its login, journaled as the table's alarm."""
        user = self.config.mqtt.username
        while True:
            refused = await self._logins.get()
            await self._durably(core, mqtt, partial(core.broker_login, refused=refused, user=user))

    async def _disk_watch(self, core: TableCore, mqtt: MqttLink) -> None:
        """``DISK_LOW`` (``daemon.disk``): every ``disk_check_every`` seconds, the journal's
        growth measured and the free space compared with what ``[journal] disk_low_hours``
        of it need; at once at the start (a disk already low)."""
        hours = self.config.journal.disk_low_hours
        folder = self.config.journal_path.parent
        while True:
            try:
                self.growth.sample(time.monotonic(), journal_bytes(self.config.journal_path))
                free = free_bytes(folder)
            except OSError as exc:
                self.log.warning("cannot measure the journal's disk", error=str(exc))
            else:
                needed = self.growth.needed(hours)
                check = functools.partial(core.disk_checked, free, needed, hours)
                await self._durably(core, mqtt, check)
            await asyncio.sleep(self.disk_check_every)

    async def _timer(self, core: TableCore, desk: RequestDesk, mqtt: MqttLink) -> None:
        """The rules' clock and the journal's upkeep: ``TableCore.tick`` every ``TICK_S``
        (after the desk's counts of requests not served one by one), and the closed
        segments past the retention removed after a rotation."""
        while True:
            await asyncio.sleep(TICK_S)
            await self._durably(core, mqtt, lambda: core.watch_clock(time.monotonic()))
            await self._durably(core, mqtt, desk.flush_drops)
            await self._durably(core, mqtt, core.tick)
            for segment in core.upkeep.take_expired():
                await self._remove_segment(core, segment)

    async def _remove_segment(self, core: TableCore, segment: Segment) -> None:
        """Hand an expired segment to ``[journal] archive_command`` (removed once it exits
        0), or remove it; either way journaled. A failing command keeps the segment, for the
        next rotation to try again."""
        command = self.config.journal.archive_command
        slog = self.log.bind(segment=segment.path.name)
        if command is not None:
            try:
                proc = await asyncio.create_subprocess_exec(
                    str(command),
                    str(segment.path),
                    stdin=asyncio.subprocess.DEVNULL,
                    stdout=asyncio.subprocess.DEVNULL,
                    stderr=asyncio.subprocess.PIPE,
                )
                async with asyncio.timeout(ARCHIVE_COMMAND_TIMEOUT_S):
                    _, err = await proc.communicate()
            except (OSError, TimeoutError) as exc:
                slog.error("archive command failed; segment kept", error=str(exc) or "timed out")
                return
            if proc.returncode != 0:
                slog.error(
                    "archive command failed; segment kept",
                    status=proc.returncode,
                    stderr=err.decode(errors="replace")[-500:],
                )
                return
        remove_segment(segment.path)
        how = "archive command, then deleted" if command is not None else "deleted"
        core.upkeep.removed(segment, how)
        slog.info("journal segment removed (past the retention)", how=how)

    # ------------------------------------------------------------------ health

    async def _watchdog(self, core: TableCore) -> None:
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
        health = core.health
        loop = asyncio.get_running_loop()
        due = loop.time()
        while True:
            lag = loop.time() - due
            if lag > stall:
                health.last_error = f"event loop stalled {lag:.1f} s"
            # A journal that refuses writes (a full disk) is no reason to restart: the
            # table says offline and waits for space (``_durably``); reads must work.
            healthy = lag <= stall and core.journal_answers()
            if healthy:
                self.notifier.watchdog()
            else:
                self.log.error("unhealthy: not feeding the watchdog", error=health.last_error)
            due = loop.time() + interval
            await asyncio.sleep(interval)


def settle_heap() -> int:
    """Collect what the start left (imports, the rules' tables, the replay) and take what
    survives out of the garbage collector's reach (``gc.freeze``); returns how many objects
    that is. Otherwise the first full collections of a running table scan it all, 35 to
    75 ms during the first rounds on the bench machine, while a device waits for its ACK
    (link-layer.md: 250 ms). Objects frozen are still freed by reference counting; only
    cycles among them would be kept."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


@dataclass(frozen=True, slots=True)
class SoftwareCheck:
    """The installed software as read at start: its digest, how long reading it took, and
    against ``[software]``'s manifests which one it matches or the problem (a sentence)."""

    digest: str | None
    """None when the files could not be read."""
    count: int
    ms: float
    approved: str | None
    problem: str | None

    def record(self) -> dict[str, object]:
        """What the journal keeps of it (kind ``daemon``, ``software``)."""
        return {
            "version": lammer_version(),
            "digest": self.digest,
            "components": self.count,
            "ms": self.ms,
            "approved": self.approved,
            "problem": self.problem,
        }


def check_software(config: TableConfig, root: Path, log: Any) -> SoftwareCheck:
    """Read the installed components now (``contract.software``) and check them against
    the approved manifests of ``[software]``, if any."""
    started = time.perf_counter()
    try:
        parts = components(root)
    except SoftwareError as exc:
        # Closed only where approved manifests are required; else published as unknown.
        log.error("installed software unreadable", error=str(exc))
        unread = f"the installed software cannot be read: {exc}"
        return SoftwareCheck(None, 0, 0.0, None, unread if config.software.manifests else None)
    digest = whole_digest(parts)
    ms = round((time.perf_counter() - started) * 1000, 1)
    approved, problem = _approval(config, parts, digest)
    log.info(
        "software digest",
        digest=digest,
        components=len(parts),
        ms=ms,
        approved=approved,
        problem=problem,
    )
    return SoftwareCheck(digest, len(parts), ms, approved, problem)


def _approval(
    config: TableConfig, parts: tuple[Component, ...], digest: str
) -> tuple[str | None, str | None]:
    section = config.software
    if not section.manifests:
        return None, None
    try:
        keys = public_keys(section.public_keys)
        manifests = [load_manifest(p, keys) for p in section.manifests]
    except ManifestError as exc:
        return None, f"the software cannot be verified: {exc}"
    for manifest in manifests:
        if manifest.digest == digest:
            return manifest.name, None
    version = lammer_version()
    closest = next((m for m in manifests if m.version == version), manifests[0])
    actual = {c.path: c.digest for c in parts}
    found = first_difference(actual, dict(closest.components))
    what = "its components differ" if found is None else found[1]
    return None, (
        f"the installed software matches no approved release manifest: {what} "
        f"(against {closest.name}, lammer {closest.version})"
    )


def seeded_answer(root: Path, seed_hex: str) -> tuple[tuple[Component, ...], str] | str:
    """``request/authenticate``'s answer read now: the components' HMACs under the seed and
    the whole's, or a sentence why the files cannot be read. Runs in a worker thread."""
    try:
        return seeded(components(root), parse_seed(seed_hex))
    except SoftwareError as exc:
        return f"the installed software cannot be read: {exc}"


class JournalFault:
    """A journal that refuses to write, while it does: since when, why, how many held.

    The first refusal (a device event's, a request's, the timer's, or the MQTT link's mark
    of a message published) takes the table offline at once, frees the disk's reserve
    (``daemon.disk``) and records ``JOURNAL_FAULT`` in its room, so both reach the displays
    within the second. Events are tried again only once space has really returned
    (``Reserve.returned``)."""

    def __init__(self, log: Any, reserve: Reserve | None = None) -> None:
        self.log = log
        self.reserve = reserve
        self.since: datetime | None = None
        self.error = ""
        self.held = 0
        self._logged = 0.0

    def begin(self, error: str, mqtt: MqttLink, core: TableCore) -> None:
        """The first refusal: offline, then the alarm written into the reserve's room.
        Nothing when the fault is already known."""
        if self.since is not None:
            return
        self.since = utc_now()
        self.error = error
        self._logged = time.monotonic()
        mqtt.set_available(False)
        self.log.error(
            "journal refuses to write: nothing is acknowledged and the table is offline"
            " until it works again",
            error=error,
        )
        if self.reserve is None or not self.reserve.release():
            return
        try:
            core.journal.reconnect()
            queued = core.journal_refused(error)
        except JournalError as exc:
            self.log.error("JOURNAL_FAULT could not be recorded", error=str(exc))
            return
        if queued:
            mqtt.notify()

    async def hold(self, exc: JournalError, mqtt: MqttLink, core: TableCore) -> None:
        """One refusal: the first begins the fault; errors are logged every
        ``JOURNAL_FAULT_LOG_S``."""
        self.held += 1
        if self.since is None:
            self.begin(str(exc), mqtt, core)
        else:
            self._log_still(str(exc))
        await asyncio.sleep(JOURNAL_RETRY_S)

    async def wait(self) -> None:
        """An event held while the disk has no room yet."""
        self.held += 1
        self._log_still(self.error)
        await asyncio.sleep(JOURNAL_RETRY_S)

    def _log_still(self, error: str) -> None:
        now = time.monotonic()
        if now - self._logged >= JOURNAL_FAULT_LOG_S:
            self._logged = now
            self.log.error("journal still refuses to write", error=error, held=self.held)

    def room(self) -> bool:
        """Whether the journal may be tried again: space has really returned (the reserve
        allocated whole again and a margin free beyond it: ``Reserve.returned``), or no
        reserve kept."""
        return self.reserve is None or self.reserve.returned()

    def over(self, core: TableCore, mqtt: MqttLink) -> None:
        """The journal may work again: the outage goes into the record, and only when it
        does (a tick that wrote nothing proves nothing) is the table online again. Nothing
        when there is no fault to end."""
        if self.since is None:
            return
        try:
            queued = core.journal_fault_over(self.since, self.error, self.held)
        except JournalError:
            return
        held, error = self.held, self.error
        self.since, self.error, self.held = None, "", 0
        mqtt.set_available(True)
        if queued:
            mqtt.notify()
        self.log.info("journal writes again: the table is online", held=held, error=error)


def count_event(counts: DeviceCounts, event: DriverEvent) -> None:
    """One driver event in its device's counts (``[metrics]``)."""
    match event:
        case Received():
            counts.frames += 1
        case BadFrameReceived():
            counts.naks += 1  # the driver NAKed it already
        case NoiseReceived():
            counts.noise += 1
        case Disconnected():
            counts.disconnects += 1
        case _:
            pass


def on_driver_event(core: TableCore, device: Device, event: DriverEvent, dlog: Any) -> int:
    """Hand one driver event to the core; returns the number of messages queued."""
    match event:
        case Connected(url=url):
            dlog.info("device connected", url=url)
            return core.ingest(device, DeviceConnected(device=device))
        case Disconnected(url=url, reason=reason):
            dlog.warning("device disconnected", url=url, reason=reason)
            return core.ingest(device, DeviceDisconnected(device=device, reason=reason))
        case BadFrameReceived(raw=raw, reason=reason):
            # Logged by the core, within its bounds (daemon.bad_frames).
            return core.bad_frame(device, raw, reason)
        case NoiseReceived(raw=raw, size=size):
            return core.noise(device, raw, size)
        case Received(fact=fact, seq=link_seq, raw=raw, probe=probe):
            return core.ingest(device, fact, link_seq=link_seq, raw=raw, probe=probe)
        case _:
            assert_never(event)


def install_signal_handlers(task: asyncio.Task[None]) -> None:
    """SIGTERM, SIGINT and SIGHUP (a closed terminal) cancel the daemon's task: a clean
    stop (offline published, journal closed). SIGUSR1 logs every asyncio task with where
    it waits (``kill -USR1``: what a stuck daemon is doing, without stopping it)."""
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, task.cancel)
    with contextlib.suppress(NotImplementedError):
        loop.add_signal_handler(signal.SIGUSR1, log_tasks)


def log_tasks() -> None:
    """Log every asyncio task of the loop, with the stack where it waits."""
    for running in asyncio.all_tasks():
        frames = [
            f"{f.f_code.co_filename}:{f.f_lineno} {f.f_code.co_name}"
            for f in running.get_stack(limit=12)
        ]
        log.warning(
            "task",
            task=running.get_name(),
            done=running.done(),
            cancelling=running.cancelling(),
            stack=frames,
        )
