"""Logging: JSON off a terminal, console on one, no timestamps under journald, context
bound, and no card face down at info."""

from __future__ import annotations

import io
import json
import logging
import os
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import structlog

from daemon.logs import (
    HIDDEN,
    bound_context,
    configure_logging,
    fact_fields,
    get_logger,
    outcome_fields,
)
from rules.events import CoverAllPayouts, CoverAllResult, DiceRolled, PayRow


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    """configure_logging changes global state: put it back for the other tests."""
    config = structlog.get_config()
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    structlog.configure(**config)
    for handler in list(root.handlers):
        if handler not in handlers:
            root.removeHandler(handler)
    root.setLevel(level)
    structlog.contextvars.clear_contextvars()


def lines(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_auto_is_json_off_a_terminal_with_bound_context(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JOURNAL_STREAM", raising=False)
    stream = io.StringIO()
    assert configure_logging(fmt="auto", level="info", stream=stream) == "json"
    log = get_logger("lammer.test", device="shuffler")
    with bound_context(table="t1", round=812):
        log.info("round dealt", hands=3)
        log.debug("not shown at info")
    log.warning("outside")
    first, second = lines(stream)
    assert first["event"] == "round dealt"
    assert (first["table"], first["device"], first["round"], first["hands"]) == (
        "t1",
        "shuffler",
        812,
        3,
    )
    assert first["level"] == "info"
    assert first["timestamp"].endswith("Z")
    assert second["event"] == "outside"
    assert "table" not in second


def test_auto_is_console_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JOURNAL_STREAM", raising=False)
    main, follower = os.openpty()
    with os.fdopen(follower, "w") as tty:
        assert configure_logging(fmt="auto", level="info", stream=tty) == "console"
        get_logger().info("hello", table="t1")
        tty.flush()
        text = os.read(main, 4096).decode()
    os.close(main)
    assert "hello" in text
    assert "table" in text
    assert not text.lstrip().startswith("{")


def test_no_timestamps_when_journald_stamps_the_stream(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with (tmp_path / "journald").open("w+") as stream:
        st = os.fstat(stream.fileno())
        monkeypatch.setenv("JOURNAL_STREAM", f"{st.st_dev}:{st.st_ino}")
        configure_logging(fmt="json", level="info", stream=stream)
        get_logger().info("under journald")
        monkeypatch.setenv("JOURNAL_STREAM", f"{st.st_dev}:{st.st_ino + 1}")  # another stream
        configure_logging(fmt="json", level="info", stream=stream)
        get_logger().info("not journald's stream")
        stream.seek(0)
        first, second = (json.loads(line) for line in stream.read().splitlines())
    assert "timestamp" not in first
    assert "timestamp" in second


def test_cards_are_hidden_at_info_and_shown_at_debug() -> None:
    # shuffler-icd.md: never log a card before it is face up at ordinary levels.
    stream = io.StringIO()
    configure_logging(fmt="json", level="debug", stream=stream)
    log = get_logger()
    log.info("hand", cards=("As", "Kd"), card="Qh", raw="2448414e44", position="P1")
    log.debug("hand", cards=("As", "Kd"))
    info, debug = lines(stream)
    assert (info["cards"], info["card"], info["raw"], info["position"]) == (
        HIDDEN,
        HIDDEN,
        HIDDEN,
        "P1",
    )
    assert debug["cards"] == ["As", "Kd"]


@pytest.mark.parametrize("fmt", ["json", "console"])
def test_tracebacks_show_no_local_variables(fmt: Any) -> None:
    stream = io.StringIO()
    configure_logging(fmt=fmt, level="info", stream=stream)
    hole_card = "Qh" + "Js"  # a value only at run time, not in the source shown
    try:
        raise ValueError("bad round")
    except ValueError:
        get_logger().exception("failed")
    text = stream.getvalue()
    assert "bad round" in text
    assert hole_card not in text


def test_standard_library_logging_goes_through_the_same_renderer() -> None:
    stream = io.StringIO()
    configure_logging(fmt="json", level="warning", stream=stream)
    with bound_context(table="t1"):
        logging.getLogger("aiomqtt").warning("broker gone: %s", "refused")
        logging.getLogger("aiomqtt").info("filtered by level")
    (line,) = lines(stream)
    assert (line["event"], line["logger"], line["table"]) == (
        "broker gone: refused",
        "aiomqtt",
        "t1",
    )


def test_reconfiguring_replaces_the_handler() -> None:
    first, second = io.StringIO(), io.StringIO()
    configure_logging(fmt="json", level="info", stream=first)
    configure_logging(fmt="json", level="info", stream=second)
    get_logger().info("once")
    assert first.getvalue() == ""
    assert len(lines(second)) == 1


def test_bad_level_or_format() -> None:
    with pytest.raises(ValueError, match="unknown log level 'loud'"):
        configure_logging(fmt="json", level="loud")
    with pytest.raises(ValueError, match="unknown log format 'xml'"):
        configure_logging(fmt="xml", level="info")  # type: ignore[arg-type]


def test_facts_and_outcomes_are_logged_as_json_values_never_python_reprs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Issue 20: "paytable": "(PayRow(hand='Royal Flush', pays=Decimal('80')), ...)" and
    # "dice": "(4, 6)" were strings holding Python reprs inside the JSON.
    monkeypatch.delenv("JOURNAL_STREAM", raising=False)
    stream = io.StringIO()
    configure_logging(fmt="json", level="info", stream=stream)
    payouts = CoverAllPayouts(
        round_id=812,
        game="CSP",
        hands=3,
        paytable=(
            PayRow(hand="Royal Flush", pays=Decimal("80")),
            PayRow(hand="Straight", pays=Decimal("1.5")),
        ),
    )
    roll = DiceRolled(roll_id=7, dice=(4, 6))
    log = get_logger("lammer.test")
    log.info("outcome", **outcome_fields(payouts))
    log.info("fact", **fact_fields(roll))
    outcome, fact = lines(stream)
    assert outcome["paytable"] == [
        {"hand": "Royal Flush", "pays": "80"},
        {"hand": "Straight", "pays": "1.5"},
    ]
    assert (outcome["round_id"], outcome["game"], outcome["hands"]) == (812, "CSP", 3)
    assert fact["dice"] == [4, 6]
    assert "(" not in stream.getvalue()


def test_a_face_down_card_inside_an_outcome_is_still_only_what_outcomes_publish() -> None:
    # outcome_fields writes what the outcome holds, as JSON; a flagged result holds no card.
    flagged = CoverAllResult(
        round_id=9,
        game="UTH",
        hands=None,
        outcome="flagged",
        highest=None,
        pays=None,
        reason="card count",
    )
    assert outcome_fields(flagged) == {
        "round_id": 9,
        "game": "UTH",
        "hands": None,
        "outcome": "flagged",
        "highest": None,
        "pays": None,
        "reason": "card count",
    }
