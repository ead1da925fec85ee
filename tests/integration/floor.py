"""The floor under test: a real nats-server cluster and table controllers bridged to it.

A ``Controller`` is one table controller as it runs in a casino: its own Mosquitto running
the files ``lammer broker-config --bridge`` wrote (users, ACL, the bridge to every floor
node), its table's daemon logging in with the password broker-config made, and the
simulator on a pty playing honestly without end. The ``FloorCluster`` runs the nodes
``lammer floor-config`` wrote for the controllers' declarations.

A ``FloorSubscriber`` is a pit system on the floor: user ``display``, a persistent session
(clean session off) subscribed to every table at QoS 1, which moves to the next node when
its node dies, and keeps every message it receives. A ``FeedSubscriber`` reads through
``contract.feed`` as every lammer consumer does (seq order once, gaps asked with
``request/resend``) and keeps what the feed released; a ``PitSubscriber`` is ``lammer
web``'s own store (``display.web.store.Store``) on such a connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import itertools
import json
import os
import pwd
import signal
import subprocess
import time
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import aiomqtt

from cli.main import main
from contract.feed import Event, Feed, Gap, Message, Other, Refused, Resend
from contract.floor import BRIDGE_STATUS_ROOT
from contract.payloads import TOPICS
from contract.session import observe_disconnect
from deploy import floor
from deploy.broker import Broker, free_port
from deploy.floor_cluster import FloorCluster
from display.web.store import Store
from tests.integration.harness import (
    DEADLINE,
    LAMMER,
    LAMMER_SIM,
    Sim,
    Subscriber,
    Table,
    _spawn,
    _stop,
)

T = TypeVar("T")


async def until(predicate: Callable[[], T | None], what: str, within: float = DEADLINE) -> T:
    """Poll ``predicate`` until it is truthy and return it; fail saying ``what`` after
    ``within`` s (the deadline bounds a failure, it is never what is tested)."""
    deadline = time.monotonic() + within
    while True:
        result = predicate()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


@dataclass(frozen=True, slots=True)
class FloorMessage:
    """One message as a floor client received it."""

    topic: str
    payload: bytes
    retained: bool
    node: int  # which node it came through (1-based)
    at: float = field(default_factory=time.monotonic)  # when it arrived

    @property
    def body(self) -> Any:
        """The JSON body, or the text (``availability``, bridge status)."""
        try:
            return json.loads(self.payload)
        except ValueError:
            return self.payload.decode(errors="replace")


class FloorSubscriber(Subscriber):
    """A persistent-session MQTT subscriber on the floor that fails over between nodes."""

    def __init__(
        self,
        cluster: FloorCluster,
        filters: Sequence[str],
        *,
        user: str = "display",
        first: int = 1,
        clean: bool = False,
    ) -> None:
        self.cluster = cluster
        self.filters = list(filters)
        self.user = user
        self.node = first
        self.clean = clean
        self.identifier = f"test-floor-{uuid.uuid4().hex[:8]}"
        self.messages: list[FloorMessage] = []
        self.connections: list[int] = []
        self.events: list[tuple[float, int, str]] = []  # (monotonic time, node, what happened)
        self.ready = asyncio.Event()
        self._client: aiomqtt.Client | None = None
        self._task: asyncio.Task[None] | None = None

    def _name(self) -> str:
        return f"floor subscriber {self.user}"

    async def _run(self) -> None:
        subscribed = False
        while True:
            host, port = self.cluster.mqtt_endpoints[self.node - 1]
            try:
                async with aiomqtt.Client(
                    host,
                    port,
                    identifier=self.identifier,
                    username=self.user,
                    password=self.cluster.password(self.user),
                    clean_session=self.clean,
                    timeout=5,
                    keepalive=10,
                    tls_context=self.cluster.tls_context(),
                ) as client:
                    observe_disconnect(client)
                    self.connections.append(self.node)
                    self.events.append((time.monotonic(), self.node, "connected"))
                    if self.clean or not subscribed:
                        for topic in self.filters:
                            granted = await client.subscribe(topic, qos=1)
                            codes = [getattr(code, "value", code) for code in granted]
                            if any(c >= 0x80 for c in codes):  # a node electing leaders
                                raise aiomqtt.MqttError(f"subscription refused: {codes}")
                        subscribed = True
                    self._client = client
                    self.ready.set()
                    ticker = asyncio.create_task(self._ticking(client))
                    try:
                        async for message in client.messages:
                            payload = message.payload
                            data = payload if isinstance(payload, bytes) else str(payload).encode()
                            await self._take(client, message.topic.value, data, message.retain)
                    finally:
                        ticker.cancel()
                        with contextlib.suppress(asyncio.CancelledError, aiomqtt.MqttError):
                            await ticker
            except aiomqtt.MqttError as exc:
                self.events.append((time.monotonic(), self.node, f"left: {exc}"))
            finally:
                self._client = None
                self.ready.clear()
            # This node is gone (or refused us): the next one, as a pit system does.
            self.node = self.node % len(self.cluster.mqtt_endpoints) + 1
            await asyncio.sleep(0.1)

    async def _take(
        self, client: aiomqtt.Client, topic: str, payload: bytes, retained: bool
    ) -> None:
        self.messages.append(FloorMessage(topic, payload, retained, self.node))

    async def _ticking(self, client: aiomqtt.Client) -> None:
        await asyncio.Event().wait()  # nothing to do while connected

    async def publish(self, topic: str, payload: bytes) -> None:
        """Publish (QoS 1) through the subscriber's connection."""
        async with asyncio.timeout(DEADLINE):
            await self.ready.wait()
        assert self._client is not None
        await self._client.publish(topic, payload, qos=1)


@dataclass
class BridgedBroker(Broker):
    """A controller's two brokers as broker-config makes them: the tables' Mosquitto
    (``mosquitto.conf``, no bridge; this ``Broker``'s host, port and process) and the
    floor bridge's own Mosquitto (``bridge.conf``) run by ``lammer bridge-watchdog``.
    ``start()`` and ``stop()`` act on both, the tables' first up and last down; both
    write to ``log``. ``kill()`` is a controller's power cut: SIGKILL to all three."""

    bridge_conf: Path | None = None
    watchdog: subprocess.Popen[bytes] | None = None
    watchdog_args: tuple[str, ...] = ("--interval", "0.5", "--deadline", "1", "--grace", "2")
    _log_at: int = 0

    def start(self) -> None:
        super().start()
        self.start_bridge()
        if self.watchdog is not None:
            self.wait_bridged()

    def start_bridge(self) -> None:
        """Start the bridge broker's watchdog (and through it the bridge broker)."""
        if self.bridge_conf is None or not self.bridge_conf.exists():
            return
        self._log_at = self.log.stat().st_size if self.log.exists() else 0
        with self.log.open("ab") as log:
            self.watchdog = subprocess.Popen(
                [
                    LAMMER,
                    "bridge-watchdog",
                    "--conf",
                    str(self.bridge_conf),
                    "--log-format",
                    "json",
                    *self.watchdog_args,
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )

    def wait_bridged(self, within: float = DEADLINE) -> None:
        """Return once the bridge broker is connected to the tables' broker (the log says
        so). Until its first connection the tables' broker keeps no session for it: what a
        daemon publishes before then never reaches the floor (a first start only; the
        session persists after)."""
        deadline = time.monotonic() + within
        start = self._log_at
        while "as floor-bridge" not in self.log.read_text(errors="replace")[start:]:
            if time.monotonic() > deadline:
                raise AssertionError("the bridge broker never connected to the tables' broker")
            time.sleep(0.05)

    def stop_bridge(self) -> None:
        """Stop the watchdog (it stops the bridge broker)."""
        if self.watchdog is not None:
            _stop(self.watchdog)
            self.watchdog = None

    def bridge_pid(self) -> int | None:
        """The bridge broker's pid (the watchdog's child), or None."""
        if self.watchdog is None:
            return None
        with contextlib.suppress(OSError):
            path = Path(f"/proc/{self.watchdog.pid}/task/{self.watchdog.pid}/children")
            pids = path.read_text().split()
            return int(pids[0]) if pids else None
        return None

    def stop(self) -> None:
        self.stop_bridge()
        super().stop()

    def kill(self) -> None:
        """SIGKILL the tables' broker, the watchdog and the bridge broker."""
        bridge = self.bridge_pid()
        for proc in (self.watchdog, self.process):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
        if bridge is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(bridge, signal.SIGKILL)
        self.watchdog = None
        self.process = None


@dataclass
class Controller:
    """One table controller: its tables' Mosquitto, the floor bridge in a Mosquitto of its
    own under ``lammer bridge-watchdog``, the daemon, the simulator."""

    root: Path
    name: str
    game: str
    cluster: FloorCluster
    table: Table = field(init=False)
    broker: BridgedBroker = field(init=False)
    out: Path = field(init=False)
    bridge_port: int = field(init=False)

    def __post_init__(self) -> None:
        self.root.mkdir(parents=True)
        (self.root / "data" / "bridge").mkdir(parents=True)
        self.out = self.root / "broker"
        self.bridge_port = free_port()
        self.broker = BridgedBroker(
            self.root,
            port=free_port(),
            config_file=self.out / "mosquitto.conf",
            bridge_conf=self.out / "bridge.conf",
        )
        table_id = f"{self.game.lower()}-{self.name}"
        self.table = Table(self.root, self.broker, self.game, table_id=table_id)

    @property
    def declaration(self) -> Path:
        """Its ``floor-controller.json``."""
        return self.out / "floor-controller.json"

    def configure(self, *extra: str) -> None:
        """``lammer broker-config --bridge`` for its table, then the table logs in."""
        me = pwd.getpwuid(os.geteuid()).pw_name
        argv = [
            "broker-config",
            "--out",
            str(self.out),
            "--data-dir",
            str(self.root / "data"),
            "--broker-user",
            me,
            *self.cluster.bridge_args,
            "--controller",
            self.name,
            "--bridge-listen",
            f"127.0.0.1:{self.bridge_port}",
            *extra,
            str(self.table.config_path),
        ]
        with contextlib.redirect_stdout(io.StringIO()):
            assert main(argv) == 0
        user = f"lammer-{self.table.table_id}"
        password_file = self.root / f"{self.table.table_id}.mqtt-password"
        password_file.write_bytes((self.out / "credentials" / user).read_bytes())
        password_file.chmod(0o600)
        self.table.mqtt_login = (user, password_file)
        self.table.config_path.write_text(self.table.config_text())
        display = (self.out / "credentials" / "display").read_text().split("\n")[0]
        self.table.recorder.login = ("display", display)

    async def start(self, *, interval: float, seed: int) -> None:
        """Its broker, its daemon, then honest play without end."""
        self.broker.start()
        await self.table.start()
        device = self.table.device
        argv = [LAMMER_SIM]
        if device == "shuffler":
            argv += ["shuffler", "--game", self.game]
        else:
            argv += ["dice"]
        argv += ["--interval", str(interval), "--seed", str(seed), "--link", str(self.table.link)]
        n = len(self.table.sims) + 1
        out, err = self.root / f"sim-{n}.out", self.root / f"sim-{n}.err"
        sim = Sim(_spawn(argv, out, err), out, err)
        self.table.sim = sim
        self.table.sims.append(sim)

    async def stop_play(self) -> None:
        """Stop the simulator (the table goes quiet; the daemon stays)."""
        if self.table.sim is not None:
            _stop(self.table.sim.proc)
            self.table.sim = None

    async def close(self) -> None:
        """Stop everything it started."""
        await self.table.close()
        self.broker.stop()


class FeedSubscriber(FloorSubscriber):
    """A floor subscriber reading through ``contract.feed`` from each table's first seq
    (``start`` 0 for every base): ``released`` holds, per table, the seqs the feed released
    (once each, in order, it claims), ``gaps`` what it gave up on, ``asked`` its resend
    requests. It moves between nodes as a pit system does; the feed stays."""

    def __init__(
        self, cluster: FloorCluster, bases: Sequence[str], *, first: int, prefix: str = "lammer"
    ) -> None:
        super().__init__(cluster, [f"{prefix}/+/#"], first=first)
        self.prefix = prefix
        self.feed = Feed(start=dict.fromkeys(bases, 0))
        self.released: dict[str, list[int]] = {base: [] for base in bases}
        self.gaps: list[Gap] = []
        self.asked: list[Resend] = []

    def _name(self) -> str:
        return "floor feed subscriber"

    def _events(self, topic: str, payload: bytes, retained: bool, now: float) -> list[Resend]:
        parts = topic.split("/", 2)
        if len(parts) < 3:
            return []
        base = f"{parts[0]}/{parts[1]}"
        return self._handle(self.feed.receive(base, parts[2], payload, now=now, retained=retained))

    def _handle(self, events: Sequence[Event]) -> list[Resend]:
        out: list[Resend] = []
        for event in events:
            match event:
                case Message():
                    self.released.setdefault(event.table, []).append(event.seq)
                case Gap():
                    self.gaps.append(event)
                case Resend():
                    out.append(event)
                case Other() | Refused():
                    pass
        return out

    def _tick_events(self, now: float) -> list[Resend]:
        return self._handle(self.feed.tick(now))

    async def _ask(self, client: aiomqtt.Client, asks: list[Resend]) -> None:
        for resend in asks:
            self.asked.append(resend)
            # At its own user level (mqtt-api.md 1.4): the floor grants nothing else.
            await client.publish(resend.topic_for(self.user), resend.payload(self.user), qos=1)

    async def _take(
        self, client: aiomqtt.Client, topic: str, payload: bytes, retained: bool
    ) -> None:
        await super()._take(client, topic, payload, retained)
        now = asyncio.get_running_loop().time()
        await self._ask(client, self._events(topic, payload, retained, now))

    async def _ticking(self, client: aiomqtt.Client) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(0.2)
            await self._ask(client, self._tick_events(loop.time()))


class PitSubscriber(FeedSubscriber):
    """``lammer web``'s store on a floor connection, as its follower feeds it: every table
    and the bridges' status through ``Store.receive``, its resend requests published."""

    def __init__(
        self,
        cluster: FloorCluster,
        bases: Sequence[str],
        controllers: dict[str, list[str]],
        *,
        first: int,
        prefix: str = "lammer",
    ) -> None:
        super().__init__(cluster, bases, first=first, prefix=prefix)
        self.filters.append(f"{BRIDGE_STATUS_ROOT}+")
        self.store = Store(prefix, feed=self.feed, controllers=controllers)

    def _name(self) -> str:
        return "floor pit (lammer web's store)"

    def _events(self, topic: str, payload: bytes, retained: bool, now: float) -> list[Resend]:
        for _, text in self.store.receive(topic, payload, now=now, retained=retained):
            body = json.loads(text)
            if body["t"] == "msg" and isinstance(body.get("payload"), dict):
                self.released.setdefault(f"{self.prefix}/{body['table']}", []).append(
                    body["payload"]["seq"]
                )
        return self._drain()

    def _tick_events(self, now: float) -> list[Resend]:
        self.store.tick(now)
        return self._drain()

    def _drain(self) -> list[Resend]:
        out = list(self.store.resends)
        self.store.resends.clear()
        return out


class NewPit(PitSubscriber):
    """A pit that has just started (``lammer web`` as it runs): its store's own ``Feed``
    with no position, a clean session on node ``first`` (a new subscriber gets every
    retained state there). ``feed`` is the ``Feed`` to use (``Store``'s default: ``Feed()``,
    which catches up after the retained burst)."""

    def __init__(
        self,
        cluster: FloorCluster,
        bases: Sequence[str],
        controllers: dict[str, list[str]],
        *,
        first: int,
        feed: Feed | None = None,
        prefix: str = "lammer",
    ) -> None:
        super().__init__(cluster, bases, controllers, first=first, prefix=prefix)
        self.clean = True
        self.feed = feed if feed is not None else Feed()
        self.store = Store(prefix, feed=self.feed, controllers=controllers)
        self.released = {base: [] for base in bases}

    def _name(self) -> str:
        return "new pit (lammer web's store, no position)"

    def connected_at(self) -> float:
        """When (monotonic) it connected last."""
        return max(at for at, _, what in self.events if what == "connected")

    def card(self, table_id: str, topic: str = "state") -> int | None:
        """The ``seq`` of ``topic`` the pit draws for ``table_id`` (None: nothing yet)."""
        entry = self.store.tables.get(table_id)
        drawn = None if entry is None else entry.retained.get(topic)
        return None if drawn is None else int(drawn[0])


def bridges(cluster: FloorCluster) -> int:
    """Controller bridges connected to the floor (``/connz`` of every live node)."""
    total = 0
    for node in (1, 2, 3):
        with contextlib.suppress(OSError):
            total += sum(c.startswith("lammer-bridge-") for c in cluster.mqtt_clients(node))
    return total


async def until_retained(cluster: FloorCluster, topic: str, seq: int) -> None:
    """Wait until a new subscriber on node 1 is handed ``topic`` retained at ``seq``."""
    watcher = FloorSubscriber(cluster, [topic], first=1, clean=True)

    def held() -> int | None:
        found = [m.body.get("seq") for m in watcher.messages if isinstance(m.body, dict)]
        return seq if seq in found else None

    for _ in range(12):  # a new subscriber every 5 s, for a minute at most
        await watcher.start()
        try:
            with contextlib.suppress(AssertionError):
                await until(held, f"{topic} at seq {seq} on the floor", within=5.0)
                return
        finally:
            await watcher.close()
        watcher.messages.clear()
    raise AssertionError(f"the floor never held {topic} at seq {seq}")


def stale_store(controller: Controller, seq: int) -> dict[str, bytes]:
    """What a floor node that has not caught up holds of ``controller``'s table when it has
    everything the table published up to ``seq`` (topic -> payload, byte for byte): of each
    retained topic the last message up to ``seq``, and nothing (an empty payload: deleted) of
    a topic first published after it. Read from the controller's own broker."""
    held: dict[str, bytes] = {}
    for message in sorted(controller.table.recorder.messages, key=lambda m: m.seq or 0):
        if message.seq is None or not TOPICS.get(message.topic, (None, False))[1]:
            continue
        if message.seq <= seq:
            held[message.topic] = message.payload  # the last one wins: sorted by seq
        else:
            held.setdefault(message.topic, b"")
    return held


async def forge(cluster: FloorCluster, controller: Controller, held: dict[str, bytes]) -> None:
    """Publish ``held`` (topic -> payload; empty: deleted) retained on the floor as the
    controller's own bridge user, through node 1 (the retained store is the cluster's),
    trying again while the cluster settles after a restart (a node electing leaders)."""
    user = floor.bridge_user(controller.name)
    password = (controller.out / "credentials" / user).read_text().strip()
    base = controller.table.base
    host, port = cluster.mqtt_endpoints[0]

    async def once() -> bool:
        try:
            async with aiomqtt.Client(
                host,
                port,
                identifier="test-stale-state",
                username=user,
                password=password,
                tls_context=cluster.tls_context(),
                timeout=10,
            ) as client:
                observe_disconnect(client)
                for topic, payload in sorted(held.items()):
                    await client.publish(f"{base}/{topic}", payload, qos=1, retain=True)
        except aiomqtt.MqttError:
            return False
        return True

    async with asyncio.timeout(DEADLINE):
        for _ in itertools.count():
            if await once():
                return
            await asyncio.sleep(0.5)  # a retry's pause, not a wait for an event


@contextlib.asynccontextmanager
async def running_floor(
    folder: Path, games: Sequence[str], count: int
) -> AsyncIterator[tuple[FloorCluster, list[Controller]]]:
    """A floor cluster with ``count`` controllers (their games in turn from ``games``),
    configured as an operator would (broker-config, then floor-config) and started; every
    controller closed and the cluster stopped on the way out."""
    cluster = FloorCluster(folder / "cluster")
    controllers = [
        Controller(folder / f"ctl{i}", f"ctl{i}", games[i % len(games)], cluster)
        for i in range(count)
    ]
    try:
        for c in controllers:
            c.configure()
        cluster.configure([c.declaration for c in controllers])
        cluster.start()
        yield cluster, controllers
    finally:
        for c in controllers:
            await c.close()
        cluster.stop()
