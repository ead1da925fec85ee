"""MqttLink on the real journal (daemon/journal.py is its Outbox), through an outage and a
daemon restart, every message checked against mqtt-api.md by tests/spec_mqtt.py."""

from __future__ import annotations

import asyncio
import json
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

from daemon.journal import Journal
from daemon.mqtt import MqttLink
from daemon.publications import outcome_publication, state_publications
from foundation.backoff import Backoff
from rules.events import CrapsBetSettled, RollRecorded
from rules.table import DeviceState, TableState
from tests.conftest import Broker
from tests.helpers.mqtt_link import eventually, recording
from tests.spec_mqtt import check_message, check_seq_order

BASE = "lammer/t1"
T0 = datetime(2026, 11, 29, 14, 0, tzinfo=UTC)


def queue_roll(journal: Journal, roll_id: int, dice: tuple[int, int]) -> None:
    """What the daemon queues for one counted roll: craps/roll, then the state it changed."""
    at = T0 + timedelta(seconds=roll_id)
    roll = outcome_publication(
        RollRecorded(roll_id=roll_id, dice=dice, total=sum(dice), status="counted", reason=None),
        table="t1",
    )
    assert roll is not None
    journal.append_publish(roll.topic, roll.body, retained=roll.retained, ts=at)
    if sum(dice) == 7:
        lost = outcome_publication(
            CrapsBetSettled(roll_id=roll_id, bet="all_small", outcome="lose", pays=None),
            table="t1",
        )
        assert lost is not None
        journal.append_publish(lost.topic, lost.body, retained=False, ts=at)
    table = TableState(game="CRAPS", devices=(("dice_reader", DeviceState(connected=True)),))
    [state] = [p for p in state_publications(table, table="t1") if p.topic == "state"]
    body = {**state.body, "last_roll": roll_id}  # an added field keeps every state distinct
    journal.append_publish("state", body, retained=True, ts=at)


def link_for(broker: Broker, journal: Journal) -> MqttLink:
    async def ignore(incoming: object) -> None: ...

    return MqttLink(
        host=broker.host,
        port=broker.port,
        client_id="lammer-t1",
        base_topic=BASE,
        outbox=journal,
        on_request=ignore,
        keepalive=5,
        backoff=Backoff(initial=0.05, maximum=0.2),
        rng=random.Random(5),
    )


async def test_journal_outbox_through_an_outage_and_a_restart(
    mosquitto_private: Broker, tmp_path: Path
) -> None:
    broker = mosquitto_private
    path = tmp_path / "t1.db"
    journal = Journal.open(path)
    for roll_id in range(1, 11):
        queue_roll(journal, roll_id, (roll_id % 6 + 1, 3))
    link = link_for(broker, journal)
    async with recording(broker) as rec:
        task = asyncio.create_task(link.run())
        await eventually(lambda: not journal.pending(), "first rolls published")
        await eventually(
            lambda: any(json.loads(p).get("last_roll") == 10 for p in rec.on("state")), "state"
        )
        broker.stop()
        await eventually(lambda: not link.connected, "outage seen")
        for roll_id in range(11, 21):  # the table keeps working; the journal queues
            queue_roll(journal, roll_id, (roll_id % 6 + 1, 1))
            link.notify()
        await link.close()  # the daemon restarts while the broker is still down
        await asyncio.wait({task})
        first = [m for m in rec.messages if m.topic.value != f"{BASE}/availability"]
    journal.close()

    journal = Journal.open(path)
    assert [m.seq for m in journal.pending()][:1] == [journal.retained()[-1].seq + 1]
    broker.start()
    link = link_for(broker, journal)
    async with recording(broker) as early:
        task = asyncio.create_task(link.run())
        await eventually(lambda: not journal.pending(), "queue drained after the restart")
        await eventually(
            lambda: any(json.loads(p).get("last_roll") == 20 for p in early.on("state")),
            "current state",
        )
        second = [m for m in early.messages if m.topic.value != f"{BASE}/availability"]
    # A display that connects afterwards draws the current state at once, byte for byte
    # what the journal stored (original seq and ts).
    async with recording(broker) as late:
        await eventually(lambda: bool(late.on("state")), "retained state")
        assert late.on("state") == [m.payload for m in journal.retained() if m.topic == "state"]
    await link.close()
    await asyncio.wait({task})
    journal.close()

    bodies = []
    for message in first + second:
        body = check_message(message.topic.value, bytes(message.payload), base=BASE, retained=None)
        assert isinstance(body, dict)
        if not message.retain:
            bodies.append(body)
    check_seq_order(bodies)
    seen = {body["seq"] for body in bodies}
    rolls = {body["roll_id"] for body in bodies if "roll_id" in body and "bet" not in body}
    assert rolls == set(range(1, 21))  # every roll reached the display, none lost
    assert max(seen) == journal_last_seq(path)


def journal_last_seq(path: Path) -> int:
    with Journal.open(path, readonly=True) as journal:
        return journal.last_seq
