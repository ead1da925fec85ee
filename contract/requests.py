"""The requests of mqtt-api.md ("Requests") and their responses, as the contract declares them.

A request arrives on ``<base>/request/<name>`` as a JSON object with ``operator`` (who
decides; required) and optionally ``request_id``; the answer goes to
``<base>/response/<name>`` (``ResponseBody``). The models here say what a well-formed
request is; the daemon (``daemon.requests``) bounds what arrives, parses it with them and
turns it into the decision the rules check. A pit terminal or a web server builds its
requests with the same models, so what it sends is what the table accepts.

Choices where the spec is silent (documented in docs/auditors/choices.md):

* ``request_id`` may be a string or an integer; it is echoed as it came, null if absent.
* ``roll_id`` is the dice reader's id, 1 to 999999 (dice-reader-icd.md), as a JSON integer
  or a string of digits; ``clause`` is 2, 3 or 6 as a number or a string ("2").
* Unknown fields are an error (a misspelt field must not be silently ignored).
* ``operator`` is trimmed, 1 to 100 characters, no control characters (it is kept in the
  table's record with the decision).
* A request payload is at most 4096 bytes of UTF-8 (mqtt-api.md).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Annotated, ClassVar, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from contract.payloads import Envelope, HexDigest, PayloadModel, TableId, Text
from rules.events import MAX_ID, VoidClause

MAX_PAYLOAD: Final = 4096
MAX_OPERATOR: Final = 100
HEAD_BYTES: Final = 256
"""How much of a refused oversize payload is kept for the record."""
NAME_MAX: Final = 64
NAME_PATTERN: Final = re.compile(rf"[a-z0-9_]{{1,{NAME_MAX}}}")
"""The shape of a request name (mqtt-api.md "Requests")."""
NAME_KEPT: Final = 80
"""How much of a name of another shape is kept for the record."""


def _shown(value: object) -> str:
    """A received value as JSON writes it (``true``, ``"x"``), shortened for a sentence."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _roll_id(value: object) -> int:
    if isinstance(value, bool):  # bool is an int in Python, never a roll id
        raise ValueError(f"roll_id must be a roll id from 1 to {MAX_ID}, got {_shown(value)}")
    if isinstance(value, str) and value.isascii() and value.isdigit():
        value = int(value)
    if not isinstance(value, int) or not 1 <= value <= MAX_ID:
        raise ValueError(f"roll_id must be a roll id from 1 to {MAX_ID}, got {_shown(value)}")
    return value


class RequestBase(BaseModel):
    """What every request holds: ``operator`` (required) and ``request_id``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    operator: str = Field(
        min_length=1, max_length=MAX_OPERATOR, description="who decides (kept in the record)"
    )
    request_id: str | int | None = Field(
        default=None, description="echoed in the response; string or integer"
    )

    @field_validator("operator", mode="before")
    @classmethod
    def _operator(cls, value: object) -> str:
        if not isinstance(value, str):
            raise ValueError(f"operator must be text naming who decides, got {_shown(value)}")
        value = value.strip()
        if not value:
            raise ValueError("operator is empty: say who decides")
        if len(value) > MAX_OPERATOR:
            raise ValueError(f"operator is longer than {MAX_OPERATOR} characters")
        if any(not ch.isprintable() for ch in value):
            raise ValueError("operator contains control characters")
        return value

    @field_validator("request_id", mode="before")
    @classmethod
    def _request_id(cls, value: object) -> str | int | None:
        if value is None or (isinstance(value, str | int) and not isinstance(value, bool)):
            return value
        raise ValueError(f"request_id must be a string or an integer, got {_shown(value)}")


class RequestModel(RequestBase):
    """A stickperson's decision about a roll: ``roll_id`` and what the request says."""

    roll_id: int = Field(ge=1, le=MAX_ID, description="the dice reader's roll id")

    @field_validator("roll_id", mode="before")
    @classmethod
    def _roll(cls, value: object) -> int:
        return _roll_id(value)


class RollDecisionRequest(RequestModel):
    """``request/roll_decision``: decide a pending ``CHECK`` roll (dice-reader-icd.md)."""

    EFFECT: ClassVar[str] = "decides the pending `CHECK` roll"

    decision: Literal["valid", "invalid"]

    @field_validator("decision", mode="before")
    @classmethod
    def _decision(cls, value: object) -> str:
        if not isinstance(value, str) or value not in ("valid", "invalid"):
            raise ValueError(f'decision must be "valid" or "invalid", got {_shown(value)}')
        return value


class VoidRollRequest(RequestModel):
    """``request/void_roll``: declare the latest counted roll invalid under 68 IAC
    10-4-4(c)(2), (3) or (6), the clauses the reader cannot see (dice-reader-icd.md)."""

    EFFECT: ClassVar[str] = (
        "declares the latest counted roll invalid under 68 IAC 10-4-4(c)(2), (3) or (6)"
    )

    clause: Annotated[VoidClause, Field(description="`2`, `3` or `6` (a number or a string)")]

    @field_validator("clause", mode="before")
    @classmethod
    def _clause(cls, value: object) -> int:
        # 68 IAC 10-4-4(c)(2), (3), (6): the only clauses a stickperson declares by hand.
        if type(value) is int and value in (2, 3, 6):
            return value
        if isinstance(value, str) and value in ("2", "3", "6"):
            return int(value)
        raise ValueError(
            "clause must be 2, 3 or 6 (68 IAC 10-4-4(c)(2) another patron threw, "
            f"(3) dice not released together, (6) no pass or don't pass bet), got {_shown(value)}"
        )


class OverturnRequest(RequestModel):
    """``request/overturn``: reinstate the latest roll declared invalid (4-4(c), last
    sentence)."""

    EFFECT: ClassVar[str] = "reinstates the latest roll declared invalid"


RESEND_SPAN: Final = 1000
"""``to_seq - from_seq`` at most (mqtt-api.md 1.3 "at most 1,000 apart")."""

USER_LEVEL: Final = frozenset({"resend", "authenticate"})
"""Requests a read-only user publishes with its user name as one more topic level,
``<base>/request/<name>/<user>`` (mqtt-api.md 1.4): the broker grants each user its own
name only, so the table knows who asks and can budget per user. The bare
``request/<name>`` stays for ``terminal``."""

USER_PATTERN: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
"""The shape of a user at the user level: what ``lammer broker-config`` and
``lammer floor-config`` name their users, one topic level without a wildcard."""

BARE_USER: Final = "terminal"
"""Whose budget a bare ``request/resend`` counts against: on a secured broker only
``terminal`` may publish it (mqtt-api.md 1.4)."""

COPY_BUDGET: Final = 2000
"""Copies a table publishes for one user's resends in any 60 s (``COPY_BUDGETS`` names the
users with another figure). A choice where mqtt-api.md 1.4 says only "may budget copies
per user": bounds what a flood from the shared ``display`` credential costs a table, and
twice what a display's gap fill of 1,000 seqs needs."""

COPY_BUDGETS: Final[Mapping[str, int]] = MappingProxyType({"records": 12_000})
"""Users with a budget other than ``COPY_BUDGET``, per 60 s: ``records`` backfills whole
gaming days (a craps table publishes about 2.5 messages a roll, 381 for 150 rolls in
tests/integration/test_resend_flood.py: a busy day of 4,320 rolls is about 11,000 messages,
a minute of budget; a day at the simulators' full pace, a roll every 4 s, about 55,000,
under 5 minutes), and its password stays on one server, not on every screen."""


def copy_budget(user: str) -> int:
    """Copies a table publishes for ``user``'s resends in any 60 s."""
    return COPY_BUDGETS.get(user, COPY_BUDGET)


def request_topic(base: str, name: str, user: str | None = None) -> str:
    """Where to publish request ``name`` to the table at ``base``: at ``user``'s own level
    for a request of ``USER_LEVEL`` (mqtt-api.md 1.4), bare when ``user`` is None (a
    terminal, or a broker without logins). Raises ``ValueError`` for a user that cannot be
    one topic level (``USER_PATTERN``)."""
    if user is None or name not in USER_LEVEL:
        return f"{base}/request/{name}"
    if not USER_PATTERN.fullmatch(user):
        raise ValueError(
            f"user {user[:80]!r} cannot be a request's topic level: 1 to 64 letters, digits, "
            "'_', '.' or '-', starting with a letter or digit"
        )
    return f"{base}/request/{name}/{user}"


def _matching(name: str, pattern: re.Pattern[str], value: object, expected: str) -> str:
    """``value`` when it is text ``pattern`` matches whole; else ``ValueError`` saying that
    ``name`` must be ``expected`` and what came instead."""
    if not isinstance(value, str) or not pattern.fullmatch(value):
        raise ValueError(f"{name} must be {expected}, got {_shown(value)}")
    return value


def _seq_field(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a seq, an integer from 1, got {_shown(value)}")
    return value


class ResendRequest(RequestBase):
    """``request/resend`` (mqtt-api.md 1.3): publish again, from the journal, every message
    with ``from_seq <= seq <= to_seq``. Any reader of the table may ask."""

    EFFECT: ClassVar[str] = (
        "publishes again, from the journal, the messages with a seq in the range (non-retained, "
        "the same bytes, marked resent; at most a few a second)"
    )

    from_seq: int = Field(ge=1, description="the first seq to publish again")
    to_seq: int = Field(ge=1, description=f"the last; at most {RESEND_SPAN} above from_seq")

    @field_validator("from_seq", mode="before")
    @classmethod
    def _from(cls, value: object) -> int:
        return _seq_field("from_seq", value)

    @field_validator("to_seq", mode="before")
    @classmethod
    def _to(cls, value: object) -> int:
        return _seq_field("to_seq", value)

    @model_validator(mode="after")
    def _span(self) -> ResendRequest:
        if self.to_seq < self.from_seq:
            raise ValueError(
                f"to_seq ({self.to_seq}) is below from_seq ({self.from_seq}): "
                "ask for a range from from_seq up to to_seq"
            )
        if self.to_seq - self.from_seq > RESEND_SPAN:
            raise ValueError(
                f"from_seq {self.from_seq} to to_seq {self.to_seq} is more than "
                f"{RESEND_SPAN} apart: ask for it in parts"
            )
        return self


SEED_HEX: Final = re.compile(r"(?:[0-9a-fA-F]{2}){16,64}")
"""A seed of ``request/authenticate``: 16 to 64 bytes in hex (mqtt-api.md 1.4)."""


class AuthenticateRequest(RequestBase):
    """``request/authenticate`` (mqtt-api.md 1.4): the table reads its critical components
    now and answers with each one's HMAC-SHA256 under ``seed`` and the whole's
    (``contract.software``). The terminal (bare) and ``records``
    (``request/authenticate/records``) may ask; ``display`` may not."""

    EFFECT: ClassVar[str] = (
        "reads the installed software now and answers each component's HMAC-SHA256 under the "
        "seed and the whole's (at most one at a time, a few a minute per user)"
    )

    seed: str = Field(description="the verifier's fresh seed: 16 to 64 bytes, hex")

    @field_validator("seed", mode="before")
    @classmethod
    def _seed(cls, value: object) -> str:
        hex_text = "16 to 64 bytes written in hex (32 to 128 hex digits)"
        return _matching("seed", SEED_HEX, value, hex_text).lower()


ALARM_CODE: Final = re.compile(r"[A-Z][A-Z0-9_]{0,79}")
"""An alarm code as the table raises them (``MODE_MISMATCH``, ``DEVICE_FAULT_JAM``)."""


class AlarmAckRequest(RequestBase):
    """``request/alarm_ack`` (mqtt-api.md 1.3): a pit user acknowledges the active alarm
    ``alarm`` (its code). The alarm stays until it clears; it changes no payout."""

    EFFECT: ClassVar[str] = (
        "acknowledges an active alarm: it stays until it clears, with who and when; "
        "no payout changes"
    )

    alarm: str = Field(description="the code of an active alarm")

    @field_validator("alarm", mode="before")
    @classmethod
    def _alarm(cls, value: object) -> str:
        return _matching("alarm", ALARM_CODE, value, "an alarm's code (MODE_MISMATCH)")


REQUEST_MODELS: Final[dict[str, type[RequestBase]]] = {
    "roll_decision": RollDecisionRequest,
    "void_roll": VoidRollRequest,
    "overturn": OverturnRequest,
    "resend": ResendRequest,
    "alarm_ack": AlarmAckRequest,
    "authenticate": AuthenticateRequest,
}
"""Every request of mqtt-api.md by name."""

REQUEST_NAMES: Final = tuple(REQUEST_MODELS)

NAMES_TEXT: Final = "roll_decision, void_roll, overturn, resend, alarm_ack or authenticate"


# ---------------------------------------------------------------------------------------
# Responses

RESPONSE_LEVEL: Final = "response"
"""Where a table answers its requests: ``<base>/response/<name>``, one level below this."""

MAX_COMPONENTS: Final = 5000
"""Components an ``authenticate`` answer may list (a release has a few hundred)."""


class ComponentHmac(PayloadModel):
    """One component of an ``authenticate`` answer: its path and its HMAC under the seed."""

    path: Annotated[str, Field(min_length=1, max_length=300)]
    hmac: HexDigest


class ResponseBody(PayloadModel):
    """``response/<name>`` (not retained): the answer to a request."""

    WHEN: ClassVar[str] = "the answer to a request on `request/<name>`"

    table: TableId
    # Bounded by the request's own bound: whatever a request could carry is echoed.
    request_id: Annotated[str, Field(max_length=MAX_PAYLOAD)] | int | None = Field(
        default=None, description="as it came, `null` if none or not readable"
    )
    status: Literal["ok", "error"]
    error: Text | None = Field(
        default=None, description="for `error`: a sentence a person understands; `null` for `ok`"
    )
    # resend (mqtt-api.md 1.3); null for the other requests.
    sent: int | None = Field(
        default=None, ge=0, description="resend: how many messages were published again"
    )
    missing_before: int | None = Field(
        default=None,
        ge=1,
        description="resend: every seq of the range below this one is no longer in the "
        "journal; `null` if none is gone",
    )
    # authenticate (mqtt-api.md 1.4); null for the other requests.
    seed: Annotated[str, Field(pattern=r"^[0-9a-f]{32,128}$")] | None = Field(
        default=None, description="authenticate: the seed asked with, echoed (lowercase hex)"
    )
    digest: HexDigest | None = Field(
        default=None,
        description="authenticate: HMAC-SHA256 under the seed over the sorted list of the "
        "components' HMACs",
    )
    components: Annotated[list[ComponentHmac], Field(max_length=MAX_COMPONENTS)] | None = Field(
        default=None,
        description="authenticate: `[{path, hmac}]`, each component's HMAC-SHA256 under the "
        "seed, sorted by path",
    )

    @model_validator(mode="after")
    def _consistent(self) -> ResponseBody:
        if (self.status == "error") != (self.error is not None):
            raise ValueError("an error response says why, and an ok response has no error")
        return self


class ResponseMessage(ResponseBody, Envelope):
    """``response/<name>`` as published."""
