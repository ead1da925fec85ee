"""Requests of mqtt-api.md ("Requests"): parsed into decisions, or refused with a sentence."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contract.requests import REQUEST_MODELS, REQUEST_NAMES, ResendRequest
from daemon.requests import (
    RETAINED_ERROR,
    Dropped,
    Incoming,
    Refused,
    Request,
    RequestError,
    ResendAsked,
    admit,
    parse_request,
    request_id_of,
    response_publication,
)
from rules.events import AlarmAcknowledged, RollDecided, RollVoided, VoidOverturned
from tests import strategies as s
from tests.spec_mqtt import SpecViolation, check_message

AT = datetime(2026, 11, 29, 14, 3, 7, 123000, tzinfo=UTC)


def parse(name: str, body: Any) -> Any:
    """The decision a request asks for (its ``request_id`` is checked where it matters)."""
    payload = body if isinstance(body, bytes) else json.dumps(body).encode()
    return parse_request(name, payload, at=AT).decision


def test_roll_decision() -> None:
    decided = parse(
        "roll_decision",
        {"operator": " Ann (stick) ", "roll_id": 5003, "decision": "invalid", "request_id": "r1"},
    )
    assert decided == RollDecided(roll_id=5003, valid=False, operator="Ann (stick)", at=AT)
    request = parse_request(
        "overturn", b'{"operator": "Ann", "roll_id": 7, "request_id": 7}', at=AT
    )
    assert (request.name, request.request_id) == ("overturn", 7)  # read once, echoed as it came
    assert parse("roll_decision", {"operator": "Ann", "roll_id": "5003", "decision": "valid"}) == (
        RollDecided(roll_id=5003, valid=True, operator="Ann", at=AT)
    )


@pytest.mark.parametrize("clause", [2, 3, 6, "2", "3", "6"])
def test_void_roll_clauses_2_3_6(clause: int | str) -> None:
    # 68 IAC 10-4-4(c)(2), (3), (6): what the reader cannot see (dice-reader-icd.md).
    voided = parse("void_roll", {"operator": "Bob", "roll_id": 77, "clause": clause})
    assert voided == RollVoided(roll_id=77, clause=int(clause), operator="Bob", at=AT)  # type: ignore[arg-type]


def test_overturn() -> None:
    assert parse("overturn", {"operator": "Cy", "roll_id": 999999, "request_id": 12}) == (
        VoidOverturned(roll_id=999999, operator="Cy", at=AT)
    )


GOOD = {"operator": "Ann", "roll_id": 5003, "decision": "valid", "request_id": "r7"}


@pytest.mark.parametrize(
    ("name", "body", "words", "request_id"),
    [
        ("roll_decision", b'{"operator": "Ann", ', "not valid JSON", None),
        ("roll_decision", b"\xff\xfe", "not UTF-8", None),
        ("roll_decision", b'{"operator": NaN}', "not valid JSON", None),
        ("roll_decision", [GOOD], "must be a JSON object, got a list", None),
        ("roll_decision", "valid", "must be a JSON object, got a string", None),
        ("double_down", GOOD, "unknown request 'double_down'", "r7"),
        ("roll_decision", {**GOOD, "operator": None}, "operator must be text", "r7"),
        (
            "roll_decision",
            {k: v for k, v in GOOD.items() if k != "operator"},
            "operator is missing",
            "r7",
        ),
        ("roll_decision", {**GOOD, "operator": "   "}, "operator is empty", "r7"),
        ("roll_decision", {**GOOD, "operator": "x" * 101}, "longer than 100", "r7"),
        ("roll_decision", {**GOOD, "operator": "a\nb"}, "control characters", "r7"),
        (
            "roll_decision",
            {k: v for k, v in GOOD.items() if k != "roll_id"},
            "roll_id is missing",
            "r7",
        ),
        (
            "roll_decision",
            {**GOOD, "roll_id": 0},
            "roll_id must be a roll id from 1 to 999999, got 0",
            "r7",
        ),
        ("roll_decision", {**GOOD, "roll_id": 1000000}, "from 1 to 999999", "r7"),
        ("roll_decision", {**GOOD, "roll_id": True}, "got true", "r7"),
        ("roll_decision", {**GOOD, "roll_id": 12.5}, "got 12.5", "r7"),
        ("roll_decision", {**GOOD, "roll_id": "12a"}, 'got "12a"', "r7"),
        (
            "roll_decision",
            {**GOOD, "decision": "maybe"},
            'decision must be "valid" or "invalid"',
            "r7",
        ),
        ("roll_decision", {**GOOD, "decision": "VALID"}, 'got "VALID"', "r7"),
        (
            "roll_decision",
            {k: v for k, v in GOOD.items() if k != "decision"},
            "decision is missing",
            "r7",
        ),
        ("roll_decision", {**GOOD, "clause": 2}, "unknown field 'clause' in roll_decision", "r7"),
        (
            "void_roll",
            {"operator": "A", "roll_id": 1, "clause": 4},
            "clause must be 2, 3 or 6",
            None,
        ),
        ("void_roll", {"operator": "A", "roll_id": 1, "clause": 2.0}, "got 2.0", None),
        ("void_roll", {"operator": "A", "roll_id": 1, "clause": True}, "got true", None),
        ("void_roll", {"operator": "A", "roll_id": 1}, "clause is missing", None),
        (
            "overturn",
            {"operator": "A", "roll_id": 1, "request_id": [1]},
            "request_id must be",
            None,
        ),
        (
            "overturn",
            {"operator": "A", "roll_id": 1, "request_id": False},
            "request_id must be",
            None,
        ),
        (
            "overturn",
            {"operator": "A", "roll_id": 1, "oprator": "B"},
            "unknown field 'oprator'",
            None,
        ),
    ],
)
def test_bad_requests_are_refused_with_a_sentence(
    name: str, body: Any, words: str, request_id: str | None
) -> None:
    with pytest.raises(RequestError) as caught:
        parse(name, body)
    assert words in caught.value.message
    assert str(caught.value) == caught.value.message
    assert caught.value.request_id == request_id
    assert isinstance(caught.value, ValueError)


def test_every_problem_is_named_at_once() -> None:
    with pytest.raises(RequestError) as caught:
        parse("void_roll", {"roll_id": -1, "clause": 9, "extra": 1, "request_id": 5})
    message = caught.value.message
    for words in ("operator is missing", "roll_id must be", "clause must be", "'extra'"):
        assert words in message
    assert caught.value.request_id == 5


def test_oversized_request_is_refused() -> None:
    with pytest.raises(RequestError, match="at most 4096 bytes"):
        parse_request("overturn", b" " * 5000, at=AT)


@given(st.binary(max_size=300))
def test_any_bytes_give_a_decision_or_a_request_error(payload: bytes) -> None:
    for name in (*REQUEST_NAMES, "other"):
        message = "parsed"
        try:
            parse_request(name, payload, at=AT)
        except RequestError as exc:
            message = exc.message
        assert message


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
# Every field of every request of the contract, and one that none has.
FIELDS = st.sampled_from(
    [*sorted({f for model in REQUEST_MODELS.values() for f in s.request_fields(model)}), "x"]
)


@pytest.mark.heavy
@given(st.dictionaries(FIELDS, JSON | st.sampled_from(["valid", "2", 3, "Ann", 17]), max_size=6))
def test_any_object_gives_a_decision_or_a_request_error(body: dict[str, Any]) -> None:
    payload = json.dumps(body).encode()
    for name in REQUEST_NAMES:
        try:
            decision = parse_request(name, payload, at=AT).decision
        except RequestError as exc:
            message = exc.message
        else:
            message = "parsed"
            assert not isinstance(decision, AlarmAcknowledged)  # these name a roll
            assert decision.operator == body["operator"].strip()
            assert decision.roll_id == int(body["roll_id"])
            assert decision.at == AT
        assert message


def test_response_bodies_meet_the_spec() -> None:
    ok = response_publication("void_roll", "r1", None, table="t1")
    assert ok.topic == "response/void_roll"
    assert not ok.retained
    # sent and missing_before are resend's (1.3), seed, digest and components
    # authenticate's (1.4): null for the other requests.
    assert ok.body == {
        "table": "t1",
        "request_id": "r1",
        "status": "ok",
        "error": None,
        "sent": None,
        "missing_before": None,
        "seed": None,
        "digest": None,
        "components": None,
    }
    error = response_publication("roll_decision", 7, "roll 5003 is not pending", table="t1").body
    assert error == {
        "table": "t1",
        "request_id": 7,
        "status": "error",
        "error": "roll 5003 is not pending",
        "sent": None,
        "missing_before": None,
        "seed": None,
        "digest": None,
        "components": None,
    }
    for name, body in (("void_roll", ok.body), ("roll_decision", error)):
        payload = json.dumps({**body, "seq": 9, "ts": "2026-11-29T14:03:07.123Z"}).encode()
        check_message(f"response/{name}", payload, retained=False)
    # The checker catches an error response without its sentence.
    bad = {"table": "t1", "request_id": None, "status": "error", "seq": 1, "ts": "x"}
    with pytest.raises(SpecViolation):
        check_message("response/overturn", json.dumps(bad).encode())


BIG = b'{"request_id": "r9", "x": "' + b"a" * 5000 + b'"}'


@pytest.mark.parametrize(
    ("name", "payload", "expected"),
    [
        # A name of no answerable shape is dropped, whatever the payload (never parsed).
        ("", b"{", Dropped(reason="an empty request name")),
        ("x" * 65, b"{", Dropped(reason="a request name of 65 characters (at most 64)")),
        (
            "Void-Roll",
            b"{",
            Dropped(reason="a request name with characters other than a-z, 0-9 and _"),
        ),
        # Too big: refused on its size alone, with no id (the payload is never parsed).
        (
            "void_roll",
            BIG,
            Refused(
                request_id=None,
                error=f"the request is {len(BIG)} bytes; at most 4096 bytes are allowed",
            ),
        ),
        # An unknown name of the right shape is answered, with the request's own id.
        (
            "void_all",
            b'{"request_id": 3}',
            Refused(
                request_id=3,
                error="unknown request 'void_all': the requests are "
                "roll_decision, void_roll, overturn, resend, alarm_ack or authenticate",
            ),
        ),
        # A retained request is never acted on (issue 20), whatever it asks.
        (
            "overturn",
            b'{"request_id": "r0", "operator": "Ann", "roll_id": 7}',
            Refused(request_id="r0", error=RETAINED_ERROR),
        ),
        # resend asks no decision of the rules: the table serves it from its journal.
        (
            "resend",
            b'{"request_id": 9, "operator": "pit", "from_seq": 10, "to_seq": 20}',
            ResendAsked(
                request_id=9,
                request=ResendRequest(operator="pit", request_id=9, from_seq=10, to_seq=20),
            ),
        ),
        (
            "overturn",
            b'{"request_id": "r1", "operator": "Ann", "roll_id": 7}',
            Request(
                name="overturn",
                request_id="r1",
                decision=VoidOverturned(roll_id=7, operator="Ann", at=AT),
            ),
        ),
    ],
)
def test_admission_is_one_call_in_the_spec_s_order(
    name: str, payload: bytes, expected: Request | ResendAsked | Refused | Dropped
) -> None:
    retained = isinstance(expected, Refused) and expected.error == RETAINED_ERROR
    assert admit(Incoming.receive(name, payload, retained=retained), at=AT) == expected


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        (b'{"request_id": "r-1"}', "r-1"),
        (b'{"request_id": 7}', 7),
        (b'{"request_id": true}', None),
        (b'{"request_id": 1.5}', None),
        (b'{"request_id": NaN}', None),
        (b'{"request_id": Infinity}', None),
        (b'{"request_id": null}', None),
        (b'["request_id"]', None),
        (b"\xff\xfe", None),
        (b"", None),
        (b"[" * 3000, None),
        (b'{"request_id": "x", "pad": "' + b"y" * 5000 + b'"}', None),  # over 4 KiB: unread
    ],
)
def test_the_request_id_of_a_request_refused_unread(payload: bytes, expected: object) -> None:
    assert request_id_of(payload) == expected


@given(st.binary(max_size=300))
def test_request_id_of_never_raises(payload: bytes) -> None:
    found = request_id_of(payload)
    assert found is None or isinstance(found, str | int)


def test_alarm_ack_names_the_alarm_and_the_operator() -> None:
    body = json.dumps({"alarm": "MODE_MISMATCH", "operator": " pat ", "request_id": 9}).encode()
    request = parse_request("alarm_ack", body, at=AT)
    assert request.decision == AlarmAcknowledged(code="MODE_MISMATCH", operator="pat", at=AT)
    assert request.request_id == 9


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"operator": "pat"}, "alarm is missing"),
        ({"alarm": "mode mismatch", "operator": "pat"}, "alarm must be an alarm's code"),
        ({"alarm": 3, "operator": "pat"}, "alarm must be an alarm's code"),
        ({"alarm": "MODE_MISMATCH"}, "operator is missing"),
        ({"alarm": "MODE_MISMATCH", "operator": "pat", "roll_id": 4}, "unknown field 'roll_id'"),
    ],
)
def test_a_bad_alarm_ack_is_refused_with_a_sentence(body: dict[str, Any], message: str) -> None:
    with pytest.raises(RequestError, match=message):
        parse_request("alarm_ack", json.dumps(body).encode(), at=AT)
