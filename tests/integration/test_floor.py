"""The casino floor end to end: table controllers bridged to a 3-node nats-server cluster.

Ten controllers, each its own Mosquitto (``broker-config --bridge`` to every node), its
daemon and its simulator on a pty playing honestly; a 3-node cluster (``floor-config``)
on loopback; a pit system on the floor (user ``display``, a persistent session on the
node that will die). The tables play for a minute; a third of the way in, the node the
bridges and the pit system are connected to is killed (SIGKILL: no goodbye), and it is
started again later. Then:

* the floor has every message every table published (each table's journal is the truth): two
  floor subscribers with persistent sessions (a pit system on the node that dies, which
  moves to another, and one on node 3) receive each between them, never a ``seq`` a table
  did not publish; the one on node 3 receives its ``seq``s in increasing order per table (a
  repeat of a ``seq`` it has seen is allowed: QoS 1 after a failover), except a message the
  table's daemon published again when its bridge dropped (``floor_resend``: the node may
  have acknowledged it and lost it), which may arrive late. What one of them lacks at the
  end (nats-server 2.9 may fail to deliver a message to one subscriber while node 1 leaves
  and comes back: README, The casino floor, Failures), and what the moved pit is given again
  out of order, is printed;
* the pit system moved and heard every table from its new node;
* every node holds the right retained state of every table (the latest of each retained
  topic in the journal), and each bridge's status ``1``;
* a request sent from the floor (user ``terminal``) reaches a table and its answer comes
  back to the floor.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from deploy.floor_cluster import FloorCluster
from tests.integration.floor import Controller, FloorSubscriber, until

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(420)]

CONTROLLERS = 10
GAMES = ("CRAPS", "UTH", "BJ", "CRAPS", "TCP")
PLAY = 60.0  # seconds of play
KILL_AT = PLAY / 3
RESTART_AT = 2 * PLAY / 3
CATCH_UP = 90.0  # after play stops, every message must reach the floor within this
SUBSCRIBER_GRACE = 10.0  # then each subscriber alone, if it is to get them all


@pytest.fixture
async def floor(tmp_path: Path) -> AsyncIterator[tuple[FloorCluster, list[Controller]]]:
    cluster = FloorCluster(tmp_path / "cluster")
    controllers = [
        Controller(tmp_path / f"ctl{i}", f"ctl{i}", GAMES[i % len(GAMES)], cluster)
        for i in range(CONTROLLERS)
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


def expected_retained(controller: Controller) -> dict[str, Any]:
    """Topic -> body of the latest retained message of each topic, from the journal."""
    latest: dict[str, Any] = {}
    for record in controller.table.journal("--kind", "publish"):
        if record["retained"]:
            latest[f"{controller.table.base}/{record['topic']}"] = record["payload"]
    latest[f"{controller.table.base}/availability"] = "online"
    return latest


def first_seqs(sub: FloorSubscriber, bases: list[str]) -> dict[str, list[int]]:
    """Per table, each ``seq`` the subscriber received, at its first arrival, in order."""
    out: dict[str, list[int]] = {base: [] for base in bases}
    seen: set[tuple[str, int]] = set()
    for m in sub.messages:
        base = "/".join(m.topic.split("/")[:2])
        body = m.body
        if (
            base in out
            and isinstance(body, dict)
            and isinstance(body.get("seq"), int)
            and (base, body["seq"]) not in seen
        ):
            seen.add((base, body["seq"]))
            out[base].append(body["seq"])
    return out


def arrived_late(firsts: list[int]) -> set[int]:
    """The seqs that first arrived after a higher one had."""
    late: set[int] = set()
    highest = -1
    for seq in firsts:
        if seq < highest:
            late.add(seq)
        highest = max(highest, seq)
    return late


def resent_seqs(controller: Controller) -> set[int]:
    """The seqs the controller's daemon published again for its floor bridge, from its log."""
    out: set[int] = set()
    for e in controller.table.log_events():
        if e.get("event") == "floor bridge down: publishing the last messages again" and e.get(
            "messages"
        ):
            out.update(range(e["first_seq"], e["last_seq"] + 1))
    return out


def what_is_missing(sub: FloorSubscriber, expected: dict[str, set[int]], start: float) -> str:
    """For a failure: what the subscriber lacks, its connections and its last arrivals
    (seconds since play began)."""
    lost = missing(sub, expected)
    last: dict[str, float] = {}
    for m in sub.messages:
        last["/".join(m.topic.split("/")[:2])] = m.at - start
    events = [f"{t - start:.1f}s node {node}: {what}" for t, node, what in sub.events]
    return (
        f"subscriber that started on node {sub.connections[0]}: missing {lost}; "
        f"last arrival per table { ({k: round(v, 1) for k, v in sorted(last.items())}) }; "
        f"connections {events}"
    )


def missing_at_both(
    a: FloorSubscriber, b: FloorSubscriber, expected: dict[str, set[int]]
) -> dict[str, list[int]]:
    """Per table, the published ``seq``s neither subscriber has received."""
    lost_a, lost_b = missing(a, expected), missing(b, expected)
    both = {base: sorted(set(seqs) & set(lost_b.get(base, []))) for base, seqs in lost_a.items()}
    return {base: seqs for base, seqs in both.items() if seqs}


def missing(sub: FloorSubscriber, expected: dict[str, set[int]]) -> dict[str, list[int]]:
    """Per table, the published ``seq``s the subscriber has not received."""
    got = first_seqs(sub, list(expected))
    lost = {base: sorted(seqs - set(got[base])) for base, seqs in expected.items()}
    return {base: seqs for base, seqs in lost.items() if seqs}


async def test_floor_survives_a_node_and_loses_nothing(  # noqa: C901  one end-to-end scenario, step by step
    floor: tuple[FloorCluster, list[Controller]],
) -> None:
    cluster, controllers = floor
    bases = [c.table.base for c in controllers]
    pit = FloorSubscriber(cluster, ["lammer/+/#"], first=1)
    await pit.start()
    steady = FloorSubscriber(cluster, ["lammer/+/#"], first=3)
    await steady.start()
    try:
        for i, c in enumerate(controllers):
            await c.start(interval=1.0 if c.game == "CRAPS" else 2.0, seed=100 + i)
        # Every bridge is on node 1, the first address each was given.
        await until(
            lambda: (
                sum(cid.startswith("lammer-bridge-") for cid in cluster.mqtt_clients(1))
                == CONTROLLERS
            ),
            "every bridge connected to node 1",
            30,
        )
        started = time.monotonic()
        # The scenario's clock (a minute of play, node 1 killed and restarted in it): the
        # sleeps below are the play under test, not waits for something to happen.
        await asyncio.sleep(KILL_AT)
        cluster.kill_node(1)
        killed_at = time.monotonic()
        await until(
            lambda: (
                sum(
                    cid.startswith("lammer-bridge-")
                    for n in (2, 3)
                    for cid in cluster.mqtt_clients(n)
                )
                == CONTROLLERS
            ),
            "every bridge on another node",
            60,
        )
        failover = time.monotonic() - killed_at
        await asyncio.sleep(max(0.0, started + RESTART_AT - time.monotonic()))
        cluster.start_node(1)
        await asyncio.sleep(max(0.0, started + PLAY - time.monotonic()))
        for c in controllers:
            await c.stop_play()

        # Every message of every table reaches both pit systems, in seq order per table.
        # Off the loop, all at once: ten `lammer journal` processes in a row blocked it for
        # 15 s and more on a loaded machine, 1.5 keepalives, and the nodes dropped both
        # subscribers as silent.
        with ThreadPoolExecutor(len(controllers)) as pool:
            loop = asyncio.get_running_loop()
            exports = await asyncio.gather(
                *(
                    loop.run_in_executor(pool, c.table.journal, "--kind", "publish")
                    for c in controllers
                )
            )
        journals = {c.table.base: e for c, e in zip(controllers, exports, strict=True)}
        expected = {base: {r["seq"] for r in records} for base, records in journals.items()}
        published = sum(len(v) for v in expected.values())
        # What each daemon published again when its floor bridge dropped (floor_resend):
        # nats-server 2.9 acknowledges a QoS 1 message before storing it, so a message in
        # flight as node 1 died reaches the floor only as such a copy, late.
        again = {c.table.base: resent_seqs(c) for c in controllers}
        assert published >= CONTROLLERS * 20, f"too little play to show anything: {published}"
        # The floor has every message: a floor system subscribed through two nodes (the pit
        # whose node died, and one on node 3) gets each from one or the other. nats-server
        # 2.9 may fail to deliver a QoS 1 message to one subscriber while node 1 leaves and
        # comes back (README, The casino floor, Failures: the other one had it), so each
        # alone is given a grace to catch up and then only reported.
        try:
            await until(
                lambda: not missing_at_both(pit, steady, expected), "every message", CATCH_UP
            )
            with contextlib.suppress(AssertionError):
                await until(
                    lambda: not missing(pit, expected) and not missing(steady, expected),
                    "every message at each subscriber",
                    SUBSCRIBER_GRACE,
                )
        except AssertionError:
            raise AssertionError(
                "\n".join(what_is_missing(sub, expected, started) for sub in (steady, pit))
            ) from None
        for sub in (pit, steady):
            if missing(sub, expected):
                print("not delivered to one subscriber: " + what_is_missing(sub, expected, started))
        # The pit moved to another node and heard every table from there.
        moved_at = next(t for t, node, what in pit.events if node != 1 and what == "connected")
        heard = {"/".join(m.topic.split("/")[:2]) for m in pit.messages if m.at > moved_at}
        assert heard == set(bases), (
            f"the pit heard only {sorted(heard)} after it moved; "
            + what_is_missing(pit, expected, started)
        )
        # In seq order at the subscriber whose node never died, but for the copies a daemon
        # published again (floor_resend). The pit's session, moved while node 1 left and came
        # back, may also be given a message again after later ones (nats-server 2.9 redelivers
        # what it lost track of): printed, not asserted.
        for sub in (pit, steady):
            for base, firsts in first_seqs(sub, bases).items():
                assert set(firsts) <= expected[base], f"{base}: a seq the table never published"
                late = arrived_late(firsts) - again[base]
                if sub is steady:
                    assert not late, f"{base}: out of seq order, never published again: {firsts}"
                elif late:
                    print(f"{base}: late at the pit (redelivered): {sorted(late)}")
        assert pit.connections[0] == 1, pit.connections
        assert len(set(pit.connections)) >= 2, pit.connections  # it moved to another node
        assert steady.connections == [3], steady.connections

        # Every node holds the right retained state of every table, and every bridge's 1.
        want = {k: v for c in controllers for k, v in expected_retained(c).items()}
        want |= {f"lammer-floor/bridge/{c.name}": 1 for c in controllers}  # payload "1"
        for node in (2, 3, 1):
            fresh = FloorSubscriber(
                cluster, ["lammer/+/#", "lammer-floor/#"], first=node, clean=True
            )
            await fresh.start()
            try:

                def stored(f: FloorSubscriber = fresh) -> dict[str, Any]:
                    return {m.topic: m.body for m in f.messages if m.retained}

                def right(f: FloorSubscriber = fresh) -> bool:
                    return stored(f) == want

                try:
                    await until(right, f"node {node}'s retained state", 30)
                except AssertionError:
                    got = stored()
                    wrong = sorted(k for k in set(got) | set(want) if got.get(k) != want.get(k))
                    shown = {k: (got.get(k), want.get(k)) for k in wrong}
                    raise AssertionError(f"node {node}: retained (got, want): {shown}") from None
                assert fresh.connections == [node]
            finally:
                await fresh.close()

        # A request from the floor reaches a table and is answered on the floor.
        craps = next(c for c in controllers if c.game == "CRAPS")
        terminal = FloorSubscriber(
            cluster, [f"{craps.table.base}/response/+"], user="terminal", first=2, clean=True
        )
        await terminal.start()
        try:
            request = {"operator": "pit-boss", "request_id": "floor-1", "roll_id": 999999}
            await terminal.publish(
                f"{craps.table.base}/request/overturn", json.dumps(request).encode()
            )

            def answered() -> dict[str, Any] | None:
                for m in terminal.messages:
                    body = m.body
                    if isinstance(body, dict) and body.get("request_id") == "floor-1":
                        return body
                return None

            answer = await until(answered, "the answer to a request sent from the floor", 30)
            assert answer["status"] == "error"
            assert answer["error"]
        finally:
            await terminal.close()
        print(f"failover of {CONTROLLERS} bridges: {failover:.2f} s; {published} messages")
    finally:
        await pit.close()
        await steady.close()
