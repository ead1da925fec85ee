"""A floor of simulated tables for the pit, without daemons: retained ``availability``,
``state``, ``alarms``, ``info`` and a result per table, published to a broker as the
daemons would, then (optionally) a new result per table every ``--period`` seconds.

Every payload is built by the daemon's own publication functions from rules events or
validated by the contract's models, so the web server accepts each one as a daemon's.
Tables are ``<name>-NNN``; every 10th is offline, every 7th has a ``MODE_MISMATCH`` alarm
(payouts paused), every 4th is a craps table with a pending ``CHECK``.

Run: ``.venv/bin/python bench/pit_load.py --port 1883 --tables 200 --period 5 --duration 60``.
Used by ``tests/display/test_pit.py`` (200 tables in the list view) and ``bench_pit.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import aiomqtt

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from contract.payloads import (
    AlarmsMessage,
    StateMessage,
)
from daemon.clock import format_ts
from daemon.config import TableSection
from daemon.publications import (
    craps_board_publication,
    info_publication,
    outcome_publication,
)
from rules import craps
from rules.events import CoverAllResult, HighestHand, RollCheck, TableGame

GAMES: tuple[TableGame, ...] = ("UTH", "CSP", "TCP", "CRAPS", "MSP", "LIR", "FCP", "CRAPS")


@dataclass
class SimTable:
    """One simulated table: its id, game, and the next seq it publishes."""

    table: str
    game: TableGame
    offline: bool
    alarmed: bool
    seq: int = 0
    round_id: int = 0
    since: datetime = field(default_factory=lambda: datetime.now(UTC) - timedelta(minutes=7))
    """When its alarm was raised."""
    check_since: datetime = field(default_factory=lambda: datetime.now(UTC) - timedelta(minutes=3))
    """When its pending ``CHECK`` arrived (a craps table)."""

    def envelope(self, body: dict[str, Any], at: datetime) -> bytes:
        """The body with ``table``, the next ``seq`` and ``ts``, as JSON."""
        self.seq += 1
        return json.dumps(
            {**body, "table": self.table, "seq": self.seq, "ts": format_ts(at)}
        ).encode()

    def state(self, at: datetime) -> list[tuple[str, bytes]]:
        """``info``, ``state`` and ``alarms``."""
        device = "dice_reader" if self.game == "CRAPS" else "shuffler"
        alarms = (
            [
                {
                    "code": "MODE_MISMATCH",
                    "device": "shuffler",
                    "message": "the shuffler reports TCP but the table plays this game",
                    "since": format_ts(self.since),
                    "stops_payouts": True,
                }
            ]
            if self.alarmed and device == "shuffler"
            else []
        )
        devices = {device: {"connected": True, "status": "READY", "mode": None}}
        if device == "shuffler":
            devices[device]["mode"] = self.game
        info = info_publication(
            table=TableSection(id=self.table, game=self.game),
            version="load",
            craps_paytable=1,
            decks=6,
            dealer_hits_soft_17=False,
        )
        ts = format_ts(at)
        state = StateMessage.model_validate(
            {
                "table": self.table,
                "seq": 1,
                "ts": ts,
                "game": self.game,
                "devices": devices,
                "alarms": alarms,
            }
        )
        alarms_body = AlarmsMessage.model_validate(
            {"table": self.table, "seq": 1, "ts": ts, "alarms": alarms}
        )
        return [
            ("info", self.envelope(dict(info.body), at)),
            ("state", self.envelope(state.model_dump(mode="json"), at)),
            ("alarms", self.envelope(alarms_body.model_dump(mode="json"), at)),
        ]

    def result(self, at: datetime) -> tuple[str, bytes]:
        """A new result: a Cover All round, or a craps board with a pending CHECK."""
        self.round_id += 1
        if self.game == "CRAPS":
            board, _ = craps.apply(
                craps.initial_state(1),
                RollCheck(roll_id=self.round_id, dice=(3, 3), reason="ON_CHIPS"),
                at=self.check_since,
            )
            shown = craps_board_publication(craps.board(board), table=self.table)
            return "craps/board", self.envelope(dict(shown.body), at)
        win = self.round_id % 3 == 0
        outcome = CoverAllResult(
            round_id=self.round_id,
            game=self.game,  # type: ignore[arg-type]  # one of GAMES' poker games
            hands=2 if self.game in ("MSP", "LIR", "FCP") else 3,
            outcome="win" if win else "no_qualifier",
            highest=None,
            pays=None,
            reason=None,
        )
        if win:
            outcome = _royal(outcome)
        pub = outcome_publication(outcome, table=self.table)
        assert pub is not None
        return pub.topic, self.envelope(dict(pub.body), at)


def _royal(result: CoverAllResult) -> CoverAllResult:
    """The round as a royal flush at P1 (cards as the game deals them), paying its cell."""
    from rules.cover_all import LAYOUTS, Win, resolve_round

    layout = LAYOUTS[result.game]
    royal = ["As", "Ks", "Qs", "Js", "Ts"]
    own, board = royal[: layout.player_cards], royal[layout.player_cards :]
    others = ["2c", "3d", "4h", "5c", "7d", "8h", "9c", "2d", "3h", "4c", "6d", "7h", "8c"]
    cards: dict[str, list[str]] = {"P1": own}
    need = result.hands or 2
    if layout.community_cards:
        cards["CM"] = board + others[: layout.community_cards - len(board)]
        others = others[layout.community_cards - len(board) :]
    elif len(own) < layout.player_cards:
        own += others[: layout.player_cards - len(own)]
    positions = ["DL"] if layout.dealer_cards is not None else []
    positions += [f"P{i}" for i in range(2, 10)]
    for position in positions[: need - 1]:
        size = layout.dealer_cards if position == "DL" else layout.player_cards
        assert size is not None
        cards[position], others = others[:size], others[size:]
    resolution = resolve_round(result.game, need, cards)
    if not isinstance(resolution, Win):
        return result
    return CoverAllResult(
        round_id=result.round_id,
        game=result.game,
        hands=need,
        outcome="win",
        highest=HighestHand(
            hand=resolution.category, position=resolution.position, cards=resolution.cards
        ),
        pays=Decimal(resolution.odds),
        reason=None,
    )


def floor(tables: int, name: str = "sim") -> list[SimTable]:
    """``tables`` simulated tables named ``<name>-NNN``; their alarms raised 6.5 to 7
    minutes ago and their CHECKs 2 to 7 minutes ago, each a few seconds apart in an order
    that is not the tables' (so a pit sorting by age is seen to)."""
    now = datetime.now(UTC)
    return [
        SimTable(
            table=f"{name}-{i:03d}",
            game=GAMES[i % len(GAMES)],
            offline=i % 10 == 9,
            alarmed=i % 7 == 3,
            since=now - timedelta(minutes=7) + timedelta(seconds=(i * 13) % 29),
            check_since=now - timedelta(minutes=2, seconds=(i * 37) % 300),
        )
        for i in range(tables)
    ]


async def publish_floor(client: aiomqtt.Client, prefix: str, sims: list[SimTable]) -> None:
    """Every table's retained picture: availability, info, state, alarms, one result."""
    at = datetime.now(UTC)
    for sim in sims:
        base = f"{prefix}/{sim.table}"
        await client.publish(
            f"{base}/availability", b"offline" if sim.offline else b"online", qos=1, retain=True
        )
        for topic, payload in [*sim.state(at), sim.result(at)]:
            await client.publish(f"{base}/{topic}", payload, qos=1, retain=True)


async def play(
    client: aiomqtt.Client, prefix: str, sims: list[SimTable], period: float, duration: float
) -> int:
    """A new result from every table each ``period`` seconds, spread evenly, for
    ``duration`` seconds; returns how many were published."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    gap = period / max(1, len(sims))
    sent = 0
    while loop.time() - start < duration:
        for sim in sims:
            topic, payload = sim.result(datetime.now(UTC))
            await client.publish(f"{prefix}/{sim.table}/{topic}", payload, qos=1, retain=True)
            sent += 1
            await asyncio.sleep(gap)
    return sent


async def _main(args: argparse.Namespace) -> None:
    password = args.password_file.read_text().strip() if args.password_file else None
    sims = floor(args.tables, args.name)
    async with aiomqtt.Client(
        args.host, args.port, username=args.user, password=password
    ) as client:
        await publish_floor(client, args.prefix, sims)
        print(f"{len(sims)} tables published under {args.prefix}/")
        if args.duration > 0:
            sent = await play(client, args.prefix, sims, args.period, args.duration)
            print(f"{sent} results in {args.duration:.0f} s")


def main() -> None:
    """``bench/pit_load.py``: publish a simulated floor."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=1883)
    parser.add_argument("--user")
    parser.add_argument("--password-file", type=Path)
    parser.add_argument("--prefix", default="lammer")
    parser.add_argument("--name", default="sim")
    parser.add_argument("--tables", type=int, default=200)
    parser.add_argument("--period", type=float, default=5.0)
    parser.add_argument("--duration", type=float, default=0.0)
    asyncio.run(_main(parser.parse_args()))


if __name__ == "__main__":
    main()
