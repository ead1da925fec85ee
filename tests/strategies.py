"""Hypothesis strategies built from the declarations, in one place for every test.

Nothing here lists message types, facts or requests by hand: each strategy is derived from
what the code declares, so a new declaration is fuzzed by every test that draws from here
without a test edit:

* **device messages and their facts** from ``drivers.messages.DECLARED``: one ``declare``
  gives the fact, the devices that send it and each field's codec (``Number``, ``Choice``,
  ``Cards``, ...); ``field_values`` turns a codec into the values it accepts;
* **the host's messages** from ``drivers.messages.HOST_MESSAGES`` (each class's own check
  says which sequence numbers it takes);
* **device facts** from the ``rules.events.DeviceFact`` union: a fact a frame carries is
  built from its declaration, a fact of the link (connected, disconnected, bad frame) from
  its dataclass's type hints;
* **request bodies** from ``contract.requests.REQUEST_MODELS``: every field of a model, its
  values from the field's type (a ``Literal`` is its choices), or from the request
  vocabulary below for the fields whose type says less than the contract (``roll_id``,
  ``clause``, ``operator``).

A test narrows what it draws by field name (``device_facts(round_id=st.integers(1, 3))``
makes rounds collide, which a free draw of 1..999999 never does); a codec or a field type
that has no strategy here raises ``TypeError`` naming it, so a new kind of field is one
edit here, never a silent gap.
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Mapping, Sequence
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

import annotated_types
from hypothesis import strategies as st

from contract.requests import ALARM_CODE, REQUEST_MODELS, RESEND_SPAN, RequestBase
from drivers import messages as m
from drivers.errors import FrameError
from drivers.link import MAX_SEQ
from rules import events as ev
from rules.cards import DECK

Strategy = st.SearchStrategy[Any]

seqs = st.integers(1, MAX_SEQ)
"""A device message's sequence number (link-layer.md)."""
cards = st.sampled_from([card.code for card in DECK])
_printable = st.characters(min_codepoint=0x20, max_codepoint=0x7E)
words = st.text(_printable.filter(lambda c: c not in "$*,"), min_size=1, max_size=24)
texts = st.text(_printable.filter(lambda c: c not in "$*"), max_size=60)
status_codes = st.text(st.sampled_from("ABCDEFGHIJKLMNOPQRSTUVWXYZ_"), min_size=1, max_size=20)


# ---------------------------------------------------------------------------------------
# Device messages, from drivers.messages' declarations


def field_values(codec: m.Field) -> Strategy:
    """Every value ``codec`` accepts (what a device may send in that field)."""
    match codec:
        case m.Number(low=low, high=high):
            return st.integers(low, high)
        case m.Dice(low=low):
            return st.tuples(st.integers(low, 6), st.integers(low, 6))
        case m.Cards():
            return st.lists(cards, min_size=1, max_size=7).map(tuple)
        case m.OneCard():
            return cards
        case m.Choice(allowed=allowed):
            return st.sampled_from(sorted(allowed))
        case m.Code():
            return status_codes
        case m.Text():
            return texts
        case m.Word():
            return words
    raise TypeError(f"tests/strategies.py has no values for a {type(codec).__name__} field")


def _pick(name: str, default: Strategy, overrides: Mapping[str, Strategy]) -> Strategy:
    return overrides.get(name, default)


def declared_facts(
    declaration: m.MessageType, device: ev.Device, **overrides: Strategy
) -> st.SearchStrategy[m.WireFact]:
    """The facts ``device`` may state in a ``declaration`` message; ``overrides`` replace
    the values of the fields they name."""
    values = {
        name: _pick(name, field_values(codec), overrides) for name, codec in declaration.fields
    }
    if declaration.names_device:
        values["device"] = st.just(device)
    return st.builds(declaration.fact, **values)


def messages_from(device: ev.Device, **overrides: Strategy) -> st.SearchStrategy[m.Message]:
    """Every message ``device`` sends, as declared."""
    return st.one_of(
        [
            st.builds(m.DeviceMessage, seq=seqs, fact=declared_facts(t, device, **overrides))
            for t in m.DECLARED
            if device in t.sent_by
        ]
    )


def _host_seqs(cls: type[m.HostMessage]) -> st.SearchStrategy[int]:
    """The sequence numbers ``cls`` takes, asked of its own check (``ACK`` 1..9999, ``NAK``
    0..9999, ``QUERY`` 0)."""

    def takes(seq: int) -> bool:
        try:
            cls(seq=seq)
        except FrameError:
            return False
        return True

    low = 0 if takes(0) else 1
    high = MAX_SEQ if takes(MAX_SEQ) else low
    return st.integers(low, high)


host_messages: st.SearchStrategy[m.Message] = st.one_of(
    [st.builds(cls, seq=_host_seqs(cls)) for cls in m.HOST_MESSAGES.values()]
)
"""Every message the host sends."""
shuffler_messages = messages_from("shuffler")
dice_messages = messages_from("dice_reader")
device_messages: st.SearchStrategy[tuple[ev.Device, m.Message]] = st.one_of(
    [st.tuples(st.just(d), messages_from(d)) for d in ev.DEVICES]
)
"""A device and a message it sends."""
readers: st.SearchStrategy[tuple[ev.Device | None, list[m.Message]]] = st.one_of(
    [
        *(
            st.tuples(st.just(d), st.lists(st.one_of(messages_from(d), host_messages)))
            for d in ev.DEVICES
        ),
        st.tuples(st.none(), st.lists(host_messages)),
    ]
)
"""A reader (the device whose messages it takes, or none) and messages it can read."""


# ---------------------------------------------------------------------------------------
# Device facts, from rules.events' union


def _fact_types() -> tuple[type[ev.DeviceFact], ...]:
    return tuple(get_args(ev.DeviceFact))


def device_facts(
    *, exclude: Sequence[type[ev.DeviceFact]] = (), **overrides: Strategy
) -> st.SearchStrategy[ev.DeviceFact]:
    """Every device fact of ``rules.events.DeviceFact`` but ``exclude``: a fact a frame
    carries as its declaration allows, from every device that sends it; a fact of the link
    from its type hints. ``overrides`` replace the values of the fields they name, in every
    fact that has them (the rules take facts from the journal too, not only from the codec:
    an override may go beyond what the wire allows)."""
    declared: dict[type, m.MessageType] = {t.fact: t for t in m.DECLARED}
    options: list[st.SearchStrategy[ev.DeviceFact]] = []
    for fact in _fact_types():
        if fact in exclude:
            continue
        declaration = declared.get(fact)
        if declaration is not None:
            options.extend(declared_facts(declaration, d, **overrides) for d in declaration.sent_by)
        else:
            hints = get_type_hints(fact)
            fields = [f.name for f in dataclasses.fields(fact)]
            options.append(
                st.builds(
                    fact, **{n: _pick(n, values_of_type(hints[n]), overrides) for n in fields}
                )
            )
    return st.one_of(options)


def values_of_type(hint: Any) -> Strategy:
    """Values of a field's type: a ``Literal``'s choices, a union's members, or what
    hypothesis infers for a plain type."""
    if get_origin(hint) is Literal:
        return st.sampled_from(get_args(hint))
    if get_origin(hint) in (Union, types.UnionType):
        return st.one_of([values_of_type(arg) for arg in get_args(hint)])
    if hint is type(None):
        return st.none()
    if hint in (str, int, bool):
        return st.from_type(hint)
    raise TypeError(f"tests/strategies.py has no values for a field of type {hint!r}")


# ---------------------------------------------------------------------------------------
# Requests, from contract.requests' models

REQUEST_VOCABULARY: Mapping[str, Strategy] = {
    # The contract's types say int and str; its validators say more (contract/requests.py).
    "roll_id": st.one_of(st.integers(1, ev.MAX_ID), st.integers(1, ev.MAX_ID).map(str)),
    "clause": st.sampled_from([*get_args(ev.VoidClause), *map(str, get_args(ev.VoidClause))]),
    "operator": st.text(
        st.characters(categories=["L", "N"], include_characters=" "), min_size=1, max_size=30
    ).filter(str.strip),
    "request_id": st.one_of(st.none(), st.text(max_size=20), st.integers()),
    "alarm": st.from_regex(ALARM_CODE, fullmatch=True),
    "seed": st.binary(min_size=16, max_size=64).map(bytes.hex),
}
"""Values of the request fields whose type alone does not say what the contract accepts."""


def _bounded(hint: Any, constraints: Sequence[object]) -> Strategy:
    """Values of a model field's type within its declared bounds (``Field(ge=1, le=60)``,
    ``max_length``): what the contract accepts, not only what the type allows."""
    low: int | None = None
    high: int | None = None
    for c in constraints:
        match c:
            case annotated_types.Ge(ge=int(bound)):
                low = bound
            case annotated_types.Gt(gt=int(bound)):
                low = bound + 1
            case annotated_types.Le(le=int(bound)):
                high = bound
            case annotated_types.Lt(lt=int(bound)):
                high = bound - 1
            case annotated_types.MinLen(min_length=bound):
                low = bound
            case annotated_types.MaxLen(max_length=bound):
                high = bound
    if hint is int:
        return st.integers(low, high)
    if hint is str:
        return st.text(min_size=low or 0, max_size=high)
    return values_of_type(hint)


def request_fields(model: type[RequestBase]) -> list[str]:
    """The fields of a request model, as a body names them."""
    return [field.alias or name for name, field in model.model_fields.items()]


def request_bodies(
    names: Sequence[str] | None = None, **overrides: Strategy
) -> st.SearchStrategy[tuple[str, dict[str, Any]]]:
    """A request name and a well-formed JSON body for it, for every request of the contract
    (or ``names``); an optional field is sometimes left out. ``overrides`` replace the
    values of the fields they name."""
    options = []
    for name, model in REQUEST_MODELS.items():
        if names is not None and name not in names:
            continue
        required: dict[str, Strategy] = {}
        optional: dict[str, Strategy] = {}
        for field_name, field in model.model_fields.items():
            key = field.alias or field_name
            if key in overrides:
                values = overrides[key]
            elif key in REQUEST_VOCABULARY:
                values = REQUEST_VOCABULARY[key]
            else:
                values = _bounded(field.annotation, field.metadata)
            (required if field.is_required() else optional)[key] = values
        body = st.fixed_dictionaries(required, optional=optional)
        shape = REQUEST_SHAPES.get(name)
        options.append(st.tuples(st.just(name), body if shape is None else body.map(shape)))
    return st.one_of(options)


def _resend_range(body: dict[str, Any]) -> dict[str, Any]:
    # The one rule across fields: to_seq from from_seq up to RESEND_SPAN above it.
    return {**body, "to_seq": body["from_seq"] + body["to_seq"] % (RESEND_SPAN + 1)}


REQUEST_SHAPES: Mapping[str, Any] = {"resend": _resend_range}
"""What a request's fields must hold together (its model's own validator), by name."""
