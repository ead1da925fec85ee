"""The script format (simulators/scripts.py) and the fault settings and wire faults."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from drivers.link import BadFrame, Frame, FrameDecoder
from drivers.messages import Decoded, MessageDecoder
from simulators.faults import Faults, plan_transmission
from simulators.scripts import (
    DropAck,
    FaultSpecError,
    ScriptError,
    Send,
    Sleep,
    Unplug,
    Wait,
    format_script,
    load_script,
    parse_script,
)

SCRIPT = """\
# Dispute 2026-11-02, table 7: one Caribbean Stud round as the shuffler sent it
MODE,CSP
DECK,OK
HAND,812,P1,9c9d5h5s2c
sleep 0.25   # the dealer paused
HAND,812,P3,QhJhTh8h7h
HAND,812,DL,AcKd4s3h3c

ROUND,812,3
unplug
SETTLE,812
STATUS,JAM,card jam, tray 2
"""


def test_script_steps() -> None:
    steps = parse_script(SCRIPT, device="shuffler")
    assert steps == [
        Send(("MODE", "CSP")),
        Send(("DECK", "OK")),
        Send(("HAND", "812", "P1", "9c9d5h5s2c")),
        Sleep(0.25),
        Send(("HAND", "812", "P3", "QhJhTh8h7h")),
        Send(("HAND", "812", "DL", "AcKd4s3h3c")),
        Send(("ROUND", "812", "3")),
        Unplug(),
        Send(("SETTLE", "812")),
        Send(("STATUS", "JAM", "card jam", " tray 2")),
    ]
    # The body as the spec's CSP example numbers it, and free text keeps its comma.
    assert steps[2].body(4) == "HAND,4,812,P1,9c9d5h5s2c"  # type: ignore[union-attr]
    assert steps[-1].body(9) == "STATUS,9,JAM,card jam, tray 2"  # type: ignore[union-attr]


def test_a_wait_step_names_a_file_as_written() -> None:
    steps = parse_script(
        "ROLL,1,2,3\nWAIT /run/Cue Dir/next roll  # the test's cue\nwait cues/go\n",
        device="dice_reader",
    )
    assert steps == [
        Send(("ROLL", "1", "2", "3")),
        Wait(Path("/run/Cue Dir/next roll")),
        Wait(Path("cues/go")),
    ]
    assert format_script(steps).splitlines()[1:] == ["wait /run/Cue Dir/next roll", "wait cues/go"]


def test_dice_script_matches_the_spec_example() -> None:
    steps = parse_script(
        "ROLL,5001,6,5\nROLL,5002,2,2\nCHECK,5003,1,6,ON_CHIPS\n", device="dice_reader"
    )
    assert [s.body(n) for n, s in enumerate(steps, start=2) if isinstance(s, Send)] == [
        "ROLL,2,5001,6,5",
        "ROLL,3,5002,2,2",
        "CHECK,4,5003,1,6,ON_CHIPS",
    ]


@pytest.mark.parametrize(
    ("device", "line", "match"),
    [
        ("shuffler", "ROLL,5001,6,5", "'ROLL' is not a shuffler message"),
        ("dice_reader", "HAND,1,P1,AsKs", "'HAND' is not a dice_reader message"),
        ("shuffler", "HAND,812,P1,9c9d5h5s1c", "card 5 is not a card code"),
        ("shuffler", "HAND,812,P9,9c9d5h5s2c", "position"),
        ("dice_reader", "ROLL,5001,7,5", "die 1 7 is out of range 1..6"),
        ("dice_reader", "CHECK,5001,0,5,LEANING", "reason"),
        ("dice_reader", "ROLL,5001,6", "fields after the sequence number"),
        ("shuffler", "sleep soon", "expected 'sleep SECONDS'"),
        ("shuffler", "sleep -1", "expected 'sleep SECONDS'"),
        ("shuffler", "wait", "expected 'wait PATH'"),
        ("shuffler", "wait   # no path", "expected 'wait PATH'"),
    ],
)
def test_script_errors_name_the_line(device: str, line: str, match: str) -> None:
    with pytest.raises(ScriptError, match=match) as caught:
        parse_script(f"# header\n\n{line}\n", device=device)  # type: ignore[arg-type]
    assert caught.value.line == 3
    assert str(caught.value).startswith("line 3: ")


def test_a_script_file_that_is_not_utf8_names_its_line(tmp_path: Path) -> None:
    script = tmp_path / "dispute.txt"
    script.write_bytes(b"ROLL,1,2,3\nROLL,2,\xff,4\n")
    with pytest.raises(
        ScriptError, match=r"line 2: byte 0xff of .*dispute.txt is not UTF-8"
    ) as caught:
        load_script(script, device="dice_reader")
    assert caught.value.line == 2


steps_strategy = st.lists(
    st.one_of(
        st.builds(
            lambda r, d: Send.of("ROLL", r, d[0], d[1]),
            st.integers(1, 999_999),
            st.tuples(st.integers(1, 6), st.integers(1, 6)),
        ),
        st.builds(lambda r: Send.of("NOROLL", r, "OFF_TABLE"), st.integers(1, 999_999)),
        st.builds(Sleep, st.integers(0, 10_000_000).map(lambda us: us / 1_000_000)),
        st.builds(Wait, st.sampled_from([Path("/run/cue"), Path("cue 2"), Path("a/b.go")])),
        st.just(Unplug()),
        st.just(DropAck()),
    ),
    max_size=20,
)


@given(steps_strategy)
def test_format_then_parse_is_identity(steps: list[Send | Sleep | Wait | Unplug | DropAck]) -> None:
    assert parse_script(format_script(steps), device="dice_reader") == steps


# Fault settings -------------------------------------------------------------------------


def test_fault_spec_parses_and_adds_up() -> None:
    faults = Faults.parse("crc=0.1, garbage=0.05,split")
    assert (faults.crc, faults.garbage, faults.split) == (0.1, 0.05, 1.0)
    more = Faults.parse("drop-ack=0.2,split_delay=0.01", base=faults)
    assert (more.crc, more.drop_ack, more.split_delay) == (0.1, 0.2, 0.01)
    assert str(more) == "crc=0.1,garbage=0.05,split=1,drop_ack=0.2,split_delay=0.01"
    assert str(Faults()) == "none"


@pytest.mark.parametrize(
    ("spec", "match"),
    [
        ("crc=0.1,cosmic_rays=0.2", "unknown fault 'cosmic_rays'"),
        ("crc=lots", "'lots' is not a number"),
        ("garbage=1.5", "not a probability"),
        ("crc=1", "would never let a frame through"),
        ("drop_ack", "would never let a frame through"),
        ("split_delay", "needs a value in seconds"),
        ("unplug_pause=-1", "seconds >= 0"),
    ],
)
def test_bad_fault_specs(spec: str, match: str) -> None:
    with pytest.raises(FaultSpecError, match=match):
        Faults.parse(spec)


# Wire faults, judged by the drivers' own decoder ---------------------------------------

BODY = "HAND,4,812,P1,9c9d5h5s2c"


def decode(data: bytes) -> list[Decoded | BadFrame]:
    return MessageDecoder(device="shuffler", sender="device").feed(data)


def test_clean_transmission_is_the_frame() -> None:
    plan = plan_transmission(BODY, device="shuffler", faults=Faults(), rng=random.Random(0))
    assert plan.data == b"$HAND,4,812,P1,9c9d5h5s2c*738E\r\n"  # shuffler-icd.md example
    assert (plan.split, plan.applied) == (False, ())


@pytest.mark.parametrize("seed", range(20))
def test_crc_fault_is_a_bad_crc(seed: int) -> None:
    plan = plan_transmission(
        BODY, device="shuffler", faults=Faults(crc=0.99), rng=random.Random(seed)
    )
    assert plan.applied == ("crc",)
    (item,) = FrameDecoder().feed(plan.data)
    assert isinstance(item, BadFrame)
    assert item.reason.startswith("bad CRC")


@pytest.mark.parametrize(
    "body",
    [BODY, "ROUND,7,812,3", "HELLO,1,IDEAL-SIM,2.1.0,SN0001", "STATUS,5,JAM,jam", "DECK,3,OK"],
)
def test_garble_fault_has_a_good_crc_but_does_not_parse(body: str) -> None:
    plan = plan_transmission(
        body, device="shuffler", faults=Faults(garble=0.99), rng=random.Random(1)
    )
    assert "garble" in plan.applied
    (framed,) = FrameDecoder().feed(plan.data)
    assert isinstance(framed, Frame), "the CRC is good"
    (item,) = decode(plan.data)
    assert isinstance(item, BadFrame)
    assert item.seq == int(body.split(",")[1]), "NAKed with its own sequence number"


def test_garbage_duplicate_and_split() -> None:
    faults = Faults(garbage=1.0, duplicate=1.0, split=1.0)
    plan = plan_transmission(BODY, device="shuffler", faults=faults, rng=random.Random(5))
    assert set(plan.applied) == {"garbage", "duplicate", "split"}
    assert plan.split
    frame = b"$HAND,4,812,P1,9c9d5h5s2c*738E\r\n"
    assert plan.data.endswith(frame + frame)
    assert not plan.data.startswith(b"$"), "junk first"
    items = decode(plan.data)
    assert [i.raw for i in items if isinstance(i, Decoded)] == [frame, frame]


def test_fault_draws_are_reproducible() -> None:
    faults = Faults(crc=0.3, garbage=0.3, duplicate=0.3, split=0.3, garble=0.3)

    def run(seed: int) -> list[bytes]:
        rng = random.Random(seed)
        return [
            plan_transmission(BODY, device="shuffler", faults=faults, rng=rng).data
            for _ in range(30)
        ]

    assert run(1) == run(1) != run(2)
