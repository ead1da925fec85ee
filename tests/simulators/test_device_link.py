"""The device side of link-layer.md, over an in-memory line read with the drivers' decoder.

Timers are injected: where a test shows that something does *not* happen, the timer that
could make it happen is an hour, so no assertion depends on how fast the machine is.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Callable

import pytest

from drivers.errors import FrameError
from drivers.link import BadFrame, next_seq
from drivers.messages import (
    Ack,
    Decoded,
    DeviceMessage,
    Message,
    MessageDecoder,
    Nak,
    Query,
    encode_message,
)
from rules import events as ev
from simulators.device_link import DeviceLink, LinkTimings
from simulators.faults import Faults
from simulators.scripts import DeviceKind, Send

HOUR = 3600.0
SLOW = LinkTimings(ack_timeout=HOUR, slow_interval=HOUR)


class Wire:
    """The host's end of an in-memory line: decodes what the device writes; may ACK it."""

    def __init__(self, device: DeviceKind, *, auto_ack: bool = False) -> None:
        self.decoder = MessageDecoder(device=device, sender="device")
        self.frames: asyncio.Queue[Decoded | BadFrame] = asyncio.Queue()
        self.raw: list[bytes] = []
        self.auto_ack = auto_ack
        self.link: DeviceLink | None = None

    async def write(self, data: bytes) -> None:
        for item in self.decoder.feed(data):
            self.raw.append(item.raw)
            self.frames.put_nowait(item)
            if self.auto_ack and isinstance(item, Decoded):
                self.say(Ack(seq=item.message.seq))

    def say(self, message: Message) -> None:
        assert self.link is not None
        self.link.feed(encode_message(message))

    async def next(self) -> DeviceMessage:
        async with asyncio.timeout(10):  # a safety net, not a timing assertion
            item = await self.frames.get()
        assert isinstance(item, Decoded), item
        message = item.message
        assert not isinstance(message, Ack | Nak | Query)
        return message

    async def nothing_more(self) -> None:
        # Everything here is in memory, in this loop: once every task has run to its next
        # wait, what the device would send now is sent (the timers that could send more are
        # an hour). Turns of the loop, not wall time: a loaded machine changes nothing.
        for _ in range(100):
            await asyncio.sleep(0)
        assert self.frames.empty(), f"unexpected frame: {self.frames.get_nowait()}"


Make = Callable[..., tuple[DeviceLink, Wire]]


@pytest.fixture
async def make_link() -> AsyncIterator[Make]:
    links: list[DeviceLink] = []

    def make(
        device: DeviceKind = "shuffler", *, auto_ack: bool = False, **kwargs: object
    ) -> tuple[DeviceLink, Wire]:
        wire = Wire(device, auto_ack=auto_ack)
        hello = (
            Send.of("HELLO", "IDEAL-SIM", "2.1.0", "SN0001")
            if device == "shuffler"
            else Send.of("HELLO", "DICE-SIM", "1.0.0", "DR0042")
        )
        config = [Send.of("MODE", "CSP")] if device == "shuffler" else []
        link = DeviceLink(
            device=device,
            hello=hello,
            config=config,
            write=wire.write,
            **kwargs,  # type: ignore[arg-type]
        )
        wire.link = link
        link.start()
        links.append(link)
        return link, wire

    yield make
    for link in links:
        await link.stop()


async def test_power_up_numbers_from_one_stop_and_wait(make_link: Make) -> None:
    link, wire = make_link(timings=SLOW)
    link.power_up()
    deck = asyncio.create_task(link.send(Send.of("DECK", "OK")))
    hello = await wire.next()
    assert isinstance(hello.fact, ev.DeviceHello)
    assert hello.seq == 1
    await wire.nothing_more()  # stop-and-wait: MODE waits for ACK 1
    wire.say(Ack(seq=1))
    mode = await wire.next()
    assert mode == DeviceMessage(seq=2, fact=ev.ModeReported(game="CSP"))
    wire.say(Ack(seq=2))
    assert (await wire.next()).seq == 3
    assert not deck.done()
    wire.say(Ack(seq=3))
    sent = await deck
    assert sent.seq == 3
    assert [m.seq for m in link.sent] == [1, 2, 3]
    assert wire.raw[:2] == [  # link-layer.md and shuffler-icd.md vectors
        b"$HELLO,1,IDEAL-SIM,2.1.0,SN0001*F9E4\r\n",
        b"$MODE,2,CSP*CA7D\r\n",
    ]


async def test_sequence_wraps_from_9999_to_1_and_hello_resets(make_link: Make) -> None:
    assert next_seq(9999) == 1
    link, _ = make_link(auto_ack=True, first_seq=9998)
    seqs = [(await link.send(Send.of("DECK", "OK"))).seq for _ in range(3)]
    assert seqs == [9998, 9999, 1]
    assert (await link.send(Send.of("HELLO", "IDEAL-SIM", "2.1.0", "SN0002"))).seq == 1
    assert (await link.send(Send.of("DECK", "OK"))).seq == 2


async def test_no_ack_retransmits_5_times_then_waits_for_the_slow_timer(make_link: Make) -> None:
    link, wire = make_link(timings=LinkTimings(ack_timeout=0.005, slow_interval=HOUR))
    sending = asyncio.create_task(link.send(Send.of("ROUND", 812, 3)))
    copies = [await wire.next() for _ in range(6)]  # the frame, then 5 retransmissions
    assert {m.seq for m in copies} == {1}
    assert len(set(wire.raw)) == 1, "the same frame each time"
    await wire.nothing_more()  # then only every slow_interval (here an hour)
    wire.say(Ack(seq=1))
    assert (await sending).seq == 1
    assert link.transmissions == 6


async def test_slow_retransmissions_go_on_until_acknowledged(make_link: Make) -> None:
    link, wire = make_link(
        timings=LinkTimings(ack_timeout=0.005, fast_retries=1, slow_interval=0.01)
    )
    sending = asyncio.create_task(link.send(Send.of("SETTLE", 812)))
    for _ in range(8):
        assert (await wire.next()).seq == 1
    wire.say(Ack(seq=1))
    await sending


async def test_nak_resends_at_once_up_to_5_times(make_link: Make) -> None:
    link, wire = make_link(timings=SLOW)
    sending = asyncio.create_task(link.send(Send.of("DECK", "OK")))
    await wire.next()
    wire.say(Nak(seq=7))  # some other frame's NAK: not ours
    await wire.nothing_more()
    for nak in (Nak(seq=1), Nak(seq=0), Nak(seq=1), Nak(seq=1), Nak(seq=0)):
        wire.say(nak)
        assert (await wire.next()).seq == 1
    wire.say(Nak(seq=1))  # a sixth NAK: now only the (hour-long) slow timer resends
    await wire.nothing_more()
    wire.say(Ack(seq=1))
    await sending
    assert link.transmissions == 6


async def test_late_ack_of_an_earlier_frame_is_ignored(make_link: Make) -> None:
    link, wire = make_link(timings=SLOW)
    first = asyncio.create_task(link.send(Send.of("DECK", "OK")))
    await wire.next()
    wire.say(Ack(seq=1))
    await first
    second = asyncio.create_task(link.send(Send.of("DECK", "OK")))
    await wire.next()
    wire.say(Ack(seq=1))  # a duplicate ACK of frame 1
    await wire.nothing_more()
    assert not second.done()
    wire.say(Ack(seq=2))
    assert (await second).seq == 2


async def test_query_is_answered_with_hello_then_the_current_mode(make_link: Make) -> None:
    link, wire = make_link(auto_ack=True)
    await link.send(Send.of("MODE", "UTH"))  # the dealer changed the game
    await link.send(Send.of("DECK", "OK"))
    assert [(await wire.next()).kind for _ in range(2)] == ["MODE", "DECK"]
    wire.say(Query())
    await link.wait_idle()
    hello, mode = await wire.next(), await wire.next()
    assert isinstance(hello.fact, ev.DeviceHello)
    assert hello.seq == 1
    assert mode == DeviceMessage(seq=2, fact=ev.ModeReported(game="UTH"))
    assert (await link.send(Send.of("DECK", "OK"))).seq == 3
    assert link.queries == 1


async def test_dice_reader_answers_query_with_hello_only(make_link: Make) -> None:
    link, wire = make_link("dice_reader", auto_ack=True)
    await link.send(Send.of("ROLL", 5001, 6, 5))
    wire.say(Query())
    await link.wait_idle()
    assert (await wire.next()).kind == "ROLL"
    hello = await wire.next()
    assert isinstance(hello.fact, ev.DeviceHello)
    assert hello.seq == 1
    assert [m.kind for m in link.sent] == ["ROLL", "HELLO"]


async def test_query_during_a_frame_finishes_it_then_resends_it_at_once(
    make_link: Make,
) -> None:
    link, wire = make_link(timings=SLOW)
    hand = asyncio.create_task(link.send(Send.of("HAND", 812, "P1", "9c9d5h5s2c")))
    queued = asyncio.create_task(link.send(Send.of("ROUND", 812, 1)))
    assert (await wire.next()).kind == "HAND"
    wire.say(Query())  # the timers are an hour: only the QUERY can bring it again now
    again = await wire.next()
    assert (again.kind, again.seq) == ("HAND", 1)
    wire.say(Ack(seq=1))
    assert (await hand).seq == 1
    for expected in (("HELLO", 1), ("MODE", 2), ("ROUND", 3)):
        message = await wire.next()
        assert (message.kind, message.seq) == expected
        wire.say(Ack(seq=message.seq))
    await queued


async def test_dropped_acks_cost_one_retransmission_each(make_link: Make) -> None:
    link, _ = make_link(
        "dice_reader",
        auto_ack=True,
        faults=Faults(drop_ack=0.4),
        rng=random.Random(3),
        timings=LinkTimings(ack_timeout=0.005),
    )
    for n in range(1, 31):
        assert (await link.send(Send.of("ROLL", n, 1, 2))).seq == n
    assert link.acks_dropped > 5
    assert link.transmissions == 30 + link.acks_dropped
    assert [m.seq for m in link.sent] == list(range(1, 31))


async def test_a_scripted_lost_ack_costs_exactly_the_next_frame_one_retransmission(
    make_link: Make,
) -> None:
    link, _ = make_link("dice_reader", auto_ack=True, timings=LinkTimings(ack_timeout=0.005))
    assert (await link.send(Send.of("ROLL", 1, 1, 2))).seq == 1
    before = link.transmissions
    link.lose_next_ack()
    assert (await link.send(Send.of("ROLL", 2, 3, 4))).seq == 2
    assert link.transmissions == before + 2  # sent, its ACK lost, sent again
    assert link.acks_dropped == 1
    assert (await link.send(Send.of("ROLL", 3, 5, 6))).seq == 3
    assert link.transmissions == before + 3  # the loss was for one frame only
    assert [m.seq for m in link.sent] == [1, 2, 3]


async def test_a_frame_that_does_not_validate_is_refused(
    make_link: Make,
) -> None:
    link, _ = make_link(auto_ack=True)
    with pytest.raises(FrameError, match="not a shuffler message"):
        await link.send(Send.of("ROLL", 1, 2, 3))
    assert (await link.send(Send.of("DECK", "OK"))).seq == 1
