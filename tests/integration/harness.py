"""The integration harness: one table as it runs on a table controller, with real parts.

A ``Table`` is one test's table: a TOML configuration in the test's ``tmp_path`` (journal
there too, MQTT at a real Mosquitto, a table id of its own so no test sees another's
retained topics), ``lammer-sim`` as a real subprocess serving a real pty behind a
``--link`` symlink, ``lammer run`` as a real subprocess logging to a file, and a real MQTT
subscriber (``Recorder``) that keeps every message under the table's base topic and checks
each against ``shared/spec/mqtt-api.md`` with the independent ``tests.spec_mqtt`` checker.

Nothing here sleeps to let something happen: every wait is ``Table.wait_for(predicate)``
with a deadline that only bounds a failure (the deadline is never what is tested).
Devices and requests are ordered by *phases*: a simulator plays a script to the end and
lingers; the test acts (a request, a kill); the next script is played by a new simulator
at the same ``--link`` (the daemon sees an unplug and a replug, as when a dealer swaps a
reader).

The subscriber speaks MQTT 5 with "retain as published", so the retain flag it sees is the
one the daemon set, and "no local", so the requests it publishes for the test do not come
back to it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import aiomqtt
from paho.mqtt.subscribeoptions import SubscribeOptions

from contract.follow import resent_mark
from contract.session import observe_disconnect
from contract.tasks import cancel_and_wait
from tests.conftest import Broker
from tests.spec_mqtt import SpecViolation, check_message, check_seq_order

BIN = Path(sys.executable).parent
LAMMER = str(BIN / "lammer")
LAMMER_SIM = str(BIN / "lammer-sim")
PREFIX = "lammer"

DEADLINE = 120.0
"""Seconds a wait may take before the test fails: a bound on a failure, never what is tested.
20 s was reached on a 2-core box at load 20 with the suite niced beside two busy processes
(a daemon had not logged its first line: Python's imports alone took that long)."""

T = TypeVar("T")


# ---------------------------------------------------------------------------------------
# The MQTT subscriber


@dataclass(frozen=True, slots=True)
class Received:
    """One message as the subscriber received it (topic relative to the base topic)."""

    topic: str
    payload: bytes
    retained: bool
    body: Any  # the decoded JSON object, or the text of ``availability``
    connection: int  # which of the subscriber's connections received it (1, 2, ...)
    at: float = 0.0  # when it arrived (time.time(): comparable with the daemon's log times)

    @property
    def seq(self) -> int | None:
        """The message's ``seq`` (None for ``availability``)."""
        return self.body.get("seq") if isinstance(self.body, dict) else None


class Subscriber:
    """An MQTT subscriber running in a task of its own: ``_run`` connects, subscribes, sets
    ``ready`` and keeps going until cancelled."""

    ready: asyncio.Event
    _task: asyncio.Task[None] | None

    def _name(self) -> str:
        raise NotImplementedError

    async def _run(self) -> None:
        raise NotImplementedError

    async def start(self) -> None:
        """Connect and subscribe; returns once subscribed."""
        self._task = asyncio.create_task(self._run(), name=self._name())
        async with asyncio.timeout(DEADLINE):
            await self.ready.wait()

    async def close(self) -> None:
        """Disconnect and stop: cancelled until it ends (contract.tasks.cancel_and_wait). A
        single cancel was once lost to aiomqtt's ``wait_for`` (Python 3.11) on a loaded
        machine, and the floor test's subscriber went on reconnecting until the test's
        timeout. An error of its own, other than the cancellation, is raised here."""
        if self._task is not None:
            task, self._task = self._task, None
            left = await cancel_and_wait([task], within=DEADLINE)
            assert not left, f"{self._name()} did not stop within {DEADLINE:g} s"
            if not task.cancelled() and (error := task.exception()) is not None:
                raise error


class Recorder(Subscriber):
    """A real MQTT subscriber to ``<base>/#`` that records and checks every message.

    It reconnects by itself (the broker may be stopped and started by a test); ``ready``
    is set while it is subscribed. ``login`` (user, password) is for a broker that refuses
    anonymous clients (``lammer broker-config``).
    """

    def __init__(self, broker: Broker, base: str, *, login: tuple[str, str] | None = None) -> None:
        self.broker = broker
        self.base = base
        self.login = login
        self.messages: list[Received] = []
        self.violations: list[str] = []
        self.connections = 0
        self.ready = asyncio.Event()
        self._client: aiomqtt.Client | None = None
        self._task: asyncio.Task[None] | None = None

    def _name(self) -> str:
        return f"recorder {self.base}"

    async def _run(self) -> None:
        while True:
            try:
                async with aiomqtt.Client(
                    self.broker.host,
                    self.broker.port,
                    identifier=f"test-recorder-{uuid.uuid4().hex[:8]}",
                    username=None if self.login is None else self.login[0],
                    password=None if self.login is None else self.login[1],
                    protocol=aiomqtt.ProtocolVersion.V5,
                    timeout=30,
                ) as client:
                    observe_disconnect(client)  # a broker restarted under it: no stray error
                    options = SubscribeOptions(qos=1, noLocal=True, retainAsPublished=True)
                    await client.subscribe(f"{self.base}/#", options=options)
                    self.connections += 1
                    self._client = client
                    self.ready.set()
                    async for message in client.messages:
                        self._record(message)
            except aiomqtt.MqttError:
                pass
            finally:
                self._client = None
                self.ready.clear()
            await asyncio.sleep(0.02)  # the broker is down: try again soon

    def _record(self, message: aiomqtt.Message) -> None:
        topic = message.topic.value
        payload = message.payload
        data = payload if isinstance(payload, bytes) else str(payload).encode()
        rel = topic[len(self.base) + 1 :] if topic.startswith(self.base + "/") else topic
        if rel.startswith("request/"):
            return  # another client's request (ours are not echoed: "no local")
        body: Any = None
        # A request/resend copy goes out never retained, marked (mqtt-api.md 1.3).
        retained = None if resent_mark(message) else bool(message.retain)
        try:
            body = check_message(topic, data, base=self.base, retained=retained)
        except SpecViolation as exc:
            self.violations.append(str(exc))
        self.messages.append(
            Received(rel, data, bool(message.retain), body, self.connections, time.time())
        )

    async def publish(self, topic: str, payload: bytes) -> None:
        """Publish (QoS 1) on ``<base>/<topic>`` through the subscriber's connection."""
        async with asyncio.timeout(DEADLINE):
            await self.ready.wait()
        client = self._client
        assert client is not None
        await client.publish(f"{self.base}/{topic}", payload, qos=1)

    # -- reading what arrived -------------------------------------------------------------

    def mark(self) -> int:
        """A position in the record: pass it as ``since`` to look only at later messages."""
        return len(self.messages)

    def on(self, topic: str, since: int = 0) -> list[Received]:
        """Messages of one topic, in arrival order, each ``seq`` once (a display drops a
        ``seq`` it has seen: mqtt-api.md, Conventions)."""
        seen: set[int | None] = set()
        out: list[Received] = []
        for m in self.messages[since:]:
            if m.topic != topic:
                continue
            if m.seq is not None and m.seq in seen:
                continue
            seen.add(m.seq)
            out.append(m)
        return out

    def bodies(self, topic: str, since: int = 0) -> list[dict[str, Any]]:
        """The JSON bodies of one topic, in order, each ``seq`` once."""
        return [m.body for m in self.on(topic, since) if isinstance(m.body, dict)]

    def latest(self, topic: str, since: int = 0) -> dict[str, Any] | None:
        """The last body received on a topic (the highest ``seq``), or None."""
        found = self.bodies(topic, since)
        return max(found, key=lambda b: b["seq"]) if found else None

    def seqs(self) -> set[int]:
        """Every distinct ``seq`` received."""
        return {m.seq for m in self.messages if m.seq is not None}

    def check_order(self) -> None:
        """``seq`` strictly increasing over everything received (repeats dropped)."""
        check_seq_order(m.body for m in self.messages if m.seq is not None)

    def raise_violations(self) -> None:
        """Fail the test if any message broke mqtt-api.md."""
        if self.violations:
            raise AssertionError("payloads against mqtt-api.md:\n" + "\n".join(self.violations))


async def retained_snapshot(broker: Broker, base: str) -> dict[str, Received]:
    """What a display that connects now is given: the retained message of every topic.

    A fresh MQTT 3.1.1 client subscribes to ``<base>/#``, then publishes a probe on a
    topic of its own; the broker sends the stored messages on subscribing, so everything
    received before the probe is the stored state.
    """
    probe = f"test-probe/{uuid.uuid4().hex}"
    stored: dict[str, Received] = {}
    async with aiomqtt.Client(broker.host, broker.port, timeout=30) as client:
        await client.subscribe(f"{base}/#", qos=1)
        await client.subscribe(probe, qos=1)
        await client.publish(probe, b"probe", qos=1)
        async with asyncio.timeout(DEADLINE):
            async for message in client.messages:
                topic = message.topic.value
                if topic == probe:
                    break
                payload = message.payload
                data = payload if isinstance(payload, bytes) else str(payload).encode()
                rel = topic[len(base) + 1 :]
                body = check_message(topic, data, base=base, retained=None)
                stored[rel] = Received(rel, data, bool(message.retain), body, 1)
    return stored


# ---------------------------------------------------------------------------------------
# Processes


@dataclass
class Sim:
    """One ``lammer-sim`` process."""

    proc: subprocess.Popen[bytes]
    out: Path
    err: Path

    def log_events(self) -> list[dict[str, Any]]:
        """The simulator's JSON log lines (stderr)."""
        return _json_lines(self.err)

    def done(self) -> bool:
        """It has played its script and every frame was acknowledged."""
        return any(e.get("event") == "all frames acknowledged" for e in self.log_events())

    def retransmitted(self) -> bool:
        """A frame went unacknowledged and was sent again (seen with ``debug`` only)."""
        return any(e.get("event") == "retransmit" for e in self.log_events())

    def ack_dropped(self, kind: str) -> bool:
        """The ACK of a ``kind`` frame (``HAND``) was ignored (``drop_ack``, fault or script), so
        the frame is still in flight for the device (seen with ``debug`` only)."""
        events = self.log_events()
        dropped = {e["seq"] for e in events if str(e.get("event")).startswith("ACK dropped")}
        return any(
            e.get("event") == "tx" and any(f"${kind},{seq}," in e["raw"] for seq in dropped)
            for e in events
        )

    def pty_paths(self) -> list[str]:
        """The ptys it served, in order (a replug opens a new one)."""
        return self.out.read_text().split() if self.out.exists() else []


@dataclass
class Daemon:
    """One ``lammer run`` process and its log file."""

    proc: subprocess.Popen[bytes]
    log: Path

    def log_events(self) -> list[dict[str, Any]]:
        """The daemon's JSON log lines."""
        return _json_lines(self.log)


def _json_lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    out: list[dict[str, Any]] = []
    for line in path.read_text(errors="replace").splitlines():
        with contextlib.suppress(ValueError):
            item = json.loads(line)
            if isinstance(item, dict):
                out.append(item)
    return out


def _tail(path: Path, lines: int = 40) -> str:
    if not path.exists():
        return f"({path.name}: none)"
    text = path.read_text(errors="replace").splitlines()[-lines:]
    return f"--- {path.name} (last {len(text)} lines)\n" + "\n".join(text)


def _spawn(argv: list[str], out: Path, err: Path | None) -> subprocess.Popen[bytes]:
    """Start a process with stdout to ``out`` and stderr to ``err`` (or to ``out``)."""
    with out.open("wb") as o:
        if err is None:
            return subprocess.Popen(
                argv, stdout=o, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
        with err.open("wb") as e:
            return subprocess.Popen(argv, stdout=o, stderr=e, stdin=subprocess.DEVNULL)


def _stop(proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM) -> None:
    """Stop a process we started (by its own id) and reap it."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, sig)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def card_pattern(cards: Iterable[str]) -> re.Pattern[str]:
    """A pattern finding any of ``cards`` as a card code (not inside a longer word)."""
    alternatives = "|".join(re.escape(c) for c in cards)
    return re.compile(rf"(?<![A-Za-z0-9])(?:{alternatives})(?![A-Za-z0-9])")


# ---------------------------------------------------------------------------------------
# The table


@dataclass
class Table:
    """One table under test: config, simulator, daemon and subscriber (module docstring)."""

    workdir: Path
    broker: Broker
    game: str
    extra_config: str = ""
    table_id: str = field(default="")
    mqtt_login: tuple[str, Path] | None = None
    """The daemon's ``[mqtt] username`` and ``password_file``, if the broker wants them."""
    device_port: str = ""
    """The device section's ``port`` (default: ``link``, the simulator's pty; a device
    server's ``socket://`` or ``rfc2217://`` URL in front of it)."""
    device_settings: str = ""
    """More lines of the device section (``silence_timeout = 3.0``)."""
    recorder: Recorder = field(init=False)
    sim: Sim | None = field(default=None, init=False)
    daemon: Daemon | None = field(default=None, init=False)
    sims: list[Sim] = field(default_factory=list, init=False)
    daemons: list[Daemon] = field(default_factory=list, init=False)

    def __post_init__(self) -> None:
        if not self.table_id:
            self.table_id = f"{self.game.lower()}-{uuid.uuid4().hex[:8]}"
        self.recorder = Recorder(self.broker, self.base)
        self.config_path.write_text(self.config_text())

    # -- configuration ---------------------------------------------------------------------

    @property
    def base(self) -> str:
        """``<prefix>/<table id>``."""
        return f"{PREFIX}/{self.table_id}"

    @property
    def device(self) -> str:
        """The table's device: ``dice_reader`` for craps, else ``shuffler``."""
        return "dice_reader" if self.game == "CRAPS" else "shuffler"

    @property
    def config_path(self) -> Path:
        """The table's TOML file."""
        return self.workdir / f"{self.table_id}.toml"

    @property
    def journal_path(self) -> Path:
        """The table's journal."""
        return self.workdir / "journal" / f"{self.table_id}.db"

    @property
    def link(self) -> Path:
        """The stable name of the device's pty (the simulator keeps the symlink)."""
        return self.workdir / f"{self.device}.link"

    def config_text(self) -> str:
        """The configuration: short reconnect delays so a test never waits long."""
        return (
            f'[table]\nid = "{self.table_id}"\ngame = "{self.game}"\n\n'
            f'[{self.device}]\nport = "{self.device_port or self.link}"\n'
            f"reconnect_initial = 0.05\nreconnect_max = 0.2\n{self.device_settings}\n"
            f'[mqtt]\nhost = "{self.broker.host}"\nport = {self.broker.port}\n'
            f'prefix = "{PREFIX}"\nreconnect_initial = 0.05\nreconnect_max = 0.3\n'
            + self._login_lines()
            + "\n"
            f'[journal]\npath = "{self.journal_path}"\n\n'
            '[logging]\nformat = "json"\nlevel = "info"\n\n' + self.extra_config
        )

    def _login_lines(self) -> str:
        if self.mqtt_login is None:
            return ""
        user, password_file = self.mqtt_login
        return f'username = "{user}"\npassword_file = "{password_file}"\n'

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self, script: str | None = None, **sim_options: Any) -> None:
        """Subscribe, start the simulator (with ``script``, if given) and the daemon; returns
        once the daemon is online and the script's frames are all acknowledged."""
        await self.recorder.start()
        if script is not None:
            await self.start_sim(script, wait=False, **sim_options)
        self.start_daemon()
        await self.wait_for(self._online, what="availability online")
        if script is not None:
            await self.wait_sim_done()

    def _online(self) -> bool:
        avail = self.recorder.on("availability")
        return bool(avail) and avail[-1].body == "online"

    async def close(self) -> None:
        """Stop everything this table started; fails if a process is left behind."""
        await self.recorder.close()
        for daemon in self.daemons:
            _stop(daemon.proc)
        for sim in self.sims:
            _stop(sim.proc)
        procs = [d.proc for d in self.daemons] + [s.proc for s in self.sims]
        alive = [p.pid for p in procs if p.poll() is None]
        assert not alive, f"processes left running: {alive}"

    def start_daemon(self) -> Daemon:
        """``lammer run --config FILE`` as a subprocess, its log in a file of its own."""
        assert self.daemon is None or self.daemon.proc.poll() is not None, "daemon running"
        log = self.workdir / f"daemon-{len(self.daemons) + 1}.log"
        proc = _spawn([LAMMER, "run", "--config", str(self.config_path)], log, None)
        self.daemon = Daemon(proc, log)
        self.daemons.append(self.daemon)
        return self.daemon

    async def stop_daemon(self, sig: int = signal.SIGTERM) -> int:
        """Signal the daemon and wait for it to exit; returns its exit status."""
        daemon = self.daemon
        assert daemon is not None
        self.daemon = None  # its exit is expected now
        daemon.proc.send_signal(sig)
        await self.wait_for(lambda: daemon.proc.poll() is not None, what="the daemon to exit")
        status = daemon.proc.returncode
        assert status is not None
        return status

    async def start_sim(
        self,
        script: str,
        *,
        mode: str | None = None,
        fault: str | None = None,
        seed: int = 1,
        wait: bool = True,
        debug: bool = False,
        ack_timeout: float | None = None,
        baud: int | None = None,
    ) -> Sim:
        """A new ``lammer-sim`` at the table's ``--link`` playing ``script`` (the previous
        one is stopped first: an unplug). ``mode`` is the shuffler's game (default: the
        table's). With ``wait``, returns once every frame is acknowledged; with ``debug``
        the simulator logs every transmission (``Sim.retransmitted``); with ``baud`` its pty
        is a line at that rate (``lammer-sim --baud``)."""
        if self.sim is not None:
            await self.stop_sim()
        n = len(self.sims) + 1
        script_path = self.workdir / f"script-{n}.txt"
        script_path.write_text(script)
        argv = [LAMMER_SIM]
        if self.device == "shuffler":
            argv += ["shuffler", "--game", mode or self.game]
        else:
            argv += ["dice"]
        argv += ["--script", str(script_path), "--link", str(self.link)]
        argv += ["--interval", "0", "--linger", "--seed", str(seed)]
        if fault is not None:
            argv += ["--fault", fault]
        if debug:
            argv += ["--log-level", "debug"]
        if ack_timeout is not None:
            argv += ["--ack-timeout", str(ack_timeout)]
        if baud is not None:
            argv += ["--baud", str(baud)]
        out, err = self.workdir / f"sim-{n}.out", self.workdir / f"sim-{n}.err"
        sim = Sim(_spawn(argv, out, err), out, err)
        self.sim = sim
        self.sims.append(sim)
        await self.wait_for(
            lambda: bool(sim.pty_paths()) and self.link.exists(), what="the simulator's pty"
        )
        if wait:
            await self.wait_sim_done()
        return sim

    async def wait_sim_done(self) -> None:
        """Wait until the current simulator has had every frame acknowledged."""
        sim = self.sim
        assert sim is not None
        await self.wait_for(sim.done, what="the simulator's frames all acknowledged")

    async def stop_sim(self) -> None:
        """Stop the simulator (SIGTERM: the pty closes, the symlink goes)."""
        sim = self.sim
        assert sim is not None
        _stop(sim.proc)
        assert sim.proc.returncode == 0, _tail(sim.err)
        self.sim = None

    # -- waiting and asking -------------------------------------------------------------------

    async def wait_for(
        self, predicate: Callable[[], T | None], *, what: str, within: float = DEADLINE
    ) -> T:
        """Poll ``predicate`` until it is truthy and return its value; fail with the logs
        after ``within`` s, at once if a payload broke the spec or a process died."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within
        while True:
            self.recorder.raise_violations()
            self._check_processes()
            result = predicate()
            if result:
                return result
            if loop.time() > deadline:
                raise AssertionError(f"timed out waiting for {what}\n{self.diagnostics()}")
            await asyncio.sleep(0.01)

    def _check_processes(self) -> None:
        if self.daemon is not None and self.daemon.proc.poll() is not None:
            status = self.daemon.proc.returncode
            raise AssertionError(f"the daemon exited ({status})\n{self.diagnostics()}")
        if self.sim is not None and self.sim.proc.poll() is not None:
            status = self.sim.proc.returncode
            raise AssertionError(f"the simulator exited ({status})\n{self.diagnostics()}")

    def diagnostics(self) -> str:
        """Log tails and what the subscriber got, for a failure message."""
        parts = [_tail(d.log) for d in self.daemons[-2:]]
        parts += [_tail(s.err, 15) for s in self.sims[-1:]]
        got = [f"{m.topic} {m.payload[:160]!r}" for m in self.recorder.messages[-25:]]
        parts.append("--- received (last 25)\n" + "\n".join(got))
        return "\n".join(parts)

    async def request(
        self, name: str, body: dict[str, Any] | bytes, *, request_id: str | None = None
    ) -> dict[str, Any]:
        """Publish ``request/<name>`` and return its answer on ``response/<name>``.

        A dict body gets ``request_id`` (a fresh one unless given) and the answer is the
        response echoing it; raw bytes are sent as they are and the answer is the next
        response on that topic.
        """
        since = self.recorder.mark()
        if isinstance(body, dict):
            request_id = request_id or uuid.uuid4().hex[:12]
            payload = json.dumps({**body, "request_id": request_id}).encode()
        else:
            payload = body

        def answer() -> dict[str, Any] | None:
            for b in self.recorder.bodies(f"response/{name}", since):
                if request_id is None or b.get("request_id") == request_id:
                    return b
            return None

        await self.recorder.publish(f"request/{name}", payload)
        return await self.wait_for(answer, what=f"the response to {name} {payload[:80]!r}")

    async def wait_topic(
        self,
        topic: str,
        match: Callable[[dict[str, Any]], bool] = lambda _: True,
        *,
        since: int = 0,
    ) -> dict[str, Any]:
        """The first body on ``topic`` (after ``since``) for which ``match`` holds."""

        def found() -> dict[str, Any] | None:
            return next((b for b in self.recorder.bodies(topic, since) if match(b)), None)

        return await self.wait_for(found, what=f"a message on {topic}")

    async def wait_published(self) -> None:
        """Wait until every message the journal holds has reached the subscriber."""
        expected = {r["seq"] for r in self.journal() if r["kind"] == "publish"}
        await self.wait_for(
            lambda: expected <= self.recorder.seqs(),
            what=f"every journaled message (missing {sorted(expected - self.recorder.seqs())})",
        )

    # -- the record ----------------------------------------------------------------------------

    def journal(self, *args: str) -> list[dict[str, Any]]:
        """The table's record as ``lammer journal FILE`` exports it (one dict a record)."""
        done = subprocess.run(
            [LAMMER, "journal", str(self.journal_path), *args],
            capture_output=True,
            check=False,
            timeout=120,  # a bound on failure only (a loaded machine)
        )
        assert done.returncode == 0, done.stderr.decode(errors="replace")
        return [json.loads(line) for line in done.stdout.decode().splitlines()]

    def log_events(self) -> list[dict[str, Any]]:
        """Every daemon log line so far (all runs), in order."""
        return [e for d in self.daemons for e in d.log_events()]


def device_records(records: Sequence[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    """The journal's device records of one fact type (``HandDealt``...)."""
    return [
        r
        for r in records
        if r["kind"] == "device" and isinstance(r.get("event"), dict) and r["event"]["type"] == kind
    ]
