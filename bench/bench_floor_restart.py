"""No stale state after a node restart (docs/developers/benchmarks.md, "A node
restarted under a new pit"): how often a floor node just restarted hands a new subscriber
a table's state older than the table's, and what a pit draws 5 s after it connected, with
the feed's catch-up and without it, in the same run (one pit after the other).

Real parts, as the floor test: a 3-node cluster by ``lammer floor-config`` (the pinned
nats-server 2.15.1), ``--controllers`` controllers (``lammer broker-config --bridge``, the
daemon, the simulator), every table playing slowly (a roll or a round every
``--interval`` s, so that a table is often quiet for the seconds that matter). Each of
``--cycles`` cycles: a node (in turn) is killed (SIGKILL), stays down ``--down`` s while
the tables play on, and is started again; as soon as it serves MQTT with JetStream running
(its replicas may still be catching up: the moment a pit reconnecting to it would come),
two new pits connect to it one after the other, each ``lammer web``'s own store with no
position: first one without the catch-up (``catchup_after=None``), then one with it (the
default). A pit draws what another pit's catch-up brought, so they do not watch at once.
For every table:

* **handed stale**: a retained topic the node handed over (``state``, ``craps/board``, a
  result...) is older than the table's latest message of that topic when the pit
  connected (read from the controller's own broker);
* **card stale at 5 s**: 5 s after the pit connected, the pit draws a topic of the table
  older than that (what the issue's goal counts: none with the catch-up).

With ``--stale`` (a node stale by design, as tests/integration/test_floor_restart.py makes
it, since a restarted 2.15.1 node seldom is: none in 20 restarts here): half the tables go
quiet before the first cycle, and in each cycle, before the pits connect, the floor is
handed each quiet table's retained topics as they stood halfway through what it published
(byte for byte, as the table's bridge user; put right again after the cycle).

Prints per cycle and in total; asserts nothing. Run:
``.venv/bin/python bench/bench_floor_restart.py [--cycles 20] [--controllers 4] [--stale]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import sys
import tempfile
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import machine
from contract.feed import Feed
from contract.payloads import TOPICS
from deploy.floor_cluster import FloorCluster
from tests.integration.floor import (
    Controller,
    NewPit,
    bridges,
    forge,
    running_floor,
    stale_store,
    until,
    until_retained,
)

GAMES = ("CRAPS", "UTH", "BJ", "CRAPS")
CARD_WITHIN = 5.0


@dataclass
class Cycle:
    """One restart's figures: tables handed a stale state, cards stale at 5 s by pit."""

    node: int
    handed_stale: int = 0
    stale_with: int = 0
    stale_without: int = 0
    right_after: list[float] = field(default_factory=list)
    """With the catch-up: seconds until each card handed stale was right."""


def latest(controller: Controller, at: float) -> dict[str, int]:
    """Per retained topic, the seq of the table's latest message its own broker had
    delivered by ``at`` (monotonic; the recorder's times are wall times: compared through
    the offset)."""
    wall = time.time() - (time.monotonic() - at)
    found: dict[str, int] = {}
    for m in controller.table.recorder.messages:
        if m.seq is not None and m.at <= wall and TOPICS.get(m.topic, (None, False))[1]:
            found[m.topic] = max(found.get(m.topic, 0), m.seq)
    return found


def played(controller: Controller) -> bool:
    """Whether the table has published enough to be made stale: retained messages at two
    points at least."""
    return len(controller.table.recorder.seqs()) >= 8


def handed(pit: NewPit, base: str) -> dict[str, int]:
    """Per retained topic, the seq the node handed ``pit`` for the table at ``base``."""
    found: dict[str, int] = {}
    for m in pit.messages:
        if m.retained and m.topic.startswith(base + "/") and isinstance(m.body, dict):
            found.setdefault(m.topic[len(base) + 1 :], int(m.body["seq"]))
    return found


def behind(pit: NewPit, table_id: str, want: dict[str, int]) -> bool:
    """Whether ``pit`` draws any retained topic of the table older than ``want``."""
    return any((pit.card(table_id, topic) or 0) < seq for topic, seq in want.items())


def stale_point(controller: Controller) -> tuple[int, int]:
    """(a seq in the middle of what the table published, its last seq)."""
    seqs = sorted({m.seq for m in controller.table.recorder.messages if m.seq})
    return seqs[len(seqs) // 2], seqs[-1]


async def one_cycle(
    cluster: FloorCluster,
    controllers: list[Controller],
    node: int,
    down: float,
    quiet: list[Controller],
) -> Cycle:
    """Kill ``node``, let the tables play ``down`` s, start it, make the ``quiet`` tables
    stale on the floor, and watch two new pits."""
    cluster.kill_node(node)
    await asyncio.sleep(down)  # the play the node misses: the scenario, not a wait
    cluster.start_node(node, wait=False)
    await asyncio.get_running_loop().run_in_executor(
        None, lambda: cluster.wait_healthy(node, current=False)
    )
    if quiet:
        await until(lambda: bridges(cluster) == len(controllers) or None, "every bridge")
        for c in quiet:
            middle, _ = stale_point(c)
            # The floor holds the table's newest retained message before it is made stale
            # (a bridge that reconnected after the restart sends its retained states).
            topic, seq = max(latest(c, time.monotonic()).items(), key=lambda item: item[1])
            await until_retained(cluster, f"{c.table.base}/{topic}", seq)
            await forge(cluster, c, stale_store(c, middle))
    bases = [c.table.base for c in controllers]
    tables = {c.name: [c.table.table_id] for c in controllers}
    cycle = Cycle(node)
    # One pit, then the other: a pit draws what another pit's catch-up brought (its answers
    # and copies reach every subscriber), so they must not watch at once.
    for catchup in (False, True):
        feed = Feed() if catchup else Feed(catchup_after=None)
        pit = NewPit(cluster, bases, tables, first=node, feed=feed)
        await pit.start()
        try:
            connected = pit.connected_at()
            want = {c.table.table_id: latest(c, connected) for c in controllers}
            right: dict[str, float] = {}
            while time.monotonic() < connected + CARD_WITHIN:
                for tid, seqs in want.items():
                    if tid not in right and seqs and not behind(pit, tid, seqs):
                        right[tid] = time.monotonic() - connected
                await asyncio.sleep(0.05)  # sampling the pit's cards, not an event's wait
            for c in controllers:
                tid, seqs = c.table.table_id, want[c.table.table_id]
                given = handed(pit, c.table.base)
                old = any(given.get(topic, 0) < seq for topic, seq in seqs.items())
                late = behind(pit, tid, seqs)
                if catchup:
                    cycle.handed_stale += old
                    cycle.stale_with += late
                    if old and tid in right:
                        cycle.right_after.append(right[tid])
                    if late:
                        drawn = {t: pit.card(tid, t) for t in seqs}
                        print(f"  {tid}: wanted {seqs}, drawn {drawn}, asked {pit.asked}")
                else:
                    cycle.stale_without += late
        finally:
            await pit.close()
    for c in quiet:  # the floor put right for the next cycle
        await forge(cluster, c, stale_store(c, stale_point(c)[1]))
    await until(lambda: cluster.healthy(node) or None, "the node caught up", 60)
    return cycle


async def run(args: argparse.Namespace) -> list[Cycle]:
    cycles: list[Cycle] = []
    with tempfile.TemporaryDirectory(prefix="bench-floor-restart-") as tmp:
        with contextlib.redirect_stdout(io.StringIO()):
            floor = running_floor(Path(tmp), GAMES, args.controllers)
            cluster, controllers = await floor.__aenter__()
        try:
            for i, c in enumerate(controllers):
                await c.start(interval=args.interval, seed=200 + i)
            await asyncio.sleep(args.interval * 2)  # some play before the first restart
            quiet = controllers[: len(controllers) // 2] if args.stale else []
            for c in quiet:  # a few more rounds, then nothing: quiet tables
                await c.table.wait_for(partial(played, c), what="some play", within=120)
                await c.stop_play()
                await c.table.wait_published()
            for n in range(args.cycles):
                cycle = await one_cycle(cluster, controllers, 1 + n % 3, args.down, quiet)
                cycles.append(cycle)
                print(
                    f"cycle {n + 1:2d}: node {cycle.node}; tables handed a stale state "
                    f"{cycle.handed_stale}; cards stale at {CARD_WITHIN:g} s: with the "
                    f"catch-up {cycle.stale_with}, without {cycle.stale_without}",
                    flush=True,
                )
        finally:
            await floor.__aexit__(None, None, None)
    return cycles


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cycles", type=int, default=20)
    parser.add_argument("--controllers", type=int, default=4)
    parser.add_argument("--interval", type=float, default=8.0, help="seconds between plays")
    parser.add_argument("--down", type=float, default=3.0, help="seconds a node stays down")
    parser.add_argument("--stale", action="store_true", help="make the quiet tables stale")
    args = parser.parse_args()
    print(f"machine: {machine()}")
    cycles = asyncio.run(run(args))
    tables = args.controllers * len(cycles)
    handed_stale = sum(c.handed_stale for c in cycles)
    fixed = [t for c in cycles for t in c.right_after]
    print(
        f"{len(cycles)} restarts, {tables} table cards: handed a stale state {handed_stale} "
        f"(in {sum(1 for c in cycles if c.handed_stale)} restarts); stale {CARD_WITHIN:g} s "
        f"after connecting: with the catch-up {sum(c.stale_with for c in cycles)}, without "
        f"{sum(c.stale_without for c in cycles)}"
    )
    if fixed:
        fixed.sort()
        print(
            f"stale cards made right by the catch-up: {len(fixed)}, after "
            f"{fixed[len(fixed) // 2]:.2f} s median, {fixed[-1]:.2f} s at most"
        )


if __name__ == "__main__":
    main()
