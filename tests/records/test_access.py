"""The ``records`` user against a real Mosquitto running broker-config's files as they are:
it reads every table, asks for resends, publishes integrity alarms, and nothing else.

"Nothing arrives" is shown as in tests/integration/test_broker_access.py: every forbidden
publish is QoS 1 and acknowledged before the owner's marker, which a subscriber receives
after anything the broker forwarded before it.
"""

from __future__ import annotations

import pytest

from tests.helpers.broker_access import Secured, next_messages, secured

__all__ = ["secured"]

pytestmark = pytest.mark.integration


async def test_records_reads_every_table_and_may_only_ask_for_resends(secured: Secured) -> None:
    a = secured.table("a")
    b = secured.table("b", prefix="casino/pit_3")
    secured.configure(secured.config("a"), secured.config("b"))
    secured.broker.start()
    async with secured.client("lammer-a") as owner_a:
        await owner_a.publish(f"{a}/state", b'{"by":"a"}', qos=1, retain=True)
    async with secured.client("lammer-b") as owner_b:
        await owner_b.publish(f"{b}/state", b'{"by":"b"}', qos=1, retain=True)
    # It reads both tables with the filters the service subscribes to.
    async with secured.client("records") as records:
        await records.subscribe("lammer/+/#", qos=1)
        await records.subscribe("casino/pit_3/+/#", qos=1)
        async with secured.client("lammer-a") as owner_a:
            await owner_a.publish(f"{a}/marker", b"", qos=1)
        got = await next_messages(records, f"{a}/marker")
        assert sorted((t, p) for t, p, _ in got) == sorted(
            [(f"{a}/state", b'{"by":"a"}'), (f"{b}/state", b'{"by":"b"}'), (f"{a}/marker", b"")]
        )
    forged = [
        (f"{a}/request/roll_decision", False),
        (f"{a}/request/void_roll", False),
        (f"{a}/request/resend/more", False),
        # mqtt-api.md 1.4: at its own name only, never bare (the terminal's).
        (f"{a}/request/resend", False),
        (f"{a}/request/resend/display", False),
        (f"{a}/state", True),
        (f"{a}/response/resend", False),
        ("lammer-floor/bridge/ctl-1", True),
    ]
    async with secured.client("lammer-a") as spy, secured.client("display") as pit:
        await spy.subscribe(f"{a}/#", qos=1)
        await pit.subscribe("lammer-floor/#", qos=1)
        await pit.subscribe(f"{a}/marker", qos=1)
        async with secured.client("records") as records:
            for topic, retain in forged:
                await records.publish(topic, b'{"operator":"records"}', qos=1, retain=retain)
            await records.publish(f"{a}/request/resend/records", b'{"from_seq":1}', qos=1)
            await records.publish("lammer-floor/integrity/a", b'{"alarms":[]}', qos=1, retain=True)
        # The table's own user marks the end (one connection per user: client ids are the
        # user names, so a second lammer-a would take the spy's place).
        await spy.publish(f"{a}/marker", b"", qos=1)
        got = await next_messages(spy, f"{a}/marker")
        assert [(t, p) for t, p, retained in got if not retained] == [
            (f"{a}/request/resend/records", b'{"from_seq":1}'),
            (f"{a}/marker", b""),
        ]
        # The display of a controller reads the tables' topics and the integrity alarms
        # (the pit draws them), nothing else of the floor's root (broker-config).
        seen = await next_messages(pit, f"{a}/marker")
        assert [(t, p) for t, p, retained in seen if not retained] == [
            ("lammer-floor/integrity/a", b'{"alarms":[]}'),
            (f"{a}/marker", b""),
        ]
