"""MqttLink against a real Mosquitto, watched by a real aiomqtt subscriber.

The outbox here is a small in-memory fake with the journal's contract
(daemon/outbox.py); test_mqtt_journal.py runs the link on the real journal.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import pwd
import random
import signal
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import aiomqtt
import pytest
import structlog
from hypothesis import given
from hypothesis import strategies as st

from contract.follow import resent_mark
from contract.session import UNBOUNDED, session
from daemon.errors import JournalError, JournalValueError
from daemon.intake import SHED_AT, SHED_FOR, RequestGate
from daemon.mqtt import REQUEST_LEVELS, REQUEST_QUEUE, MqttLink
from daemon.requests import Incoming
from deploy.broker import broker_config
from foundation.backoff import Backoff
from tests.conftest import Broker, free_port
from tests.helpers.mqtt_link import BASE, FakeOutbox, Recorder, collected, eventually, recording

ROOT = Path(__file__).resolve().parents[2]


def subscribed_probe() -> FakeOutbox:
    """An outbox of one message, which the link publishes only once it has subscribed to
    the requests (daemon/mqtt/session.py, ``Session._session``: SUBSCRIBE, availability,
    retained state, then the outbox): its PUBACK (``marked == [1]``) says requests
    published now arrive."""
    outbox = FakeOutbox()
    outbox.add("probe", {})
    return outbox


def subscribed(link: MqttLink) -> bool:
    """Every request subscription SUBACKed on the live connection: ``Inbox.subscribe``
    records each one once ``client.subscribe`` returns, i.e. once its SUBACK came, while
    ``link.connected`` turns true before the SUBSCRIBE goes out (``Session._session``).
    A request published before that is dropped by the broker."""
    return link.inbox.subscribed == set(REQUEST_LEVELS)


async def _ignore(incoming: Incoming) -> None:
    return None


def make_link(
    broker: Broker,
    outbox: FakeOutbox,
    on_request: Callable[[Incoming], Awaitable[None]] = _ignore,
    *,
    rng: random.Random | None = None,
    client_id: str = "lammer-t1",
    intake: RequestGate | None = None,
    shed_at: int | None = SHED_AT,
    shed_for: float = SHED_FOR,
) -> MqttLink:
    return MqttLink(
        host=broker.host,
        port=broker.port,
        client_id=client_id,
        base_topic=BASE,
        outbox=outbox,
        on_request=on_request,
        keepalive=5,
        backoff=Backoff(initial=0.05, maximum=0.2),
        rng=rng or random.Random(7),
        timeout=5.0,
        intake=intake,
        shed_at=shed_at,
        shed_for=shed_for,
    )


UNLIMITED = RequestGate(rate=1e9, burst=10**9)
"""A gate that admits everything (tests of what follows it)."""


@asynccontextmanager
async def running(link: MqttLink) -> AsyncIterator[asyncio.Task[None]]:
    task = asyncio.create_task(link.run())
    try:
        yield task
    finally:
        await link.close()
        await asyncio.wait({task})


async def test_queued_messages_go_out_in_order_once_each(mosquitto: Broker) -> None:
    outbox = FakeOutbox()
    for i in range(60):  # more than one window, queued before the link starts
        outbox.add(f"ev/{i % 3}", {"i": i})
    link = make_link(mosquitto, outbox)
    async with recording(mosquitto, f"{BASE}/ev/#") as rec, running(link):
        await eventually(lambda: len(outbox.marked) == 60, "first batch acknowledged")
        for i in range(60, 100):  # queued while connected: notify() wakes the drain
            outbox.add(f"ev/{i % 3}", {"i": i})
            link.notify()
            if i % 7 == 0:
                await asyncio.sleep(0)
        await eventually(lambda: len(rec.seqs()) >= 100, "all 100 received")
        await asyncio.sleep(0.1)  # the window in which a duplicate would arrive: the check
        assert link.tcp_nodelay is True
    assert rec.seqs() == list(range(1, 101))
    assert outbox.marked == list(range(1, 101))
    assert link.published == 100
    assert all(m.qos == 1 for m in rec.messages)


async def test_retained_state_is_republished_byte_for_byte(mosquitto_private: Broker) -> None:
    outbox = FakeOutbox()
    old = outbox.add("state", {"game": "UTH", "ts": "2026-11-29T14:03:07.123Z"}, retained=True)
    outbox.add("craps/roll", {"roll_id": 1})  # not retained: never republished
    new = outbox.add("state", {"game": "UTH", "ts": "2026-11-29T14:03:08.456Z"}, retained=True)
    board = outbox.add("craps/board", {"ts": "2026-11-29T14:03:09.000Z"}, retained=True)
    outbox.marked = [old.seq, 2, new.seq, board.seq]  # published in an earlier life
    link = make_link(mosquitto_private, outbox)
    async with running(link):
        await eventually(lambda: link.connected, "connected")
        await eventually(lambda: link.tcp_nodelay is not None, "socket up")
        # The link says online, then publishes the retained state again: a subscriber that
        # comes meanwhile is given part of it live, without the retain flag (seen on a loaded
        # machine). The board, the newest, is the last: once a first subscriber has it, the
        # broker holds all of it.
        async with recording(mosquitto_private) as first:
            await eventually(lambda: bool(first.on("craps/board")), "the state published again")
        # A display that connects now draws the table at once from the retained state.
        async with recording(mosquitto_private) as rec:
            await eventually(lambda: bool(rec.on("craps/board")), "retained board")
            await eventually(lambda: bool(rec.on("state")), "retained state")
            await eventually(lambda: rec.on("availability")[-1:] == [b"online"], "online")
            assert rec.on("state") == [new.payload]
            assert rec.on("craps/board") == [board.payload]
            assert rec.on("craps/roll") == []
            assert all(m.retain for m in rec.messages)
    assert outbox.marked == [1, 2, 3, 4]  # republishing marks nothing again


async def test_broker_restart_mid_stream_loses_nothing(mosquitto_private: Broker) -> None:
    broker = mosquitto_private
    outbox = FakeOutbox()
    link = make_link(broker, outbox)
    received: list[int] = []
    stop_producing = asyncio.Event()

    async def produce() -> None:
        i = 0
        while not stop_producing.is_set():
            outbox.add(f"ev/{i % 2}", {"i": i})
            outbox.add("state", {"i": i}, retained=True)
            link.notify()
            i += 1
            await asyncio.sleep(0.002)

    with structlog.testing.capture_logs() as logs:
        async with running(link):
            async with recording(broker, f"{BASE}/ev/#") as rec:
                producer = asyncio.create_task(produce())
                await eventually(lambda: len(rec.seqs()) > 50, "streaming")
                broker.stop()  # mid-stream: the link is publishing as fast as rows come
                await eventually(lambda: not link.connected, "link saw the outage")
                received += rec.seqs()
            during = len(outbox.rows)
            await eventually(lambda: len(outbox.rows) > during + 50, "queued during outage")
            stop_producing.set()
            await producer
            outbox.hold = True  # the subscriber gets ready before the queue drains
            broker.start()
            await eventually(lambda: link.connected, "link reconnected")
            async with recording(broker, f"{BASE}/#") as rec2:
                await eventually(lambda: bool(rec2.on("state")), "retained state after restart")
                # The retained state is current the moment it reconnects: the broker lost
                # it (no persistence), and the link put back the last acknowledged one.
                acked_states = [m for m in outbox.retained() if m.topic == "state"]
                assert rec2.on("state")[-1] == acked_states[-1].payload
                outbox.hold = False
                link.notify()
                total = len(outbox.rows)
                await eventually(lambda: len(outbox.marked) == total, "all acknowledged")
                last_state = outbox.rows[-1] if outbox.rows[-1].topic == "state" else None
                await eventually(
                    lambda: last_state is None or rec2.on("state")[-1] == last_state.payload,
                    "state current",
                )
                await eventually(
                    lambda: bool(rec2.seqs()) and rec2.seqs()[-1] == outbox.rows[-2].seq,
                    "every event after the outage received",
                )
                received += rec2.seqs()

    events = [m.seq for m in outbox.rows if m.topic.startswith("ev/")]
    assert sorted(outbox.marked) == list(range(1, len(outbox.rows) + 1))
    assert outbox.marked == sorted(outbox.marked), "acknowledged out of order"
    # A display sees every event in order; one whose PUBACK was lost in the outage may
    # come twice (QoS 1), and it drops the seq it has seen.
    first_seen = list(dict.fromkeys(received))
    assert first_seen == sorted(first_seen)
    assert set(rec2.seqs()) >= {s for s in events if s > during}
    warnings = [e for e in logs if e["log_level"] == "warning"]
    assert len(warnings) == 1
    assert "connection lost" in warnings[0]["event"]
    assert sum("reachable again" in e["event"] for e in logs) == 1


class CountingRandom(random.Random):
    """Counts the backoff draws, i.e. the reconnect attempts waited for."""

    draws = 0

    def uniform(self, a: float, b: float) -> float:
        self.draws += 1
        return super().uniform(a, b)


async def test_unreachable_broker_logged_once_then_connects(mosquitto_private: Broker) -> None:
    mosquitto_private.stop()
    outbox = FakeOutbox()
    outbox.add("ev/0", {"i": 0})
    rng = CountingRandom(3)
    link = make_link(mosquitto_private, outbox, rng=rng)
    with structlog.testing.capture_logs() as logs:
        async with running(link):
            await eventually(lambda: rng.draws >= 5, "several failed attempts")
            assert not link.connected
            assert outbox.marked == []  # nothing marked while unreachable
            mosquitto_private.start()
            await eventually(lambda: outbox.marked == [1], "queued message went out")
    assert [e["event"].split(";")[0] for e in logs if e["log_level"] == "warning"] == [
        "mqtt broker unreachable"
    ]
    assert sum("reachable again" in e["event"] for e in logs) == 1


async def test_graceful_close_and_cancel_leave_offline(mosquitto: Broker) -> None:
    async with recording(mosquitto, f"{BASE}/availability") as rec:
        link = make_link(mosquitto, FakeOutbox())
        task = asyncio.create_task(link.run())
        await eventually(lambda: rec.on("availability")[-1:] == [b"online"], "online")
        await link.close()
        await eventually(lambda: rec.on("availability")[-1:] == [b"offline"], "offline")
        assert task.done()
        assert not task.cancelled()
        assert not link.connected

        # SIGTERM reaches the link as a cancellation through the daemon's TaskGroup.
        link2 = make_link(mosquitto, FakeOutbox())
        task2 = asyncio.create_task(link2.run())
        await eventually(lambda: rec.on("availability")[-1:] == [b"online"], "online again")
        task2.cancel()
        await asyncio.wait({task2})
        assert task2.cancelled()
        await eventually(lambda: rec.on("availability")[-1:] == [b"offline"], "offline again")
    # A display connecting later reads offline from the retained availability.
    async with recording(mosquitto, f"{BASE}/availability") as late:
        await eventually(lambda: late.on("availability") == [b"offline"], "retained offline")


KILLED_LINK = textwrap.dedent(
    """
    import asyncio, random, sys
    from daemon.mqtt import MqttLink
    from tests.helpers.mqtt_link import FakeOutbox


    async def main() -> None:
        async def ignore(incoming: object) -> None: ...
        link = MqttLink(host=sys.argv[1], port=int(sys.argv[2]), client_id="lammer-killed",
                        base_topic=sys.argv[3], outbox=FakeOutbox(), on_request=ignore,
                        keepalive=5, rng=random.Random(1))
        task = asyncio.create_task(link.run())
        while not link.connected:
            await asyncio.sleep(0.01)
        print("connected", flush=True)
        await task

    asyncio.run(main())
    """
)


async def test_will_says_offline_when_the_daemon_dies(mosquitto: Broker) -> None:
    base = "lammer/killed"
    async with recording(mosquitto, f"{base}/availability") as rec:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            KILLED_LINK,
            mosquitto.host,
            str(mosquitto.port),
            base,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        assert proc.stdout is not None
        try:
            # A bound on failure only: on a loaded machine the imports alone took over 20 s.
            async with asyncio.timeout(120):
                while (line := await proc.stdout.readline()) != b"connected\n":
                    assert line, "the link process ended before connecting"
            topic = f"{base}/availability"
            await eventually(
                lambda: (
                    [bytes(m.payload) for m in rec.messages if m.topic.value == topic]
                    == [b"online"]
                ),
                "online",
            )
        finally:
            proc.send_signal(signal.SIGKILL)  # no chance to say goodbye: the will speaks
            await proc.wait()
        await eventually(
            lambda: bytes(rec.messages[-1].payload) == b"offline",
            "will published",
        )
        assert rec.messages[-1].retain is False  # delivered live; retained for later ones
    async with recording(mosquitto, f"{base}/availability") as late:
        await eventually(lambda: len(late.messages) == 1, "retained will")
        assert bytes(late.messages[0].payload) == b"offline"
        assert late.messages[0].retain


BROKER_DIES_AS_THE_LINK_CLOSES = textwrap.dedent(
    """
    import asyncio, os, random, signal, sys
    from daemon.mqtt import MqttLink
    from tests.helpers.mqtt_link import FakeOutbox


    async def main() -> None:
        async def ignore(incoming: object) -> None: ...
        link = MqttLink(host=sys.argv[1], port=int(sys.argv[2]), client_id="lammer-dies",
                        base_topic="lammer/dies", outbox=FakeOutbox(), on_request=ignore,
                        keepalive=5, rng=random.Random(1), close_timeout=1.0)
        task = asyncio.create_task(link.run())
        while not link.connected:
            await asyncio.sleep(0.01)
        broker = int(sys.argv[3])
        os.kill(broker, signal.SIGSTOP)  # "offline" waits for a PUBACK that never comes
        closing = asyncio.create_task(link.close())
        await asyncio.sleep(0.3)  # the scenario: the close waits (for ever) on a frozen broker
        os.kill(broker, signal.SIGKILL)  # and the connection drops under it
        await closing
        await task
        print("closed", flush=True)

    asyncio.run(main())
    """
)


def test_a_broker_dying_as_the_link_closes_leaves_no_unretrieved_error(
    mosquitto_private: Broker,
) -> None:
    # What Ctrl-C on `lammer demo` did: the broker and the daemons stop at once, the
    # daemon's "offline" fails as the connection drops, aiomqtt's __aexit__ returns early
    # and its failed disconnect future was reported at exit ("Future exception was never
    # retrieved ... MqttCodeError") on stderr, i.e. in the daemon's log.
    assert mosquitto_private.process is not None
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            BROKER_DIES_AS_THE_LINK_CLOSES,
            mosquitto_private.host,
            str(mosquitto_private.port),
            str(mosquitto_private.process.pid),
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,  # a bound on failure only (the imports alone took 20 s on a loaded machine)
        check=False,
    )
    mosquitto_private.process.wait()
    output = done.stdout + done.stderr  # the logs and what asyncio reports at exit
    assert done.returncode == 0, output
    assert done.stdout.endswith("closed\n"), output
    assert "could not publish offline" in output  # the scenario happened
    assert "never retrieved" not in output
    assert "Traceback" not in output


async def test_requests_reach_on_request_in_order(mosquitto: Broker) -> None:
    got: list[tuple[str, bytes]] = []

    async def on_request(incoming: Incoming) -> None:
        if incoming.payload == b"boom":
            raise RuntimeError("a handler bug")  # must not take the link down
        if incoming.retained:
            return  # the core refuses it (test_retained_request_*)
        got.append((incoming.name, incoming.payload))

    async with aiomqtt.Client(mosquitto.host, mosquitto.port) as client:
        await client.publish(f"{BASE}/request/void_roll", b"stale", qos=1, retain=True)
    outbox = subscribed_probe()
    link = make_link(mosquitto, outbox, on_request)
    async with running(link), aiomqtt.Client(mosquitto.host, mosquitto.port) as client:
        await eventually(lambda: link.connected, "connected")
        await eventually(lambda: outbox.marked == [1], "subscribed")
        sent = [
            ("roll_decision", b'{"operator":"ann","roll_id":1,"decision":"valid"}'),
            ("overturn", b"boom"),
            ("void_roll", b'{"operator":"bob","roll_id":2,"clause":3}'),
            ("no_such", b"not json"),
        ]
        for name, payload in sent:
            await client.publish(f"{BASE}/request/{name}", payload, qos=1)
        await eventually(lambda: len(got) == 3, "three handled")
        assert link.connected
    async with aiomqtt.Client(mosquitto.host, mosquitto.port) as client:
        # clear the retained request (once the link is gone) so no other test sees it
        await client.publish(f"{BASE}/request/void_roll", b"", qos=1, retain=True)
    assert got == [sent[0], sent[2], sent[3]]


@given(
    initial=st.floats(0.001, 10),
    factor=st.floats(1, 100),
    attempt=st.integers(0, 10_000),
    seed=st.integers(0, 2**32),
)
def test_backoff_is_jittered_exponential_and_capped(
    initial: float, factor: float, attempt: int, seed: int
) -> None:
    # The link's policy is foundation.backoff's (one helper for every link).
    backoff = Backoff(initial=initial, maximum=initial * factor)
    step = min(backoff.maximum, initial * 2**attempt) if attempt < 1000 else backoff.maximum
    delay = backoff.delay(attempt, random.Random(seed))
    assert step / 2 <= delay <= step <= backoff.maximum


class RangeRecorder(random.Random):
    """Records the range of each reconnect delay the link draws, and answers a hundredth
    of its low end, so the test sees many attempts without waiting for them."""

    def __init__(self) -> None:
        super().__init__(0)
        self.ranges: list[tuple[float, float]] = []

    def uniform(self, a: float, b: float) -> float:
        self.ranges.append((a, b))
        return a / 100


async def test_link_reconnects_within_5_s_by_default() -> None:
    # Nothing listens on the port: every attempt fails at once. Without a backoff given,
    # the delays double from 0.5 s and stop at 5 s, so after a long outage displays are
    # stale at most 5 s once the broker is back (it was 30 s).
    rng = RangeRecorder()
    link = MqttLink(
        host="127.0.0.1",
        port=free_port(),
        client_id="lammer-t1",
        base_topic=BASE,
        outbox=FakeOutbox(),
        on_request=_ignore,
        rng=rng,
        timeout=5.0,
    )
    async with running(link):
        await eventually(lambda: len(rng.ranges) >= 9, "nine failed attempts")
    highs = [high for _, high in rng.ranges[:9]]
    assert highs == [0.5, 1.0, 2.0, 4.0, 5.0, 5.0, 5.0, 5.0, 5.0]
    assert all(low == high / 2 for low, high in rng.ranges)


def test_backoff_and_link_refuse_nonsense() -> None:
    with pytest.raises(ValueError, match="initial <= maximum"):
        Backoff(initial=2, maximum=1)
    with pytest.raises(ValueError, match="base topic"):
        MqttLink(
            host="h",
            port=1,
            client_id="c",
            base_topic="lammer/#",
            outbox=FakeOutbox(),
            on_request=_ignore,
        )


async def test_a_message_the_client_refuses_is_set_aside_and_the_queue_goes_on(
    mosquitto: Broker,
) -> None:
    # A topic MQTT cannot carry (over 65,535 bytes) once raised inside the publish loop
    # and ended the daemon, again at every restart since it stayed queued.
    outbox = FakeOutbox()
    outbox.add("ev/1", {"i": 1})
    bad = outbox.add("x" * 70_000, {"i": 2})
    outbox.add("ev/3", {"i": 3})
    link = make_link(mosquitto, outbox)
    async with recording(mosquitto) as rec, running(link) as task:
        await eventually(lambda: rec.seqs() == [1, 3], "the messages around the refused one")
        assert not task.done()
        assert link.connected
    assert sorted(outbox.marked) == [1, 2, 3]
    assert list(outbox.refused) == [bad.seq]
    assert outbox.refused[bad.seq].startswith("refused by the MQTT client: ")


class BrokenOutbox(FakeOutbox):
    """An outbox with a bug: marking a message published fails."""

    def mark_published(self, *seqs: int) -> None:
        raise RuntimeError("a bug in the outbox")


class FullDiskOutbox(FakeOutbox):
    """An outbox on a full disk: marking fails until ``space`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.space = False
        self.refusals = 0

    def mark_published(self, *seqs: int) -> None:
        if not self.space:
            self.refusals += 1
            raise JournalError("journal t1.db: commit failed: database or disk is full")
        super().mark_published(*seqs)


async def test_a_journal_that_cannot_mark_does_not_end_the_link(mosquitto: Broker) -> None:
    # A full disk: what went out is never sent again, and is marked once the journal works.
    outbox = FullDiskOutbox()
    outbox.add("ev/1", {"i": 1})
    link = make_link(mosquitto, outbox, client_id="lammer-t1-full")
    async with recording(mosquitto) as rec, running(link) as task:
        await eventually(lambda: outbox.refusals >= 1, "a refusal")
        await eventually(lambda: rec.seqs() == [1], "the message, once")
        assert not task.done()
        outbox.space = True
        outbox.add("ev/2", {"i": 2})
        link.notify()
        await eventually(lambda: outbox.marked == [1, 2], "both marked once the disk has space")
        assert not task.done()
        await asyncio.sleep(0.3)  # a copy would follow right behind (backoff 0.2 s)
    assert rec.seqs() == [1, 2]  # each once


async def test_a_refused_mark_holds_back_neither_offline_nor_newer_messages(
    mosquitto: Broker,
) -> None:
    # Issue 20: the drain slept the whole backoff (5 s) after a refused mark, so the
    # offline notice waited, and the messages delivered were sent again after. Now the
    # link says so at once (on_journal_error), availability and a message queued after
    # go out well before the backoff's end, and nothing goes out twice. The backoff here is
    # a minute, so that "well before" has room for a loaded machine.
    outbox = FullDiskOutbox()
    outbox.add("ev/1", {"i": 1})
    said: list[float] = []
    loop = asyncio.get_running_loop()
    link = MqttLink(
        host=mosquitto.host,
        port=mosquitto.port,
        client_id="lammer-t1-offline",
        base_topic=BASE,
        outbox=outbox,
        on_request=_ignore,
        backoff=Backoff(initial=60.0, maximum=60.0),
        on_journal_error=lambda: said.append(loop.time()),
    )
    async with recording(mosquitto) as rec, running(link):
        await eventually(lambda: bool(said), "the journal's refusal reported")
        refused_at = said[0]
        link.set_available(False)
        outbox.add("ev/2", {"i": 2})  # what the reserve lets the journal still write
        link.notify()
        await eventually(lambda: rec.on("availability")[-1:] == [b"offline"], "offline")
        await eventually(lambda: rec.seqs() == [1, 2], "the newer message")
        # Well before the backoff's 60 s (what the old drain slept): room for a loaded machine.
        assert loop.time() - refused_at < 30.0
        outbox.space = True
        link.notify()
        await eventually(lambda: outbox.marked == [1, 2], "marked once the journal writes")
        await asyncio.sleep(0.3)
    assert rec.seqs() == [1, 2]


class ForgetfulOutbox(FakeOutbox):
    """An outbox that does not know seq 2 when it is marked (a bug, not a full disk)."""

    def mark_published(self, *seqs: int) -> None:
        if 2 in seqs:
            raise JournalValueError("seq 2 is not a message of the outbox")
        super().mark_published(*seqs)


async def test_a_message_that_cannot_be_marked_takes_nothing_offline(mosquitto: Broker) -> None:
    outbox = ForgetfulOutbox()
    for i in range(3):
        outbox.add("ev/x", {"i": i})
    errors: list[None] = []
    link = MqttLink(
        host=mosquitto.host,
        port=mosquitto.port,
        client_id="lammer-t1-forgetful",
        base_topic=BASE,
        outbox=outbox,
        on_request=_ignore,
        backoff=Backoff(initial=0.05, maximum=0.2),
        on_journal_error=lambda: errors.append(None),
    )
    async with recording(mosquitto) as rec, running(link):
        await eventually(lambda: outbox.marked == [1, 3], "the others marked")
        await eventually(lambda: rec.seqs() == [1, 2, 3], "all published")
        await asyncio.sleep(0.3)
    assert rec.seqs() == [1, 2, 3]  # once each
    assert errors == []


async def test_availability_follows_set_available(mosquitto: Broker) -> None:
    link = make_link(mosquitto, FakeOutbox(), client_id="lammer-t1-avail")
    async with recording(mosquitto, f"{BASE}/availability") as rec, running(link):
        await eventually(lambda: rec.on("availability")[-1:] == [b"online"], "online")
        link.set_available(False)
        await eventually(lambda: rec.on("availability")[-1:] == [b"offline"], "offline")
        link.set_available(True)
        await eventually(lambda: rec.on("availability")[-1:] == [b"online"], "online again")


async def test_a_fault_that_ends_the_link_says_offline(mosquitto: Broker) -> None:
    # A clean DISCONNECT suppresses the will: after a fatal error availability once stayed
    # retained "online" for a daemon that had stopped.
    outbox = BrokenOutbox()
    outbox.hold = True
    link = make_link(mosquitto, outbox, client_id="lammer-t1-fault")
    async with recording(mosquitto, f"{BASE}/availability") as rec:
        task = asyncio.create_task(link.run())
        await eventually(lambda: rec.on("availability")[-1:] == [b"online"], "online")
        outbox.add("ev/1", {"i": 1})
        outbox.hold = False
        link.notify()
        await asyncio.wait({task})
        with pytest.raises(RuntimeError, match="a bug in the outbox"):
            task.result()
        await eventually(lambda: rec.on("availability")[-1:] == [b"offline"], "offline")
    async with recording(mosquitto, f"{BASE}/availability") as late:
        await eventually(lambda: late.on("availability") == [b"offline"], "retained offline")


async def test_a_flood_of_requests_is_bounded(mosquitto: Broker) -> None:
    # Requests wait in a bounded queue, bounded themselves: a 100 MB request is kept as
    # its size, hash and first bytes, and a flood beyond the queue is dropped and counted.
    release = asyncio.Event()
    got: list[Incoming] = []

    async def slow(incoming: Incoming) -> None:
        await release.wait()
        got.append(incoming)

    outbox = subscribed_probe()
    link = make_link(mosquitto, outbox, slow, intake=RequestGate(rate=1e9, burst=10**9))
    big = b"[" * 5_000_000
    async with running(link), aiomqtt.Client(mosquitto.host, mosquitto.port) as client:
        await eventually(lambda: outbox.marked == [1], "subscribed")
        await client.publish(f"{BASE}/request/overturn", big, qos=1)
        for i in range(REQUEST_QUEUE + 50):
            await client.publish(f"{BASE}/request/overturn", str(i).encode(), qos=1)
        await eventually(lambda: link.requests_overflowed >= 50, "the overflow counted")
        release.set()
        await eventually(lambda: len(got) == REQUEST_QUEUE + 1, "the queued ones handled")
    first = got[0]
    assert (first.size, first.oversize, len(first.payload)) == (len(big), True, 256)
    assert first.sha256 == hashlib.sha256(big).hexdigest()


async def test_requests_beyond_the_rate_are_refused_unread_and_counted_while_results_flow(
    mosquitto: Broker,
) -> None:
    # 1,000 requests as fast as a client sends them, against a gate of 5 a second (20 at
    # once): the table is handed the admitted ones and, at most one a second, one to answer
    # busy that stands for the refusals before it; every request is accounted for. Results
    # queued during the flood go out, and the link never drops.
    got: list[Incoming] = []

    async def handle(incoming: Incoming) -> None:
        got.append(incoming)

    outbox = FakeOutbox()
    # The gate alone: no subscription left unread for the flood (tested below), so that
    # every request reaches the gate and is accounted for.
    link = make_link(mosquitto, outbox, handle, intake=RequestGate(rate=5, burst=20), shed_at=None)
    flood = 1000
    async with (
        recording(mosquitto, f"{BASE}/ev/#") as rec,
        running(link),
        aiomqtt.Client(mosquitto.host, mosquitto.port) as client,
    ):
        await eventually(lambda: link.tcp_nodelay is not None, "connected")
        await eventually(lambda: subscribed(link), "subscribed (after the connection)")
        loop = asyncio.get_running_loop()
        started = loop.time()
        for i in range(flood):
            await client.publish(f"{BASE}/request/overturn", b'{"request_id": %d}' % i, qos=1)
            if i % 100 == 0:
                outbox.add("ev/result", {"i": i})
                link.notify()
        await eventually(
            lambda: link.intake.admitted + link.intake.refused == flood, "every request seen"
        )
        elapsed = loop.time() - started
        await eventually(lambda: len(rec.seqs()) == 10, "every result published")
        await eventually(
            lambda: sum(max(1, g.busy) for g in got) + link.intake.unanswered == flood,
            "every request handed on or counted",
        )
        assert link.connected
        assert link.session.outage.attempts == 0  # never dropped
    admitted = [g for g in got if not g.busy]
    busy = [g for g in got if g.busy]
    assert 20 <= len(admitted) <= 20 + 5 * elapsed + 1
    assert 1 <= len(busy) <= 1 + elapsed + 1
    assert link.intake.refused == flood - len(admitted)
    # Admitted requests are the first ones, whole and in order.
    assert [g.payload for g in admitted[:20]] == [b'{"request_id": %d}' % i for i in range(20)]


async def test_a_flood_is_left_unread_for_a_while_and_the_other_subscription_read_on(
    mosquitto: Broker,
) -> None:
    # 3,000 resend requests as fast as a client sends them, at one user's level: past
    # shed_at refused in a second the link unsubscribes request/resend/+ (the broker drops
    # what nobody reads), reads the terminal's request/+ on, and after shed_for subscribes
    # again. Results queued meanwhile go out; the link never drops.
    # shed_for outlasts sending the flood: on a loaded machine the 3,000 publishes went on
    # 6 s after the shed, and a shed of 2 s read the flood again and left it unread again.
    shed_for = 10.0
    got: list[Incoming] = []

    async def handle(incoming: Incoming) -> None:
        got.append(incoming)

    outbox = FakeOutbox()
    link = make_link(mosquitto, outbox, handle, shed_at=100, shed_for=shed_for)
    flood = 3000
    async with (
        recording(mosquitto, f"{BASE}/ev/#") as rec,
        running(link),
        aiomqtt.Client(mosquitto.host, mosquitto.port) as client,
    ):
        await eventually(lambda: link.tcp_nodelay is not None, "connected")
        await eventually(lambda: subscribed(link), "subscribed (after the connection)")
        topic = f"{BASE}/request/resend/display"
        for i in range(flood):
            await client.publish(topic, b'{"request_id": %d}' % i, qos=0)
            if i % 300 == 0:
                outbox.add("ev/result", {"i": i})
                link.notify()
        await eventually(lambda: link.sheds == 1, "the flood left unread")
        gate = link.user_gates["display"]
        # The terminal's subscription is read while the flood's is not.
        shed_at = asyncio.get_running_loop().time()
        await client.publish(f"{BASE}/request/overturn", b'{"request_id": "stick"}', qos=1)
        await eventually(lambda: any(g.payload == b'{"request_id": "stick"}' for g in got), "read")
        await eventually(lambda: len(rec.seqs()) == 10, "every result published")
        seen = gate.admitted + gate.refused
        assert seen < flood  # the broker dropped the rest: nobody read them
        # After shed_for, read again: a request of the same user is admitted.
        await eventually(lambda: "request/resend/+" in link.inbox.subscribed, "subscribed again")
        assert asyncio.get_running_loop().time() - shed_at < shed_for + 20.0
        before = len([g for g in got if g.user == "display" and not g.busy])
        await asyncio.sleep(1.0)  # the gate's bucket refills (4 a second)
        await client.publish(topic, b'{"request_id": "again"}', qos=1)
        await eventually(
            lambda: len([g for g in got if g.user == "display" and not g.busy]) > before,
            "a request read again",
        )
        assert link.connected
        assert link.session.outage.attempts == 0  # never dropped
    assert link.sheds == 1


@asynccontextmanager
async def bridged(tmp_path: Path) -> AsyncIterator[tuple[Broker, Broker]]:
    """A controller's Mosquitto (local) bridged to a "floor" Mosquitto (remote) as
    broker-config writes it: its tables out, QoS 1, a persistent session, the
    notification on ``lammer-floor/bridge/c1``."""
    remote = Broker(tmp_path / "floor")
    (tmp_path / "floor").mkdir()
    remote.start()
    (tmp_path / "local").mkdir()
    local = Broker(tmp_path / "local", config_file=tmp_path / "local" / "mosquitto.conf")
    local.conf.write_text(
        broker_config(local.port)
        + "connection floor\n"
        + f"address 127.0.0.1:{remote.port}\n"
        + "cleansession false\n"
        + "notifications true\n"
        + "notification_topic lammer-floor/bridge/c1\n"
        + "restart_timeout 1\n"
        + "topic lammer/# out 1\n"
    )
    local.start()
    try:
        yield local, remote
    finally:
        local.stop()
        remote.stop()


def kill(broker: Broker) -> None:
    """SIGKILL, as a machine that dies (no DISCONNECT, no will of its own)."""
    assert broker.process is not None
    broker.process.kill()
    broker.process.wait()


def said(recorder: Recorder) -> bytes | None:
    """The last payload the recorder received (the bridge's latest status)."""
    return bytes(recorder.messages[-1].payload) if recorder.messages else None


def make_floor_link(broker: Broker, outbox: FakeOutbox, floor_resend: float) -> MqttLink:
    return MqttLink(
        host=broker.host,
        port=broker.port,
        client_id="lammer-t1",
        base_topic=BASE,
        outbox=outbox,
        on_request=_ignore,
        keepalive=5,
        backoff=Backoff(initial=0.05, maximum=0.2),
        rng=random.Random(7),
        timeout=5.0,
        floor_resend=floor_resend,
    )


@pytest.mark.service
async def test_a_floor_bridge_that_drops_gets_the_newest_message_again(tmp_path: Path) -> None:
    # A floor node may acknowledge a message and die before its subscribers have it: a
    # subscriber fills a hole by prev_seq (contract.feed), but a loss at the end of the
    # stream shows only when the table publishes next. The bridge's 0 (real: the remote is
    # SIGKILLed) makes the link publish the newest message again, same bytes, never
    # retained, marked resent as a request/resend copy is (mqtt-api.md 1.3: a display
    # must not take an unmarked non-retained copy of a retained topic for a broken table):
    # one copy, from which a subscriber learns the latest seq.
    async with (
        bridged(tmp_path) as (local, remote),
        recording(local) as seen,
        recording_v5(local, f"{BASE}/#") as seen5,
    ):
        outbox = FakeOutbox()
        link = make_floor_link(local, outbox, floor_resend=30)
        async with running(link):
            sent = [
                outbox.add("state", {"table": "t1", "n": 1}, retained=True),
                outbox.add("craps/roll", {"table": "t1", "roll_id": 1}),
                outbox.add("craps/roll", {"table": "t1", "roll_id": 2}),
                outbox.add("state", {"table": "t1", "n": 2}, retained=True),
            ]
            link.notify()
            await eventually(lambda: len(outbox.marked) == 4, "the messages acknowledged")
            await eventually(lambda: len(seen.messages) >= 5, "the messages seen locally")
            before = len(seen.messages)
            kill(remote)  # SIGKILL: the floor node dies
            await eventually(lambda: link.resent == 1, "the copy published")
            await eventually(lambda: len(seen.messages) >= before + 1, "the copy seen")
            await asyncio.sleep(0.5)  # anything more would come now
            copies = [
                m
                for m in seen.messages[before:]
                if not m.topic.value.endswith("availability") and "/bridge/" not in m.topic.value
            ]
            assert [bytes(m.payload) for m in copies] == [sent[3].payload]
            assert [m.topic.value for m in copies] == [f"{BASE}/{sent[3].topic}"]
            assert not any(m.retain for m in copies)
            assert link.resent == 1

            # As an MQTT 5 display sees them (retain as published, user properties).
            def copies5() -> list[aiomqtt.Message]:
                return [m for m in seen5.messages if bytes(m.payload) == sent[3].payload]

            await eventually(lambda: len(copies5()) == 2, "the original and its copy (MQTT 5)")
            assert [(m.retain, resent_mark(m)) for m in copies5()] == [(True, False), (False, True)]
        # The local broker still holds the newest state, as stored.
        async with recording(local, f"{BASE}/state") as fresh:
            await eventually(lambda: len(fresh.messages) == 1, "the retained state")
            assert bytes(fresh.messages[0].payload) == sent[3].payload


@pytest.mark.service
async def test_only_a_message_of_the_window_is_sent_again_and_zero_turns_it_off(
    tmp_path: Path,
) -> None:
    async with bridged(tmp_path) as (local, remote), recording(local) as seen:
        outbox = FakeOutbox()
        # The window is 3 s, not 0.5 s: the second message must still be in it when the
        # bridge's 0 arrives, after the kill, on a loaded machine too.
        link = make_floor_link(local, outbox, floor_resend=3.0)
        async with running(link):
            outbox.add("craps/roll", {"table": "t1", "roll_id": 1})
            link.notify()
            await eventually(lambda: len(outbox.marked) == 1, "the first acknowledged")
            await asyncio.sleep(3.5)  # older than the window (3 s) by now: time is the check
            last = outbox.add("craps/roll", {"table": "t1", "roll_id": 2})
            link.notify()
            await eventually(lambda: len(outbox.marked) == 2, "the second acknowledged")
            kill(remote)
            await eventually(lambda: link.resent == 1, "the copy of the last one")

            def rolls() -> list[bytes]:
                return [bytes(m.payload) for m in seen.messages if m.topic.value.endswith("roll")]

            await eventually(lambda: rolls().count(last.payload) >= 2, "the original and the copy")
        remote.start()
        off_outbox = FakeOutbox()
        off = make_floor_link(local, off_outbox, floor_resend=0)
        async with running(off), recording(local, "lammer-floor/bridge/c1") as bridge:
            off_outbox.add("craps/roll", {"table": "t1", "roll_id": 3})
            off.notify()
            await eventually(lambda: off.published == 1, "published")
            # The bridge reconnects (restart_timeout 1) and says 1.
            await eventually(lambda: said(bridge) == b"1", "the bridge up again")
            kill(remote)
            await eventually(lambda: said(bridge) == b"0", "the bridge's 0")
            await asyncio.sleep(0.5)  # the window in which a copy would go out: the check
            assert off.resent == 0


@pytest.mark.service
async def test_an_acl_without_the_bridge_status_costs_only_the_copies(tmp_path: Path) -> None:
    # An ACL of before the floor (the table's own topics only). Mosquitto 2.0 grants the
    # subscription and delivers nothing on it (a broker that refuses it is logged once):
    # the table's messages go out as ever, across a reconnect.
    broker = Broker(tmp_path, config_file=tmp_path / "mosquitto.conf")
    (tmp_path / "acl").write_text(f"topic readwrite {BASE}/#\n")
    me = pwd.getpwuid(os.getuid()).pw_name  # as root, Mosquitto would become "mosquitto"
    broker.conf.write_text(broker_config(broker.port, user=me) + f"acl_file {tmp_path / 'acl'}\n")
    broker.start()
    try:
        outbox = FakeOutbox()
        link = make_floor_link(broker, outbox, floor_resend=30)
        async with running(link), recording(broker) as seen:
            outbox.add("craps/roll", {"table": "t1", "roll_id": 1})
            link.notify()
            await eventually(lambda: outbox.marked == [1], "published")
            broker.stop()
            broker.start()
            outbox.add("craps/roll", {"table": "t1", "roll_id": 2})
            link.notify()
            await eventually(lambda: outbox.marked == [1, 2], "published after a reconnect")
        assert link.resent == 0
        assert any(m.topic.value == f"{BASE}/craps/roll" for m in seen.messages)
    finally:
        broker.stop()


@pytest.mark.parametrize(
    "payload",
    [b"", b"1", b"0\n", b" 0", b"00", b"\x00", b"\xff", b"0" * 100_000],
    ids=["empty", "one", "newline", "space", "double", "nul", "not-utf8", "100k-zeros"],
)
async def test_only_a_bare_0_on_the_bridge_status_sends_anything_again(
    mosquitto_private: Broker, payload: bytes
) -> None:
    # Whoever may publish on lammer-floor/bridge/+ (Mosquitto itself, by broker-config's
    # ACL): anything but the notification's exact "0" is ignored; a bare "0" still works.
    outbox = FakeOutbox()
    link = make_floor_link(mosquitto_private, outbox, floor_resend=30)
    async with running(link):
        outbox.add("craps/roll", {"table": "t1", "roll_id": 1})
        link.notify()
        await eventually(lambda: len(outbox.marked) == 1, "acknowledged")
        client = aiomqtt.Client(mosquitto_private.host, mosquitto_private.port, timeout=UNBOUNDED)
        async with session(client, within=5, close_within=5):
            await client.publish("lammer-floor/bridge/c1", payload, qos=1)
            await asyncio.sleep(0.5)  # the window in which a copy would go out: the check
            assert link.resent == 0
            await client.publish("lammer-floor/bridge/c1", b"0", qos=1)
            await eventually(lambda: link.resent == 1, "the copy after a bare 0")


# -- MQTT 5: retained requests and request/resend copies ---------------------------------


@asynccontextmanager
async def recording_v5(broker: Broker, topic: str) -> AsyncIterator[Recorder]:
    """An MQTT 5 subscriber that sees the retain flag as published (and its properties)."""
    from paho.mqtt.subscribeoptions import SubscribeOptions

    async with aiomqtt.Client(
        broker.host, broker.port, protocol=aiomqtt.ProtocolVersion.V5
    ) as client:
        await client.subscribe(topic, options=SubscribeOptions(qos=1, retainAsPublished=True))
        async with collected(client) as recorder:
            yield recorder


async def _retained_on(broker: Broker, topic: str) -> bytes | None:
    """What the broker retains on ``topic`` (None: nothing), read by a fresh client."""
    async with aiomqtt.Client(broker.host, broker.port) as client:
        await client.subscribe(topic, qos=1)
        try:
            async with asyncio.timeout(0.5):
                message = await anext(client.messages)
        except TimeoutError:
            return None
        assert message.retain
        return bytes(message.payload) if isinstance(message.payload, bytes) else None


async def test_a_retained_request_is_handed_on_marked_and_cleared(mosquitto: Broker) -> None:
    # Issue 20: published with retain while the daemon is connected, the broker delivers it
    # live with the retain flag cleared (3.1.1); the link subscribes with MQTT 5's
    # retain-as-published, sees it for what it is and clears it from the broker.
    got: list[Incoming] = []

    async def on_request(incoming: Incoming) -> None:
        got.append(incoming)

    topic = f"{BASE}/request/roll_decision"
    decision = b'{"operator":"ann","roll_id":6,"decision":"invalid"}'
    link = make_link(mosquitto, FakeOutbox(), on_request)
    async with running(link), aiomqtt.Client(mosquitto.host, mosquitto.port) as client:
        await eventually(lambda: link.connected, "connected")
        await eventually(lambda: subscribed(link), "subscribed (after the connection)")
        await client.publish(topic, decision, qos=1, retain=True)
        await client.publish(f"{BASE}/request/overturn", b"{}", qos=1)  # not retained
        await eventually(lambda: len(got) == 2, "both handed on")
        await eventually(lambda: link.inbox.to_clear == set(), "cleared")
        assert await _retained_on(mosquitto, topic) is None
        # The link's own empty retained publish never comes back as a request (no local),
        # and another client clearing a retained request is not one either.
        await client.publish(topic, b"", qos=1, retain=True)
        await client.publish(f"{BASE}/request/overturn", b"{}", qos=1)
        await eventually(lambda: len(got) == 3, "the next request")
    assert [(i.name, i.payload, i.retained) for i in got] == [
        ("roll_decision", decision, True),
        ("overturn", b"{}", False),
        ("overturn", b"{}", False),
    ]


async def test_a_retained_request_left_before_the_start_is_cleared_by_survey(
    mosquitto_private: Broker,
) -> None:
    mosquitto = mosquitto_private  # nothing else retained under the base topic
    topic = f"{BASE}/request/void_roll"
    async with aiomqtt.Client(mosquitto.host, mosquitto.port) as client:
        await client.publish(topic, b'{"operator":"x","roll_id":1,"clause":2}', qos=1, retain=True)
    link = make_link(mosquitto, FakeOutbox())
    with structlog.testing.capture_logs() as logs:
        assert await link.survey(frozenset()) == 0
    assert await _retained_on(mosquitto, topic) is None
    events = [e["event"] for e in logs]
    assert any(e.startswith("cleared a retained request") for e in events), events
    assert not any("another game" in e for e in events)


async def test_resend_copies_are_marked_never_retained_and_never_hold_results(
    mosquitto: Broker,
) -> None:
    outbox = FakeOutbox()
    old = [outbox.add("state", {"i": i}, retained=True) for i in range(3)]
    link = make_link(mosquitto, outbox)
    async with recording_v5(mosquitto, f"{BASE}/#") as rec, running(link):
        # Acknowledged to the link is not yet delivered to the recorder: the three first
        # publications must all be in before the copies are counted from here.
        await eventually(lambda: len(outbox.marked) == 3, "published")
        await eventually(
            lambda: sum(m.topic.value == f"{BASE}/state" for m in rec.messages) == 3,
            "the originals received",
        )
        mark = len(rec.messages)
        copies = old * 40  # 120 copies: six windows
        link.resend(copies)
        fresh = outbox.add("ev/new", {"i": 99})  # a result queued behind the resend
        link.notify()
        await eventually(lambda: link.copies_sent == 120, "copies sent")
        await eventually(lambda: len(rec.messages) - mark >= 121, "all received")
    got = rec.messages[mark:]
    resent = [m for m in got if m.topic.value == f"{BASE}/state"]
    assert [bytes(m.payload) for m in resent] == [m.payload for m in copies]
    assert not any(m.retain for m in resent)
    for m in resent:
        assert m.properties is not None
        assert getattr(m.properties, "UserProperty", None) == [("resent", "true")]
    # The table's own message went out before most of the copies: one window at most
    # precedes it (copies go between batches of results, never ahead of them).
    position = [m.topic.value for m in got].index(f"{BASE}/ev/new")
    assert position <= 20, position
    news = got[position]
    assert bytes(news.payload) == fresh.payload
    assert news.properties is None or not getattr(news.properties, "UserProperty", None)
