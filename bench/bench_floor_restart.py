"""No stale state after a node restart (issue 28, docs/developers/benchmarks.md, "A node
restarted under a new pit"): how often a floor node just restarted hands a new subscriber
a table's state older than the table's, and what a pit draws 5 s after it connected, with
the feed's catch-up and without it, in the same run.

Real parts, as the floor test: a 3-node cluster by ``lammer floor-config`` (the pinned
nats-server 2.15.1), ``--controllers`` controllers (``lammer broker-config --bridge``, the
daemon, the simulator), every table playing slowly (a roll or a round every
``--interval`` s, so that a table is often quiet for the seconds that matter). Each of
``--cycles`` cycles: a node (in turn) is killed (SIGKILL), stays down ``--down`` s while
the tables play on, and is started again; as soon as it serves MQTT with JetStream running
(its replicas may still be catching up: the moment a pit reconnecting to it would come),
two new pits connect to it, each ``lammer web``'s own store with no position: one with
``contract.feed``'s catch-up (the default), one without (``catchup_after=None``, the feed
before issue 28). For every table:

* **handed stale**: the retained ``state`` the node handed over is older than the table's
  latest state when the pit connected (read from the controller's own broker);
* **card stale at 5 s**: 5 s after the pit connected, the pit draws a state older than
  that latest one (what the issue's goal counts: none with the catch-up).

Prints per cycle and in total; asserts nothing. Run:
``.venv/bin/python bench/bench_floor_restart.py [--cycles 20] [--controllers 4]``.
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
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import machine
from contract.feed import Feed
from deploy.floor_cluster import FloorCluster
from tests.integration.floor import Controller, NewPit, running_floor, until

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


def latest_state(controller: Controller, at: float) -> int | None:
    """The seq of the table's latest ``state`` its own broker had delivered by ``at``
    (monotonic; the recorder's ``at`` is wall time, so compared through the offset)."""
    wall = time.time() - (time.monotonic() - at)
    seqs = [m.seq for m in controller.table.recorder.on("state") if m.at <= wall and m.seq]
    return max(seqs, default=None)


def handed(pit: NewPit, base: str) -> int | None:
    """The seq of the retained ``state`` the node handed ``pit`` for ``base``."""
    for m in pit.messages:
        if m.topic == f"{base}/state" and m.retained and isinstance(m.body, dict):
            return int(m.body["seq"])
    return None


async def one_cycle(
    cluster: FloorCluster, controllers: list[Controller], node: int, down: float
) -> Cycle:
    """Kill ``node``, let the tables play ``down`` s, start it, and watch two new pits."""
    cluster.kill_node(node)
    await asyncio.sleep(down)  # the play the node misses: the scenario, not a wait
    cluster.start_node(node, wait=False)
    await asyncio.get_running_loop().run_in_executor(
        None, lambda: cluster.wait_healthy(node, current=False)
    )
    bases = [c.table.base for c in controllers]
    tables = {c.name: [c.table.table_id] for c in controllers}
    with_catchup = NewPit(cluster, bases, tables, first=node)
    without = NewPit(cluster, bases, tables, first=node, feed=Feed(catchup_after=None))
    cycle = Cycle(node)
    await asyncio.gather(with_catchup.start(), without.start())
    try:
        connected = min(with_catchup.connected_at(), without.connected_at())
        want = {c.table.table_id: latest_state(c, connected) for c in controllers}
        right: dict[str, float] = {}
        while time.monotonic() < connected + CARD_WITHIN:
            for c in controllers:
                tid = c.table.table_id
                card, seq = with_catchup.card(tid), want[tid]
                if tid not in right and card is not None and seq is not None and card >= seq:
                    right[tid] = time.monotonic() - connected
            await asyncio.sleep(0.05)  # sampling the pit's cards, not waiting for an event
        for c in controllers:
            tid, seq = c.table.table_id, want[c.table.table_id]
            if seq is None:
                continue
            given = handed(with_catchup, c.table.base)
            given_too = handed(without, c.table.base)
            stale = [g for g in (given, given_too) if g is not None and g < seq]
            cycle.handed_stale += bool(stale)
            cycle.stale_with += (with_catchup.card(tid) or 0) < seq
            cycle.stale_without += (without.card(tid) or 0) < seq
            if stale and tid in right:
                cycle.right_after.append(right[tid])
    finally:
        await asyncio.gather(with_catchup.close(), without.close())
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
            for n in range(args.cycles):
                cycle = await one_cycle(cluster, controllers, 1 + n % 3, args.down)
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
