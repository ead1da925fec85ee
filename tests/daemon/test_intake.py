"""The request gate (daemon.intake): its rates, checked against a count made by hand, and
hostile settings refused; and why it is the table's, not a user's (a real Mosquitto tells a
subscriber nothing of who published)."""

from __future__ import annotations

import asyncio
import math
import uuid
from typing import Any

import aiomqtt
import pytest
from hypothesis import given
from hypothesis import strategies as st

from daemon.intake import BUSY_ERROR, Flood, RequestGate, Verdict
from deploy.broker import Broker
from foundation.bucket import TokenBucket


def test_a_burst_then_the_rate() -> None:
    gate = RequestGate(rate=5, burst=20, answers=1)
    verdicts = [gate.check(100.0) for _ in range(25)]
    assert verdicts[:20] == [Verdict.ADMIT] * 20
    # The 21st is refused and answered busy; the rest of the same instant only counted.
    assert verdicts[20:] == [Verdict.ANSWER_BUSY] + [Verdict.COUNT] * 4
    assert (gate.admitted, gate.refused, gate.unanswered) == (20, 5, 4)
    assert gate.take_unanswered() == 4
    assert gate.unanswered == 0
    # 0.2 s later one more token (5 a second); no busy answer yet (1 a second).
    assert gate.check(100.2) is Verdict.ADMIT
    assert gate.check(100.2) is Verdict.COUNT
    # A second after the first busy answer, the next refusal is answered again.
    assert gate.check(101.0) is Verdict.ADMIT  # 0.8 s more: 4 tokens
    for _ in range(3):
        assert gate.check(101.0) is Verdict.ADMIT
    assert gate.check(101.0) is Verdict.ANSWER_BUSY


def test_admitted_over_a_long_flood_match_the_rate() -> None:
    # 10 requests every 10 ms for 60 s (1,000 a second): admitted = burst + rate x time,
    # busy answers = one a second, counted by hand.
    gate = RequestGate(rate=5, burst=20, answers=1)
    answers = 0
    for tick in range(6000):
        now = 1000.0 + tick / 100
        for _ in range(10):
            if gate.check(now) is Verdict.ANSWER_BUSY:
                answers += 1
    assert gate.admitted + gate.refused == 60_000
    assert 20 + 5 * 59.99 - 1 <= gate.admitted <= 20 + 5 * 59.99 + 1
    assert 59 <= answers <= 61


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"rate": 0}, ValueError),
        ({"rate": -1}, ValueError),
        ({"rate": math.nan}, ValueError),
        ({"rate": math.inf}, ValueError),
        ({"rate": "5"}, TypeError),
        ({"rate": True}, TypeError),
        ({"burst": 0}, ValueError),
        ({"burst": 0.5}, ValueError),
        ({"burst": math.nan}, ValueError),
        ({"burst": "20"}, TypeError),
        ({"answers": -0.1}, ValueError),
        ({"answers": math.inf}, ValueError),
        ({"answers": None}, TypeError),
    ],
)
def test_hostile_settings_are_refused(kwargs: dict[str, Any], error: type[Exception]) -> None:
    with pytest.raises(error):
        RequestGate(**kwargs)


@pytest.mark.parametrize("now", [math.nan, math.inf, -math.inf])
def test_a_time_that_is_not_one_is_refused(now: float) -> None:
    with pytest.raises(ValueError, match="not a time"):
        RequestGate().check(now)


@given(st.lists(st.floats(min_value=0, max_value=1e6), min_size=1, max_size=300))
def test_every_request_is_admitted_or_refused_and_the_burst_holds(times: list[float]) -> None:
    gate = RequestGate(rate=5, burst=20, answers=1)
    verdicts = [gate.check(t) for t in sorted(times)]
    assert gate.admitted + gate.refused == len(times)
    assert verdicts.count(Verdict.ADMIT) == gate.admitted
    assert verdicts.count(Verdict.COUNT) == gate.unanswered
    # Within any one instant, never more than the burst.
    first = sorted(times)[0]
    same = sum(1 for t in times if t == first)
    assert verdicts[:same].count(Verdict.ADMIT) == min(same, 20)


def test_the_busy_answer_says_what_to_do() -> None:
    assert BUSY_ERROR.startswith("busy: ")
    assert BUSY_ERROR.endswith("Send it again")


async def test_a_request_does_not_say_who_published_it(mosquitto: Broker) -> None:
    """What the gate could key a per-user rate on, as the daemon's MQTT 5 link receives it:
    two users' identical requests arrive identical, and a user property naming a user is
    the sender's claim, delivered as sent (daemon/intake.py, docs/floor/broker.md)."""
    from paho.mqtt.packettypes import PacketTypes
    from paho.mqtt.properties import Properties
    from paho.mqtt.subscribeoptions import SubscribeOptions

    v5 = aiomqtt.ProtocolVersion.V5
    base = f"lammer/intake-{uuid.uuid4().hex[:8]}"
    topic = f"{base}/request/roll_decision"
    body = b'{"operator": "alice", "roll_id": 7, "decision": "valid"}'
    host, port = mosquitto.host, mosquitto.port
    async with aiomqtt.Client(host, port, protocol=v5) as daemon:
        options = SubscribeOptions(qos=1, retainAsPublished=True)
        await daemon.subscribe(f"{base}/request/+", options=options)
        async with (
            aiomqtt.Client(host, port, identifier="terminal-a", username="terminal-a") as a,
            aiomqtt.Client(host, port, identifier="terminal-b", username="terminal-b") as b,
            aiomqtt.Client(
                host, port, identifier="terminal-c", username="terminal-c", protocol=v5
            ) as c,
        ):
            await a.publish(topic, body, qos=1)
            await b.publish(topic, body, qos=1)
            claim = Properties(PacketTypes.PUBLISH)  # type: ignore[no-untyped-call]
            claim.UserProperty = [("user", "terminal-a")]
            await c.publish(topic, body, qos=1, properties=claim)
            got: list[aiomqtt.Message] = []
            async with asyncio.timeout(10):
                async for message in daemon.messages:
                    got.append(message)
                    if len(got) == 3:
                        break
    seen = [
        (m.topic.value, m.payload, m.qos, m.retain, getattr(m.properties, "UserProperty", None))
        for m in got
    ]
    assert seen[0] == seen[1] == (topic, body, 1, False, None)
    assert seen[2] == (topic, body, 1, False, [("user", "terminal-a")])


def test_a_flood_is_said_at_its_count_within_a_second_never_at_a_pace() -> None:
    flood = Flood(at=100, window=1.0)
    # 99 a second, for a minute: never a flood.
    assert not any(flood.refused(second + i / 99) for second in range(60) for i in range(99))
    # 100 within a second: the hundredth says so.
    burst = Flood(at=100, window=1.0)
    said = [burst.refused(0.5 + i / 1000) for i in range(100)]
    assert said == [False] * 99 + [True]
    # A clock that goes back starts the count again (it never says a flood by it).
    back = Flood(at=3, window=1.0)
    assert [back.refused(t) for t in (10.0, 10.1, 5.0, 5.1)] == [False, False, False, False]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"rate": "5"}, "rate must be a number, got str"),
        ({"rate": True}, "rate must be a number, got bool"),
        ({"rate": 0}, "rate must be a finite number above 0, got 0"),
        ({"rate": math.inf}, "rate must be a finite number above 0, got inf"),
        ({"burst": 0}, "burst must be a finite number above 0, got 0"),
        ({"burst": 0.5}, "burst must be at least 1, got 0.5"),
        ({"burst": "20"}, "burst must be a number, got str"),
    ],
)
def test_a_hostile_setting_is_refused_with_a_sentence_naming_it(
    kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises((TypeError, ValueError)) as refused:
        RequestGate(**kwargs)
    assert str(refused.value) == message


def test_a_burst_of_exactly_one_is_allowed() -> None:
    bucket = TokenBucket(rate=1, burst=1)
    assert bucket.take(0.0)
    assert not bucket.take(0.0)
    assert bucket.take(1.0)  # exactly one token a second later


def test_a_flood_is_on_at_the_count_within_the_window_and_starts_again_after() -> None:
    flood = Flood(at=3, window=1.0)
    assert [flood.refused(10.0), flood.refused(10.5), flood.refused(10.99)] == [False, False, True]
    assert flood.refused(10.999)  # still on within the window
    # A whole window after the first: counted afresh.
    assert not flood.refused(11.0)
    assert not flood.refused(11.1)
    assert flood.refused(11.2)
    # A clock that went back starts the count again too.
    assert not flood.refused(5.0)
    assert not flood.refused(5.1)
    assert flood.refused(5.2)


def test_the_gate_says_its_rate_and_defaults_to_the_tables() -> None:
    assert RequestGate(rate=7).rate == 7.0
    gate = RequestGate()
    assert gate.rate == 5.0
    verdicts = [gate.check(0.0) for _ in range(22)]
    assert verdicts == [Verdict.ADMIT] * 20 + [Verdict.ANSWER_BUSY, Verdict.COUNT]
    assert gate.check(1.0) is Verdict.ADMIT  # a second later: 5 more, and a busy answer
    assert [gate.check(1.0) for _ in range(5)][-1] is Verdict.ANSWER_BUSY


def test_refusals_in_the_same_instant_all_count_towards_a_flood() -> None:
    # A burst read in one loop turn carries one clock reading: each one still counts.
    flood = Flood(at=3, window=1.0)
    assert not flood.refused(5.0)
    assert not flood.refused(5.0)
    assert flood.refused(5.0)
    # A clock that went back starts the count again rather than joining two windows.
    assert not flood.refused(4.0)
