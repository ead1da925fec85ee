"""Client ids bound to users (issue 20): against a broker running ``lammer broker-config``'s
files and a real daemon, a client that logs in as ``terminal`` (or ``display``) and asks for
the daemon's client id gets its own user name as its id instead: the daemon's session is
never taken over, ``availability`` never flaps, the table goes on publishing.

Before, seven such connections in 5.4 s made ``availability`` go offline and online seven
times (each takeover sent the daemon's will, then the daemon took its id back).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import aiomqtt
import pytest

from tests.helpers.broker_access import Secured

pytestmark = pytest.mark.integration


@pytest.fixture
def secured(tmp_path: Path) -> Iterator[Secured]:
    """A broker of the test's own running broker-config's files."""
    (tmp_path / "secured").mkdir()
    s = Secured(tmp_path / "secured")
    yield s
    s.broker.stop()


async def test_no_user_takes_the_daemons_client_id(secured: Secured, tmp_path: Path) -> None:
    table = secured.craps_table(
        tmp_path / "table", extra=("--terminal", "pit"), recorder="terminal-pit"
    )
    user = f"lammer-{table.table_id}"
    try:
        await table.start("ROLL,1,2,2\n")
        # Seven impostors in a row, each asking for the daemon's client id, each holding
        # its connection long enough for a takeover to show (a request answered: the
        # daemon is still the one reading its requests).
        for n in range(7):
            name = "terminal" if n % 2 == 0 else "display"
            client = aiomqtt.Client(
                "127.0.0.1",
                secured.port,
                username=name,
                password=secured.password(name),
                identifier=user,  # the daemon's own client id
                timeout=30,
            )
            async with client:
                await client.subscribe(f"{table.base}/#", qos=1)
                if name == "terminal":
                    answer = await table.request(
                        "roll_decision", {"operator": "s", "roll_id": 777, "decision": "valid"}
                    )
                    assert "unknown roll 777" in str(answer["error"])
        # The table plays on: a roll after the impostors reaches the recorder.
        mark = table.recorder.mark()
        await table.start_sim("ROLL,2,3,4\n")
        await table.wait_topic("craps/roll", lambda b: b["roll_id"] == 2, since=mark)
        assert [m.body for m in table.recorder.on("availability")] == ["online"]
        events = [e["event"] for e in table.log_events()]
        assert not [e for e in events if e.startswith("mqtt connection lost")]
        log = secured.log()
        assert f"Client {user} already connected" not in log  # no takeover, ever
        # The broker gave each impostor its user name as its id.
        assert log.count("as terminal (") == 4
        assert log.count("as display (") == 3
        assert log.count(f"as {user} (") == 2  # the daemon's survey, then its link
    finally:
        await table.close()


async def test_a_second_connection_of_one_user_replaces_the_first(secured: Secured) -> None:
    # The consequence written in docs/floor/broker.md: one connection per user. A display of its own
    # (--display NAME) keeps its connection while another logs in as "display".
    secured.start_with_a_lobby("a")
    async with secured.client("display-lobby", identifier="anything") as lobby:
        await lobby.subscribe("lammer/a/#", qos=1)
        async with secured.client("display") as first:
            await first.subscribe("lammer/a/#", qos=1)
            async with secured.client("display", identifier="another-id") as second:
                await second.subscribe("lammer/a/#", qos=1)
                # The first "display" was replaced; the lobby display was not.
                with pytest.raises(aiomqtt.MqttError):
                    await _until_closed(first)
                async with secured.client("lammer-a") as daemon:
                    await daemon.publish("lammer/a/state", b"{}", qos=1)
                async with asyncio.timeout(10):
                    async for message in lobby.messages:
                        assert message.topic.value == "lammer/a/state"
                        break
    assert "Client display already connected, closing old connection." in secured.log()
    assert "Client display-lobby already connected" not in secured.log()


async def _until_closed(client: aiomqtt.Client) -> None:
    async with asyncio.timeout(10):  # a timeout here: still connected
        async for _ in client.messages:
            pass
