"""Who may ask a table to authenticate its software (mqtt-api.md 1.4), on a real Mosquitto
running ``lammer broker-config``'s files: the terminal at the bare ``request/authenticate``,
``records`` at ``request/authenticate/records``; ``display`` never (neither bare, nor at its
own name, nor at another's). "Nothing arrives" is shown as in test_broker_access.py: every
publish is QoS 1, then a marker from a user that may publish; the table's subscriber that
has the marker got nothing forbidden."""

from __future__ import annotations

import pytest

from tests.helpers.broker_access import Secured, next_messages, secured

__all__ = ["secured"]  # the fixture, used by name

pytestmark = pytest.mark.integration


async def test_display_cannot_ask_authenticate_the_terminal_and_records_can(
    secured: Secured,
) -> None:
    a = secured.start_with_a_lobby("a")
    body = b'{"operator":"x","seed":"' + b"ab" * 16 + b'"}'
    async with secured.client("lammer-a") as table:
        await table.subscribe(f"{a}/request/#", qos=1)
        async with secured.client("display") as display:
            await display.publish(f"{a}/request/authenticate", body, qos=1)
            await display.publish(f"{a}/request/authenticate/display", body, qos=1)
            await display.publish(f"{a}/request/authenticate/records", body, qos=1)
        async with secured.client("display-lobby") as lobby:
            await lobby.publish(f"{a}/request/authenticate/display-lobby", body, qos=1)
        async with secured.client("records") as records:
            await records.publish(f"{a}/request/authenticate", body, qos=1)  # bare: not its
            await records.publish(f"{a}/request/authenticate/records", body, qos=1)
            await records.publish("lammer-floor/software/a", b"{}", qos=1)
        async with secured.client("terminal") as terminal:
            await terminal.publish(f"{a}/request/authenticate/records", body, qos=1)
            await terminal.publish(f"{a}/request/authenticate", body, qos=1)
            await terminal.publish(f"{a}/request/marker", b"", qos=1)
        got = await next_messages(table, f"{a}/request/marker")
    assert got == [
        (f"{a}/request/authenticate/records", body, False),
        (f"{a}/request/authenticate", body, False),  # the terminal's
        (f"{a}/request/marker", b"", False),
    ]
