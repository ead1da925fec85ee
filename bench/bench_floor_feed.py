"""The floor after the gap fill (docs/developers/benchmarks.md, "After the gap fill"): what every
subscriber reading through ``contract.feed`` is given over node kills, with real tables.

Each run is the floor test's scenario (tests/integration/test_floor.py) without its
assertions: ``--controllers`` controllers, each its Mosquitto bridged by ``lammer
broker-config --bridge``, its real daemon (which serves ``request/resend`` from its
journal) and its simulator; a 3-node cluster by ``lammer floor-config`` (``--server``: the
pinned 2.15.1 by default, or Debian's 2.9.10); three floor subscribers through
``contract.feed`` (two feeds starting on nodes 1 and 3, and ``lammer web``'s store as the
pit on node 1), each moving between nodes as its node dies or refuses it. A third of the
way into ``--play`` seconds the node holding most bridges is killed (SIGKILL), two thirds in
it is started again. Figures per run and in total:

* per subscriber, against the table's journal (``lammer journal --kind publish``), once
  every subscriber caught up or 90 s passed: **missing** (published, never released),
  **out of order** (released below one released before), **repeats** (released twice),
  **gaps** given up; **asked** (resend requests published) and duplicates dropped;
* ``floor_resend``: bridge drops seen by the daemons and the copies they published;
* **failover**: SIGKILL until ``/connz`` of the live nodes lists every bridge;
* **frame-to-floor latency**: from a message's ``ts`` (the daemon's time of the device's
  frame) to its release by a subscriber's feed (the moment a screen could draw it,
  gap fill included), p50 and p99: before the kill (quiet), and for messages stamped in
  the 30 s after it (the failover window).

Prints; asserts nothing. Run: ``.venv/bin/python bench/bench_floor_feed.py --runs 2``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import itertools
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Final

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from contract.feed import Event, Message, Resend
from deploy.floor_cluster import FloorCluster
from tests.integration.floor import Controller, FeedSubscriber, PitSubscriber

GAMES: Final = ("CRAPS", "UTH", "BJ", "CRAPS", "TCP")
WINDOW: Final = 30.0
"""Seconds after the kill whose messages count as the failover window."""
CATCH_UP: Final = 90.0


@dataclass
class Figures:
    """One run's figures."""

    victim: int = 0
    failover: float = float("nan")
    published: int = 0
    subscribers: list[tuple[str, int, int, int, int, int, int]] = field(default_factory=list)
    floor_resend: tuple[int, int] = (0, 0)
    quiet: list[float] = field(default_factory=list)
    window: list[float] = field(default_factory=list)


class Timed(FeedSubscriber):
    """A feed subscriber that notes when each message is released (wall clock)."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.latency: list[tuple[float, float]] = []  # (ts, seconds to release)

    def _handle(self, events: Sequence[Event]) -> list[Resend]:
        now = time.time()
        for event in events:
            if isinstance(event, Message) and isinstance(event.body.get("ts"), str):
                ts = datetime.fromisoformat(event.body["ts"]).timestamp()
                self.latency.append((ts, now - ts))
        return super()._handle(events)


def p(values: list[float], q: float) -> str:
    """The ``q`` quantile in ms, or ``-``."""
    if not values:
        return "-"
    ordered = sorted(values)
    return f"{ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000:.0f}"


def judge(released: list[int], want: list[int]) -> tuple[int, int, int]:
    """(missing, out of order, repeats) of what a subscriber released."""
    late = sum(1 for a, b in itertools.pairwise(released) if b < a)
    return len(set(want) - set(released)), late, len(released) - len(set(released))


def bridges_on(cluster: FloorCluster, node: int) -> int:
    """Bridges ``/connz`` lists on ``node`` (0 for a dead one)."""
    try:
        return sum(cid.startswith("lammer-bridge-") for cid in cluster.mqtt_clients(node))
    except OSError:
        return 0


async def wait_for(predicate: object, within: float) -> bool:
    """Poll ``predicate`` (a callable) until true or ``within`` s; whether it came true."""
    assert callable(predicate)
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if predicate():
            return True
        await asyncio.sleep(0.1)
    return False


async def one_run(root: Path, args: argparse.Namespace, seed: int) -> Figures:  # noqa: C901  one run of the bench, step by step
    """One run's figures."""
    cluster = FloorCluster(root / "cluster", server=args.server)
    controllers = [
        Controller(root / f"ctl{i}", f"ctl{i}", GAMES[i % len(GAMES)], cluster)
        for i in range(args.controllers)
    ]
    subscribers: list[FeedSubscriber] = []
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            for c in controllers:
                c.configure()
        cluster.configure([c.declaration for c in controllers])
        cluster.start()
        bases = [c.table.base for c in controllers]
        feeds = [Timed(cluster, bases, first=1), Timed(cluster, bases, first=3)]
        pit = PitSubscriber(
            cluster, bases, {c.name: [c.table.table_id] for c in controllers}, first=1
        )
        subscribers = [*feeds, pit]
        for sub in subscribers:
            await sub.start()
        for i, c in enumerate(controllers):
            await c.start(interval=1.0 if c.game == "CRAPS" else 2.0, seed=seed + i)
        await wait_for(
            lambda: sum(bridges_on(cluster, n) for n in (1, 2, 3)) == len(controllers), 60
        )
        started = time.monotonic()
        await asyncio.sleep(args.play / 3)
        victim = max((1, 2, 3), key=lambda n: bridges_on(cluster, n))
        cluster.kill_node(victim)
        killed_mono, killed_wall = time.monotonic(), time.time()
        others = [n for n in (1, 2, 3) if n != victim]
        moved = await wait_for(
            lambda: sum(bridges_on(cluster, n) for n in others) == len(controllers), 60
        )
        failover = time.monotonic() - killed_mono if moved else float("nan")
        await asyncio.sleep(max(0.0, started + 2 * args.play / 3 - time.monotonic()))
        cluster.start_node(victim)
        await asyncio.sleep(max(0.0, started + args.play - time.monotonic()))
        for c in controllers:
            await c.stop_play()

        def published() -> dict[str, list[int]]:
            journals = {c.table.base: c.table.journal("--kind", "publish") for c in controllers}
            return {base: sorted(r["seq"] for r in records) for base, records in journals.items()}

        def caught_up(want: dict[str, list[int]]) -> bool:
            return all(
                (sub.feed.positions().get(base) or 0) >= seqs[-1]
                for sub in subscribers
                for base, seqs in want.items()
            )

        # A table still publishes after its simulator stopped (the device's loss: a state, an
        # alarm), so the journals are read again once every subscriber reached them: the
        # judgement is against the table's last words, not against a read taken before them
        # (which counted a pit that was ahead of it as missing).
        first = published()
        await wait_for(lambda: caught_up(first), CATCH_UP)
        want = published()
        await wait_for(lambda: caught_up(want), CATCH_UP / 3)
        figures = Figures(victim=victim, failover=failover)
        figures.published = sum(len(v) for v in want.values())
        rows = figures.subscribers
        for name, sub in zip(("feed@1", "feed@3", "pit@1"), subscribers, strict=True):
            missing = late = repeats = 0
            for base, seqs in want.items():
                got = sub.released.get(base, [])
                if sub is pit:
                    # The pit draws no request or response: its order and repeats from
                    # what it drew; missing: a table whose feed (in order, gap-filled) did not reach
                    # the end.
                    _, lt, r = judge(got, seqs)
                    m = 0 if (sub.feed.positions().get(base) or 0) >= seqs[-1] else 1
                else:
                    m, lt, r = judge(got, seqs)
                missing, late, repeats = missing + m, late + lt, repeats + r
            rows.append(
                (name, missing, late, repeats, len(sub.gaps), len(sub.asked), sub.feed.dropped)
            )
        drops = copies = 0
        for c in controllers:
            for e in c.table.log_events():
                if str(e.get("event", "")).startswith("floor bridge down: publishing"):
                    drops += 1
                    copies += int(e.get("messages") or 0)
        figures.floor_resend = (drops, copies)
        for sub in feeds:
            for ts, lag in sub.latency:
                if ts < killed_wall - 1:
                    figures.quiet.append(lag)
                elif ts < killed_wall + WINDOW:
                    figures.window.append(lag)
        return figures
    finally:
        for sub in subscribers:
            await sub.close()
        for c in controllers:
            await c.close()
        cluster.stop()


async def run(args: argparse.Namespace) -> None:
    """Every run, then the totals."""
    quiet_all: list[float] = []
    window_all: list[float] = []
    totals = [0, 0, 0, 0]
    for n in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="bench-floor-feed-") as tmp:
            f = await one_run(Path(tmp), args, seed=100 + 17 * n)
        quiet, window = f.quiet, f.window
        quiet_all += quiet
        window_all += window
        load = " ".join(f"{x:.2f}" for x in os.getloadavg())
        print(
            f"run {n + 1}: killed node {f.victim}, failover {f.failover:.2f} s, "
            f"{f.published} messages, floor_resend drops/copies {f.floor_resend}, "
            f"load {load}"
        )
        for name, missing, late, repeats, gaps, asked, dropped in f.subscribers:
            print(
                f"  {name}: missing {missing}, out of order {late}, repeats {repeats}, "
                f"gaps {gaps}, resend asked {asked}, duplicates dropped {dropped}"
            )
            for i, v in enumerate((missing, late, repeats, gaps)):
                totals[i] += v
        print(
            f"  frame-to-floor ms: quiet p50 {p(quiet, 0.5)} p99 {p(quiet, 0.99)} "
            f"({len(quiet)}); failover window p50 {p(window, 0.5)} p99 {p(window, 0.99)} "
            f"({len(window)})"
        )
    print(
        f"total over {args.runs} kills, 3 subscribers each: missing {totals[0]}, "
        f"out of order {totals[1]}, repeats {totals[2]}, gaps {totals[3]}; frame-to-floor ms "
        f"quiet p99 {p(quiet_all, 0.99)} (n={len(quiet_all)}), failover window p99 "
        f"{p(window_all, 0.99)} (n={len(window_all)}); median quiet "
        f"{statistics.median(quiet_all) * 1000 if quiet_all else float('nan'):.0f}"
    )


def main(argv: list[str] | None = None) -> int:
    """Parse the options and run."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=2, help="runs (one node kill each)")
    parser.add_argument("--play", type=float, default=45.0, help="seconds of play per run")
    parser.add_argument("--controllers", type=int, default=10)
    parser.add_argument("--server", default=None, help="nats-server binary (default: pinned)")
    asyncio.run(run(parser.parse_args(argv)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
