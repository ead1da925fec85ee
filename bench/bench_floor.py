"""The casino floor (docs/developers/benchmarks.md, "The floor"): a 3-node nats-server
cluster on this machine, configured by ``lammer floor-config``, and table controllers
bridged to it by ``lammer broker-config --bridge``. Three figures, each its own part:

* **Latency** (``--latency N``): one real craps table (its Mosquitto with the floor
  bridge, its daemon on a pty driven here as the dice reader, as ``bench_daemon.py``
  does). For each ``ROLL`` frame, from the last byte written to the pty to its
  ``craps/roll`` at a subscriber on the controller's own Mosquitto (controller-local) and
  at a subscriber on another floor node than the bridge's (table to floor), in the same
  run, one frame at a time.
* **Capacity** (``--capacity``): a load generator plays ``T`` tables, four per controller,
  each controller one MQTT connection logged in as its bridge user (what a bridge is to
  the floor: QoS 1, a persistent session, one message in flight); every table publishes a
  result (not retained) every ``--period`` seconds and a state (retained) with it. A pit
  subscriber of the whole floor (``lammer/+/#``, QoS 1, on another node) measures each
  message from the generator's publish to its arrival and counts what never arrives. T
  doubles until p99 exceeds 100 ms or a message is lost. Reported: tables held, messages
  per second, the cluster's memory (RSS of the three nodes) per table, the generator's
  own CPU (it shares the two cores with the cluster).
* **Failover** (``--failover K``): ten controllers, each its real Mosquitto with the
  bridge, fed by a local publisher at two messages a second per table; a subscriber on
  node 3. The node the bridges use is killed (SIGKILL) ``K`` times (restarted between):
  time until every bridge is connected elsewhere, the longest silence a table had at the
  subscriber, and messages lost (journal of the publishers against what arrived).

Run: ``.venv/bin/python bench/bench_floor.py`` (about five minutes; ``--help``). Prints
figures; asserts nothing about time.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import io
import itertools
import json
import os
import pwd
import resource
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import aiomqtt

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_daemon import pty_device, roll, rolls, stop
from bench.common import machine, percentile
from cli.main import main as lammer
from deploy import floor
from deploy.broker import free_port
from deploy.floor_cluster import FloorCluster, nats_server_path
from tests.integration.floor import BridgedBroker

PREFIX: Final = "lammer"
TABLES_PER_CONTROLLER: Final = 4
P99_LIMIT: Final = 0.100
SERVER: str | None = None
"""``--server``: the nats-server binary (default: the pinned one, ``nats_server_path()``)."""


def ms(value: float) -> str:
    """Seconds as milliseconds with two decimals."""
    return f"{value * 1000:.2f} ms"


def me() -> str:
    """This user (Mosquitto keeps running as it)."""
    return pwd.getpwuid(os.geteuid()).pw_name


# ---------------------------------------------------------------------------- controllers


@dataclass
class Controller:
    """A controller's broker-config output, its Mosquitto and its tables."""

    root: Path
    name: str
    tables: list[str]
    broker: BridgedBroker = field(init=False)

    def __post_init__(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / "data" / "bridge").mkdir(parents=True, exist_ok=True)
        # The tables' Mosquitto and the floor bridge's own (deploy.bridge_watchdog), as
        # broker-config writes them: start() and stop() act on both.
        self.broker = BridgedBroker(
            self.root,
            port=free_port(),
            config_file=self.root / "broker" / "mosquitto.conf",
            bridge_conf=self.root / "broker" / "bridge.conf",
        )

    def toml(self, table: str, *, device: str = "/dev/null", login: bool = False) -> Path:
        """The table's configuration (``login``: as its daemon logs in)."""
        path = self.root / f"{table}.toml"
        lines = [
            f'[table]\nid = "{table}"\ngame = "CRAPS"\n',
            f'[dice_reader]\nport = "{device}"\n',
            f'[mqtt]\nhost = "127.0.0.1"\nport = {self.broker.port}\nprefix = "{PREFIX}"\n',
        ]
        if login:
            password = self.root / f"{table}.mqtt-password"
            password.write_bytes(self.credential(f"lammer-{table}").encode() + b"\n")
            password.chmod(0o600)
            lines.append(f'username = "lammer-{table}"\npassword_file = "{password}"\n')
        lines.append(f'[journal]\npath = "{self.root / (table + ".db")}"\n')
        lines.append('[logging]\nformat = "json"\nlevel = "info"\n')
        path.write_text("".join(lines))
        return path

    def configure(self, cluster: FloorCluster, nodes: tuple[int, ...] = ()) -> None:
        """``lammer broker-config --bridge`` for its tables: to every node, or to
        ``nodes`` (1-based) only."""
        configs = [str(self.toml(t)) for t in self.tables]
        argv = ["broker-config", "--out", str(self.root / "broker")]
        argv += ["--data-dir", str(self.root / "data"), "--broker-user", me()]
        bridge = cluster.bridge_args
        if nodes:
            bridge[1] = ",".join(
                f"{h}:{p}" for h, p in (cluster.mqtt_endpoints[n - 1] for n in nodes)
            )
        argv += [*bridge, "--controller", self.name, "--bridge-listen", f"127.0.0.1:{free_port()}"]
        argv += configs
        with contextlib.redirect_stdout(io.StringIO()):
            if lammer(argv) != 0:
                raise RuntimeError(f"broker-config failed for {self.name}")

    @property
    def declaration(self) -> Path:
        """Its ``floor-controller.json``."""
        return self.root / "broker" / "floor-controller.json"

    def credential(self, user: str) -> str:
        """A user's password on its Mosquitto (or its bridge's)."""
        return (self.root / "broker" / "credentials" / user).read_text().split("\n")[0]


def floor_client(
    cluster: FloorCluster, node: int, user: str, password: str, **kw: Any
) -> aiomqtt.Client:
    """An MQTT client of node ``node``."""
    host, port = cluster.mqtt_endpoints[node - 1]
    return aiomqtt.Client(
        host,
        port,
        username=user,
        password=password,
        timeout=10,
        max_queued_outgoing_messages=0,
        tls_context=cluster.tls_context(),
        **kw,
    )


# ---------------------------------------------------------------------------- latency


def spawn_daemon(config: Path, log: io.BufferedWriter) -> subprocess.Popen[bytes]:
    """``lammer run --config FILE``, its log into ``log``."""
    lammer_bin = str(Path(sys.executable).parent / "lammer")
    return subprocess.Popen(
        [lammer_bin, "run", "--config", str(config)], stdout=log, stderr=subprocess.STDOUT
    )


@contextlib.contextmanager
def roll_floor(
    workdir: Path,
    server: str | None,
    controllers: int,
    name: str,
    bridge_nodes: tuple[int, ...] = (),
) -> Iterator[tuple[FloorCluster, list[Controller]]]:
    """The failover rig (here and in ``bench_floor_versions.py``): a 3-node cluster on
    ``server`` and ``controllers`` controllers, each its Mosquitto bridged to the floor
    (to ``bridge_nodes`` only, when given) with one table ``<name><i>`` that logs in;
    everything stopped on leaving, the controllers first."""
    cluster = FloorCluster(workdir / "cluster", server=server)
    ctls = [Controller(workdir / f"c{i}", f"c{i}", [f"{name}{i}"]) for i in range(controllers)]
    for c in ctls:
        c.configure(cluster, bridge_nodes)
    cluster.configure([c.declaration for c in ctls])
    cluster.start()
    try:
        for c in ctls:
            c.toml(c.tables[0], login=True)
            c.broker.start()
        yield cluster, ctls
    finally:
        for c in ctls:
            c.broker.stop()
        cluster.stop()


async def feed_rolls(c: Controller, stopping: asyncio.Event, stamps: list[float]) -> None:
    """Publish to ``c``'s broker, as its table, a ``craps/roll`` every 0.5 s until
    ``stopping``: the body ``{table, seq}``, seq ``n`` published at ``stamps[n - 1]``
    (monotonic)."""
    table = c.tables[0]
    async with aiomqtt.Client(
        "127.0.0.1",
        c.broker.port,
        username=f"lammer-{table}",
        password=c.credential(f"lammer-{table}"),
        timeout=10,
    ) as client:
        while not stopping.is_set():
            stamps.append(time.monotonic())
            body = {"table": table, "seq": len(stamps)}
            await client.publish(f"{PREFIX}/{table}/craps/roll", json.dumps(body), qos=1)
            await asyncio.sleep(0.5)


async def receive_rolls(
    cluster: FloorCluster,
    node: int,
    identifier: str,
    arrivals: dict[str, list[tuple[int, float]]],
) -> None:
    """A pit system of the floor on ``node`` (user ``display``, persistent session, QoS 1):
    each ``craps/roll``'s seq and monotonic arrival, by table, until the link fails
    (``aiomqtt.MqttError``, also when the subscription is refused)."""
    async with floor_client(
        cluster,
        node,
        "display",
        cluster.password("display"),
        identifier=identifier,
        clean_session=False,
    ) as sub:
        granted = await sub.subscribe(f"{PREFIX}/+/craps/roll", qos=1)
        if any(getattr(g, "value", g) >= 0x80 for g in granted):
            raise aiomqtt.MqttError("subscription refused")
        async for message in sub.messages:
            body = json.loads(bytes(message.payload))
            arrivals[body["table"]].append((body["seq"], time.monotonic()))


def missing_rolls(
    published: dict[str, list[float]], arrivals: dict[str, list[tuple[int, float]]]
) -> int:
    """Seqs published (``feed_rolls``) and not (yet) received (``receive_rolls``)."""
    return sum(
        len(set(range(1, len(stamps) + 1)) - {seq for seq, _ in arrivals[table]})
        for table, stamps in published.items()
    )


async def poll(done: Any, within: float) -> bool:
    """Call ``done()`` every 50 ms until it is true or ``within`` s passed; its last value."""
    deadline = time.monotonic() + within
    while True:
        if done():
            return True
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.05)


async def latency(workdir: Path, frames: int) -> dict[str, float]:
    """One real table: frame to the controller's subscriber and to the floor's."""
    cluster = FloorCluster(workdir / "cluster", server=SERVER)
    ctl = Controller(workdir / "ctl", "lat", ["lat1"])
    ctl.configure(cluster)
    cluster.configure([ctl.declaration])
    cluster.start()
    daemon: subprocess.Popen[bytes] | None = None
    try:
        ctl.broker.start()
        local: dict[int, asyncio.Future[float]] = {}
        remote: dict[int, asyncio.Future[float]] = {}

        async def listen(client: aiomqtt.Client, waiting: dict[int, asyncio.Future[float]]) -> None:
            async for message in client.messages:
                now = time.perf_counter()
                if message.topic.value.endswith("/craps/roll"):
                    body = json.loads(bytes(message.payload))
                    future = waiting.pop(int(body["roll_id"]), None)
                    if future is not None and not future.done():
                        future.set_result(now)

        async with contextlib.AsyncExitStack() as stack:
            device, slave = await stack.enter_async_context(pty_device())
            ctl.toml("lat1", device=slave, login=True)
            log = (workdir / "daemon.log").open("wb")
            stack.callback(log.close)
            daemon = spawn_daemon(ctl.root / "lat1.toml", log)
            here = await stack.enter_async_context(
                aiomqtt.Client(
                    "127.0.0.1",
                    ctl.broker.port,
                    username="display",
                    password=ctl.credential("display"),
                    timeout=10,
                )
            )
            there = await stack.enter_async_context(
                floor_client(cluster, 2, "display", cluster.password("display"))
            )
            await here.subscribe(f"{PREFIX}/lat1/craps/roll", qos=1)
            await there.subscribe(f"{PREFIX}/lat1/craps/roll", qos=1)
            tasks = [
                asyncio.create_task(listen(here, local)),
                asyncio.create_task(listen(there, remote)),
            ]
            try:
                async with asyncio.timeout(60):
                    await device.queries.wait()
                source = rolls()
                samples_local: list[float] = []
                samples_floor: list[float] = []
                loop = asyncio.get_running_loop()
                for n in range(frames + 20):  # 20 to warm up
                    roll_id, dice = next(source)
                    a, b = loop.create_future(), loop.create_future()
                    local[roll_id], remote[roll_id] = a, b
                    async with asyncio.timeout(30):
                        written, _ = await device.send(functools.partial(roll, roll_id, dice))
                        at_local, at_floor = await a, await b
                    if n >= 20:
                        samples_local.append(at_local - written)
                        samples_floor.append(at_floor - written)
            finally:
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
        return {
            "local_p50": percentile(samples_local, 0.5),
            "local_p99": percentile(samples_local, 0.99),
            "floor_p50": percentile(samples_floor, 0.5),
            "floor_p99": percentile(samples_floor, 0.99),
            "frames": frames,
        }
    finally:
        if daemon is not None:
            stop(daemon)
        ctl.broker.stop()
        cluster.stop()


# ---------------------------------------------------------------------------- capacity


def synthetic_declarations(root: Path, controllers: int) -> tuple[list[Path], dict[str, str]]:
    """Declarations of ``controllers`` controllers of four tables each (as broker-config
    writes them) and each bridge user's password."""
    root.mkdir(parents=True, exist_ok=True)
    paths, passwords = [], {}
    for c in range(controllers):
        name = f"gen{c}"
        password = uuid.uuid4().hex
        tables = tuple(
            floor.DeclaredTable(f"g{c}t{t}", f"{PREFIX}/g{c}t{t}", "CRAPS")
            for t in range(TABLES_PER_CONTROLLER)
        )
        decl = floor.Declaration(name, floor.hash_password(password), tables)
        path = root / f"{name}.json"
        path.write_text(decl.to_json())
        paths.append(path)
        passwords[floor.bridge_user(name)] = password
    return paths, passwords


@dataclass
class Step:
    """One load level's figures."""

    tables: int
    sent: int
    received: int
    lost: int
    rate: float
    p50: float
    p99: float
    rss_kib: int
    generator_cpu: float
    refusals: int = 0
    persist_refusals: int = 0


def _persist_refusals(cluster: FloorCluster) -> int:
    """Node log lines of an MQTT CONNECT refused because JetStream timed out (2.15)."""
    return sum(
        cluster.log(n).read_text(errors="replace").count("unable to persist session")
        for n in range(1, cluster.nodes + 1)
        if cluster.log(n).exists()
    )


async def capacity_step(
    cluster: FloorCluster,
    controllers: int,
    passwords: dict[str, str],
    period: float,
    seconds: float,
) -> Step:
    """``controllers`` x 4 tables for ``seconds``; the pit subscriber's figures."""
    arrivals: dict[tuple[str, int], float] = {}
    sent: dict[tuple[str, int], float] = {}
    pit_id = f"bench-pit-{uuid.uuid4().hex[:6]}"
    async with floor_client(
        cluster, 2, "display", cluster.password("display"), identifier=pit_id
    ) as pit:
        await pit.subscribe(f"{PREFIX}/+/#", qos=1)

        async def listen() -> None:
            async for message in pit.messages:
                now = time.time()
                if message.retain:
                    continue
                body = json.loads(bytes(message.payload))
                arrivals.setdefault((body["table"], body["seq"]), now)

        listener = asyncio.create_task(listen())
        cpu0 = resource.getrusage(resource.RUSAGE_SELF)
        wall0 = time.monotonic()

        refusals = 0
        persist0 = _persist_refusals(cluster)

        async def controller(c: int) -> None:
            nonlocal refusals
            user = f"bridge-gen{c}"
            # Tables start spread over the period, as real ones are.
            await asyncio.sleep(period * c / controllers)
            seq = 0
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                try:
                    async with floor_client(
                        cluster,
                        1,
                        user,
                        passwords[user],
                        identifier=f"lammer-bridge-gen{c}",
                        clean_session=False,
                    ) as client:
                        while time.monotonic() < end:
                            for t in range(TABLES_PER_CONTROLLER):
                                table = f"g{c}t{t}"
                                seq += 1
                                now = time.time()
                                result = {
                                    "table": table,
                                    "seq": seq,
                                    "ts": now,
                                    "outcome": "win",
                                    "pad": "x" * 200,
                                }
                                sent[(table, seq)] = now
                                # One message in flight, as the bridge: wait for each PUBACK.
                                await client.publish(
                                    f"{PREFIX}/{table}/craps/result", json.dumps(result), qos=1
                                )
                                state = {
                                    "table": table,
                                    "seq": seq,
                                    "ts": now,
                                    "game": "CRAPS",
                                    "pad": "y" * 300,
                                }
                                await client.publish(
                                    f"{PREFIX}/{table}/state",
                                    json.dumps(state),
                                    qos=1,
                                    retain=True,
                                )
                            await asyncio.sleep(period)
                except aiomqtt.MqttError:
                    # Refused (a node whose JetStream requests time out) or dropped: the
                    # bridge would try again, so does the generator.
                    refusals += 1
                    await asyncio.sleep(1.0)

        await asyncio.gather(*(controller(c) for c in range(controllers)))
        wall = time.monotonic() - wall0
        cpu1 = resource.getrusage(resource.RUSAGE_SELF)
        await poll(lambda: not set(sent) - set(arrivals), 15)
        rss = sum(cluster.rss_kib().values())
        listener.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await listener
    delays = [arrivals[k] - sent[k] for k in sent if k in arrivals]
    cpu = (cpu1.ru_utime + cpu1.ru_stime - cpu0.ru_utime - cpu0.ru_stime) / wall
    return Step(
        tables=controllers * TABLES_PER_CONTROLLER,
        sent=len(sent),
        received=len(delays),
        lost=len(sent) - len(delays),
        rate=2 * len(sent) / wall,
        p50=percentile(delays, 0.5) if delays else float("nan"),
        p99=percentile(delays, 0.99) if delays else float("nan"),
        rss_kib=rss,
        generator_cpu=cpu,
        refusals=refusals,
        persist_refusals=_persist_refusals(cluster) - persist0,
    )


async def capacity(
    workdir: Path, start: int, period: float, seconds: float, most: int
) -> tuple[int, list[Step]]:
    """Double the tables until p99 > 100 ms or a loss; the cluster's idle RSS and steps."""
    steps: list[Step] = []
    controllers = max(1, start // TABLES_PER_CONTROLLER)
    decl_dir = workdir / "declarations"
    paths, passwords = synthetic_declarations(decl_dir, most // TABLES_PER_CONTROLLER)
    cluster = FloorCluster(workdir / "cluster", paths, server=SERVER)
    cluster.start()
    try:
        await asyncio.sleep(2)
        idle = sum(cluster.rss_kib().values())
        while controllers * TABLES_PER_CONTROLLER <= most:
            step = await capacity_step(cluster, controllers, passwords, period, seconds)
            steps.append(step)
            print(
                f"  {step.tables:>5} tables: {step.rate:8.1f} msg/s, p50 {ms(step.p50)}, "
                f"p99 {ms(step.p99)}, lost {step.lost}, cluster RSS {step.rss_kib / 1024:.0f} MiB, "
                f"generator CPU {step.generator_cpu:.0%}, connections refused or dropped "
                f"{step.refusals} ('unable to persist session' {step.persist_refusals}); "
                f"load {' '.join(f'{x:.2f}' for x in os.getloadavg())}",
                flush=True,
            )
            if step.lost or step.p99 > P99_LIMIT:
                break
            controllers *= 2
        return idle, steps
    finally:
        cluster.stop()


# ---------------------------------------------------------------------------- failover


async def failover(workdir: Path, kills: int, controllers: int = 10) -> list[dict[str, float]]:
    """Kill the bridges' node ``kills`` times under load; each time's figures."""
    with roll_floor(workdir, SERVER, controllers, "f") as (cluster, ctls):
        return await _failover(cluster, ctls, kills, controllers)


async def _failover(
    cluster: FloorCluster, ctls: list[Controller], kills: int, controllers: int
) -> list[dict[str, float]]:
    results: list[dict[str, float]] = []
    arrivals: dict[str, list[tuple[int, float]]] = {c.tables[0]: [] for c in ctls}
    published: dict[str, list[float]] = {c.tables[0]: [] for c in ctls}
    stopping = asyncio.Event()

    async def listen() -> None:
        # A pit system of the floor: a persistent session that moves to the next node
        # when its node dies (or refuses the subscription while JetStream recovers).
        node = 3
        while True:
            try:
                await receive_rolls(cluster, node, "bench-failover", arrivals)
            except aiomqtt.MqttError:
                node = node % 3 + 1
                await asyncio.sleep(0.1)

    tasks = [asyncio.create_task(listen())] + [
        asyncio.create_task(feed_rolls(c, stopping, published[c.tables[0]])) for c in ctls
    ]

    def bridges_on(nodes: tuple[int, ...]) -> int:
        return sum(
            cid.startswith("lammer-bridge-")
            for n in nodes
            if cluster.alive(n)
            for cid in cluster.mqtt_clients(n)
        )

    try:
        await asyncio.sleep(5)
        for _ in range(kills):
            counts = {n: bridges_on((n,)) for n in (1, 2, 3)}
            victim = max(counts, key=lambda n: counts[n])
            others = tuple(n for n in (1, 2, 3) if n != victim)
            mark = {t: len(a) for t, a in arrivals.items()}
            killed = time.monotonic()
            cluster.kill_node(victim)
            await poll(lambda others=others: bridges_on(others) >= controllers, 120)
            moved = time.monotonic() - killed
            # Until every table was heard of again (the silence is then whole).
            await poll(lambda mark=mark: all(len(a) > mark[t] for t, a in arrivals.items()), 120)
            gap = 0.0
            for table, got in arrivals.items():
                times = [t for _, t in got[max(0, mark[table] - 1) :]]
                gaps = [b - a for a, b in itertools.pairwise(times)]
                gap = max(gap, max(gaps, default=0.0))
            cluster.start_node(victim)
            await asyncio.sleep(10)
            results.append(
                {"victim": victim, "moved": moved, "gap": gap, "bridges": counts[victim]}
            )
        stopping.set()
        await asyncio.sleep(5)

        await poll(lambda: missing_rolls(published, arrivals) == 0, 60)
        lost = missing_rolls(published, arrivals)
        for r in results:
            r["lost"] = lost
            r["published"] = sum(len(p) for p in published.values())
    finally:
        stopping.set()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return results


# ---------------------------------------------------------------------------- main


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--latency", type=int, default=300, metavar="N", help="frames (0: skip)")
    parser.add_argument("--capacity", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--start", type=int, default=64, help="tables of the first capacity step")
    parser.add_argument("--most", type=int, default=2048, help="tables at most")
    parser.add_argument(
        "--period", type=float, default=3.0, help="seconds between a table's results"
    )
    parser.add_argument("--seconds", type=float, default=20.0, help="seconds per capacity step")
    parser.add_argument("--failover", type=int, default=3, metavar="K", help="kills (0: skip)")
    parser.add_argument(
        "--server", metavar="PATH", help="the nats-server to run (default: the venv's pinned one)"
    )
    return parser.parse_args(argv)


async def run(args: argparse.Namespace) -> None:
    """Every part asked for, printed as it is measured."""
    print(f"machine: {machine()}; load average {os.getloadavg()[0]:.2f}", flush=True)
    with tempfile.TemporaryDirectory(prefix="lammer-floor-bench-") as tmp:
        root = Path(tmp)
        if args.latency:
            lat = await latency(root / "latency", args.latency)
            print(f"latency, device frame to subscriber, {args.latency} frames one at a time:")
            for where, key in (("controller-local (its Mosquitto)", "local"), ("floor", "floor")):
                p50, p99 = ms(lat[f"{key}_p50"]), ms(lat[f"{key}_p99"])
                print(f"  {where:<34} p50 {p50}  p99 {p99}", flush=True)
        if args.capacity:
            print(
                f"capacity: {TABLES_PER_CONTROLLER} tables per controller connection, a result "
                f"and a state every {args.period} s per table, {args.seconds} s per step:",
                flush=True,
            )
            idle, steps = await capacity(
                root / "capacity", args.start, args.period, args.seconds, args.most
            )
            held = [s for s in steps if not s.lost and s.p99 <= P99_LIMIT]
            if held:
                best = held[-1]
                per_table = (best.rss_kib - idle) / best.tables
                print(
                    f"  held: {best.tables} tables, {best.rate:.0f} msg/s (p99 {ms(best.p99)}); "
                    f"cluster RSS idle {idle / 1024:.0f} MiB, {per_table:.0f} KiB more per table",
                    flush=True,
                )
        if args.failover:
            print(
                f"failover: 10 controllers with their Mosquitto bridges, {args.failover} kills:",
                flush=True,
            )
            for r in await failover(root / "failover", args.failover):
                print(
                    f"  node {int(r['victim'])} killed with {int(r['bridges'])} bridges: all on "
                    f"other nodes after {r['moved']:.2f} s; longest silence of a table "
                    f"{r['gap']:.2f} s; lost {int(r['lost'])} of {int(r['published'])}",
                    flush=True,
                )
    print(f"load average after {os.getloadavg()[0]:.2f}")


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark."""
    global SERVER
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    args = parse_args(argv)
    SERVER = args.server
    server = SERVER or nats_server_path()
    done = subprocess.run([server, "--version"], capture_output=True, text=True, timeout=30)
    print(f"{server}: {done.stdout.strip()}", flush=True)
    asyncio.run(run(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
