"""The shared strategies (tests/strategies.py) draw what the declarations accept, every kind
of it: a strategy that drew only refusals would fuzz nothing but the refusal."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any, get_args

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contract.requests import REQUEST_MODELS
from daemon.requests import AuthenticateAsked, Incoming, Request, ResendAsked, admit
from drivers import messages as m
from rules import events as ev
from tests import strategies as s

AT = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


@given(s.request_bodies())
def test_every_drawn_request_is_one_the_table_accepts(item: tuple[str, dict[str, Any]]) -> None:
    name, body = item
    REQUEST_MODELS[name].model_validate(body)
    admitted = admit(Incoming.receive(name, json.dumps(body).encode()), at=AT)
    assert isinstance(admitted, Request | ResendAsked | AuthenticateAsked), admitted
    if isinstance(admitted, Request):
        assert admitted.name == name
    elif isinstance(admitted, ResendAsked):
        assert name == "resend"
    else:
        assert name == "authenticate"


_FACTS = get_args(ev.DeviceFact)
_EACH_FACT = [(f, s.device_facts(exclude=[o for o in _FACTS if o is not f])) for f in _FACTS]
_EACH_REQUEST = [(name, s.request_bodies(names=[name])) for name in REQUEST_MODELS]


# Building a strategy of every declaration is slow on a loaded machine, not the drawing.
@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_every_request_and_every_fact_is_drawn(data: st.DataObject) -> None:
    # Each option of the strategies is reached: a new declaration is in without an edit.
    for name, bodies in _EACH_REQUEST:
        assert data.draw(bodies)[0] == name
    for fact, facts in _EACH_FACT:
        assert isinstance(data.draw(facts), fact)


@given(s.device_facts())
def test_a_drawn_fact_a_frame_carries_is_a_message_a_device_may_send(fact: ev.DeviceFact) -> None:
    if isinstance(fact, get_args(m.WireFact)):
        message = m.DeviceMessage(seq=1, fact=fact)  # FrameError if the fact may not be sent
        assert m.parse_body(m.encode_body(message), device=_sender(message)) == message


def _sender(message: m.DeviceMessage) -> ev.Device:
    if message.message_type.names_device:  # HELLO, STATUS: the fact names its device
        device: ev.Device = getattr(message.fact, "device")  # noqa: B009
        return device
    return sorted(message.message_type.sent_by)[0]
