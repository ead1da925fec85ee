"""The requests of mqtt-api.md ("Requests") and their responses, as the contract declares them.

A request arrives on ``<base>/request/<name>`` as a JSON object with ``operator`` (who
decides; required) and optionally ``request_id``; the answer goes to
``<base>/response/<name>`` (``ResponseBody``). The models here say what a well-formed
request is; the daemon (``daemon.requests``) bounds what arrives, parses it with them and
turns it into the decision the rules check. A pit terminal or a web server builds its
requests with the same models, so what it sends is what the table accepts.

Choices where the spec is silent (documented in the README):

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
from typing import Annotated, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from contract.payloads import Envelope, PayloadModel, TableId, Text

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
        raise ValueError(f"roll_id must be a roll id from 1 to 999999, got {_shown(value)}")
    if isinstance(value, str) and value.isascii() and value.isdigit():
        value = int(value)
    if not isinstance(value, int) or not 1 <= value <= 999999:
        raise ValueError(f"roll_id must be a roll id from 1 to 999999, got {_shown(value)}")
    return value


class OperatorRequest(BaseModel):
    """What every request deciding something holds: ``operator`` and ``request_id``."""

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


class RequestModel(OperatorRequest):
    """A request about a roll (the stickperson's): ``roll_id`` besides."""

    roll_id: int = Field(ge=1, le=999999, description="the dice reader's roll id")

    @field_validator("roll_id", mode="before")
    @classmethod
    def _roll(cls, value: object) -> int:
        return _roll_id(value)


class RollDecisionRequest(RequestModel):
    """``request/roll_decision``: decide a pending ``CHECK`` roll (dice-reader-icd.md)."""

    decision: Literal["valid", "invalid"]

    @field_validator("decision", mode="before")
    @classmethod
    def _decision(cls, value: object) -> str:
        if value not in ("valid", "invalid"):
            raise ValueError(f'decision must be "valid" or "invalid", got {_shown(value)}')
        assert isinstance(value, str)
        return value


class VoidRollRequest(RequestModel):
    """``request/void_roll``: declare the latest counted roll invalid under 68 IAC
    10-4-4(c)(2), (3) or (6), the clauses the reader cannot see (dice-reader-icd.md)."""

    clause: Annotated[int, Field(description="2, 3 or 6 (a number or a string)")]

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


ALARM_CODE: Final = re.compile(r"[A-Z][A-Z0-9_]{0,79}")
"""An alarm code as the table raises them (``MODE_MISMATCH``, ``DEVICE_FAULT_JAM``)."""


class AlarmAckRequest(OperatorRequest):
    """``request/alarm_ack`` (mqtt-api.md 1.3): a pit user acknowledges the active alarm
    ``alarm`` (its code). The alarm stays until it clears; it changes no payout."""

    alarm: str = Field(description="the code of an active alarm")

    @field_validator("alarm", mode="before")
    @classmethod
    def _alarm(cls, value: object) -> str:
        if not isinstance(value, str) or not ALARM_CODE.fullmatch(value):
            raise ValueError(f"alarm must be an alarm's code (MODE_MISMATCH), got {_shown(value)}")
        return value


REQUEST_MODELS: Final[dict[str, type[OperatorRequest]]] = {
    "roll_decision": RollDecisionRequest,
    "void_roll": VoidRollRequest,
    "overturn": OverturnRequest,
    "alarm_ack": AlarmAckRequest,
}
"""Every request of mqtt-api.md by name."""

REQUEST_NAMES: Final = tuple(REQUEST_MODELS)

NAMES_TEXT: Final = "roll_decision, void_roll, overturn or alarm_ack"


# ---------------------------------------------------------------------------------------
# Responses


class ResponseBody(PayloadModel):
    """``response/<name>`` (not retained): the answer to a request."""

    table: TableId
    request_id: str | int | None = Field(description="the request's own, echoed; null if none")
    status: Literal["ok", "error"]
    error: Text | None = Field(description="for error: a sentence a person understands")

    @model_validator(mode="after")
    def _consistent(self) -> ResponseBody:
        if (self.status == "error") != (self.error is not None):
            raise ValueError("an error response says why, and an ok response has no error")
        return self


class ResponseMessage(ResponseBody, Envelope):
    """``response/<name>`` as published."""
