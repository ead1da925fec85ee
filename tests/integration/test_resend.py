"""A real daemon: a retained request is never acted on (issue 20), ``request/resend``
publishes the journal again (mqtt-api.md 1.3), and ``contract.feed`` fills what a lossy
subscriber lost from the table itself (issue 21)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from typing import Any, cast

import aiomqtt
import pytest
from paho.mqtt.subscribeoptions import SubscribeOptions

from contract.feed import Feed, Gap, Message
from contract.follow import follow, resent_mark
from tests.integration.conftest import MakeTable
from tests.integration.harness import DEADLINE, Table, retained_snapshot

pytestmark = pytest.mark.integration

ROLLS = "".join(f"ROLL,{i},{1 + i % 2},{1 + (i // 2) % 2}\n" for i in range(1, 13))
"""Twelve counted rolls, no seven: a roll, a board and a state each."""


def _decide(roll_id: int, decision: str) -> dict[str, Any]:
    return {"operator": "Stickperson Ann", "roll_id": roll_id, "decision": decision}


async def test_a_retained_decision_is_refused_cleared_and_said_as_it_is(
    make_table: MakeTable,
) -> None:
    table = make_table("CRAPS")
    await table.start("ROLL,1,1,1\nCHECK,2,3,3,ON_CHIPS\n")
    await table.wait_topic("craps/roll", lambda b: b["roll_id"] == 2)
    topic = f"{table.base}/request/roll_decision"
    request = {**_decide(2, "invalid"), "request_id": "retained-1"}
    # Published with retain while the daemon is connected: the broker delivers it live
    # with the retain flag cleared to a 3.1.1 subscriber; the daemon sees it all the same.
    async with aiomqtt.Client(table.broker.host, table.broker.port) as client:
        await client.publish(topic, json.dumps(request).encode(), qos=1, retain=True)
    answer = await table.wait_topic(
        "response/roll_decision", lambda b: b["request_id"] == "retained-1"
    )
    assert answer["status"] == "error"
    assert answer["error"].startswith("a retained request is never acted on")
    # Acted on: no. The roll is still pending, and the same decision sent properly works.
    board = table.recorder.latest("craps/board")
    assert board is not None
    assert board["pending_roll"]["roll_id"] == 2
    stored = await retained_snapshot(table.broker, table.base)
    assert "request/roll_decision" not in stored  # cleared from the broker
    ok = await table.request("roll_decision", _decide(2, "valid"))
    assert ok["status"] == "ok"
    events = [e["event"] for e in table.log_events()]
    assert any(e.startswith("retained request refused and cleared") for e in events)
    assert "cleared a retained request from the broker" in events
    refused = [
        r["rejected"]
        for r in table.journal()
        if r["kind"] == "decision" and isinstance(r.get("rejected"), dict)
    ]
    assert [(r["name"], r.get("retained")) for r in refused] == [("roll_decision", True)]

    # Left on the broker while the daemon is away: the next start clears it, saying what
    # it was, and never answers or acts on it.
    assert await table.stop_daemon() == 0
    async with aiomqtt.Client(table.broker.host, table.broker.port) as client:
        await client.publish(topic, json.dumps(request).encode(), qos=1, retain=True)
    mark = table.recorder.mark()
    table.start_daemon()
    await table.wait_for(
        lambda: any(
            e["event"].startswith("cleared a retained request (never acted on")
            for e in table.daemon.log_events()  # type: ignore[union-attr]
        ),
        what="the start's clearing",
    )
    assert not any("another game" in e["event"] for e in table.log_events())
    await table.wait_for(
        lambda: [m.body for m in table.recorder.on("availability", mark)][-1:] == ["online"],
        what="online again",
    )
    assert await table.request("overturn", {"operator": "x", "roll_id": 9}) is not None
    assert [
        b for b in table.recorder.bodies("response/roll_decision", mark) if b["request_id"]
    ] == []
    assert "request/roll_decision" not in await retained_snapshot(table.broker, table.base)


@contextlib.asynccontextmanager
async def v5_client(table: Table) -> AsyncIterator[aiomqtt.Client]:
    async with aiomqtt.Client(
        table.broker.host, table.broker.port, protocol=aiomqtt.ProtocolVersion.V5, timeout=30
    ) as client:
        yield client


async def test_resend_publishes_the_same_bytes_again_marked_and_bounded(
    make_table: MakeTable,
) -> None:
    table = make_table("CRAPS")
    await table.start(ROLLS)
    await table.wait_published()
    originals = {m.seq: m for m in table.recorder.messages if m.seq is not None}
    last = max(originals)
    async with v5_client(table) as client:
        options = SubscribeOptions(qos=1, retainAsPublished=True, noLocal=True)
        await client.subscribe(f"{table.base}/#", options=options)
        request = {"operator": "display-3", "request_id": "r1", "from_seq": 1, "to_seq": last}
        await client.publish(f"{table.base}/request/resend", json.dumps(request).encode(), qos=1)
        copies: list[aiomqtt.Message] = []
        answer: dict[str, Any] | None = None
        async with asyncio.timeout(DEADLINE):
            async for message in client.messages:
                topic = message.topic.value
                if message.retain:
                    continue  # the retained states handed over at subscription
                payload = message.payload
                assert isinstance(payload, bytes)
                if topic.endswith("/response/resend"):
                    answer = json.loads(payload)  # before the copies: the outbox goes first
                else:
                    copies.append(message)
                if answer is not None and len(copies) >= answer["sent"]:
                    break
    assert answer is not None
    assert (answer["status"], answer["request_id"], answer["missing_before"]) == ("ok", "r1", None)
    # Every JSON message the table published up to `last`, in seq order, byte for byte.
    assert answer["sent"] == len(originals) == len(copies)
    seqs = [json.loads(m.payload)["seq"] for m in copies]
    assert seqs == sorted(originals)
    for message, seq in zip(copies, seqs, strict=True):
        assert message.payload == originals[seq].payload
        assert message.topic.value == f"{table.base}/{originals[seq].topic}"
        assert not message.retain
        assert resent_mark(message)
    # The retained state on the broker is still the newest (copies are never retained).
    stored = await retained_snapshot(table.broker, table.base)
    assert stored["state"].body["seq"] == max(
        m.seq for m in table.recorder.messages if m.topic == "state" and m.seq
    )
    # Copies are not new records: the journal holds the request and its answer only.
    served = [r["resend"] for r in table.journal() if r["kind"] == "decision" and "resend" in r]
    assert served == [
        {
            "operator": "display-3",
            "request_id": "r1",
            "from_seq": 1,
            "to_seq": last,
            "sent": len(originals),
            "missing_before": None,
        }
    ]

    # Bounded: a range over 1,000, a reversed one; then more than the rate allows.
    wide = await table.request("resend", {"operator": "d", "from_seq": 1, "to_seq": 1002})
    assert wide["status"] == "error"
    assert "more than 1000 apart" in wide["error"]
    backwards = await table.request("resend", {"operator": "d", "from_seq": 9, "to_seq": 3})
    assert backwards["status"] == "error"
    assert "below from_seq" in backwards["error"]
    mark = table.recorder.mark()
    for i in range(12):  # at once: the burst is 8
        body = {"operator": "d", "request_id": f"burst-{i}", "from_seq": 1, "to_seq": 2}
        await table.recorder.publish("request/resend", json.dumps(body).encode())
    answers = await table.wait_for(
        lambda: (lambda found: found if len(found) == 12 else None)(
            table.recorder.bodies("response/resend", mark)
        ),
        what="12 answers",
    )
    refused = [a for a in answers if a["status"] == "error"]
    assert refused, answers
    assert all(a["error"].startswith("too many resend requests") for a in refused)
    assert len(refused) <= 12 - 8  # the burst of 8 (and what refilled meanwhile) served


class Lossy:
    """An aiomqtt client between the broker and ``follow`` that loses, on purpose, the
    first delivery of every ``every``-th message of the table (never a copy asked for)
    while ``losing``. The gap fill sees a lost message by the ``prev_seq`` of a later one;
    a lost last message, with nothing after it, only by the feed's tail probe (the test
    after this one)."""

    def __init__(self, client: aiomqtt.Client, *, every: int = 3, losing: bool = True) -> None:
        self.client = client
        self.lost: list[int] = []
        self.losing = losing
        self.every = every

    async def subscribe(self, topic: str, qos: int = 0) -> Any:
        return await self.client.subscribe(topic, qos=qos)

    async def publish(self, topic: str, payload: bytes, qos: int = 0) -> None:
        await self.client.publish(topic, payload, qos=qos)

    @property
    def messages(self) -> AsyncIterator[aiomqtt.Message]:
        return self._filtered()

    async def _filtered(self) -> AsyncIterator[aiomqtt.Message]:
        async for message in self.client.messages:
            payload = message.payload
            if isinstance(payload, bytes) and payload.startswith(b"{"):
                seq = json.loads(payload).get("seq")
                first = isinstance(seq, int) and seq not in self.lost
                if self.losing and first and seq % self.every == 0 and not resent_mark(message):
                    self.lost.append(seq)
                    continue
            yield message


async def consume(
    lossy: Lossy,
    base: str,
    feed: Feed,
    released: list[Message],
    gaps: list[Gap],
    *,
    clock: Callable[[], float] | None = None,
) -> None:
    """``follow`` through the lossy client as the test-feed operator: what the feed
    releases, and its gaps, into the lists."""
    async for event in follow(
        cast(aiomqtt.Client, lossy), [base], feed, operator="test-feed", clock=clock
    ):
        if isinstance(event, Message):
            released.append(event)
        elif isinstance(event, Gap):
            gaps.append(event)


async def test_the_feed_fills_from_the_table_what_a_lossy_subscriber_lost(
    make_table: MakeTable,
) -> None:
    table = make_table("CRAPS")
    # Short waits: the test's broker does not reorder, and an answer lost (every third
    # message is, answers included) is asked again soon. No tail probe: the losses are
    # stopped before the table's last messages, which reveal them (the next test probes).
    feed = Feed(wait=0.2, timeout=1.0, start={table.base: 0}, probe_after=None)
    released: list[Message] = []
    gaps: list[Gap] = []
    async with v5_client(table) as client:
        lossy = Lossy(client)

        task = asyncio.create_task(consume(lossy, table.base, feed, released, gaps))
        try:
            await asyncio.sleep(0)  # subscribed before the table starts: nothing before
            await table.start(ROLLS)
            await table.wait_published()
            lossy.losing = False  # what follows reveals the losses (prev_seq) and is kept
            await table.start_sim("ROLL,13,2,2\n")  # more after the losses: seen by prev_seq
            await table.wait_published()
            # Every JSON message the table published (the resend answers included).
            await table.wait_for(
                lambda: {m.seq for m in released} >= table.recorder.seqs() or None,
                what="every message through the feed",
            )
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
    seqs = [m.seq for m in released]
    assert seqs == sorted(set(seqs))  # once each, in order
    # Nothing the table did not send: every seq released is one the recorder (a plain
    # subscriber) is given too. Everything the table sent was waited for above; the table may
    # publish more after that wait, as its device goes away, so "the recorder's seqs are all
    # released" raced (it failed so once in a loaded fresh-clone run).
    await table.wait_for(
        lambda: set(seqs) <= table.recorder.seqs() or None,
        what="every seq released at the recorder",
    )
    assert lossy.lost
    assert set(lossy.lost) <= set(seqs)
    assert gaps == []
    by_seq = {m.seq: m.payload for m in table.recorder.messages if m.seq is not None}
    assert all(m.payload == by_seq[m.seq] for m in released if m.seq in by_seq)
    served = [r["resend"] for r in table.journal() if r["kind"] == "decision" and "resend" in r]
    assert served
    assert all(r["operator"] == "test-feed" for r in served)
    assert table.daemon is not None
    assert table.daemon.proc.poll() is None


class Clock:
    """The feed's clock: the loop's, stopped while the test sets up a loss (so that the
    tail probe cannot come before the loss is over, however loaded the machine)."""

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.stopped_at: float | None = self.loop.time()
        self.behind = 0.0

    def __call__(self) -> float:
        now = self.loop.time() if self.stopped_at is None else self.stopped_at
        return now - self.behind

    def go(self) -> None:
        assert self.stopped_at is not None
        self.behind += self.loop.time() - self.stopped_at
        self.stopped_at = None


async def test_the_feed_gets_a_lost_last_message_through_the_tail_probe(
    make_table: MakeTable,
) -> None:
    table = make_table("CRAPS")
    feed = Feed(wait=0.2, timeout=1.0, start={table.base: 0}, probe_after=1.0, probe_spread=0.0)
    released: list[Message] = []
    gaps: list[Gap] = []
    clock = Clock()
    async with v5_client(table) as client:
        lossy = Lossy(client, every=1, losing=False)

        task = asyncio.create_task(consume(lossy, table.base, feed, released, gaps, clock=clock))
        try:
            await asyncio.sleep(0)  # subscribed before the table starts: nothing before
            await table.start(ROLLS)
            await table.wait_published()
            await table.wait_for(
                lambda: {m.seq for m in released} >= table.recorder.seqs() or None,
                what="every message through the feed, nothing lost yet",
            )
            before = max(m.seq for m in released)
            # The table's last messages (a roll, its board, its state) are all lost.
            lossy.losing = True
            await table.start_sim("ROLL,13,2,2\n")
            await table.wait_published()
            await table.wait_for(lambda: len(lossy.lost) >= 3 or None, what="the tail lost")
            lossy.losing = False
            assert max(m.seq for m in released) == before  # nothing after it shows the loss
            clock.go()  # the table has been quiet since `before`: the probe comes
            await table.wait_for(
                lambda: {m.seq for m in released} >= table.recorder.seqs() or None,
                what="the lost tail through the tail probe",
            )
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
    seqs = [m.seq for m in released]
    assert seqs == sorted(set(seqs))  # once each, in order
    assert gaps == []
    # The lost ones were the table's last: only resend answers came after them.
    tail = set(lossy.lost)
    after = {m.topic for m in table.recorder.messages if m.seq and m.seq > max(tail)}
    assert after <= {"response/resend"}, after
    # They came as copies, the same bytes.
    by_seq = {m.seq: m.payload for m in table.recorder.messages if m.seq is not None}
    copies = [m for m in released if m.seq in tail]
    assert [m.seq for m in copies] == sorted(tail)
    assert all(m.resent and m.payload == by_seq[m.seq] for m in copies)
    # One probe, of the seq after the last released, then the ordinary gap fill.
    assert feed.probes == 1
    served = [r["resend"] for r in table.journal() if r["kind"] == "decision" and "resend" in r]
    assert (served[0]["from_seq"], served[0]["to_seq"]) == (before + 1, before + 1)
    assert all(r["operator"] == "test-feed" for r in served)
    assert all(any(r["from_seq"] <= s <= r["to_seq"] for r in served) for s in tail)
    assert table.daemon is not None
    assert table.daemon.proc.poll() is None
