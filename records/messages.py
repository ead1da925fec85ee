"""A received MQTT message, checked against the contract, as the store keeps it.

``parse(table, topic, payload)`` takes a topic relative to the table's base topic and the
payload bytes; it returns a ``Message`` (every JSON payload, checked as the feed checks it
before it can count, ``contract.feed.admitted``: the contract's typed message, which the
store reads by attribute, and the JSON object as published, which it keeps), an
``Availability`` (plain text, no seq), or a ``Request`` (a request seen on the floor: its
operator, for the decisions report). Anything else raises
``MessageError`` with one sentence; it is never stored. ``released(table, message)`` is
the same ``Message`` of one the feed released, which the feed already parsed: not parsed
again.

Consumers accept fields they do not know (mqtt-api.md: "add topics and fields freely"), so
a newer table's additions are kept in the stored payload (and not typed by the check); the
``resent: true`` key that marks a resend under MQTT 3.1.1 (mqtt-api.md 1.3, ``resend``) is
removed, so a resent message stores exactly as the original.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from contract.feed import Message as Released
from contract.feed import admitted
from contract.payloads import MAX_PAYLOAD as MAX_PAYLOAD  # what records.backfill bounds too
from contract.payloads import Envelope, PayloadError, decode
from contract.topics import REQUEST, Topic, request_name
from records.errors import MessageError

RESENT_KEY: Final = "resent"


@dataclass(frozen=True, slots=True, kw_only=True)
class Message:
    """A JSON message of a table: its seq, ts, topic, the payload as published (the JSON
    object the store keeps) and ``body``, the contract's typed message of it (a
    ``contract.payloads.TOPICS`` model, or ``ResponseMessage``): what the store reads."""

    table: str
    seq: int
    ts: str
    topic: str
    payload: dict[str, Any]
    body: Envelope


@dataclass(frozen=True, slots=True, kw_only=True)
class Availability:
    """``availability``: ``online`` or ``offline``."""

    table: str
    status: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Request:
    """A request seen on ``request/<name>``: who asked for what (it has no seq)."""

    table: str
    name: str
    request_id: str | None
    operator: str | None
    payload: dict[str, Any]


Received = Message | Availability | Request


def _json_object(payload: bytes) -> dict[str, Any]:
    """A request's JSON object, decoded as the contract decodes every payload."""
    try:
        return decode(payload)
    except PayloadError as exc:
        raise MessageError(_sentence(REQUEST, payload, exc), kind=exc.reason) from None


def _sentence(topic: str, payload: bytes, exc: PayloadError) -> str:
    """What is wrong with a payload the contract refused, in one sentence."""
    if exc.reason == "too_large":
        return f"a payload of {len(payload)} bytes is larger than any table sends"
    if exc.reason == "not_json":
        return f"the payload is not JSON ({exc.detail[:160]})"
    return f"{topic[:80]}: {exc.detail}"


def parse(table: str, topic: str, payload: bytes) -> Received:
    """The message ``payload`` received on ``<base>/<topic>`` of ``table``, checked."""
    if topic == Topic.AVAILABILITY:
        status = payload.decode("utf-8", "replace")
        if status not in ("online", "offline"):
            raise MessageError(
                f"availability is online or offline, not {status[:40]!r}", kind="availability"
            )
        return Availability(table=table, status=status)
    name = request_name(topic)
    if name is not None:
        data = _json_object(payload)
        operator = data.get("operator")
        request_id = data.get("request_id")
        return Request(
            table=table,
            name=name,
            request_id=None if request_id is None else str(request_id)[:200],
            operator=operator.strip()[:100] if isinstance(operator, str) else None,
            payload=data,
        )
    # The check the feed makes before a message can count (contract.feed.admitted): one
    # code path for every consumer of the contract.
    try:
        data, checked = admitted(table, topic, payload)
    except PayloadError as exc:
        raise MessageError(_sentence(topic, payload, exc), kind=exc.reason) from None
    return _stored(table, topic, data, checked)


def released(table: str, message: Released) -> Message:
    """The ``Message`` of one the feed released (``contract.feed.Message``): checked and
    parsed by the feed already, so neither decoded nor parsed again."""
    return _stored(table, message.topic, dict(message.body), message.parsed)


def _stored(table: str, topic: str, data: dict[str, Any], checked: Envelope) -> Message:
    data.pop(RESENT_KEY, None)
    return Message(
        table=table, seq=checked.seq, ts=checked.ts, topic=topic, payload=data, body=checked
    )
