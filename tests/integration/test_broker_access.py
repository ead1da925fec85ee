"""Access control with a real Mosquitto running ``lammer broker-config``'s files as they are.

Who may connect, what each user may read and publish, the message size limits, TLS on the
network listener with a CA made here, persistence across a broker restart, and a second
run of broker-config taken up by a running broker (SIGHUP). The craps test runs a real
daemon against the dice simulator on a pty (``tests.integration.harness``).

"Nothing arrives" is never shown by waiting: a forbidden publish is QoS 1, so once its
PUBACK is back the broker has dealt with it; a message published after that by a client
that may publish (a marker) reaches a subscriber after anything the broker forwarded
before, so a subscriber that has the marker and nothing else got nothing from the
forbidden one.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import ssl
from pathlib import Path

import aiomqtt
import pytest

from deploy import broker_config as bc
from deploy.broker import free_port, wait_listening
from tests.helpers.broker_access import DEADLINE, Secured, next_messages, secured
from tests.helpers.pki import make_pki

__all__ = ["secured"]  # the fixture, used by name

pytestmark = pytest.mark.integration

NOT_AUTHORISED = {5, 135}  # MQTT 3.1.1 CONNACK 5; paho reports it as MQTT 5's 135


# ---------------------------------------------------------------------------------------
# A secured broker


# ---------------------------------------------------------------------------------------
# Who may connect


async def test_only_known_users_with_their_own_password_connect(secured: Secured) -> None:
    secured.table("a")
    secured.configure(secured.config("a"))
    secured.broker.start()
    for known in ("lammer-a", "display", "terminal"):
        async with secured.client(known) as client:
            await client.subscribe("lammer/a/#", qos=1)
    refused: list[tuple[str | None, str | None]] = [
        (None, None),  # anonymous
        ("display", secured.password("terminal")),  # another user's password
        ("display", ""),
        ("lammer-b", secured.password("lammer-a")),  # a user that does not exist
        ("Display", secured.password("display")),  # names are exact
    ]
    for user, password in refused:
        with pytest.raises(aiomqtt.MqttCodeError) as info:
            async with secured.client(user, password=password):
                pass
        rc = info.value.rc
        assert getattr(rc, "value", rc) in NOT_AUTHORISED, (user, str(info.value))
    # The broker logs a refusal after it answers it: wait for the lines (bounded), then
    # count them exactly.
    for _ in range(200):
        if secured.log().count("disconnected, not authorised") >= len(refused):
            break
        await asyncio.sleep(0.05)
    assert secured.log().count("disconnected, not authorised") == len(refused)


# ---------------------------------------------------------------------------------------
# What each user may publish


async def test_no_user_publishes_where_it_may_not(secured: Secured) -> None:
    # Table ids with characters that mean something elsewhere in Mosquitto's ACL (%c, %u in
    # pattern lines; $ at the start of a topic) and a second prefix.
    a = secured.table("a")
    b = secured.table("t%c%u$ü-2", prefix="casino/pit_3")
    # The spy has a user of its own: the forged "display" below would otherwise take its
    # client id (each client's id is its user name).
    secured.configure(secured.config("a"), secured.config("t%c%u$ü-2"), extra=("--display", "spy"))
    secured.broker.start()
    forged = [
        ("lammer-a", f"{b}/state", True),  # another table's state
        ("lammer-a", f"{b}/request/roll_decision", False),  # another table's decisions
        ("lammer-a", "casino/pit_3/t%c%u$ü-3/state", False),
        ("lammer-t%c%u$ü-2", f"{a}/alarms", True),
        ("display", f"{a}/state", True),  # displays publish resend requests only
        ("display", f"{a}/request/roll_decision", False),
        ("display", f"{a}/request/resend/more", False),
        ("display", f"{a}/response/resend", False),
        ("display", "display/own", False),
        ("terminal", f"{a}/state", True),  # terminals publish requests only
        ("terminal", f"{a}/response/roll_decision", False),
        ("terminal", f"{a}/request/roll_decision/more", False),
        ("terminal", f"{a}/request", False),
        ("terminal", a, False),
    ]
    async with secured.client("display-spy") as spy:
        await spy.subscribe("#", qos=1)  # it receives only what it may read
        for user, topic, retain in forged:
            async with secured.client(user) as client:
                await client.publish(topic, b'{"forged":true}', qos=1, retain=retain)
        # The owners may: a retained state of each table, then a marker.
        async with secured.client("lammer-t%c%u$ü-2") as owner_b:
            await owner_b.publish(f"{b}/state", b'{"by":"b"}', qos=1, retain=True)
        async with secured.client("lammer-a") as owner_a:
            await owner_a.publish(f"{a}/state", b'{"by":"a"}', qos=1, retain=True)
            await owner_a.publish(f"{a}/marker", b"", qos=1)
        got = await next_messages(spy, f"{a}/marker")
    assert got == [(f"{b}/state", b'{"by":"b"}', False), (f"{a}/state", b'{"by":"a"}', False),
                   (f"{a}/marker", b"", False)]  # fmt: skip

    # Nothing forged was kept as a retained state either: a new subscriber gets the two
    # owners' states only, then the next marker.
    async with secured.client("display") as fresh:
        await fresh.subscribe("#", qos=1)
        async with secured.client("lammer-a") as owner_a:
            await owner_a.publish(f"{a}/marker", b"", qos=1)
        got = await next_messages(fresh, f"{a}/marker")
    assert sorted(got) == sorted(
        [
            (f"{a}/marker", b"", False),
            (f"{a}/state", b'{"by":"a"}', True),
            (f"{b}/state", b'{"by":"b"}', True),
        ]
    )


async def test_a_display_may_ask_a_table_to_resend_at_its_own_name_and_nothing_else(
    secured: Secured,
) -> None:
    # mqtt-api.md 1.3: any reader may ask for a resend (it reveals nothing it could not
    # read); its other requests still go nowhere. 1.4: at its own name only, so the table
    # knows who asks: not the bare request/resend (the terminal's), not another's name.
    a = secured.start_with_a_lobby("a")
    body = b'{"from_seq":1,"to_seq":2}'
    async with secured.client("lammer-a") as table:
        await table.subscribe(f"{a}/request/#", qos=1)
        async with secured.client("display") as display:
            await display.publish(f"{a}/request/overturn", b'{"by":"display"}', qos=1)
            await display.publish(f"{a}/request/resend", body, qos=1)
            await display.publish(f"{a}/request/resend/records", body, qos=1)
            await display.publish(f"{a}/request/resend/display-lobby", body, qos=1)
            await display.publish(f"{a}/request/resend/display", body, qos=1)
        async with secured.client("display-lobby") as lobby:
            await lobby.publish(f"{a}/request/resend/display", body, qos=1)
            await lobby.publish(f"{a}/request/resend/display-lobby", body, qos=1)
        async with secured.client("terminal") as terminal:
            await terminal.publish(f"{a}/request/resend/display", body, qos=1)
            await terminal.publish(f"{a}/request/resend", body, qos=1)
            await terminal.publish(f"{a}/request/marker", b"", qos=1)
        got = await next_messages(table, f"{a}/request/marker")
    assert got == [
        (f"{a}/request/resend/display", body, False),
        (f"{a}/request/resend/display-lobby", body, False),
        (f"{a}/request/resend", body, False),  # the terminal's
        (f"{a}/request/marker", b"", False),
    ]


async def test_requests_over_the_size_limit_are_dropped_and_oversized_packets_disconnect(
    secured: Secured,
) -> None:
    a = secured.table("a")
    secured.configure(secured.config("a"))
    secured.broker.start()
    largest = b"x" * bc.LARGEST_PAYLOAD
    async with secured.client("lammer-a") as spy:
        await spy.subscribe(f"{a}/#", qos=1)
        async with secured.client("terminal") as terminal:
            await terminal.publish(f"{a}/request/roll_decision", largest, qos=1)
            too_big = b"x" * (bc.MESSAGE_SIZE_LIMIT + 1)
            await terminal.publish(f"{a}/request/void_roll", too_big, qos=1)
            # Dropped, but the connection stays: the same client publishes the marker.
            await terminal.publish(f"{a}/request/marker", b"", qos=1)
        got = await next_messages(spy, f"{a}/request/marker")
        assert [(t, len(p)) for t, p, _ in got] == [
            (f"{a}/request/roll_decision", bc.LARGEST_PAYLOAD),
            (f"{a}/request/marker", 0),
        ]
        # A packet above max_packet_size ends the connection before the broker holds it.
        with pytest.raises(aiomqtt.MqttError):
            await _publish_then_more(secured, f"{a}/request/overturn", bc.MAX_PACKET_SIZE + 1)
    assert "disconnected due to oversize packet" in secured.log()


async def _publish_then_more(secured: Secured, topic: str, size: int) -> None:
    async with secured.client("terminal") as terminal:
        await terminal.publish(topic, b"x" * size, qos=0)
        async with asyncio.timeout(DEADLINE):  # a timeout here means still connected
            async for _ in terminal.messages:  # raises MqttError once disconnected
                pass


# ---------------------------------------------------------------------------------------
# A real table: displays read, terminals decide


async def test_display_cannot_decide_a_roll_and_a_terminal_can(
    secured: Secured, tmp_path: Path
) -> None:
    table = secured.craps_table(tmp_path / "table")
    user = f"lammer-{table.table_id}"
    try:
        await table.start("ROLL,1,2,2\nCHECK,2,3,3,ON_CHIPS\n")
        await table.wait_published()
        board = table.recorder.latest("craps/board")
        assert board is not None
        assert board["pending_roll"]["roll_id"] == 2
        assert f"u'{user}'" in secured.log()  # the daemon logged in as its own user

        # The display reads the table (the retained board), and its decision goes nowhere.
        async with secured.client("display") as display:
            await display.subscribe(f"{table.base}/craps/board", qos=1)
            topic, payload, retained = await _first(display)
            assert (topic, retained) == (f"{table.base}/craps/board", True)
            assert json.loads(payload)["pending_roll"]["roll_id"] == 2
            request = {"operator": "display-1", "roll_id": 2, "decision": "valid"}
            await display.publish(
                f"{table.base}/request/roll_decision",
                json.dumps({**request, "request_id": "from-display"}).encode(),
                qos=1,
            )
        # Answered after anything the broker forwarded before it: the daemon answers this
        # terminal's request (an unknown roll) and has seen nothing of the display's.
        answer = await table.request(
            "roll_decision", {"operator": "stick-1", "roll_id": 99, "decision": "valid"}
        )
        assert answer["status"] == "error"
        assert "unknown roll 99" in answer["error"]
        responses = table.recorder.bodies("response/roll_decision")
        assert [r["request_id"] for r in responses if r["request_id"] == "from-display"] == []
        assert "from-display" not in json.dumps(table.journal())
        assert "display-1" not in json.dumps(table.journal())
        board = table.recorder.latest("craps/board")
        assert board is not None
        assert board["pending_roll"]["roll_id"] == 2  # still waiting for the stickperson

        # The terminal decides it.
        mark = table.recorder.mark()
        answer = await table.request(
            "roll_decision", {"operator": "stick-1", "roll_id": 2, "decision": "valid"}
        )
        assert (answer["status"], answer["error"]) == ("ok", None)
        roll = await table.wait_topic("craps/roll", lambda b: b["roll_id"] == 2, since=mark)
        assert (roll["status"], roll["total"]) == ("counted", 6)
        decisions = [r["event"] for r in table.journal("--kind", "decision") if "event" in r]
        assert [(d["type"], d["roll_id"], d["operator"]) for d in decisions] == [
            ("RollDecided", 2, "stick-1")
        ]
        table.recorder.check_order()
    finally:
        await table.close()


async def _first(client: aiomqtt.Client) -> tuple[str, bytes, bool]:
    async with asyncio.timeout(DEADLINE):
        async for message in client.messages:
            payload = message.payload
            data = payload if isinstance(payload, bytes) else str(payload).encode()
            return message.topic.value, data, bool(message.retain)
    raise AssertionError("the connection ended")  # pragma: no cover


# ---------------------------------------------------------------------------------------
# TLS on the network listener


# MQTT 3.1.1 CONNECT: protocol "MQTT" level 4, clean session, keepalive 60, client id "x".
CONNECT_ANONYMOUS = bytes.fromhex("100d00044d5154540402003c000178")


async def test_tls_listener_verified_with_the_ca_while_loopback_stays_plain(
    secured: Secured, tmp_path: Path
) -> None:
    pki = make_pki(tmp_path / "pki", "lammer test CA")
    other = make_pki(tmp_path / "other", "someone else's CA")
    a = secured.table("a")
    tls_port = free_port()
    report = secured.configure(
        secured.config("a"),
        extra=(
            "--listen",
            f"127.0.0.1:{tls_port}",
            "--tls-cert",
            str(pki.cert),
            "--tls-key",
            str(pki.key),
            "--tls-ca",
            str(pki.ca),
        ),
    )
    assert any(f"127.0.0.1:{tls_port} (displays and terminals, TLS)" in line for line in report)
    secured.broker.start()
    assert wait_listening("127.0.0.1", tls_port)
    verified = aiomqtt.TLSParameters(ca_certs=str(pki.ca), cert_reqs=ssl.CERT_REQUIRED)
    async with secured.client("display", port=tls_port, tls=verified) as display:
        await display.subscribe(f"{a}/#", qos=1)
        async with secured.client("lammer-a") as daemon:  # plain, on the loopback listener
            await daemon.publish(f"{a}/state", b'{"over":"tls"}', qos=1)
        assert await _first(display) == (f"{a}/state", b'{"over":"tls"}', False)

    # A client that trusts another CA does not even finish the handshake: the broker's
    # certificate is what is verified.
    untrusted = ssl.create_default_context(cafile=str(other.ca))
    with pytest.raises(ssl.SSLCertVerificationError):
        await asyncio.open_connection("127.0.0.1", tls_port, ssl=untrusted)
    trusted = ssl.create_default_context(cafile=str(pki.ca))
    _, writer = await asyncio.open_connection("127.0.0.1", tls_port, ssl=trusted)
    writer.close()
    await writer.wait_closed()
    # No TLS on the TLS listener: a plain MQTT CONNECT gets no CONNACK, the connection ends.
    reader, writer = await asyncio.open_connection("127.0.0.1", tls_port)
    writer.write(CONNECT_ANONYMOUS)
    await writer.drain()
    try:
        async with asyncio.timeout(DEADLINE):
            answer = await reader.read(4)
    except ConnectionResetError:
        answer = b""
    writer.close()
    with contextlib.suppress(ConnectionResetError):
        await writer.wait_closed()
    assert not answer.startswith(b"\x20")  # not a CONNACK
    # TLS does not replace the password.
    with pytest.raises(aiomqtt.MqttCodeError):
        async with secured.client("display", password="wrong", port=tls_port, tls=verified):
            pass


# ---------------------------------------------------------------------------------------
# Persistence, and a second run taken up by a running broker


async def test_retained_state_and_queued_messages_survive_a_broker_restart(
    secured: Secured,
) -> None:
    a = secured.table("a")
    secured.configure(secured.config("a"), extra=("--display", "7"))
    secured.broker.start()
    # A display with a persistent session subscribes, then goes away.
    async with secured.client("display-7", clean_session=False) as d:
        await d.subscribe(f"{a}/#", qos=1)
    async with secured.client("lammer-a") as daemon:
        await daemon.publish(f"{a}/availability", b"offline", qos=1, retain=True)
        await daemon.publish(f"{a}/craps/roll", b'{"roll_id":1}', qos=1)
    secured.broker.stop()  # SIGTERM: Mosquitto saves its database
    assert (secured.root / "data" / "mosquitto.db").is_file()
    secured.broker.start()

    async with secured.client("display") as fresh:  # a stopped table still reads offline
        await fresh.subscribe(f"{a}/availability", qos=1)
        assert await _first(fresh) == (f"{a}/availability", b"offline", True)
    # The persistent session gets what was queued for it, in order, without subscribing.
    async with secured.client("display-7", clean_session=False) as d:
        got = await next_messages(d, f"{a}/craps/roll")
    assert got == [
        (f"{a}/availability", b"offline", False),
        (f"{a}/craps/roll", b'{"roll_id":1}', False),
    ]


async def test_a_second_run_keeps_every_password_and_a_reload_takes_the_new_table(
    secured: Secured,
) -> None:
    secured.table("a")
    secured.configure(secured.config("a"))
    secured.broker.start()
    before = {u: secured.password(u) for u in ("display", "terminal", "lammer-a")}
    b = secured.table("b")
    report = secured.configure(secured.config("a"), secured.config("b"))
    assert {u: secured.password(u) for u in before} == before
    assert any("added lammer-b" in line for line in report)
    with pytest.raises(aiomqtt.MqttCodeError):  # not before the broker reloads
        async with secured.client("lammer-b"):
            pass
    assert secured.broker.process is not None
    secured.broker.process.send_signal(signal.SIGHUP)  # systemctl reload mosquitto
    await _until_connects(secured, "lammer-b")
    async with secured.client("display", password=before["display"]) as display:
        await display.subscribe(f"{b}/#", qos=1)
        async with secured.client("lammer-b") as daemon_b:
            await daemon_b.publish(f"{b}/state", b"{}", qos=1)
        assert await _first(display) == (f"{b}/state", b"{}", False)


async def _until_connects(secured: Secured, user: str) -> None:
    async with asyncio.timeout(DEADLINE):
        while True:
            try:
                async with secured.client(user):
                    return
            except aiomqtt.MqttCodeError:
                await asyncio.sleep(0.05)
