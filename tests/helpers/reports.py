"""The reports' tests' tools: the records store's rows made by hand, and a store with them."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from deploy.postgres import Postgres
from records.migrate import migrate
from records.provision import provision, provision_reader

ROOT = Path(__file__).resolve().parents[2]


def par_of(game: str, hands: int) -> dict[str, Fraction]:
    sheet = json.loads((ROOT / "docs/cover-all-par-sheet.json").read_text())
    column = next(
        c for g in sheet if g["game"] == game for c in g["columns"] if c["hands"] == hands
    )
    return {r["hand"]: Fraction(r["probability_fraction"]) for r in column["rows"]}


def iso(day: int, hour: int, minute: int, second: int = 0) -> str:
    return f"2026-12-{day:02d}T{hour:02d}:{minute:02d}:{second:02d}.000Z"


def poker_row(table: str, seq: int, ts: str, hands: int, hand: str | None, pays: str | None,
           outcome: str | None = None) -> dict[str, Any]:  # fmt: skip
    won = hand is not None
    return {
        "table": table, "seq": seq, "ts": ts, "round_id": seq, "game": "LIR", "hands": hands,
        "outcome": outcome or ("win" if won else "no_qualifier"),
        "highest": {"hand": hand, "position": "P3", "cards": ["Ah", "Kh", "Qh", "Jh", "Th"]}
        if won else None,
        "pays": pays if won else None, "reason": None,
    }  # fmt: skip


def bust_row(
    table: str, seq: int, ts: str, up: str, win: str | None, pays: str | None
) -> dict[str, Any]:
    suited = win == "suited"
    return {
        "table": table, "seq": seq, "ts": ts, "round_id": seq,
        "outcome": "win" if win else "lose", "up_card": up,
        "dealer_cards": [up, "6s", "Ks"], "total": 26 if win else 20, "suited": suited,
        "three_eights": False, "pays": pays, "reason": None,
        "paytable_row": "6" if up.startswith("6") else "10",
        "column": win,
    }  # fmt: skip


def info_bj(table: str, seq: int) -> dict[str, Any]:
    return {
        "table": table, "seq": seq, "ts": iso(1, 7, 0), "version": "0.1.0", "contract": "1.2",
        "game": "BJ",
        "paytables": {"cover_all": None, "bonus_craps": None, "bust_bonus": {
            "decks": 6, "dealer_hits_soft_17": False, "rows": []}},
    }  # fmt: skip


@dataclass(frozen=True)
class Records:
    """A store database, its owner's DSN (writes) and its reader's (``lammer web``)."""

    owner_dsn: str
    reader_dsn: str
    pgpass: Path | None


@pytest.fixture
def records(postgres: Postgres, tmp_path: Path) -> Iterator[Records]:
    """A provisioned, migrated store with a reader role; the reader's password in a
    pgpass file (0600), never on the web server's command line."""
    suffix = secrets.token_hex(6)
    database, owner, reader = f"records_{suffix}", f"records_{suffix}", f"reader_{suffix}"
    owner_password, reader_password = secrets.token_urlsafe(18), secrets.token_urlsafe(18)
    with psycopg.connect(postgres.admin_dsn(), autocommit=True) as admin:
        provision(admin, database=database, role=owner, password=owner_password)
        provision_reader(
            admin, database=database, role=reader, password=reader_password, owner=owner
        )
    owner_dsn = postgres.dsn(owner, owner_password, database)
    with psycopg.connect(owner_dsn, autocommit=True) as conn:
        migrate(conn)
    pgpass = tmp_path / "pgpass"
    pgpass.touch(mode=0o600)
    pgpass.write_text(f"{postgres.host}:{postgres.port}:{database}:{reader}:{reader_password}\n")
    reader_dsn = f"host={postgres.host} port={postgres.port} dbname={database} user={reader}"
    yield Records(owner_dsn, reader_dsn, pgpass)
    with psycopg.connect(postgres.admin_dsn(), autocommit=True) as admin:
        admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(database)))
        for role in (reader, owner):
            admin.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
            admin.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))
