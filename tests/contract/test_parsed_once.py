"""A message is decoded once and parsed once per consumer: the feed's check
(``contract.feed.admitted``) hands its typed message on (``Message.parsed``), and the web
store, the terminal and the records service use it instead of parsing the payload again."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel

from contract.feed import Feed, Message
from contract.payloads import CrapsRollMessage
from display.terminal import Screen, TableView
from display.web.store import Store
from foundation import strict_json
from records.messages import released

TS = "2026-06-15T20:31:07.412Z"
ROLL = {"roll_id": 1, "dice": [1, 1], "total": 2, "status": "counted", "reason": None}


def roll(seq: int, prev: int | None) -> bytes:
    body = {**ROLL, "roll_id": seq, "table": "t1", "seq": seq, "prev_seq": prev, "ts": TS}
    return json.dumps(body).encode()


@pytest.fixture
def counts(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """JSON decodes (``strict_json.loads``) and model validations, counted."""
    seen: Counter[str] = Counter()
    loads = strict_json.loads
    validate: Callable[..., Any] = BaseModel.model_validate.__func__  # type: ignore[attr-defined]

    def counted_loads(*args: Any, **kwargs: Any) -> Any:
        seen["decode"] += 1
        return loads(*args, **kwargs)

    def counted_validate(cls: type[BaseModel], *args: Any, **kwargs: Any) -> Any:
        seen["parse"] += 1
        return validate(cls, *args, **kwargs)

    monkeypatch.setattr(strict_json, "loads", counted_loads)
    monkeypatch.setattr(BaseModel, "model_validate", classmethod(counted_validate))
    return seen


def test_the_web_store_decodes_and_parses_a_message_once(counts: Counter[str]) -> None:
    store = Store("lammer")
    assert len(store.receive("lammer/t1/craps/roll", roll(10, 9), now=0.0)) == 1
    assert counts == {"decode": 1, "parse": 1}


def test_the_terminal_decodes_and_parses_a_message_once(counts: Counter[str]) -> None:
    view = TableView(table="t1")
    screen = Screen([view])
    assert screen.receive(f"{view.base}/craps/roll", roll(10, 9), now=0.0)
    assert list(view.rolls) == [10]
    assert counts == {"decode": 1, "parse": 1}


def test_records_keep_the_feeds_parse(counts: Counter[str]) -> None:
    (event,) = Feed().receive("lammer/t1", "craps/roll", roll(10, 9), now=0.0)
    assert isinstance(event, Message)
    stored = released("t1", event)
    assert isinstance(stored.body, CrapsRollMessage)
    assert (stored.seq, stored.body.roll_id, stored.payload["roll_id"]) == (10, 10, 10)
    assert counts == {"decode": 1, "parse": 1}
