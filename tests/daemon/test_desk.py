"""The table's request desk (``daemon.desk``) in process: what it returns to the shell (a
resend's copies, an admitted ``request/authenticate``) and the authentication rate, on a
real journal. No broker: the shell's part is tests/daemon/test_app.py's and
tests/integration's."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from contract.software import Component
from daemon.config import validate_config
from daemon.core import TableCore
from daemon.desk import AUTH_RATE_ERROR, AUTHENTICATIONS_PER_MINUTE, RequestDesk
from daemon.journal import Journal
from daemon.requests import Incoming
from daemon.resend import BACKLOG_ERROR, NO_LINK_ERROR, RESEND_BACKLOG
from rules.events import DiceRolled

SEED = "ab" * 16


class _Clock:
    """A wall clock the test moves."""

    def __init__(self) -> None:
        self.now = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


@dataclass
class _Link:
    """The MQTT link's load, as the desk reads it."""

    connected: bool = True
    resend_backlog: int = 0


@pytest.fixture
def table(tmp_path: Path) -> Iterator[tuple[TableCore, RequestDesk, _Clock]]:
    """A craps table with 10 rolls published, its desk, and the clock both read."""
    config = validate_config(
        {
            "table": {"id": "c1", "game": "CRAPS"},
            "dice_reader": {"port": str(tmp_path / "nothing")},
            "journal": {"path": str(tmp_path / "c1.db")},
        }
    )
    clock = _Clock()
    with Journal.open(config.journal_path) as journal:
        core = TableCore(config, journal, version="test", clock=clock)
        core.start()
        for roll in range(1, 11):
            core.ingest("dice_reader", DiceRolled(roll_id=roll, dice=(2, 3)))
        journal.mark_published(*(m.seq for m in journal.pending(10_000)))  # what resends find
        yield core, RequestDesk(core), clock


def _ask(name: str, user: str | None = None, **body: object) -> Incoming:
    payload = {"operator": "lab", "request_id": f"{name}-{len(body)}", **body}
    return Incoming.receive(name, json.dumps(payload).encode(), user=user)


def _answers(core: TableCore, name: str) -> list[dict[str, Any]]:
    found = core.journal.pending(10_000)
    return [json.loads(m.payload) for m in found if m.topic == f"response/{name}"]


def test_a_resend_returns_its_copies_to_the_shell_and_journals_them_nowhere_else(
    table: tuple[TableCore, RequestDesk, _Clock],
) -> None:
    core, desk, _ = table
    last = core.journal.last_seq
    answer = desk.decide(_ask("resend", from_seq=1, to_seq=last), _Link())
    assert answer.queued == 1  # the answer alone: the copies never go through the outbox
    assert answer.resend
    assert all(m.payload[:1] == b"{" and m.seq <= last for m in answer.resend)
    (ok,) = _answers(core, "resend")
    assert (ok["status"], ok["sent"]) == ("ok", len(answer.resend))
    assert answer.authenticate is None


@pytest.mark.parametrize(
    ("link", "error"),
    [
        (None, NO_LINK_ERROR),
        (_Link(connected=False), NO_LINK_ERROR),
        (_Link(resend_backlog=RESEND_BACKLOG), BACKLOG_ERROR),
    ],
    ids=["no-link", "offline", "backlog"],
)
def test_a_resend_the_link_cannot_take_is_refused_with_no_copies(
    table: tuple[TableCore, RequestDesk, _Clock], link: _Link | None, error: str
) -> None:
    core, desk, _ = table
    answer = desk.decide(_ask("resend", from_seq=1, to_seq=5), link)
    assert (answer.queued, answer.resend) == (1, [])
    (refused,) = _answers(core, "resend")
    assert (refused["status"], refused["error"]) == ("error", error)


def test_an_authenticate_is_handed_to_the_shell_then_answered_with_what_it_read(
    table: tuple[TableCore, RequestDesk, _Clock],
) -> None:
    core, desk, _ = table
    answer = desk.decide(_ask("authenticate", user="records", seed=SEED))
    assert answer.queued == 0  # nothing is answered before the files are read
    admitted = answer.authenticate
    assert admitted is not None
    assert admitted.asked.request.seed == SEED
    macs = (Component(path="daemon/app.py", digest="11" * 32),)
    assert desk.authenticated(admitted, (macs, "22" * 32)) == 1
    (ok,) = _answers(core, "authenticate")
    assert (ok["status"], ok["seed"], ok["digest"]) == ("ok", SEED, "22" * 32)
    assert ok["components"] == [{"path": "daemon/app.py", "hmac": "11" * 32}]
    (record,) = [r.record for r in core.journal.records(kind="decision")]
    assert json.loads(json.dumps(record))["authenticate"]["user"] == "records"
    # Files that cannot be read: the sentence is the answer.
    again = desk.decide(_ask("authenticate", seed=SEED)).authenticate
    assert again is not None
    assert desk.authenticated(again, "the installed software cannot be read: gone") == 1
    assert _answers(core, "authenticate")[-1]["error"].endswith("cannot be read: gone")


def test_authentications_are_six_at_once_then_one_every_ten_seconds_per_user(
    table: tuple[TableCore, RequestDesk, _Clock],
) -> None:
    core, desk, clock = table
    admitted = [desk.decide(_ask("authenticate", seed=SEED)) for _ in range(8)]
    assert [a.authenticate is not None for a in admitted] == [True] * 6 + [False] * 2
    refusals = _answers(core, "authenticate")
    assert [r["error"] for r in refusals] == [AUTH_RATE_ERROR] * 2
    # Another user has a rate of its own.
    assert desk.decide(_ask("authenticate", user="records", seed=SEED)).authenticate
    # A minute's rate comes back a token at a time: one every 60 / 6 seconds.
    clock.now += timedelta(seconds=60 / AUTHENTICATIONS_PER_MINUTE - 1)
    assert desk.decide(_ask("authenticate", seed=SEED)).authenticate is None
    clock.now += timedelta(seconds=1)
    assert desk.decide(_ask("authenticate", seed=SEED)).authenticate is not None
    assert desk.decide(_ask("authenticate", seed=SEED)).authenticate is None
