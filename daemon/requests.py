"""The requests of mqtt-api.md ("Requests"): parse, validate, answer.

A request arrives on ``<base>/request/<name>`` as a JSON object with ``operator`` (who
decides; required) and optionally ``request_id``; the answer goes to
``<base>/response/<name>`` (``ResponseBody``, built by ``response_publication``: the
requests and their answers live here together). ``parse_request`` checks the form of a
request and turns it into a ``Request``: its ``request_id`` (read once) and the
``rules.events.Decision`` it asks for; whether the decision is legal now (is the roll pending?
is it still the latest?) is the rules' check (``rules.errors.DecisionError``), which the
daemon answers with an error response in the same way. A bad request changes nothing.

Choices where the spec is silent (documented in docs/auditors/choices.md):

* ``request_id`` may be a string or an integer; it is echoed as it came, null if absent.
* ``roll_id`` is the dice reader's id, 1 to 999999 (dice-reader-icd.md), as a JSON integer
  or a string of digits; ``clause`` is 2, 3 or 6 as a number or a string ("2").
* Unknown fields are an error (a misspelt field must not be silently ignored).
* ``operator`` is trimmed, 1 to 100 characters, no control characters (it is kept in the
  table's record with the decision).
* A request payload is at most 4096 bytes of UTF-8 (mqtt-api.md).

What arrives is bounded before anything else looks at it (``Incoming.receive``): a payload
over 4 KiB is kept only as its size, SHA-256 and first 256 bytes, and ``classify`` sorts a
name into a known request, an unknown name that can be answered (``[a-z0-9_]{1,64}``, on
``response/<name>``), or a name of any other shape, which is dropped and counted (it may
not be answerable on a valid topic; mqtt-api.md "Requests").
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from pydantic import ValidationError

from contract.payloads import Publication, built
from contract.requests import (
    HEAD_BYTES,
    MAX_PAYLOAD,
    NAME_KEPT,
    NAME_MAX,
    NAME_PATTERN,
    NAMES_TEXT,
    REQUEST_MODELS,
    USER_LEVEL,
    USER_PATTERN,
    AlarmAckRequest,
    AuthenticateRequest,
    ComponentHmac,
    OverturnRequest,
    RequestBase,
    ResendRequest,
    ResponseBody,
    RollDecisionRequest,
    VoidRollRequest,
)
from foundation import strict_json
from rules.events import (
    AlarmAcknowledged,
    RollDecided,
    RollVoided,
    TableDecision,
    VoidOverturned,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Incoming:
    """A request as received, already bounded: a name of the right shape and a payload
    within ``MAX_PAYLOAD`` are kept whole; otherwise only their first characters or bytes,
    with their length and (for a payload) its SHA-256."""

    name: str
    name_length: int
    payload: bytes
    size: int
    sha256: str
    retained: bool = False
    """Published with the retain flag (seen through an MQTT 5 retain-as-published
    subscription): never acted on (``RETAINED_ERROR``)."""
    busy: int = 0
    """0: a request to serve. Above 0: refused unread because requests came faster than the
    table serves them (``daemon.intake``), to be answered busy; it stands for this many
    refusals, itself included (those only counted since the last busy answer)."""
    user: str | None = None
    """The user level of ``request/<name>/<user>`` (mqtt-api.md 1.4: the broker lets each
    user publish at its own name only); None for the bare ``request/<name>``."""

    @classmethod
    def receive(
        cls, name: str, payload: bytes, *, retained: bool = False, user: str | None = None
    ) -> Incoming:
        """Bound a request as it comes off the wire (before any parsing)."""
        oversize = len(payload) > MAX_PAYLOAD
        return cls(
            name=name if len(name) <= NAME_KEPT else name[:NAME_KEPT],
            name_length=len(name),
            payload=payload[:HEAD_BYTES] if oversize else payload,
            size=len(payload),
            sha256=hashlib.sha256(payload).hexdigest(),
            retained=retained,
            user=None if user is None else user[:NAME_KEPT],
        )

    @property
    def oversize(self) -> bool:
        """More than ``MAX_PAYLOAD`` bytes: refused before any JSON parsing."""
        return self.size > MAX_PAYLOAD

    def summary(self) -> dict[str, object]:
        """What the journal keeps of a refused or dropped request (bounded)."""
        return {
            "name": self.name,
            "name_length": self.name_length,
            "size": self.size,
            "sha256": self.sha256,
            "head": self.payload[:HEAD_BYTES].decode("utf-8", "replace"),
            **({"retained": True} if self.retained else {}),
            **({"user": self.user} if self.user is not None else {}),
        }


RETAINED_ERROR = (
    "a retained request is never acted on: publish it without retain (the broker would "
    "hand it to the table again at every reconnect); it has been cleared from the broker"
)
"""The answer to a request published with retain."""


Kind = Literal["known", "unknown", "malformed"]


def classify(name: str) -> Kind:
    """``known``: a request of mqtt-api.md; ``unknown``: a name of the right shape that is
    not one (answered with an error); ``malformed``: any other name (dropped, counted)."""
    if name in REQUEST_MODELS:
        return "known"
    return "unknown" if NAME_PATTERN.fullmatch(name) else "malformed"


def unknown_request_error(name: str) -> str:
    """The error answered to a request name of the right shape that is not a request."""
    return f"unknown request {name!r}: the requests are {NAMES_TEXT}"


class DropCounter:
    """Counts dropped requests and says when to report them: at the first drop, then at
    most once per ``interval`` (a report carries the count since the last one and the
    first dropped request of that interval, bounded)."""

    def __init__(self, interval: timedelta = timedelta(minutes=1)) -> None:
        self.interval = interval
        self.total = 0
        self._count = 0
        self._first: dict[str, object] | None = None
        self._reported_at: datetime | None = None

    def add(
        self, incoming: Incoming, reason: str, at: datetime, *, count: int = 1
    ) -> dict[str, object] | None:
        """Count ``count`` drops (``incoming`` the one seen of them); returns a report when
        one is due."""
        self.total += count
        self._count += count
        if self._first is None:
            self._first = {**incoming.summary(), "reason": reason}
        return self.due(at)

    def due(self, at: datetime) -> dict[str, object] | None:
        """A report of the drops not yet reported, if there are some and one is due."""
        if not self._count:
            return None
        if self._reported_at is not None and at - self._reported_at < self.interval:
            return None
        report: dict[str, object] = {
            "count": self._count,
            "total": self.total,
            "first": self._first,
        }
        self._count = 0
        self._first = None
        self._reported_at = at
        return report


def request_id_of(payload: bytes) -> str | int | None:
    """The ``request_id`` of a request that is not otherwise read (refused for the rate, or
    retained), for its answer: None unless the payload is a JSON object within
    ``MAX_PAYLOAD`` with a string or integer ``request_id``."""
    if len(payload) > MAX_PAYLOAD:
        return None
    try:
        data: Any = strict_json.loads(payload.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    raw = data.get("request_id") if isinstance(data, dict) else None
    return raw if isinstance(raw, str | int) and not isinstance(raw, bool) else None


def malformed_reason(name: str, length: int) -> str:
    """Why a name is of the wrong shape, in words for the log and the journal."""
    if length == 0:
        return "an empty request name"
    if length > NAME_MAX:
        return f"a request name of {length} characters (at most {NAME_MAX})"
    return "a request name with characters other than a-z, 0-9 and _"


class RequestError(ValueError):
    """A request that is not well formed. ``message`` is a sentence for a person (it goes in
    the error response); ``request_id`` is the request's own id when it could be read."""

    def __init__(self, message: str, request_id: str | int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.request_id = request_id


def _describe(exc: ValidationError, name: str, model: type[RequestBase]) -> str:
    problems: list[str] = []
    for error in exc.errors():
        field = ".".join(str(part) for part in error["loc"]) or "the request"
        kind = error["type"]
        if kind == "missing":
            if field == "operator":
                problems.append("operator is missing: say who decides")
            else:
                problems.append(f"{field} is missing")
        elif kind == "extra_forbidden":
            known = ", ".join(model.model_fields)
            problems.append(f"unknown field {field!r} in {name} (its fields: {known})")
        elif kind == "value_error":
            problems.append(str(error["ctx"]["error"]))
        else:  # a pydantic check the before-validators did not already word
            problems.append(f"{field}: {error['msg']}")
    return "; ".join(problems)


@dataclass(frozen=True, slots=True, kw_only=True)
class Request:
    """A well-formed request: its name, its own id (echoed in the response) and the
    decision it asks for."""

    name: str
    request_id: str | int | None
    decision: TableDecision


def parse_request(name: str, payload: bytes, *, at: datetime) -> Request:
    """The request and the decision it asks for. ``at`` is when it was received (the rules
    never read a clock). Raises ``RequestError`` with a sentence saying what is wrong, and
    the request's ``request_id`` when it could be read, for the error response."""
    request, request_id = validate_request(name, payload)
    return Request(name=name, request_id=request_id, decision=_decision(request, at))


def validate_request(name: str, payload: bytes) -> tuple[RequestBase, str | int | None]:
    """The request model of ``name`` read from ``payload``, and its ``request_id`` (the
    checks of ``parse_request``, for a request that asks no decision: ``resend``)."""
    if len(payload) > MAX_PAYLOAD:
        raise RequestError(
            f"the request is {len(payload)} bytes; at most {MAX_PAYLOAD} bytes are allowed"
        )
    try:
        text = payload.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RequestError(f"the request is not UTF-8 text: {exc.reason}") from exc
    try:
        data: Any = strict_json.loads(text)
    except (json.JSONDecodeError, ValueError, RecursionError) as exc:
        raise RequestError(f"the request is not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        kind = {list: "a list", str: "a string", type(None): "null", bool: "true or false"}.get(
            type(data), "a number"
        )
        raise RequestError(f"the request must be a JSON object, got {kind}")
    raw_id = data.get("request_id")
    request_id = raw_id if isinstance(raw_id, str | int) and not isinstance(raw_id, bool) else None
    model = REQUEST_MODELS.get(name)
    if model is None:
        raise RequestError(unknown_request_error(name), request_id)
    try:
        request = model.model_validate(data)
    except ValidationError as exc:
        raise RequestError(
            f"bad {name} request: {_describe(exc, name, model)}", request_id
        ) from exc
    return request, request_id


def _decision(request: RequestBase, at: datetime) -> TableDecision:
    match request:
        case RollDecisionRequest():
            return RollDecided(
                roll_id=request.roll_id,
                valid=request.decision == "valid",
                operator=request.operator,
                at=at,
            )
        case VoidRollRequest():
            return RollVoided(
                roll_id=request.roll_id,
                clause=request.clause,
                operator=request.operator,
                at=at,
            )
        case OverturnRequest():
            return VoidOverturned(roll_id=request.roll_id, operator=request.operator, at=at)
        case AlarmAckRequest():
            return AlarmAcknowledged(code=request.alarm, operator=request.operator, at=at)
    raise AssertionError(f"no decision for {type(request).__name__}")  # pragma: no cover


@dataclass(frozen=True, slots=True, kw_only=True)
class Refused:
    """A request answered with an error, changing nothing: the sentence for a person, and
    the request's own id when it could be read."""

    request_id: str | int | None
    error: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Dropped:
    """A request that cannot be answered (its name is of no answerable shape): counted
    (``DropCounter``), with why in words."""

    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ResendAsked:
    """A well-formed ``request/resend``: it asks no decision of the rules (the table
    publishes again from its journal, ``TableCore._resend``)."""

    request_id: str | int | None
    request: ResendRequest


@dataclass(frozen=True, slots=True, kw_only=True)
class AuthenticateAsked:
    """A well-formed ``request/authenticate`` (mqtt-api.md 1.4): it asks no decision of the
    rules; the shell reads the components off the event loop and the core answers
    (``TableCore.authenticated``)."""

    request_id: str | int | None
    request: AuthenticateRequest


Admitted = Request | ResendAsked | AuthenticateAsked | Refused | Dropped


def admit(incoming: Incoming, *, at: datetime) -> Admitted:
    """What becomes of a request as received (``at``: when), in this order, before anything
    parses the payload: a name of any shape but ``[a-z0-9_]{1,64}`` is dropped, and so is a
    user level on a request that has none, or that is not a user's name; a retained
    request is refused (never acted on: ``RETAINED_ERROR``); a payload over ``MAX_PAYLOAD``
    is refused with its size; then the form (``parse_request``: an unknown name of the
    right shape is refused too, with the request's own id when it can be read). Whether
    the decision is legal now is the rules' to say."""
    name = incoming.name
    if classify(name) == "malformed":
        return Dropped(reason=malformed_reason(name, incoming.name_length))
    if incoming.user is not None and (
        name not in USER_LEVEL or not USER_PATTERN.fullmatch(incoming.user)
    ):
        # Only USER_LEVEL requests are subscribed at a user level, and a user name is one
        # of USER_PATTERN's (what the generators name users): anything else came from a
        # broker without an ACL, and cannot be told apart from a forged name.
        return Dropped(reason="a user level that is not a user's name, or not for this request")
    if incoming.retained:
        # A retained request would be handed to the table again at every reconnect: it is
        # never acted on, and the link has cleared it from the broker.
        request_id = request_id_of(incoming.payload)  # None when over the size
        return Refused(request_id=request_id, error=RETAINED_ERROR)
    if incoming.oversize:
        error = f"the request is {incoming.size} bytes; at most {MAX_PAYLOAD} bytes are allowed"
        return Refused(request_id=None, error=error)
    try:
        if name == "resend":
            request, request_id = validate_request(name, incoming.payload)
            if not isinstance(request, ResendRequest):
                raise TypeError("validate_request('resend') returned another request")
            return ResendAsked(request_id=request_id, request=request)
        if name == "authenticate":
            request, request_id = validate_request(name, incoming.payload)
            if not isinstance(request, AuthenticateRequest):
                raise TypeError("validate_request('authenticate') returned another request")
            return AuthenticateAsked(request_id=request_id, request=request)
        return parse_request(name, incoming.payload, at=at)
    except RequestError as exc:
        return Refused(request_id=exc.request_id, error=str(exc))


def response_publication(
    name: str,
    request_id: str | int | None,
    error: str | None,
    *,
    table: str,
    sent: int | None = None,
    missing_before: int | None = None,
    seed: str | None = None,
    digest: str | None = None,
    components: list[ComponentHmac] | None = None,
) -> Publication:
    """``response/<name>``: ``status`` ok when ``error`` is None, else error with the
    sentence; ``request_id`` echoed as it came; ``sent`` and ``missing_before`` for
    ``resend``, ``seed``, ``digest`` and ``components`` for ``authenticate`` (null for the
    other requests)."""
    body = ResponseBody(
        table=table,
        request_id=request_id,
        status="ok" if error is None else "error",
        error=error,
        sent=sent,
        missing_before=missing_before,
        seed=seed,
        digest=digest,
        components=components,
    )
    return Publication(f"response/{name}", False, built(f"response/{name}", body))
