"""A floor link that cannot take the controller's own broker with it (issue 28, item 2).

Against the files ``lammer broker-config --bridge`` writes, run as in production: the
tables' Mosquitto (``mosquitto.conf``, no bridge) and the floor bridge's own Mosquitto
(``bridge.conf``) under ``lammer bridge-watchdog``, bridged to a real 3-node floor
cluster through ``FaultyNode`` (``tests/integration/floor_faults.py``). Each floor fault
20 times in a row: a node with another CA's certificate, one that accepts TCP and never
answers TLS, one that resets mid-handshake, a floor that flaps. Throughout, a message a
table publishes on its broker reaches a local display without waiting on the bridge (p99
under 250 ms, none over 3 s: bounds on a failure, a hang being seconds; the figures are
printed, to read against issue 28's 100 ms), the tables' broker keeps its process; after each
fault the bridge reaches the floor again by itself, and at the end every message the
table published is on the floor. And a bridge broker that hangs (SIGSTOP: it answers
nothing and cannot act on SIGTERM, as the spinning 2.0.11 of the issue) is killed and
started again by its watchdog, the daemons told (its will, ``0``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from contract.floor import bridge_status_topic
from deploy.broker import free_port
from deploy.floor_cluster import FloorCluster
from tests.helpers.pki import other_ca
from tests.integration.floor import Controller, FloorSubscriber, bridges, until
from tests.integration.floor_faults import FAULTS, FaultyNode, LocalClock, Mode
from tests.integration.harness import DEADLINE

pytestmark = [
    pytest.mark.integration,
    pytest.mark.heavy,
    pytest.mark.slow,
    pytest.mark.timeout(900),
]

CYCLES = 20
LOCAL_BOUND = 0.250
"""Seconds from a table's publish to a local display: the p99 of each run (a bound on a
failure; the figures are printed, and issue 28's 100 ms is what they are read against).
The clock's latency holds the scheduling of two processes (the clock's own and the
broker's): on this shared 2-core machine at load 15 a few messages in 800 took 100 to
550 ms with or without a fault (bench/bench_bridge.py measures a quiet run beside the
faults), and under CI's 4 workers a few stalls of a few hundred ms are over 1 % of a
run. A tables' broker that waited on its bridge would hold messages for seconds: over
the 0.25 s of half a second's hold at each of the 20 faults is 60 messages in 800."""

LOCAL_MAX = 3.0
"""Seconds no message may take (a bound on a failure). The hang of issue 28 was over 10 s;
a bridge broker hung with SIGSTOP is SIGKILLed 3.5 s at the least after it stopped (two
probes missed, 1 s each and 0.5 s apart, then 2 s of grace) and replaced a second later
(asserted: longer than this), so a tables' broker held by it would hold a message longer
than this; a stall of the machine alone has not come near it."""


class Setup:
    """The cluster, the controller bridged to ``FaultyNode``'s port, the foreign CA."""

    def __init__(self, root: Path) -> None:
        self.cluster = FloorCluster(root / "cluster")
        self.ctl = Controller(root / "ctl", "faults", "CRAPS", self.cluster)
        self.fault_port = free_port()
        self.foreign = other_ca(root / "other")
        # The bridge dials the stand-in; it retries every 1 to 2 s (--bridge-retry) so 20
        # faults take minutes, not the production 1 to 15 s backoff.
        self.ctl.configure("--bridge", f"127.0.0.1:{self.fault_port}", "--bridge-retry", "1:2")
        self.cluster.configure([self.ctl.declaration])

    def login(self, user: str) -> tuple[str, str]:
        return user, (self.ctl.out / "credentials" / user).read_text().strip()


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    s = Setup(tmp_path_factory.mktemp("bridge-faults"))
    s.cluster.start()
    yield s
    s.ctl.broker.stop()
    s.cluster.stop()


@dataclass
class Running:
    """What ``running`` started."""

    node: FaultyNode
    watcher: FloorSubscriber
    clock: LocalClock
    pid: int  # the tables' broker's
    log_from: int  # where this test's part of the controller's log starts

    def log(self, s: Setup) -> str:
        """The controller's log (both brokers, the watchdog) since this test started."""
        return s.ctl.broker.log.read_text(errors="replace")[self.log_from :]


@contextlib.asynccontextmanager
async def running(s: Setup) -> AsyncIterator[Running]:
    """The stand-in node, the brokers, a floor subscriber and the local clock, running;
    all stopped on the way out, whatever happened."""
    _, cert = s.foreign
    log_from = len(s.ctl.broker.log.read_text(errors="replace")) if s.ctl.broker.log.exists() else 0
    node = FaultyNode(s.cluster.mqtt_endpoints[0], cert, cert.with_suffix(".key"))
    await node.start(s.fault_port)
    table = s.ctl.table.table_id
    topic = f"lammer/{table}/craps/roll"
    watcher = FloorSubscriber(s.cluster, [topic], first=2)
    clock = LocalClock(
        s.ctl.broker.host,
        s.ctl.broker.port,
        topic,
        s.login(f"lammer-{table}"),
        s.login("display"),
        folder=s.ctl.root,
    )
    try:
        s.ctl.broker.start()
        process = s.ctl.broker.process
        assert process is not None
        await watcher.start()
        # Both bridges up before the table publishes: the tables' broker keeps a session
        # for the bridge broker (and queues for it) from its first connection on.
        await until(
            lambda: "as floor-bridge" in s.ctl.broker.log.read_text(errors="replace")[log_from:],
            "the bridge broker connected to the tables' broker",
        )
        await until(lambda: bridges(s.cluster), "the bridge connected to the floor")
        await clock.start()
        await until(lambda: floor_seqs(watcher), "the bridge up: the clock on the floor")
        yield Running(node, watcher, clock, process.pid, log_from)
    finally:
        await clock.stop()
        try:
            await watcher.close()
        finally:
            s.ctl.broker.stop()
            await node.close()


def floor_seqs(watcher: FloorSubscriber) -> set[int]:
    """The clock's seqs the floor subscriber received."""
    seqs = set()
    for m in watcher.messages:
        body = m.body
        if isinstance(body, dict) and isinstance(body.get("seq"), int) and "clock" in body:
            seqs.add(body["seq"])
    return seqs


@pytest.mark.parametrize("fault", FAULTS)
async def test_each_floor_fault_20_times_leaves_the_tables_broker_serving(
    setup: Setup, fault: Mode
) -> None:
    s = setup
    recoveries: list[float] = []
    async with running(s) as r:
        node, watcher, clock = r.node, r.watcher, r.clock
        for cycle in range(CYCLES):
            # The bridge meets the fault (twice for a flapping floor: up, down, up, down).
            wanted = node.attempts[fault] + (2 if fault == "flap" else 1)
            node.switch(fault)
            await until(
                lambda wanted=wanted: node.attempts[fault] >= wanted,  # type: ignore[misc]
                f"cycle {cycle}: the bridge meeting {fault}",
            )
            if fault == "silent":
                await asyncio.sleep(0.5)  # a handshake left hanging for a while
            node.switch("floor")
            ended, after = time.monotonic(), clock.seq
            await until(
                lambda after=after: any(q > after for q in floor_seqs(watcher)),  # type: ignore[misc]
                f"cycle {cycle}: the bridge back on the floor after {fault}",
            )
            recoveries.append(time.monotonic() - ended)
        await clock.stop()
        # The tables' broker is the one that started, alive: never stalled nor restarted.
        process = s.ctl.broker.process
        assert process is not None
        assert process.pid == r.pid
        assert process.poll() is None, "the tables' broker exited under the fault"
        await until(
            lambda: set(clock.sent) <= floor_seqs(watcher),
            "every message the table published on the floor",
        )
        log = r.log(s)
    recoveries.sort()
    copies = sum(isinstance(m.body, dict) and "clock" in m.body for m in watcher.messages)
    print(
        f"\n{fault} x{CYCLES}: local {clock.figures()}; bridge back on the floor "
        f"p50 {recoveries[len(recoveries) // 2]:.2f} s, max {recoveries[-1]:.2f} s; "
        f"bridge attempts met {node.attempts[fault]}; bridge broker restarts "
        f"{log.count('bridge broker started') - 1}, SIGKILLs {log.count('ignored SIGTERM')}; "
        f"{len(clock.sent)} published, {copies} received on the floor"
    )
    assert clock.late(LOCAL_MAX) == [], clock.figures()
    assert len(clock.late(LOCAL_BOUND)) <= len(clock.sent) // 100, clock.figures()


async def test_a_hung_bridge_broker_is_killed_and_restarted_by_its_watchdog(
    setup: Setup,
) -> None:
    """SIGSTOP: the bridge broker answers nothing and cannot act on SIGTERM (the spinning
    Mosquitto of the issue). The watchdog SIGKILLs it and starts another; the daemons hear
    its will (``0`` on the local status); the tables' broker serves throughout."""
    s = setup
    local = bridge_status_topic("faults.local")
    async with running(s) as r:
        watcher, clock = r.watcher, r.clock

        def heard(payload: bytes) -> bool:
            return (local, payload) in clock.statuses

        await until(lambda: heard(b"1"), "the daemons hearing the bridge broker is there")
        # The pid read now, not before the "1": the watchdog (--deadline 1) may have
        # started another broker meanwhile on a loaded machine.
        hung = await until(lambda: _sigstop(s), "the bridge broker stopped (SIGSTOP)")
        stopped, stopped_seq = time.monotonic(), clock.seq
        replaced = await until(
            lambda: (p := s.ctl.broker.bridge_pid()) is not None and p != hung and p,
            "the watchdog starting another bridge broker",
        )
        took = time.monotonic() - stopped
        await until(lambda: heard(b"0"), "the daemons hearing the bridge broker's will")
        after = clock.seq
        await until(
            lambda: any(q > after for q in floor_seqs(watcher)), "the new bridge on the floor"
        )
        await clock.stop()
        # A SIGKILL loses what the bridge broker acknowledged in its last instant, before
        # it saved it (autosave_on_changes saves after each change, not inside the
        # acknowledgement): at most the message or two in flight when it hung. Its will
        # (heard above) makes each daemon publish its newest message again (floor_resend),
        # and floor subscribers ask for the gap (contract.feed).
        window = set(range(stopped_seq - 2, stopped_seq + 2))
        await until(
            lambda: set(clock.sent) - window <= floor_seqs(watcher),
            "every message the table published on the floor, but those in flight at the hang",
            within=DEADLINE,
        )
        lost = sorted(set(clock.sent) - floor_seqs(watcher))
        log = r.log(s)
    print(f"\nhung bridge broker replaced in {took:.1f} s (pid {hung} -> {replaced}); "
          f"local {clock.figures()}; lost at the kill: {lost}")  # fmt: skip
    assert len(lost) <= 2
    assert "ignored SIGTERM: SIGKILL" in log
    assert took > LOCAL_MAX  # the hang lasted longer than any message may take
    assert _state(hung) in ("gone", "Z")  # killed (reaped, or a zombie of the watchdog)
    assert clock.late(LOCAL_MAX) == [], clock.figures()
    assert len(clock.late(LOCAL_BOUND)) <= len(clock.sent) // 100, clock.figures()


def _sigstop(s: Setup) -> int | None:
    """SIGSTOP the bridge broker running now; its pid once it is stopped and still the
    watchdog's child, else None (to try again: the broker read may have just been replaced,
    or not be stopped yet)."""
    pid = s.ctl.broker.bridge_pid()
    if pid is None:
        return None
    if _state(pid) == "T" and s.ctl.broker.bridge_pid() == pid:
        return pid
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGSTOP)
    return None


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2]
    except OSError:
        return "gone"
