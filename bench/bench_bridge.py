"""A bridge that cannot take its tables with it (docs/developers/benchmarks.md, "The floor
bridge in a broker of its own"): the two layouts side by side under each floor fault.

* **single**: the layout before the split, one Mosquitto serving the daemons and displays
  with the floor bridge in it (``mosquitto.conf`` with ``bridge.conf``'s floor section
  appended, as broker-config wrote it until then);
* **split**: what ``lammer broker-config --bridge`` writes now, the tables' Mosquitto with
  no bridge and the bridge's own Mosquitto under ``lammer bridge-watchdog``.

Real parts, as tests/integration/test_bridge_faults.py: a 3-node floor cluster
(``lammer floor-config``, nats-server 2.15.1), the controller's generated files, the bridge
dialling a ``FaultyNode`` (``tests/integration/floor_faults.py``) that forwards to node 1
or plays a fault: ``wrong_ca``, ``silent``, ``reset``, ``flap``; and ``quiet`` (no fault,
the same time) for the baseline. For each layout and fault, ``--cycles`` cycles of: the
fault until the bridge has met it (twice for ``flap``; ``silent`` held 0.5 s more), then
the floor back; measured:

* **local**: a message every 0.1 s from a table's daemon user to a local display on the
  tables' broker (``LocalClock``, a process of its own): p50, p99, max, over 100 ms;
* **recover**: from the floor's return to the first later message on a floor subscriber;
* **CPU**: seconds of CPU the brokers (and the watchdog) used per minute of the run;
* **lost**: messages the table published that never reached the floor.

``--bridge-retry 1:2`` as the test (production: 1 to 15 s). Prints a table; asserts
nothing. Run: ``.venv/bin/python bench/bench_bridge.py [--cycles 5] [--hold 0] [--faults ...]
[--designs single split]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import machine, percentile
from deploy.broker import free_port
from deploy.broker_config import read_conf
from deploy.floor_cluster import FloorCluster
from tests.helpers.pki import other_ca
from tests.integration.floor import BridgedBroker, Controller, FloorSubscriber, bridges, until
from tests.integration.floor_faults import FAULTS, FaultyNode, LocalClock, Mode

DESIGNS = ("single", "split")
TICK = os.sysconf("SC_CLK_TCK")


@dataclass
class Row:
    """One layout under one fault."""

    design: str
    fault: str
    local: list[float]
    sent: int
    recover: list[float]
    cpu_per_min: float
    lost: int
    restarts: int
    errors: int = 0  # the local clock's connections lost (no answer in 10 s)


def cpu_seconds(pid: int | None) -> float:
    """User and system CPU of ``pid`` so far (0 when gone)."""
    if pid is None:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICK


def single_conf(out: Path) -> Path:
    """The layout before the split: mosquitto.conf with the floor bridge appended."""
    tables = (out / "mosquitto.conf").read_text()
    lines = (out / "bridge.conf").read_text().split("\n")
    start = next(i for i, line in enumerate(lines) if line == "connection floor")
    conf = out / "single.conf"
    conf.write_text(tables + "\n" + "\n".join(lines[start:]))
    assert ("connection", "floor") in read_conf(conf.read_text())
    return conf


def floor_seqs(watcher: FloorSubscriber) -> set[int]:
    """The clock's seqs the floor subscriber received."""
    return {
        m.body["seq"]
        for m in watcher.messages
        if isinstance(m.body, dict) and isinstance(m.body.get("seq"), int) and "clock" in m.body
    }


async def one(
    ctl: Controller,
    cluster: FloorCluster,
    design: str,
    fault: Mode | None,
    cycles: int,
    hold: float = 0.0,
) -> Row:
    """One layout under one fault (None: quiet), on a controller of its own (declared to
    the floor beforehand: its passwords are kept when it is configured again here)."""
    root, name = ctl.root, ctl.name
    port = free_port()
    ctl.configure("--bridge", f"127.0.0.1:{port}", "--bridge-retry", "1:2")
    # The watchdog as the unit runs it (a probe every 2 s, 3 s deadline, 5 s grace).
    ctl.broker.watchdog_args = ()
    if design == "single":
        ctl.broker = BridgedBroker(
            ctl.root, port=ctl.broker.port, config_file=single_conf(ctl.out), bridge_conf=None
        )
    _, cert = other_ca(root / f"{name}-ca")
    node = FaultyNode(cluster.mqtt_endpoints[0], cert, cert.with_suffix(".key"))
    await node.start(port)
    ctl.broker.start()
    table = ctl.table.table_id
    topic = f"lammer/{table}/craps/roll"
    watcher = FloorSubscriber(cluster, [topic], first=2)
    await watcher.start()

    def login(user: str) -> tuple[str, str]:
        return user, (ctl.out / "credentials" / user).read_text().strip()

    await until(lambda: bridges(cluster) > 0 and f"-{name}" in str(clients(cluster)), "bridge")
    clock = LocalClock(
        ctl.broker.host,
        ctl.broker.port,
        topic,
        login(f"lammer-{table}"),
        login("display"),
        folder=ctl.root,
    )
    pids = [ctl.broker.process.pid if ctl.broker.process else None]
    started = time.monotonic()
    cpu0 = sum(cpu_seconds(p) for p in pids)
    await clock.start()
    recover: list[float] = []
    try:
        await until(lambda: floor_seqs(watcher), "the clock on the floor")
        for _ in range(cycles):
            if fault is None:
                await asyncio.sleep(3 + hold)  # a quiet cycle: about as long as a fault's
                continue
            wanted = node.attempts[fault] + (2 if fault == "flap" else 1)
            node.switch(fault)
            with contextlib.suppress(AssertionError):  # a hung broker meets nothing more
                await until(
                    lambda w=wanted: node.attempts[fault] >= w,  # type: ignore[misc]
                    f"the bridge meeting {fault}",
                    60,
                )
            if fault == "silent":
                await asyncio.sleep(0.5)
            await asyncio.sleep(hold)  # the bridge tries again and again into the fault
            node.switch("floor")
            ended, after = time.monotonic(), clock.seq
            try:
                await until(
                    lambda a=after: any(q > a for q in floor_seqs(watcher)),  # type: ignore[misc]
                    "the bridge back on the floor",
                    60,
                )
            except AssertionError:
                recover.append(float("inf"))  # not back within a minute
            else:
                recover.append(time.monotonic() - ended)
        await clock.stop()
        with contextlib.suppress(AssertionError):
            await until(lambda: set(clock.sent) <= floor_seqs(watcher), "all on the floor", 30)
        bridge = ctl.broker.bridge_pid()
        used = sum(cpu_seconds(p) for p in [*pids, bridge]) - cpu0
        if ctl.broker.watchdog is not None:
            used += cpu_seconds(ctl.broker.watchdog.pid)
        minutes = (time.monotonic() - started) / 60
        log = ctl.broker.log.read_text(errors="replace")
        return Row(
            design,
            fault or "quiet",
            sorted(clock.latency.values()),
            len(clock.sent),
            sorted(recover),
            used / minutes,
            len(set(clock.sent) - floor_seqs(watcher)),
            max(0, log.count("bridge broker started") - 1),
            sum("error" in line for line in clock.out.read_text().splitlines()),
        )
    finally:
        await clock.stop()
        await watcher.close()
        ctl.broker.stop()
        await node.close()


def clients(cluster: FloorCluster) -> list[str]:
    out: list[str] = []
    for n in (1, 2, 3):
        with contextlib.suppress(OSError):
            out += cluster.mqtt_clients(n)
    return out


def show(row: Row) -> str:
    local = row.local or [float("nan")]
    errors = f"  clock errors {row.errors}" if row.errors else ""
    over = sum(v > 0.1 for v in row.local) + (row.sent - len(row.local))
    rec = (
        f"{percentile(row.recover, 0.5):5.2f} / {max(row.recover):5.2f}"
        if row.recover
        else "    - /     -"
    )
    return (
        f"{row.design:6} {row.fault:8} {percentile(local, 0.5) * 1e3:6.1f} "
        f"{percentile(local, 0.99) * 1e3:7.1f} {local[-1] * 1e3:8.1f} {over:5d}/{row.sent:<5d} "
        f"{rec}  {row.cpu_per_min:6.2f}  {row.lost:4d}  {row.restarts:3d}{errors}"
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cycles", type=int, default=5)
    parser.add_argument("--faults", nargs="*", default=["quiet", *FAULTS])
    parser.add_argument("--designs", nargs="*", default=list(DESIGNS))
    parser.add_argument(
        "--hold",
        type=float,
        default=0.0,
        help="seconds each fault lasts after the bridge first met it (it retries every 1 to "
        "2 s into it: Mosquitto 2.0.11 hangs after a few failed handshakes)",
    )
    args = parser.parse_args()
    print(machine())
    with tempfile.TemporaryDirectory(prefix="bench-bridge-") as tmp:
        root = Path(tmp)
        cluster = FloorCluster(root / "cluster")
        # Every controller declared up front (floor-config reads their declarations).
        names = [(d, f) for d in args.designs for f in args.faults]
        ctls = []
        for d, f in names:
            name = f"{d}-{f}".replace("_", "-")
            c = Controller(root / name, name, "CRAPS", cluster)
            c.configure()
            ctls.append(c)
        cluster.configure([c.declaration for c in ctls])
        cluster.start()
        try:
            print(
                "design fault     p50 ms  p99 ms   max ms  >100ms/sent  recover p50/max s"
                "  CPU s/min  lost  restarts"
            )
            for (d, f), ctl in zip(names, ctls, strict=True):
                fault: Mode | None = None if f == "quiet" else f
                row = await one(ctl, cluster, d, fault, args.cycles, args.hold)
                print(show(row), flush=True)
        finally:
            cluster.stop()


if __name__ == "__main__":
    asyncio.run(main())
