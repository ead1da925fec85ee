"""``lammer records run``'s service against a real Mosquitto and the private PostgreSQL.

A fake table (an MQTT client that follows mqtt-api.md 1.3's ``resend``: it publishes
again, marked ``resent``, what it published in the range, and answers with ``sent`` and
``missing_before``) publishes with messages lost on the way; the service fills what the
table still has and records the rest as a gap with its reason. Waits are on conditions
(the store's rows, a message), bounded, never fixed sleeps.
"""

from __future__ import annotations

import asyncio
import json
import os
import pwd
import ssl
import subprocess
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

import aiomqtt
import psycopg
import pytest
import structlog

from contract.floor import IntegrityBody
from contract.session import FLOOR_KEEPALIVE
from deploy.broker import Broker, free_port
from records.intake import CLIENT_ID
from records.migrate import applied
from records.observe import GamingDay
from records.service import run
from tests.helpers.pki import make_pki
from tests.helpers.records_service import DEADLINE, FakeTable, settings_for, until
from tests.records.conftest import StoreDb
from tests.records.messages import cover_all_result, craps_roll

MIGRATIONS = Path(__file__).resolve().parents[2] / "records" / "migrations"


async def wait_stored_roll(
    table: aiomqtt.Client, store_db: StoreDb, what: str, *, seq: int = 1, prefix: str = "lammer"
) -> None:
    """Publish roll ``seq`` of table t9 until the service has stored it, the ``seq``-th
    (it subscribes at some point after its start: what comes before is not for it)."""

    async def stored() -> bool:
        body = json.dumps(craps_roll("t9", seq, seq, 2, 3)).encode()
        await table.publish(f"{prefix}/t9/craps/roll", body, qos=1)
        with psycopg.connect(store_db.dsn) as conn:
            return conn.execute("SELECT count(*) FROM craps_roll").fetchone() == (seq,)

    await until(stored, what)


async def test_lost_messages_are_resent_and_what_is_gone_is_a_gap(
    mosquitto_private: Broker, store_db: StoreDb
) -> None:
    settings = settings_for(
        store_db,
        mosquitto_private.port,
        day=GamingDay(),
        resend_wait=0.3,
        resend_timeout=10.0,  # a bound on a failure: the gap is said on the answer
        tick=0.05,
        mqtt_user="records",  # (the test's broker lets anyone in: the name is the level)
    )
    stop = asyncio.Event()
    service = asyncio.create_task(run(settings, stop))
    table = FakeTable(mosquitto_private, "t1")
    try:
        async with aiomqtt.Client("127.0.0.1", mosquitto_private.port) as pit:
            await pit.subscribe("lammer-floor/integrity/+", qos=1)
            async with table.client() as client:
                responder = asyncio.create_task(table.serve_resends(client))

                async def stored() -> set[int]:
                    with psycopg.connect(store_db.dsn) as conn:
                        return {r[0] for r in conn.execute("SELECT seq FROM message")}

                async def subscribed() -> bool:
                    # Once the service has subscribed, what the table publishes arrives.
                    await table.publish(client, "craps/roll", craps_roll("t1", 0, 1, 3, 4))
                    return bool(await stored())

                await until(subscribed, "the service stores what it receives")
                gone = await table.publish(
                    client, "craps/roll", craps_roll("t1", 0, 2, 2, 2), lost=True
                )
                table.skip()  # a journal record that is not a message (a device fact)
                table.journal_from = table.next  # the journal no longer holds what came before
                kept = await table.publish(client, "craps/roll", craps_roll("t1", 0, 3, 5, 6))
                resent = await table.publish(
                    client, "craps/roll", craps_roll("t1", 0, 4, 6, 6), lost=True
                )
                win = cover_all_result("t1", 0, 1, hands=2, hand="Royal Flush", pays="250")
                last = await table.publish(client, "cover_all/result", win)

                async def complete() -> bool:
                    with psycopg.connect(store_db.dsn) as conn:
                        gaps = conn.execute("SELECT count(*) FROM gap").fetchone()
                    return {kept, resent, last} <= await stored() and gaps == (1,)

                await until(complete, "every message the table still had is stored")
                responder.cancel()
            async with asyncio.timeout(DEADLINE):
                async for message in pit.messages:
                    assert message.topic.value == "lammer-floor/integrity/t1"
                    payload = json.loads(message.payload)
                    break
            assert payload["table"] == "t1"
            assert isinstance(payload["alarms"], list)
        with psycopg.connect(store_db.dsn) as conn:
            gaps = conn.execute("SELECT from_seq, to_seq, reason FROM gap").fetchall()
            rows = conn.execute("SELECT seq, die1, die2 FROM craps_roll ORDER BY seq").fetchall()
        # The lost message the journal no longer holds is a gap with its reason, never
        # silence (the record after it was not a message: prev_seq says so); the one it
        # still held was resent and stored once.
        assert gaps == [(gone, gone, "gone: the table's journal no longer holds them")]
        rolls = [r[0] for r in rows]
        assert rolls == sorted(rolls)
        assert {kept, resent} <= set(rolls)
        assert gone not in rolls
        # Asked at the records' own level (mqtt-api.md 1.4: its budget, not the screens'),
        # at QoS 1, as the operator records.
        assert table.asked
        assert {(topic, qos) for topic, qos, _ in table.asked} == {
            ("lammer/t1/request/resend/records", 1)
        }
        assert {ask["operator"] for _, _, ask in table.asked} == {"records"}
    finally:
        stop.set()
        await asyncio.wait_for(service, DEADLINE)


async def test_a_table_dealing_too_many_royal_flushes_raises_its_integrity_alarm(
    mosquitto_private: Broker, store_db: StoreDb
) -> None:
    settings = settings_for(store_db, mosquitto_private.port)
    stop = asyncio.Event()
    service = asyncio.create_task(run(settings, stop))
    try:
        async with aiomqtt.Client("127.0.0.1", mosquitto_private.port) as pit:
            await pit.subscribe("lammer-floor/integrity/lir-9", qos=1)
            async with aiomqtt.Client("127.0.0.1", mosquitto_private.port) as table:
                first = cover_all_result("lir-9", 1, 1, hands=1, game="LIR")

                async def subscribed() -> bool:
                    # The service stores what it receives once it has subscribed.
                    await table.publish(
                        "lammer/lir-9/cover_all/result", json.dumps(first).encode(), qos=1
                    )
                    with psycopg.connect(store_db.dsn) as conn:
                        return conn.execute("SELECT count(*) FROM message").fetchone() == (1,)

                await until(subscribed, "the service stores what it receives")
                # Let It Ride, 1 hand: a Royal Flush is 1 round in 649,740 (exact); five in
                # 40 rounds is beyond any honest table.
                for seq in range(2, 41):
                    royal = seq % 7 == 0
                    result = cover_all_result(
                        "lir-9", seq, seq, hands=1, game="LIR",
                        hand="Royal Flush" if royal else None, pays="500" if royal else None,
                    )  # fmt: skip
                    await table.publish(
                        "lammer/lir-9/cover_all/result", json.dumps(result).encode(), qos=1
                    )
                alarm: dict[str, Any] | None = None
                async with asyncio.timeout(DEADLINE):
                    async for message in pit.messages:
                        payload = json.loads(message.payload)
                        IntegrityBody.model_validate(payload)
                        alarms = [a for a in payload["alarms"] if a["window"] == "all"]
                        if alarms:
                            alarm = alarms[0]
                            break
        assert alarm is not None
        assert (alarm["bet"], alarm["row"], alarm["side"]) == ("cover_all", "Royal Flush", "high")
        # Retained, at QoS 1: a pit screen that opens later has it at once (subscribed at
        # QoS 2, so what comes shows the level it was published at).
        async with aiomqtt.Client("127.0.0.1", mosquitto_private.port) as late:
            await late.subscribe("lammer-floor/integrity/lir-9", qos=2)
            async with asyncio.timeout(DEADLINE):
                kept = await anext(aiter(late.messages))
        assert kept.retain
        assert kept.qos == 1
        assert json.loads(kept.payload)["alarms"]
        assert alarm["observed"] >= 2  # raised as soon as the count is beyond chance
        assert alarm["message"].startswith("cover_all, Royal Flush: ")
        # A restart rebuilds the watch from the store and publishes the alarm again.
        stop.set()
        await asyncio.wait_for(service, DEADLINE)
        async with aiomqtt.Client("127.0.0.1", mosquitto_private.port) as pit:
            await pit.publish("lammer-floor/integrity/lir-9", b"", qos=1, retain=True)  # cleared
            await pit.subscribe("lammer-floor/integrity/lir-9", qos=1)
            stop = asyncio.Event()
            service = asyncio.create_task(run(settings, stop))
            async with asyncio.timeout(DEADLINE):
                async for message in pit.messages:
                    again = json.loads(message.payload)
                    break
        assert [(a["row"], a["window"]) for a in again["alarms"] if a["window"] == "all"] == [
            ("Royal Flush", "all")
        ]
    finally:
        stop.set()
        await asyncio.wait_for(service, DEADLINE)


async def test_over_tls_with_the_brokers_ca(tmp_path: Path, store_db: StoreDb) -> None:
    # The floor's listeners speak TLS only: the service verifies the broker with its CA.
    pki = make_pki(tmp_path / "pki", "lammer test CA")
    port = free_port()
    (tmp_path / "run").mkdir()
    broker = Broker(tmp_path / "run", port=port, config_file=tmp_path / "mosquitto.conf")
    broker.conf.write_text(
        f"listener {port} 127.0.0.1\nallow_anonymous true\npersistence false\n"
        f"user {pwd.getpwuid(os.geteuid()).pw_name}\n"  # root would switch to mosquitto
        f"cafile {pki.ca}\ncertfile {pki.cert}\nkeyfile {pki.key}\ntls_version tlsv1.2\n"
    )
    broker.start()
    settings = settings_for(store_db, port, mqtt_ca_file=pki.ca)
    stop = asyncio.Event()
    service = asyncio.create_task(run(settings, stop))
    try:
        context = ssl.create_default_context(cafile=str(pki.ca))
        async with aiomqtt.Client("127.0.0.1", port, tls_context=context) as table:
            await wait_stored_roll(table, store_db, "a roll stored over TLS")
    finally:
        stop.set()
        await asyncio.wait_for(service, DEADLINE)
        broker.stop()


async def test_a_dead_first_node_is_passed_for_the_next(
    mosquitto_private: Broker, store_db: StoreDb
) -> None:
    # On the floor the service is given every node; the first is down (nothing listens on
    # its port): it goes on to the next at once and stores what the tables publish there.
    live = ("127.0.0.1", mosquitto_private.port)
    dead = free_port()
    settings = settings_for(store_db, dead, other_nodes=(live,))
    stop = asyncio.Event()
    with structlog.testing.capture_logs() as logs:
        service = asyncio.create_task(run(settings, stop))
        try:
            async with aiomqtt.Client("127.0.0.1", mosquitto_private.port) as table:
                await wait_stored_roll(table, store_db, "a roll stored through the second node")
        finally:
            stop.set()
            await asyncio.wait_for(service, DEADLINE)
    # Each said: the node that failed, why, and the next tried at once; then the one that
    # answered.
    said = [e for e in logs if e["event"] in ("broker unreachable", "subscribed")]
    assert [(e["event"], e["broker"]) for e in said] == [
        ("broker unreachable", f"127.0.0.1:{dead}"),
        ("subscribed", f"127.0.0.1:{mosquitto_private.port}"),
    ]
    failed = said[0]
    assert failed["log_level"] == "warning"
    assert "refused" in failed["error"].lower()
    assert 0 < failed["retry_in"] < 0.25  # the next node at once, not a round's 0.25-0.5 s


async def test_the_first_start_applies_the_migrations_and_says_which(
    mosquitto_private: Broker, bare_store_db: StoreDb
) -> None:
    # The database as an administrator hands it over: the service's first start makes the
    # schema and says which migrations it applied; the next start has none to apply and
    # says nothing of them.
    numbers = sorted(int(f.name[:4]) for f in MIGRATIONS.glob("[0-9][0-9][0-9][0-9]_*.sql"))
    assert len(numbers) >= 3
    settings = settings_for(bare_store_db, mosquitto_private.port)
    said = []
    for _ in range(2):
        stop = asyncio.Event()
        with structlog.testing.capture_logs() as logs:
            service = asyncio.create_task(run(settings, stop))
            try:
                await until(lambda: any(e["event"] == "subscribed" for e in logs), "subscribed")
            finally:
                stop.set()
                await asyncio.wait_for(service, DEADLINE)
        said.append([e for e in logs if e["event"] == "migrations applied"])
    assert said == [[{"event": "migrations applied", "numbers": numbers, "log_level": "info"}], []]
    with psycopg.connect(bare_store_db.dsn, autocommit=True) as conn:
        assert applied(conn) == numbers


@pytest.fixture
def passwd(tmp_path: Path) -> Path:
    """A password file of the users ``records`` and ``t9``, by Debian's mosquitto_passwd."""
    path = tmp_path / "passwd"
    for user, password in (("records", "records-secret"), ("t9", "table-secret")):
        create = ["-c"] if user == "records" else []
        subprocess.run(["mosquitto_passwd", "-b", *create, str(path), user, password], check=True)
    path.chmod(0o600)
    return path


async def test_it_logs_in_on_a_persistent_session_at_the_floors_keepalive(
    tmp_path: Path, passwd: Path, store_db: StoreDb
) -> None:
    # A floor broker allows no anonymous client: the service logs in as its user, on a
    # persistent session (what comes while it restarts waits), with the floor's keepalive,
    # and subscribes at QoS 1. Mosquitto's own log says what it saw.
    port = free_port()
    (tmp_path / "run").mkdir()
    broker = Broker(tmp_path / "run", port=port, config_file=tmp_path / "mosquitto.conf")
    broker.conf.write_text(
        f"listener {port} 127.0.0.1\nallow_anonymous false\npassword_file {passwd}\n"
        f"persistence false\nuser {pwd.getpwuid(os.geteuid()).pw_name}\n"
        "log_dest stderr\nlog_type notice\nlog_type subscribe\nconnection_messages true\n"
    )
    settings = settings_for(
        store_db, port, mqtt_user="records", mqtt_password="records-secret", prefixes=("floor",)
    )
    stop = asyncio.Event()
    broker.start()
    with structlog.testing.capture_logs() as logs:
        service = asyncio.create_task(run(settings, stop))
        try:
            async with aiomqtt.Client(
                "127.0.0.1", port, username="t9", password="table-secret"
            ) as table:
                await wait_stored_roll(
                    table, store_db, "a roll stored through a broker that wants a login",
                    prefix="floor",
                )  # fmt: skip
        finally:
            stop.set()
            try:
                await asyncio.wait_for(service, DEADLINE)
            finally:
                broker.stop()
    said = [e for e in logs if e["event"] == "subscribed"]
    assert said == [
        {"event": "subscribed", "prefixes": ["floor"], "broker": f"127.0.0.1:{port}",
         "log_level": "info"}
    ]  # fmt: skip
    seen = broker.log.read_text()
    assert f"as {CLIENT_ID} (p2, c0, k{FLOOR_KEEPALIVE}, u'records')" in seen, seen
    assert f"{CLIENT_ID} 1 floor/+/#" in seen, seen


async def test_a_broker_that_goes_away_is_said_and_reconnected_to_after_a_backoff(
    mosquitto_private: Broker, store_db: StoreDb
) -> None:
    # The connection lost mid-session is said as such (not only as the refusal of the
    # next try), each try waits BROKER_BACKOFF's jittered step (0.25-0.5 s, doubling), and the
    # broker back on its port is subscribed to again: what the table publishes is stored.
    settings = settings_for(store_db, mosquitto_private.port)
    where = f"127.0.0.1:{mosquitto_private.port}"
    stop = asyncio.Event()

    def said(event: str) -> list[MutableMapping[str, Any]]:
        return [e for e in list(logs) if e["event"] == event]

    with structlog.testing.capture_logs() as logs:
        service = asyncio.create_task(run(settings, stop))
        try:
            async with aiomqtt.Client("127.0.0.1", mosquitto_private.port) as table:
                await wait_stored_roll(table, store_db, "a roll stored")
            mosquitto_private.stop()
            await until(lambda: len(said("broker unreachable")) >= 3, "three tries")
            mosquitto_private.start()
            await until(lambda: len(said("subscribed")) == 2, "subscribed again")
            async with aiomqtt.Client("127.0.0.1", mosquitto_private.port) as table:
                await wait_stored_roll(
                    table, store_db, "a roll stored after the broker came back", seq=2
                )
        finally:
            stop.set()
            await asyncio.wait_for(service, DEADLINE)
    tries = said("broker unreachable")
    # The loss itself (the message iteration disconnected, or a publish in flight timed
    # out), then the refusals of the tries while the broker was down.
    assert "refused" not in tries[0]["error"].lower(), tries[0]
    assert all("refused" in e["error"].lower() for e in tries[1:]), tries
    for n, e in enumerate(tries):
        assert e["broker"] == where
        assert e["log_level"] == "warning"
        step = min(5.0, 0.5 * 2**n)
        assert step / 2 - 0.005 <= e["retry_in"] <= step + 0.005, (n, e["retry_in"])
        assert e["retry_in"] == round(e["retry_in"], 2)  # said to the hundredth


async def test_a_table_first_known_by_its_retained_state_is_caught_up_then_backfilled(
    mosquitto_private: Broker, store_db: StoreDb
) -> None:
    # Before records starts, the table published three rolls nobody stored, then its state
    # (retained). The broker hands that state over at subscription: a state from the
    # broker's store is not where the table's stream is, so it starts no backfill; the
    # feed's catch-up asks for the seq after it, and the table's answer, a live message,
    # is where the backfill of what came before starts.
    table = FakeTable(mosquitto_private, "t1")
    settings = settings_for(store_db, mosquitto_private.port, tick=0.05)
    stop = asyncio.Event()
    async with table.client() as client:
        responder = asyncio.create_task(table.serve_resends(client))
        rolls = [
            await table.publish(client, "craps/roll", craps_roll("t1", 0, n, 1, 2))
            for n in (1, 2, 3)
        ]
        state = await table.publish(
            client, "state", {"game": "CRAPS", "devices": {}, "alarms": []}, retain=True
        )
        service = asyncio.create_task(run(settings, stop))
        try:

            async def all_stored() -> bool:
                with psycopg.connect(store_db.dsn) as conn:
                    seqs = {r[0] for r in conn.execute("SELECT seq FROM message")}
                return {*rolls, state} <= seqs

            await until(all_stored, "the rolls from before and the state stored")
        finally:
            stop.set()
            await asyncio.wait_for(service, DEADLINE)
            responder.cancel()
    # The catch-up, then the backfill up to the answer's prev_seq (the state).
    asked = [(ask["request_id"].split("-")[0], ask["from_seq"], ask["to_seq"])
             for _, _, ask in table.asked]  # fmt: skip
    assert asked[:2] == [("feed", state + 1, state + 1), ("backfill", 1, state)]
