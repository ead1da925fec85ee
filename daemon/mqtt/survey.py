"""Before the table starts: what the broker retains under the table's base topic.

One short connection of its own (client id ``<client_id>-survey``): the highest ``seq`` a
retained payload carries, so ``seq`` goes on above it (a table id used before, with
another journal; mqtt-api.md "never reused"), and every retained topic not in ``keep``
cleared (what another game of the same table id left, or a retained request, which is
never acted on). A login the broker refuses is tried again ``LOGIN_TRIES`` times, then
stops the start with one sentence (``BrokerLoginRefused``).
"""

from __future__ import annotations

import asyncio
import json
import random

import aiomqtt
import structlog

from contract import topics
from contract.follow import LOGIN_TRIES, login_refused
from contract.session import UNBOUNDED
from daemon.errors import BrokerLoginRefused
from daemon.mqtt.broker import BrokerSettings
from foundation.backoff import Backoff

log = structlog.get_logger("lammer.mqtt")


class _LoginRefusedOnce(Exception):
    """One refused login of ``_survey`` (``survey`` counts them)."""


async def survey(
    broker: BrokerSettings,
    base: str,
    keep: frozenset[str],
    *,
    backoff: Backoff,
    rng: random.Random,
    quiet: float = 0.15,
    within: float = 3.0,
) -> int | None:
    """``_survey`` (below), tried again when the broker refuses the login: after
    ``LOGIN_TRIES`` refusals in a row, ``BrokerLoginRefused`` (a wrong user name or
    password file stops the start with one sentence instead of retrying forever)."""
    for attempt in range(LOGIN_TRIES):
        try:
            return await _survey(broker, base, keep, quiet=quiet, within=within)
        except _LoginRefusedOnce:
            log.warning(
                "mqtt login refused at start",
                host=broker.host,
                port=broker.port,
                user=broker.username,
                attempt=attempt + 1,
                of=LOGIN_TRIES,
            )
            if attempt + 1 < LOGIN_TRIES:
                await asyncio.sleep(backoff.delay(attempt, rng))
    raise BrokerLoginRefused(broker.address, broker.username)


async def _survey(
    broker: BrokerSettings, base: str, keep: frozenset[str], *, quiet: float, within: float
) -> int | None:
    """Read what the broker retains under ``base``, clear what is not in ``keep``, and
    return the highest ``seq`` found; None when the broker cannot be reached within the
    timeout: the table starts all the same."""
    client = aiomqtt.Client(
        broker.host,
        broker.port,
        identifier=f"{broker.client_id}-survey",
        username=broker.username,
        password=broker.password,
        protocol=aiomqtt.ProtocolVersion.V5,
        clean_start=True,
        timeout=UNBOUNDED,
        tls_params=broker.tls_params(),
    )
    found: dict[str, bytes] = {}
    try:
        async with broker.connected(client, within=within):
            async with asyncio.timeout(within):
                await client.subscribe(f"{base}/#", qos=1)
                while True:
                    try:
                        async with asyncio.timeout(quiet):
                            message = await anext(client.messages)
                    except TimeoutError:
                        break  # the retained ones come at once after the subscription
                    if message.retain:
                        payload = message.payload
                        data = payload if isinstance(payload, bytes) else str(payload).encode()
                        found[message.topic.value[len(base) + 1 :]] = data
                await _clear_others(client, base, found, keep)
    except (aiomqtt.MqttError, OSError) as exc:
        if login_refused(exc):
            raise _LoginRefusedOnce from exc
        log.warning("mqtt: could not read the retained state at start", error=str(exc))
        return None
    return max((_seq(data) for data in found.values()), default=0)


async def _clear_others(
    client: aiomqtt.Client, base: str, found: dict[str, bytes], keep: frozenset[str]
) -> None:
    """Clear (an empty retained payload) every retained topic found and not kept."""
    for topic in sorted(set(found) - keep):
        if found[topic]:
            await client.publish(f"{base}/{topic}", b"", qos=1, retain=True)
            if topics.is_request(topic):
                log.warning(
                    "cleared a retained request (never acted on: a request "
                    "is published without retain)",
                    topic=topic,
                    size=len(found[topic]),
                )
            else:
                log.warning("cleared a retained topic of another game", topic=topic)


def _seq(payload: bytes) -> int:
    """The ``seq`` of a retained payload, 0 when it has none."""
    try:
        data = json.loads(payload)
    except ValueError:
        return 0
    seq = data.get("seq") if isinstance(data, dict) else None
    return seq if isinstance(seq, int) and not isinstance(seq, bool) else 0
