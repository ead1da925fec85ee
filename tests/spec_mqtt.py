"""A checker of published MQTT messages against ``shared/spec/mqtt-api.md`` (version 1).

Written from the spec's text and its "Published" table, deliberately without importing
``contract.payloads``: if the models there get the contract wrong, this catches it. Any
test that subscribes to a table (integration tests, the display's tests) can use it::

    from tests.spec_mqtt import check_message
    body = check_message(message.topic.value, bytes(message.payload), base="lammer/t1",
                         retained=message.retain)

``check_message`` returns the decoded body (a dict, or the text of ``availability``) or
raises ``SpecViolation`` (an ``AssertionError``) saying which clause is broken.

Fields added to the spec by lammer are checked too (``craps/reversal``; ``void`` and
``reason`` in ``bust_bonus/result``; the ``info`` topic, ``stops_payouts`` of an alarm,
``paytable_row`` and ``column`` of Bust Bonus, ``series`` and ``pending_roll`` ``since`` of
``craps/board``), marked "lammer addition" below. Unknown extra fields
are allowed: the spec lets the daemon add fields.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from decimal import Decimal
from typing import Any, Final

SPEC: Final = "mqtt-api.md"


class SpecViolation(AssertionError):
    """A message that breaks mqtt-api.md."""


# "topic under base" -> retained? (the "retained" column of the Published table)
RETAINED: Final[dict[str, bool]] = {
    "availability": True,
    "state": True,
    "alarms": True,
    "cover_all/payouts": True,
    "cover_all/result": True,
    "craps/board": True,
    "craps/roll": False,
    "craps/result": False,
    "bust_bonus/state": True,
    "bust_bonus/result": True,
    "craps/reversal": False,  # lammer addition
    "info": True,  # lammer addition
}
REQUEST_NAMES: Final = ("roll_decision", "void_roll", "overturn")

_TS = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z")
_ODDS = re.compile(r"(0|[1-9]\d*)(\.\d*[1-9])?")
_CARD = re.compile(r"[2-9TJQKA][cdhs]")
_GAMES = {"CSP", "FCP", "LIR", "MSP", "TCP", "UTH", "BJ"}
_POSITIONS = {f"P{i}" for i in range(1, 9)} | {"DL"}
_BETS = ("all_small", "all_tall", "make_em_all")
_TOTALS = {2, 3, 4, 5, 6, 8, 9, 10, 11, 12}
# Bust Bonus pay-table rows as SDAR 20:18:15:30.16(12) prints them (lammer addition)
_BUST_ROWS = ("Ace", "2", "3", "4", "5", "6", "7", "8", "9", "10", "Bust with three 8s")


def _fail(topic: str, what: str) -> SpecViolation:
    return SpecViolation(f"{topic}: {what} ({SPEC})")


class _Body:
    """Field access that names the topic and field in every complaint."""

    def __init__(self, topic: str, data: dict[str, Any]) -> None:
        self.topic = topic
        self.data = data

    def fail(self, what: str) -> SpecViolation:
        return _fail(self.topic, what)

    def has(self, key: str) -> Any:
        if key not in self.data:
            raise self.fail(f"missing {key!r}")
        return self.data[key]

    def integer(self, key: str, lo: int | None = None, hi: int | None = None) -> int:
        value = self.has(key)
        if type(value) is not int:
            raise self.fail(f"{key} must be an integer, got {value!r}")
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            raise self.fail(f"{key} out of range: {value}")
        return value

    def boolean(self, key: str) -> bool:
        value = self.has(key)
        if type(value) is not bool:
            raise self.fail(f"{key} must be true or false, got {value!r}")
        return value

    def text(self, key: str, *, nullable: bool = False) -> str | None:
        value = self.has(key)
        if value is None and nullable:
            return None
        if not isinstance(value, str) or not value:
            raise self.fail(f"{key} must be non-empty text, got {value!r}")
        return value

    def one_of(self, key: str, allowed: Iterable[object]) -> Any:
        value = self.has(key)
        allowed = list(allowed)
        # true == 1 in Python; JSON true is never the number 1.
        if value not in allowed or (
            isinstance(value, bool) and all(a is not value for a in allowed)
        ):
            raise self.fail(f"{key} must be one of {allowed}, got {value!r}")
        return value

    def odds(self, key: str, *, nullable: bool = False) -> str | None:
        # "Odds are strings holding an exact decimal, read 'to 1': "34", "1.5". Never a float."
        value = self.has(key)
        if value is None and nullable:
            return None
        if not isinstance(value, str) or not _ODDS.fullmatch(value):
            raise self.fail(f"{key} must be odds as an exact decimal string, got {value!r}")
        return value

    def card(self, value: object, where: str) -> str:
        if not isinstance(value, str) or not _CARD.fullmatch(value):
            raise self.fail(f"{where} must be a card code like 'As', got {value!r}")
        return value

    def cards(self, key: str) -> list[str]:
        value = self.has(key)
        if not isinstance(value, list):
            raise self.fail(f"{key} must be a list of cards, got {value!r}")
        return [self.card(c, f"{key}[{i}]") for i, c in enumerate(value)]

    def totals(self, value: object, where: str, *, sort: bool = True) -> list[int]:
        if not isinstance(value, list) or any(
            type(v) is not int or v not in _TOTALS for v in value
        ):
            raise self.fail(f"{where} must be a list of totals other than 7, got {value!r}")
        if sort and value != sorted(set(value)):
            raise self.fail(f"{where} must be sorted without repeats, got {value!r}")
        return value

    def dice(self, key: str) -> list[int]:
        value = self.has(key)
        if (
            not isinstance(value, list)
            or len(value) != 2
            or any(type(d) is not int or not 0 <= d <= 6 for d in value)
        ):
            raise self.fail(f"{key} must be two dice of 0-6, got {value!r}")
        return value

    def time(self, key: str, *, nullable: bool = False) -> str | None:
        value = self.has(key)
        if value is None and nullable:
            return None
        if not isinstance(value, str) or not _TS.fullmatch(value):
            raise self.fail(f"{key} must be a UTC time with milliseconds and Z, got {value!r}")
        return value

    def sub(self, key: str, *, nullable: bool = False) -> _Body | None:
        value = self.has(key)
        if value is None and nullable:
            return None
        if not isinstance(value, dict):
            raise self.fail(f"{key} must be an object, got {value!r}")
        return _Body(f"{self.topic} {key}", value)


def _alarm_list(body: _Body) -> None:
    alarms = body.has("alarms")
    if not isinstance(alarms, list):
        raise body.fail("alarms must be a list (empty when none)")
    for i, alarm in enumerate(alarms):
        if not isinstance(alarm, dict):
            raise body.fail(f"alarms[{i}] must be an object")
        a = _Body(f"{body.topic} alarms[{i}]", alarm)
        a.text("code")
        a.one_of("device", ["shuffler", "dice_reader", None])
        a.text("message")
        since = a.has("since")
        if not isinstance(since, str) or not _TS.fullmatch(since):
            raise a.fail(f"since must be a UTC time with milliseconds and Z, got {since!r}")
        a.boolean("stops_payouts")  # lammer addition


def _state(body: _Body) -> None:
    body.one_of("game", [*_GAMES, "CRAPS"])
    devices = body.has("devices")
    if not isinstance(devices, dict):
        raise body.fail("devices must be an object keyed by device")
    for name, device in devices.items():
        if name not in ("shuffler", "dice_reader"):
            raise body.fail(f"unknown device {name!r}")
        if not isinstance(device, dict):
            raise body.fail(f"devices.{name} must be an object")
        d = _Body(f"{body.topic} devices.{name}", device)
        d.boolean("connected")
        d.text("status")
        if name == "shuffler":  # "and mode for the shuffler"
            mode = d.has("mode")
            if mode is not None and mode not in _GAMES:
                raise d.fail(f"mode must be a game code or null, got {mode!r}")
    _alarm_list(body)


def _payouts(body: _Body) -> None:
    body.integer("round_id", 1, 999999)
    body.one_of("game", _GAMES - {"BJ"})
    body.integer("hands", 1, 9)
    rows = body.has("paytable")
    if not isinstance(rows, list) or not rows:
        raise body.fail("paytable must be a non-empty list of {hand, pays}")
    previous: Decimal | None = None
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            raise body.fail(f"paytable[{i}] must be an object")
        r = _Body(f"{body.topic} paytable[{i}]", row)
        r.text("hand")
        pays = Decimal(str(r.odds("pays")))
        if previous is not None and pays > previous:  # "highest first"
            raise r.fail("rows must be highest first")
        previous = pays


def _cover_all_result(body: _Body) -> None:
    body.integer("round_id", 1, 999999)
    body.one_of("game", _GAMES - {"BJ"})
    if body.has("hands") is not None:
        body.integer("hands", 1, 9)
    outcome = body.one_of("outcome", ["win", "no_qualifier", "void", "flagged"])
    highest = body.sub("highest", nullable=True)
    pays = body.odds("pays", nullable=True)
    reason = body.text("reason", nullable=True) if "reason" in body.data else None
    if outcome == "win":
        if highest is None or pays is None:
            raise body.fail("a win has highest and pays")
        highest.text("hand")
        highest.one_of("position", sorted(_POSITIONS))
        if not highest.cards("cards"):
            raise highest.fail("cards of the highest hand are shown at SETTLE")
    elif highest is not None or pays is not None:
        raise body.fail(f"{outcome}: highest and pays must be null")
    if outcome == "flagged" and reason is None:
        # "a flagged round as soon as the fault is found, without cards", with "reason"
        raise body.fail("a flagged result gives its reason")


def _bet(body: _Body, key: str) -> None:
    bet = body.sub(key)
    assert bet is not None
    bet.odds("pays")
    hit = bet.totals(bet.has("hit"), "hit")
    remaining = bet.totals(bet.has("remaining"), "remaining")
    if set(hit) & set(remaining):
        raise bet.fail("a number cannot be both hit and remaining")
    if bet.boolean("complete") != (not remaining):
        raise bet.fail("complete exactly when nothing remains")


def _board(body: _Body) -> None:
    body.one_of("paytable", [1, 2])
    body.boolean("betting_open")
    body.totals(body.has("numbers_hit"), "numbers_hit")
    for key in _BETS:
        _bet(body, key)
    pending = body.sub("pending_roll", nullable=True)
    if pending is not None:
        pending.integer("roll_id", 1, 999999)
        pending.dice("dice")
        if "since" in pending.data:  # lammer addition
            pending.time("since", nullable=True)
    if "series" in body.data:  # lammer addition
        _series(body)
    last = body.sub("last_roll", nullable=True)  # lammer addition
    if last is not None:
        last.integer("roll_id", 1, 999999)
        dice = last.dice("dice")
        status = last.one_of("status", ["counted", "noroll", "pending", "declared_invalid"])
        total = last.has("total")
        if total is not None and (status == "noroll" or total != sum(dice)):
            raise last.fail(f"total {total} is not the sum of {dice}")


def _series(body: _Body) -> None:
    """``series`` and ``series_count`` of ``craps/board`` (lammer addition): the counted
    rolls of the current series, oldest first; a seven ends a series, so none is in one."""
    series = body.has("series")
    if not isinstance(series, list):
        raise body.fail("series must be a list")
    totals = []
    for i, item in enumerate(series):
        if not isinstance(item, dict):
            raise body.fail(f"series[{i}] must be an object")
        roll = _Body(f"{body.topic} series[{i}]", item)
        roll.integer("roll_id", 1, 999999)
        dice = roll.dice("dice")
        total = roll.integer("total")
        if 0 in dice or total != sum(dice) or total == 7:
            raise roll.fail(f"a counted roll of a series: total {total} of {dice}")
        roll.time("at", nullable=True)
        roll.boolean("new_number")
        wins = roll.has("wins")
        if not isinstance(wins, list) or any(w not in _BETS for w in wins):
            raise roll.fail(f"wins must be a list of bets, got {wins!r}")
        totals.append(total)
    count = body.integer("series_count", len(series))
    if count == len(series) and sorted(set(totals)) != body.has("numbers_hit"):
        # The whole series is named: its totals are the numbers hit this series.
        raise body.fail(f"numbers_hit {body.has('numbers_hit')} are not the series' {totals}")


def _roll(body: _Body) -> None:
    body.integer("roll_id", 1, 999999)
    dice = body.dice("dice")
    total = body.has("total")
    if total is not None:
        body.integer("total", 2, 12)
        if 0 not in dice and total != sum(dice):
            raise body.fail(f"total {total} is not the sum of {dice}")
    elif 0 not in dice:
        raise body.fail("total is null only when a die is unknown")
    body.one_of("status", ["counted", "noroll", "pending", "declared_invalid", "reinstated"])
    body.text("reason", nullable=True)


def _craps_result(body: _Body) -> None:
    body.integer("roll_id", 1, 999999)
    body.one_of("bet", _BETS)
    if body.one_of("outcome", ["win", "lose"]) == "win":
        body.odds("pays")  # "pays (for win)"
    elif body.data.get("pays") is not None:
        raise body.fail("a lost bet has no pays")


def _craps_reversal(body: _Body) -> None:  # lammer addition
    body.integer("roll_id", 1, 999999)
    body.one_of("bet", _BETS)
    body.one_of("outcome", ["win", "lose"])


def _bust_state(body: _Body) -> None:
    if body.has("round_id") is not None:
        body.integer("round_id", 1, 999999)
    body.boolean("betting_open")
    up = body.has("up_card")
    if up is not None:
        body.card(up, "up_card")
    cards = body.cards("dealer_cards")
    # "dealer_cards (face-up cards only)": the up card comes first, and nothing without it.
    if cards and cards[0] != up:
        raise body.fail("dealer_cards start with the up card")
    row = body.one_of("paytable_row", [*_BUST_ROWS[:-1], None])  # lammer addition
    if (row is None) != (up is None):
        raise body.fail("paytable_row is the up card's row, null before the up card")


def _bust_result(body: _Body) -> None:
    body.integer("round_id", 1, 999999)
    outcome = body.one_of("outcome", ["win", "lose", "flagged", "void"])  # void: addition
    up = body.has("up_card")
    if up is not None:
        body.card(up, "up_card")
    body.cards("dealer_cards")
    if body.has("total") is not None:
        body.integer("total", 2)
    body.boolean("suited")
    body.boolean("three_eights")
    if outcome == "win":
        body.odds("pays")  # "pays (for win)"
    elif body.data.get("pays") is not None:
        raise body.fail(f"{outcome}: no pays")
    if outcome == "flagged" and not body.data.get("reason"):  # addition
        raise body.fail("a flagged result gives its reason")
    row = body.one_of("paytable_row", [*_BUST_ROWS, None])  # lammer addition
    column = body.one_of("column", ["suited", "off_suit", None])  # lammer addition
    if outcome in ("void", "flagged") and row is not None:
        raise body.fail(f"{outcome}: paytable_row is null")
    if (outcome == "win") != (column is not None):
        raise body.fail("column names the cell that paid: for a win, and only for it")
    if column is not None and (column == "suited") != body.data["suited"]:
        raise body.fail("column is suited exactly when the hand is suited")
    if row == _BUST_ROWS[-1] and not body.data["three_eights"]:
        raise body.fail("the three 8s row applies to three eights only")


def _info(body: _Body) -> None:  # lammer addition  # noqa: C901  the spec's info payload checked field by field
    body.text("version")
    body.text("contract")
    game = body.one_of("game", [*_GAMES, "CRAPS"])
    tables = body.sub("paytables")
    assert tables is not None
    cover_all = tables.sub("cover_all", nullable=True)
    craps = tables.sub("bonus_craps", nullable=True)
    bust = tables.sub("bust_bonus", nullable=True)
    if (cover_all is not None) != (game in _GAMES - {"BJ"}):
        raise body.fail("a Cover All pay table exactly at a poker table")
    if (craps is not None) != (game == "CRAPS") or (bust is not None) != (game == "BJ"):
        raise body.fail("the pay table of the table's own game, and no other")
    if cover_all is not None:
        if cover_all.one_of("game", _GAMES - {"BJ"}) != game:
            raise cover_all.fail("the pay table of the table's game")
        cover_all.text("title")
        columns = cover_all.has("columns")
        if (
            not isinstance(columns, list)
            or not columns
            or not all(type(c) is int and 1 <= c <= 9 for c in columns)
        ):
            raise cover_all.fail(f"columns are total hands 1..9, got {columns!r}")
        rows = cover_all.has("rows")
        if not isinstance(rows, list) or not rows:
            raise cover_all.fail("rows must be a non-empty list")
        for i, row in enumerate(rows):
            r = _Body(f"{cover_all.topic} rows[{i}]", row)
            r.text("hand")
            pays = r.has("pays")
            if not isinstance(pays, list) or len(pays) != len(columns):
                raise r.fail("one pays per column")
            for cell in pays:
                if not isinstance(cell, str) or not _ODDS.fullmatch(cell):
                    raise r.fail(f"pays are exact decimal strings, got {cell!r}")
    if craps is not None:
        craps.one_of("paytable", [1, 2])
        pays = craps.sub("pays")
        assert pays is not None
        for bet in _BETS:
            pays.odds(bet)
    if bust is not None:
        bust.integer("decks", 1, 8)
        bust.boolean("dealer_hits_soft_17")
        rows = bust.has("rows")
        if not isinstance(rows, list) or [
            r.get("row") if isinstance(r, dict) else None for r in rows
        ] != list(_BUST_ROWS):
            raise bust.fail(f"rows are {list(_BUST_ROWS)} in that order")
        for i, row in enumerate(rows):
            r = _Body(f"{bust.topic} rows[{i}]", row)
            r.odds("off_suit")
            r.odds("suited")
    software = body.sub("software", nullable=True)  # 1.4
    if software is not None:
        software.text("version")
        digest = software.has("digest")
        if not isinstance(digest, str) or not _HEX64.fullmatch(digest):
            raise software.fail(f"digest is a SHA-256 in hex, got {digest!r}")


def _response(body: _Body) -> None:
    request_id = body.has("request_id")
    if request_id is not None and (
        isinstance(request_id, bool) or not isinstance(request_id, str | int)
    ):
        raise body.fail(f"request_id echoes the request's, got {request_id!r}")
    if body.one_of("status", ["ok", "error"]) == "error":
        body.text("error")  # "a sentence a person understands"
    elif body.topic.endswith("response/authenticate"):
        _authenticated(body)


_HEX64: Final = re.compile(r"[0-9a-f]{64}")


def _authenticated(body: _Body) -> None:
    """1.4: ``seed`` echoed (hex, 16 to 64 bytes), ``digest`` the HMAC-SHA256 over the sorted
    list of per-component HMACs, ``components`` each path with its HMAC."""
    seed = body.has("seed")
    if not isinstance(seed, str) or not re.fullmatch(r"(?:[0-9a-f]{2}){16,64}", seed):
        raise body.fail(f"seed echoes a 16 to 64 byte hex seed, got {seed!r}")
    if not isinstance(body.has("digest"), str) or not _HEX64.fullmatch(body.data["digest"]):
        raise body.fail("digest is an HMAC-SHA256 in hex")
    parts = body.has("components")
    if not isinstance(parts, list) or not parts:
        raise body.fail("components lists each component with its HMAC")
    paths = [p.get("path") if isinstance(p, dict) else None for p in parts]
    named = [p for p in paths if isinstance(p, str)]
    if len(named) != len(paths) or named != sorted(named, key=lambda p: p.encode()):
        raise body.fail("components are sorted by path")
    if not all(isinstance(p.get("hmac"), str) and _HEX64.fullmatch(p["hmac"]) for p in parts):
        raise body.fail("each component's hmac is an HMAC-SHA256 in hex")


_CHECKS: Final[dict[str, Callable[[_Body], None]]] = {
    "state": _state,
    "alarms": _alarm_list,
    "cover_all/payouts": _payouts,
    "cover_all/result": _cover_all_result,
    "craps/board": _board,
    "craps/roll": _roll,
    "craps/result": _craps_result,
    "craps/reversal": _craps_reversal,
    "bust_bonus/state": _bust_state,
    "bust_bonus/result": _bust_result,
    "info": _info,
}


def relative_topic(topic: str, base: str | None) -> str:
    """``topic`` under ``base`` (``lammer/t1/state`` -> ``state``); as given if base is None."""
    if base is None:
        return topic
    if not topic.startswith(base + "/"):
        raise SpecViolation(f"{topic}: not under the base topic {base!r} ({SPEC})")
    return topic[len(base) + 1 :]


def check_message(
    topic: str, payload: bytes, *, base: str | None = None, retained: bool | None = None
) -> dict[str, Any] | str:
    """Check one published message; return its body (the text for ``availability``).

    ``topic`` is relative to the base topic, or full when ``base`` (``<prefix>/<table>``)
    is given, in which case ``table`` must be the base's table id. ``retained`` is the
    message's retain flag as *published* (a subscriber sees it only for messages the
    broker held when it subscribed; pass None when unknown).
    """
    rel = relative_topic(topic, base)
    is_response = rel.startswith("response/") and rel.count("/") == 1 and len(rel) > 9
    if rel not in RETAINED and not is_response:
        raise SpecViolation(f"{rel}: not a topic of {SPEC}")
    if retained is not None and retained != RETAINED.get(rel, False):
        raise _fail(rel, f"must {'' if RETAINED.get(rel) else 'not '}be retained")
    if payload == b"" and RETAINED.get(rel, False):
        # MQTT's way to delete a retained message (3.1.1 section 3.3.1.3): lammer clears
        # the retained topics another game of the same table id left (docs/mqtt.md).
        return ""
    if rel == "availability":
        if payload not in (b"online", b"offline"):
            raise _fail(rel, f"plain text online or offline, got {payload!r}")
        return payload.decode()
    try:
        data = json.loads(payload.decode("utf-8"), parse_float=_no_float)
    except (UnicodeDecodeError, ValueError) as exc:
        raise _fail(rel, f"payload is not UTF-8 JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise _fail(rel, "payload must be a JSON object")
    body = _Body(rel, data)
    table = body.text("table")
    if base is not None and table != base.rsplit("/", 1)[-1]:
        raise body.fail(f"table {table!r} is not the base topic's table")
    body.integer("seq", 1)
    ts = body.has("ts")
    if not isinstance(ts, str) or not _TS.fullmatch(ts):
        raise body.fail(f"ts must be UTC ISO 8601 with milliseconds and Z, got {ts!r}")
    if is_response:
        _response(body)
    else:
        _CHECKS[rel](body)
    return data


def _no_float(text: str) -> object:
    # No field of the spec is a float: odds are strings, everything else is an integer.
    raise ValueError(f"a float in a payload: {text}")


def check_seq_order(bodies: Iterable[dict[str, Any]]) -> None:
    """``seq`` strictly increasing over the live messages a display receives, once a
    ``seq`` seen before is dropped ("a display ignores a seq it has already seen").

    Leave out messages received with the retain flag (the broker's stored state, sent on
    subscribing): they come topic by topic, not in ``seq`` order."""
    seen: set[int] = set()
    last = 0
    for body in bodies:
        seq = body["seq"]
        if seq in seen:
            continue
        if seq <= last:
            raise SpecViolation(f"seq {seq} arrived after {last} ({SPEC}, Conventions)")
        seen.add(seq)
        last = seq
