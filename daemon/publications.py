"""What the table publishes: the rules' outcomes and the table's state as mqtt-api.md bodies.

Every builder returns a ``Publication(topic, retained, body)`` whose body holds ``table``
and is validated by its topic's model (``contract.payloads``); ``seq`` and ``ts`` are the
journal's to add (``Journal.append_publish``), because a republished retained state keeps
its original pair (mqtt-api.md, "Conventions").

* ``outcome_publication(outcome, table=...)``: one rules outcome (``None`` for the alarm
  outcomes, which change the active set published on ``alarms`` and ``state``);
* ``state_publications(state, table=...)``: every retained state topic of a
  ``rules.table.TableState`` (``state``, ``alarms``, and ``craps/board`` or
  ``bust_bonus/state`` for the game, also built alone from the rules' views by
  ``craps_board_publication`` and ``bust_bonus_state_publication``); the daemon queues
  those whose body changed;
* ``info_publication(...)``: the table's ``info`` (its ``[table]`` section, version, pay
  tables in use).

A body is built straight from the rules' values; whatever the shapes of the spec leave
open is decided once here: ``mode`` appears for the shuffler only; each alarm carries
``stops_payouts``; times are written by ``daemon.clock.format_ts``.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any, assert_never

from contract.payloads import (
    CONTRACT_VERSION,
    TOPICS,
    Alarm,
    AlarmsBody,
    BetProgressModel,
    BonusCrapsPaytableModel,
    BustBonusPaytableModel,
    BustBonusResultBody,
    BustBonusStateBody,
    BustRowModel,
    CoverAllPayoutsBody,
    CoverAllPaytableModel,
    CoverAllResultBody,
    CoverAllRowModel,
    CrapsBoardBody,
    CrapsResultBody,
    CrapsReversalBody,
    CrapsRollBody,
    DeviceState,
    HighestModel,
    InfoBody,
    LastRollModel,
    PayRowModel,
    PaytablesModel,
    PendingRollModel,
    Publication,
    SeriesRollModel,
    SoftwareModel,
    StateBody,
    format_odds,
    publication,
)
from contract.topics import Topic, game_topics
from daemon.clock import format_ts
from daemon.config import TableSection
from rules import bust_bonus, craps
from rules.alarms import PAYOUT_ALARMS
from rules.cover_all import read_hand
from rules.events import (
    POKER_GAMES,
    AlarmCleared,
    AlarmRaised,
    BustBonusResult,
    CoverAllPayouts,
    CoverAllResult,
    CrapsBetReversed,
    CrapsBetSettled,
    Device,
    Outcome,
    RollRecorded,
)
from rules.paytables import BUST_BONUS, bonus_craps_odds, cover_all_table
from rules.table import TableState


def retained_topics(game: str) -> frozenset[str]:
    """The retained topics a table of ``game`` publishes (``availability`` included): any
    other retained topic under its base is not this table's (a table id used before for
    another game) and is cleared at start (``MqttLink.survey``)."""
    return frozenset(
        topic
        for topic in game_topics(game)
        if topic == Topic.AVAILABILITY or TOPICS[topic][1]  # TOPICS: (model, retained)
    )


def _odds_or_none(value: Decimal | None) -> str | None:
    return None if value is None else format_odds(value)


# ---------------------------------------------------------------------------------------
# Outcomes


def outcome_publication(outcome: Outcome, *, table: str) -> Publication | None:
    """The publication of one rules outcome, or ``None`` for ``AlarmRaised`` and
    ``AlarmCleared``: they change the active set, which goes out whole on ``alarms`` and
    ``state`` (``state_publications``).

    Raises ``ValueError`` (a ``pydantic.ValidationError``) for an outcome the contract
    refuses, such as a flagged result that carries cards.
    """
    match outcome:
        case CoverAllPayouts():
            return _cover_all_payouts(outcome, table)
        case CoverAllResult():
            return _cover_all_result(outcome, table)
        case RollRecorded():
            return publication(
                Topic.CRAPS_ROLL,
                CrapsRollBody(
                    table=table,
                    roll_id=outcome.roll_id,
                    dice=list(outcome.dice),
                    total=outcome.total,
                    status=outcome.status,
                    reason=outcome.reason,
                ),
            )
        case CrapsBetSettled():
            return publication(
                Topic.CRAPS_RESULT,
                CrapsResultBody(
                    table=table,
                    roll_id=outcome.roll_id,
                    bet=outcome.bet,
                    outcome=outcome.outcome,
                    pays=_odds_or_none(outcome.pays),
                ),
            )
        case CrapsBetReversed():
            return publication(
                Topic.CRAPS_REVERSAL,
                CrapsReversalBody(
                    table=table, roll_id=outcome.roll_id, bet=outcome.bet, outcome=outcome.outcome
                ),
            )
        case BustBonusResult():
            return _bust_bonus_result(outcome, table)
        case AlarmRaised() | AlarmCleared():
            return None
        case _:
            assert_never(outcome)


def _cover_all_payouts(outcome: CoverAllPayouts, table: str) -> Publication:
    """``cover_all/payouts`` at ``ROUND``: the pay table for that many hands, highest first."""
    body = CoverAllPayoutsBody(
        table=table,
        round_id=outcome.round_id,
        game=outcome.game,
        hands=outcome.hands,
        paytable=[PayRowModel(hand=r.hand, pays=format_odds(r.pays)) for r in outcome.paytable],
    )
    return publication(Topic.COVER_ALL_PAYOUTS, body)


def _cover_all_result(outcome: CoverAllResult, table: str) -> Publication:
    """``cover_all/result`` at ``SETTLE``/``VOID``, or a flagged round (no cards: the model
    refuses a flagged result with a highest hand, shuffler-icd.md "Card data is secret")."""
    highest = outcome.highest
    best: tuple[str, ...] | None = None
    board: tuple[str, ...] = ()
    if highest is not None and outcome.outcome == "win":
        # A win's cards are a whole hand the rules judged; anything else is refused below.
        best, board = read_hand(outcome.game, highest.cards)
    body = CoverAllResultBody(
        table=table,
        round_id=outcome.round_id,
        game=outcome.game,
        hands=outcome.hands,
        outcome=outcome.outcome,
        highest=None
        if highest is None
        else HighestModel(
            hand=highest.hand,
            position=highest.position,
            cards=list(highest.cards),
            best=None if best is None else list(best),
            board=list(board),
        ),
        pays=_odds_or_none(outcome.pays),
        reason=outcome.reason,
    )
    return publication(Topic.COVER_ALL_RESULT, body)


def _bust_bonus_result(outcome: BustBonusResult, table: str) -> Publication:
    """``bust_bonus/result`` at ``END`` or ``VOID`` (or a flagged round, with its reason),
    with the pay-table cell the rules name (``paytable_row``, ``column``)."""
    body = BustBonusResultBody(
        table=table,
        round_id=outcome.round_id,
        outcome=outcome.outcome,
        up_card=outcome.up_card,
        dealer_cards=list(outcome.dealer_cards),
        total=outcome.total,
        suited=outcome.suited,
        three_eights=outcome.three_eights,
        pays=_odds_or_none(outcome.pays),
        reason=outcome.reason,
        paytable_row=outcome.paytable_row,
        column=outcome.column,
    )
    return publication(Topic.BUST_BONUS_RESULT, body)


# ---------------------------------------------------------------------------------------
# State


def state_publications(
    state: TableState, *, table: str, since: TableState | None = None
) -> list[Publication]:
    """The retained state topics of the table as it is now (``info`` aside): ``state``,
    ``alarms``, and ``craps/board`` or ``bust_bonus/state`` where the game has one.

    With ``since`` (the table these were last built from), only the topics whose part of
    the table changed: the rules replace what changes and keep the rest, so a part that
    is the very same object as in ``since`` is the same (a device frame's hot path builds
    one or two bodies, not four)."""

    def unchanged(*parts: tuple[object, object]) -> bool:
        return since is not None and all(now is then for now, then in parts)

    publications = []
    if not unchanged(
        (state.game, since.game if since else None),
        (state.devices, since.devices if since else None),
        (state.alarms, since.alarms if since else None),
    ):
        alarms = [
            Alarm(
                code=a.code,
                device=a.device,
                message=a.message,
                since=format_ts(a.since),
                stops_payouts=a.code in PAYOUT_ALARMS,
                acknowledged_by=a.acknowledged_by,
                acknowledged_at=None if a.acknowledged_at is None else format_ts(a.acknowledged_at),
            )
            for a in state.alarms
        ]
        devices = {
            name: DeviceState(
                connected=d.connected,
                status=d.status,
                mode=d.mode if name == "shuffler" else None,
            )
            for name, d in state.devices
        }
        publications.append(_state(state, devices, alarms, table))
        publications.append(publication(Topic.ALARMS, AlarmsBody(table=table, alarms=alarms)))
    if state.craps is not None and not unchanged((state.craps, since.craps if since else None)):
        publications.append(
            craps_board_publication(
                craps.board(state.craps), table=table, last=craps.last_roll(state.craps)
            )
        )
    if state.bust is not None and not unchanged((state.bust, since.bust if since else None)):
        publications.append(bust_bonus_state_publication(bust_bonus.view(state.bust), table=table))
    return publications


def bust_bonus_state_publication(view: bust_bonus.BustBonusView, *, table: str) -> Publication:
    """``bust_bonus/state``: the round, betting, the face-up dealer cards (the up card alone
    before ``END``: shuffler-icd.md "Card data is secret until it is face up") and the up
    card's pay-table row."""
    body = BustBonusStateBody(
        table=table,
        round_id=view.round_id,
        betting_open=view.betting_open,
        up_card=view.up_card,
        dealer_cards=list(view.dealer_cards),
        paytable_row=view.paytable_row,
    )
    return publication(Topic.BUST_BONUS_STATE, body)


def _state(
    state: TableState, devices: dict[Device, DeviceState], alarms: list[Alarm], table: str
) -> Publication:
    """``state``: the game, each device (``connected``, ``status``, and ``mode`` for the
    shuffler only, as the spec lists it), the active alarms."""
    body = StateBody(
        table=table,
        game=state.game,
        devices=devices,
        alarms=alarms,
    )
    state_publication = publication(Topic.STATE, body)
    for name, device in state_publication.body["devices"].items():
        if name != "shuffler":
            del device["mode"]  # the spec lists mode "for the shuffler"
    return state_publication


def _bet(progress: craps.BetBoard) -> BetProgressModel:
    chance = progress.chance
    return BetProgressModel(
        pays=format_odds(progress.pays),
        hit=sorted(progress.hit),
        remaining=sorted(progress.remaining),
        complete=progress.complete,
        chance=None if chance is None else f"{chance.numerator}/{chance.denominator}",
    )


def craps_board_publication(
    board: craps.CrapsBoard, *, table: str, last: craps.LastRoll | None = None
) -> Publication:
    """``craps/board``: pay table, betting, the lammers (sorted), each bet, a pending roll
    (with, added, since when it waits), and (added) the last roll event, ``last``, the queue
    behind the pending roll and the rolls of the current series."""
    pending = board.pending_roll
    body = CrapsBoardBody(
        table=table,
        paytable=board.paytable,
        betting_open=board.betting_open,
        numbers_hit=sorted(board.numbers_hit),
        all_small=_bet(board.all_small),
        all_tall=_bet(board.all_tall),
        make_em_all=_bet(board.make_em_all),
        pending_roll=None
        if pending is None
        else PendingRollModel(
            roll_id=pending.roll_id,
            dice=list(pending.dice),
            reason=pending.reason,
            clause=pending.clause,
            since=None if pending.since is None else format_ts(pending.since),
        ),
        last_roll=None
        if last is None
        else LastRollModel(
            roll_id=last.roll_id, dice=list(last.dice), total=last.total, status=last.status
        ),
        waiting_count=board.waiting_count,
        waiting=list(board.waiting),
        series=[
            SeriesRollModel(
                roll_id=roll.roll_id,
                dice=list(roll.dice),
                total=roll.total,
                at=None if roll.at is None else format_ts(roll.at),
                new_number=roll.new_number,
                wins=list(roll.wins),
            )
            for roll in board.series
        ],
        series_count=board.series_count,
    )
    return publication(Topic.CRAPS_BOARD, body)


# ---------------------------------------------------------------------------------------
# info


def info_keys(table: TableSection) -> dict[str, Any]:
    """The keys of a ``[table]`` section that ``info`` declares too, under ``info``'s names
    (the section's serialization aliases: ``id`` is ``table``). The section is handed over
    whole, so a key added to both ``[table]`` and ``InfoBody`` needs no line in between."""
    section = table.model_dump(by_alias=True)
    return {key: value for key, value in section.items() if key in InfoBody.model_fields}


def info_publication(
    *,
    table: TableSection,
    version: str,
    craps_paytable: int,
    decks: int,
    dealer_hits_soft_17: bool,
    digest: str | None = None,
) -> Publication:
    """``info`` (added topic): the ``[table]`` keys it declares (``info_keys``: the id and
    the game), the version, the whole pay tables in use, and the software's digest
    (``contract.software``, mqtt-api.md 1.4)."""
    game = table.game
    cover_all = None
    if game in POKER_GAMES:
        pt = cover_all_table(game)
        cover_all = CoverAllPaytableModel(
            game=pt.game,
            title=pt.title,
            columns=list(pt.columns),
            rows=[
                CoverAllRowModel(hand=hand, pays=[format_odds(p) for p in pays])
                for hand, pays in zip(pt.rows, pt.pays, strict=True)
            ],
        )
    bonus_craps = None
    if game == "CRAPS":
        odds = bonus_craps_odds(craps_paytable)
        bonus_craps = BonusCrapsPaytableModel(
            paytable=craps_paytable,
            pays={bet: format_odds(odds[bet]) for bet in odds},
        )
    bust = None
    if game == "BJ":
        bust = BustBonusPaytableModel(
            decks=decks,
            dealer_hits_soft_17=dealer_hits_soft_17,
            rows=[
                BustRowModel(
                    row=r.row, off_suit=format_odds(r.off_suit), suited=format_odds(r.suited)
                )
                for r in BUST_BONUS.rows
            ],
        )
    body = InfoBody(
        **info_keys(table),
        version=version,
        contract=CONTRACT_VERSION,
        paytables=PaytablesModel(cover_all=cover_all, bonus_craps=bonus_craps, bust_bonus=bust),
        software=None if digest is None else SoftwareModel(version=version, digest=digest),
    )
    return publication(Topic.INFO, body)
