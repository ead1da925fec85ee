"""The parts of ``lammer web`` without a server: the store's ordering, the payload checks
against what the daemon really publishes, the configuration, the users file."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal

import pytest
from argon2 import PasswordHasher

from contract.payloads import TOPICS, PayloadError, parse, relayed
from daemon.config import TableSection
from daemon.publications import (
    craps_board_publication,
    info_publication,
    outcome_publication,
)
from display.errors import UsersFileError, WebConfigError
from display.web import users as users_module
from display.web.config import load_web_config
from display.web.store import Store
from display.web.users import Users, add_user, dummy_hash, read_users_roles
from rules.craps import board as craps_board
from rules.craps import initial_state
from rules.events import BustBonusResult

TS = "2026-06-15T20:31:07.412Z"


def message(topic: str, seq: int, body: dict[str, Any], table: str = "t1") -> tuple[str, bytes]:
    return f"lammer/{table}/{topic}", json.dumps(
        {**body, "table": table, "seq": seq, "ts": TS}
    ).encode()


def validate(topic: str, table: str, payload: bytes) -> dict[str, Any]:
    """What ``lammer web`` relays of a payload: the contract's parse, as the pages get it."""
    return relayed(parse(topic, payload, table=table))


def decoded(update: tuple[str, str] | None) -> dict[str, Any]:
    assert update is not None
    body: dict[str, Any] = json.loads(update[1])
    return body


# -- the contract: what the daemon publishes validates ------------------------------------


def test_what_the_daemon_builds_validates_for_the_pages() -> None:
    info = info_publication(
        table=TableSection(id="t1", game="BJ"),
        version="9.9",
        craps_paytable=1,
        decks=6,
        dealer_hits_soft_17=False,
    )
    board = craps_board_publication(craps_board(initial_state(1)), table="t1")
    result = outcome_publication(
        BustBonusResult(
            round_id=51,
            outcome="win",
            up_card="8h",
            dealer_cards=("8h", "8h", "8h"),
            total=24,
            suited=True,
            three_eights=True,
            pays=Decimal(75),
            reason=None,
            paytable_row="Bust with three 8s",
            column="suited",
        ),
        table="t1",
    )
    assert result is not None
    for publication in (info, board, result):
        body = {**publication.body, "seq": 3, "ts": TS}
        assert validate(publication.topic, "t1", json.dumps(body).encode()) == body
    assert result.body["paytable_row"] == "Bust with three 8s"


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        (b"\xff\xfe", "not_json"),
        (b"[1, 2]", "not_json"),
        (b'{"seq": NaN}', "not_json"),
        (b"[" * 100_000, "too_large"),
        (b"[" * 10_000, "not_json"),
        (b'{"table":"t1","seq":1,"ts":"yesterday","alarms":[]}', "invalid"),
        (b'{"table":"t1","seq":true,"ts":"2026-06-15T20:31:07.412Z","alarms":[]}', "invalid"),
        (b'{"table":"t2","seq":1,"ts":"2026-06-15T20:31:07.412Z","alarms":[]}', "wrong_table"),
    ],
)
def test_bad_payloads_are_refused_with_a_reason(payload: bytes, reason: str) -> None:
    with pytest.raises(PayloadError) as caught:
        validate("alarms", "t1", payload)
    assert caught.value.reason == reason


def test_a_card_of_another_form_or_odds_as_a_float_are_refused() -> None:
    body = {"table": "t1", "seq": 1, "ts": TS, "round_id": 1, "game": "UTH", "hands": 2}
    body |= {"paytable": [{"hand": "Royal Flush", "pays": 100.0}]}
    with pytest.raises(PayloadError):
        validate("cover_all/payouts", "t1", json.dumps(body).encode())
    state = {"table": "t1", "seq": 2, "ts": TS, "betting_open": False, "up_card": "<b>",
             "dealer_cards": []}  # fmt: skip
    with pytest.raises(PayloadError):
        validate("bust_bonus/state", "t1", json.dumps(state).encode())


# -- the store: a view ordered by seq ------------------------------------------------------


def test_store_draws_no_older_retained_state() -> None:
    store = Store("lammer")
    board = craps_board_publication(craps_board(initial_state(1)), table="t1").body
    first = decoded(store.apply(*message("craps/board", 5, board)))
    assert first["payload"]["seq"] == 5
    assert first["retained"] is True
    assert store.apply(*message("craps/board", 5, board)) is None  # republished as it was
    assert store.apply(*message("craps/board", 4, board)) is None  # older
    assert decoded(store.apply(*message("craps/board", 6, board)))["payload"]["seq"] == 6
    snapshot = [json.loads(text) for text in store.snapshot("t1")]
    assert [m["payload"]["seq"] for m in snapshot] == [6]


ROLL = {"roll_id": 1, "dice": [1, 1], "total": 2, "status": "counted", "reason": None}


def roll(seq: int, prev: int | None, table: str = "t1") -> tuple[str, bytes]:
    """A ``craps/roll`` of ``table`` with its ``seq`` and ``prev_seq``."""
    return message("craps/roll", seq, {**ROLL, "roll_id": seq, "prev_seq": prev}, table)


def seqs(updates: list[tuple[str | None, str]]) -> list[int]:
    return [json.loads(text)["payload"]["seq"] for _, text in updates]


def test_store_receives_through_the_feed_once_and_in_order() -> None:
    store = Store("lammer")
    assert seqs(store.receive(*roll(10, 9), now=0.0)) == [10]  # the stream starts here
    assert store.receive(*roll(10, 9), now=0.1) == []  # a QoS 1 repeat, a copy asked by another
    assert store.receive(*roll(14, 12), now=0.2) == []  # 12 (at least) is missing: held
    assert not store.resends  # a broker that reorders gets its wait first
    assert seqs(store.receive(*roll(12, 10), now=0.3)) == [12, 14]  # in order, the hole closed
    assert store.receive(*roll(16, 15), now=0.4) == []
    assert store.tick(0.5 + store.feed.wait) == []
    (asked,) = store.resends  # the wait is over: the follower publishes this
    assert (asked.topic, asked.from_seq, asked.to_seq) == ("lammer/t1/request/resend", 15, 15)
    assert json.loads(asked.payload("display"))["operator"] == "display"
    assert seqs(store.receive(*roll(15, 14), now=2.0)) == [15, 16]  # the copy fills it
    assert [m["payload"]["seq"] for m in map(json.loads, store.snapshot("t1"))] == [
        10, 12, 14, 15, 16
    ]  # fmt: skip


def test_junk_with_a_seq_never_takes_the_seq_of_the_real_message() -> None:
    store = Store("lammer")
    store.receive(*roll(3, None), now=0.0)
    topic, real = roll(4, 3)
    junk = json.dumps({"table": "t1", "seq": 4, "prev_seq": 3, "ts": TS}).encode()  # no dice
    assert store.receive(topic, junk, now=0.1) == []
    assert store.receive("lammer/t1/response/resend", b'{"seq": 5}', now=0.1) == []
    assert seqs(store.receive(topic, real, now=0.2)) == [4]  # the real one is drawn
    assert store.dropped == {"invalid": 2}


def test_a_gap_that_will_not_be_filled_is_shown_to_the_pit() -> None:
    store = Store("lammer")
    store.receive(*roll(3, None), now=0.0)
    store.receive(*roll(9, 7), now=0.0)
    now, shown = 0.0, list[tuple[str | None, str]]()
    while not shown and now < 120:  # nobody answers the resend requests
        now += 0.5
        shown = store.tick(now)
    gap = json.loads(shown[0][1])
    assert shown[0][0] == "t1"
    assert (gap["t"], gap["table"], gap["from_seq"], gap["to_seq"]) == ("gap", "t1", 4, 7)
    assert gap["reason"] == "unanswered"
    assert seqs(shown[1:]) == [9]  # then what came after it
    assert store.counters()["gaps"] == 1
    assert gap in [json.loads(text) for text in store.snapshot("t1")]  # a page opened later


def test_the_store_follows_each_controllers_bridge() -> None:
    store = Store("lammer", controllers={"ctl1": ["t1", "t2"]})
    (lost,) = store.receive("lammer-floor/bridge/ctl1", b"0", now=0.0, retained=True)
    body = json.loads(lost[1])
    assert lost[0] is None  # for every page
    assert (body["t"], body["controller"], body["connected"]) == ("bridge", "ctl1", False)
    assert body["tables"] == ["t1", "t2"]
    assert store.receive("lammer-floor/bridge/ctl1", b"0", now=0.1) == []  # nothing new
    assert store.receive("lammer-floor/bridge/ctl1", b"junk", now=0.1) == []
    (back,) = store.receive("lammer-floor/bridge/ctl1", b"1", now=0.2)
    assert json.loads(back[1])["connected"] is True
    (other,) = store.receive("lammer-floor/bridge/ctl9", b"1", now=0.3)
    assert json.loads(other[1])["tables"] == []  # not declared: drawn, with no table
    kinds = [json.loads(text)["t"] for text in store.snapshot()]
    assert kinds == ["bridge", "bridge"]


def test_store_keeps_the_last_rolls_and_forgets_a_deleted_state() -> None:
    store = Store("lammer")
    roll = {"roll_id": 1, "dice": [1, 1], "total": 2, "status": "counted", "reason": None}
    for seq in range(1, 61):
        store.apply(*message("craps/roll", seq, {**roll, "roll_id": seq}))
    board = craps_board_publication(craps_board(initial_state(1)), table="t1").body
    store.apply(*message("craps/board", 61, board))
    cleared = decoded(store.apply("lammer/t1/craps/board", b""))
    assert cleared["payload"] is None
    kept = [json.loads(text)["payload"]["roll_id"] for text in store.snapshot("t1")]
    assert kept == list(range(11, 61))  # the history's last fifty, oldest first; no board


def test_store_sends_the_last_fifty_results_of_a_retained_topic_once_each() -> None:
    store = Store("lammer")
    result = {"round_id": 1, "game": "UTH", "hands": 5, "outcome": "no_qualifier",
              "highest": None, "pays": None, "reason": None}  # fmt: skip
    for seq in range(1, 56):
        store.apply(*message("cover_all/result", seq, {**result, "round_id": seq}))
    kept = [json.loads(text)["payload"]["round_id"] for text in store.snapshot("t1")]
    assert kept == list(range(6, 56))  # the newest (retained) once, not twice


def test_store_drops_and_counts_what_is_not_the_contract() -> None:
    store = Store("lammer", max_tables=2)
    assert store.apply("lammer/t.1/state", b"{}") is None
    assert store.apply("lammer/t1/availability", b"maybe") is None
    assert store.apply("lammer/t1/state", b"{}") is None
    assert store.apply("lammer/t1/request/roll_decision", b"{}") is None  # not drawn, not bad
    assert store.apply("lammer/t1/some/new/topic", b"{}") is None  # the daemon may add topics
    assert decoded(store.apply("lammer/t1/availability", b"online"))["payload"] == "online"
    assert store.apply("lammer/t2/availability", b"online") is not None
    assert store.apply("lammer/t3/availability", b"online") is None
    assert store.dropped == {"bad_topic": 1, "invalid": 2, "too_many_tables": 1}
    assert store.ignored["unknown_topic"] == 1
    assert store.ignored["request_response"] == 1


def test_every_topic_the_pages_draw_is_one_the_daemon_publishes() -> None:
    from contract.schemas import model_for

    for topic, (_, retained) in TOPICS.items():
        assert model_for(topic)[1] == retained, topic


# -- configuration ------------------------------------------------------------------------


def test_config_file_with_command_line_on_top(tmp_path: Path) -> None:
    (tmp_path / "secret").write_text("pw\n")
    (tmp_path / "web.toml").write_text(
        'mqtt_host = "broker"\nmqtt_port = 1884\nmqtt_user = "display"\n'
        'mqtt_password_file = "secret"\nlisten = "[::1]:9000"\n'
    )
    config = load_web_config(tmp_path / "web.toml", {"mqtt_port": 1999, "prefix": None})
    assert (config.mqtt_host, config.mqtt_port, config.prefix) == ("broker", 1999, "lammer")
    assert config.mqtt_password() == "pw"
    assert config.listen_address == ("::1", 9000)


def test_config_reports_every_problem(tmp_path: Path) -> None:
    (tmp_path / "web.toml").write_text(
        'mqtt_prot = 1884\nkeepalive = "30"\nlisten = "8080"\nmqtt_password_file = "nope"\n'
        'prefix = "a/#"\n'
    )
    with pytest.raises(WebConfigError) as caught:
        load_web_config(tmp_path / "web.toml", {})
    problems = "\n".join(caught.value.problems)
    assert "mqtt_prot: unknown key; did you mean 'mqtt_port'?" in problems
    assert "keepalive: must be an integer" in problems
    assert "listen: must be HOST:PORT" in problems
    assert "mqtt_password_file: no such file" in problems
    assert "prefix: must not hold '+', '#'" in problems
    assert len(caught.value.problems) == 5


@pytest.mark.heavy
def test_cli_bad_config_exits_2(tmp_path: Path) -> None:
    done = subprocess.run(
        [str(Path(sys.executable).parent / "lammer"), "web", "--mqtt-port", "0"],
        capture_output=True,
        check=False,
        timeout=120,  # a bound on failure: a loaded machine starts Python slowly
    )
    assert done.returncode == 2
    assert b"mqtt_port: must be between 1 and 65535, got 0" in done.stderr


# -- users ------------------------------------------------------------------------------------


@pytest.mark.heavy
def test_adduser_writes_a_0600_file_of_argon2_hashes(tmp_path: Path) -> None:
    users = tmp_path / "users"
    lammer = str(Path(sys.executable).parent / "lammer")
    for name, password in (("alice", "first password"), ("bob", "second password")):
        done = subprocess.run(
            [lammer, "web", "adduser", name, "--users", str(users)],
            input=f"{password}\n".encode(),
            capture_output=True,
            check=False,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        assert f"added {name}".encode() in done.stdout
    assert stat.S_IMODE(users.stat().st_mode) == 0o600
    text = users.read_text()
    assert "first password" not in text
    assert "$argon2id$" in text
    checker = Users(users)
    assert checker.verify("alice", "first password")
    assert not checker.verify("alice", "second password")
    assert not checker.verify("carol", "first password")
    changed = add_user(users, "alice", "a new password")
    assert not changed
    assert Users(users).verify("alice", "a new password")
    assert list(read_users_roles(users)) == ["alice", "bob"]


@pytest.mark.parametrize(
    ("name", "password"), [("a b", "long enough pw"), ("", "long enough pw"), ("x", "short")]
)
def test_adduser_refuses_bad_names_and_short_passwords(
    tmp_path: Path, name: str, password: str
) -> None:
    with pytest.raises(UsersFileError):
        add_user(tmp_path / "users", name, password)
    assert not (tmp_path / "users").exists()


def test_a_users_file_others_can_read_is_refused(tmp_path: Path) -> None:
    users = tmp_path / "users"
    add_user(users, "alice", "long enough pw")
    os.chmod(users, 0o644)
    with pytest.raises(UsersFileError, match="chmod 600"):
        Users(users)


@pytest.mark.heavy
def test_roles_and_a_users_file_from_before_roles(tmp_path: Path) -> None:
    users = tmp_path / "users"
    add_user(users, "alice", "long enough pw")  # the default: a stickperson
    add_user(users, "pat", "long enough pw", ["pit"])
    add_user(users, "sam", "long enough pw", ["pit", "stick"])
    checker = Users(users)
    assert checker.roles("alice") == {"stick"}
    assert checker.roles("pat") == {"pit"}
    assert checker.roles("sam") == {"pit", "stick"}
    assert checker.roles("nobody") == frozenset()
    assert ":pit,stick:$argon2id$" in users.read_text()
    # A line written before roles existed (NAME:hash) is a stickperson and logs in.
    hashed = users.read_text().splitlines()[1].split(":", 2)[2]
    old = tmp_path / "old-users"
    old.write_text(f"# an older lammer\nalice:{hashed}\n")
    old.chmod(0o600)
    legacy = Users(old)
    assert legacy.roles("alice") == {"stick"}
    assert legacy.verify("alice", "long enough pw")
    # adduser on such a file keeps the old user and writes roles from now on.
    add_user(old, "pat", "long enough pw", ["pit"])
    assert Users(old).roles("alice") == {"stick"}
    assert old.read_text().count(":stick:$argon2id$") == 1


def test_importing_the_users_module_makes_no_argon2_hash() -> None:
    # A fresh interpreter whose Argon2 hasher counts its hashes: the import makes none (the
    # dummy hash cost every import of the web package ~0.2 s of CPU), the first Users makes it.
    code = (
        "import argon2\n"
        "made = []\n"
        "real = argon2.PasswordHasher.hash\n"
        "argon2.PasswordHasher.hash = lambda self, *a, **k: made.append(1) or real(self, *a, **k)\n"
        "from display.web import users\n"
        "print(len(made), users.dummy_hash.cache_info().currsize)\n"
        "users.Users(None)\n"
        "users.Users(None)\n"
        "print(len(made), users.dummy_hash.cache_info().currsize)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0", "0", "1", "1"]


class _CountingHasher(PasswordHasher):
    """Argon2id with a small cost (the test's CPU), recording each hash it verifies against."""

    def __init__(self) -> None:
        super().__init__(time_cost=1, memory_cost=64, parallelism=1)
        self.verified: list[str] = []

    def verify(self, hash: str | bytes, password: str | bytes) -> Literal[True]:
        self.verified.append(hash if isinstance(hash, str) else hash.decode())
        return super().verify(hash, password)


def test_an_unknown_name_is_verified_against_a_dummy_hash_of_the_same_cost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    hasher = _CountingHasher()
    monkeypatch.setattr(users_module, "_HASHER", hasher)
    dummy_hash.cache_clear()  # made anew by this hasher; the next test's Users makes its own
    request.addfinalizer(dummy_hash.cache_clear)
    users = tmp_path / "users"
    add_user(users, "alice", "long enough pw")
    alice = read_users_roles(users)["alice"][1]
    checker = Users(users)
    assert dummy_hash.cache_info().currsize == 1  # made by the server's Users, before any login
    dummy = dummy_hash()
    assert not checker.verify("carol", "long enough pw")
    assert not checker.verify("not a name", "long enough pw")
    assert hasher.verified == [dummy, dummy]
    assert dummy != alice
    # The same Argon2 variant, version and parameters as a user's hash: the same work.
    assert dummy.split("$")[1:4] == alice.split("$")[1:4]
    assert not checker.verify("alice", "a wrong password")
    assert checker.verify("alice", "long enough pw")
    assert hasher.verified[2:] == [alice, alice]
    assert dummy_hash() is dummy  # made once


def test_an_unknown_role_is_refused_with_its_line(tmp_path: Path) -> None:
    users = tmp_path / "users"
    with pytest.raises(UsersFileError, match="roles must be pit and/or stick, got boss"):
        add_user(users, "pat", "long enough pw", ["boss"])
    add_user(users, "pat", "long enough pw", ["pit"])
    users.write_text(users.read_text().replace(":pit:", ":pit,boss:"))
    with pytest.raises(UsersFileError, match=r"users:2: roles must be pit and/or stick, got boss"):
        read_users_roles(users)
