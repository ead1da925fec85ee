"""The store: migrations, idempotent writes by (table, seq), and what its role may do."""

from __future__ import annotations

import json

import psycopg
import pytest

from records.errors import MessageError, MigrationError
from records.messages import parse
from records.migrate import Migration, migrate, migrations
from records.store import Store
from tests.records.conftest import StoreDb
from tests.records.messages import alarms, body, cover_all_result, craps_roll


def test_migrations_are_numbered_and_applied_once(store_db: StoreDb) -> None:
    with psycopg.connect(store_db.dsn, autocommit=True) as conn:
        numbers = [r[0] for r in conn.execute("SELECT number FROM schema_migration ORDER BY 1")]
        assert numbers == [m.number for m in migrations()]
        assert migrate(conn) == []  # a second start applies nothing


def test_a_failing_migration_leaves_nothing_of_itself(
    store_db: StoreDb, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = Migration(
        number=9999, name="broken", sql="CREATE TABLE half_done (x int); SELECT 1/0;"
    )
    monkeypatch.setattr("records.migrate.migrations", lambda: [*migrations(), broken])
    with psycopg.connect(store_db.dsn, autocommit=True) as conn:
        with pytest.raises(MigrationError, match="9999_broken"):
            migrate(conn)
        assert conn.execute("SELECT to_regclass('half_done')").fetchone() == (None,)
        assert conn.execute(
            "SELECT count(*) FROM schema_migration WHERE number = 9999"
        ).fetchone() == (0,)


def test_a_message_is_stored_once_whatever_the_replays(store_db: StoreDb) -> None:
    win = cover_all_result("uth-7", 12, 3, hands=6, hand="Royal Flush", pays="80")
    resent = {**win, "resent": True}  # a resend under MQTT 3.1.1 (mqtt-api.md 1.3)
    with psycopg.connect(store_db.dsn) as conn:
        store = Store(conn)
        assert store.write(parse("uth-7", "cover_all/result", body(win))) is True
        assert store.write(parse("uth-7", "cover_all/result", body(win))) is False
        assert store.write(parse("uth-7", "cover_all/result", body(resent))) is False
        rows = conn.execute(
            "SELECT round_id, hands, outcome, hand, pays::text, cards FROM cover_all_result"
        ).fetchall()
        assert rows == [(3, 6, "win", "Royal Flush", "80", ["As", "Ks", "Qs", "Js", "Ts"])]
        (payload,) = conn.execute("SELECT payload FROM message").fetchone() or (None,)
        assert payload == win  # the resend's marker is not stored


def test_every_kind_lands_in_its_table(store_db: StoreDb) -> None:
    response = {
        "table": "craps-1",
        "seq": 9,
        "ts": "2026-12-01T14:00:09.000Z",
        "request_id": "r-1",
        "status": "ok",
        "error": None,
    }
    request = {"operator": "  Dana ", "request_id": "r-1", "roll_id": 4, "decision": "valid"}
    with psycopg.connect(store_db.dsn) as conn:
        store = Store(conn)
        store.write(parse("craps-1", "craps/roll", body(craps_roll("craps-1", 5, 4, 6, 6))))
        store.write(parse("craps-1", "alarms", body(alarms("craps-1", 6, "JAM", "LID_OPEN"))))
        store.write(parse("craps-1", "alarms", body(alarms("craps-1", 7))))
        store.write(parse("craps-1", "request/roll_decision", body(request)))
        store.write(parse("craps-1", "response/roll_decision", body(response)))
        assert store.write(parse("craps-1", "availability", b"online")) is True
        assert store.write(parse("craps-1", "availability", b"online")) is False
        assert store.write(parse("craps-1", "availability", b"offline")) is True
        store.record_gap("craps-1", 1, 4, "missing_before 5: the journal no longer holds them")
        assert conn.execute("SELECT die1, die2, total FROM craps_roll").fetchall() == [(6, 6, 12)]
        assert conn.execute("SELECT seq, code FROM alarm_snapshot ORDER BY 2").fetchall() == [
            (6, "JAM"),
            (6, "LID_OPEN"),
        ]
        assert conn.execute("SELECT count(*) FROM message WHERE topic = 'alarms'").fetchone() == (
            2,
        )
        assert conn.execute(
            "SELECT d.name, d.status, r.operator FROM decision d "
            "JOIN request r USING (table_id, request_id)"
        ).fetchall() == [("roll_decision", "ok", "Dana")]
        assert conn.execute("SELECT status FROM availability ORDER BY id").fetchall() == [
            ("online",),
            ("offline",),
        ]
        assert conn.execute("SELECT from_seq, to_seq, reason FROM gap").fetchall() == [
            (1, 4, "missing_before 5: the journal no longer holds them")
        ]
        assert store.last_seqs() == {"craps-1": 9}
        assert store.stored_seqs("craps-1", 1, 10) == [5, 6, 7, 9]


@pytest.mark.parametrize(
    ("topic", "payload", "why"),
    [
        ("cover_all/result", b"{", "not JSON"),
        ("cover_all/result", b"[1]", "not a JSON object"),
        ("nonsense", b"{}", "not a topic"),
        ("availability", b"maybe", "online or offline"),
        ("craps/roll", body({**craps_roll("t", 1, 1, 1, 2), "seq": 0}), "seq"),
        ("craps/roll", body(craps_roll("other", 1, 1, 1, 2)), "names table 'other'"),
        ("craps/roll", b"{" + b" " * 70000 + b"}", "larger than"),
    ],
)
def test_what_is_not_the_contract_is_refused_with_a_sentence(
    topic: str, payload: bytes, why: str
) -> None:
    with pytest.raises(MessageError, match=why):
        parse("t", topic, payload)


def test_a_newer_tables_fields_are_kept(store_db: StoreDb) -> None:
    newer = {**craps_roll("t", 3, 1, 2, 2), "dealer_note": "added in 2.0"}
    message = parse("t", "craps/roll", body(newer))
    with psycopg.connect(store_db.dsn) as conn:
        Store(conn).write(message)
        (payload,) = conn.execute("SELECT payload FROM message").fetchone() or (None,)
        assert json.dumps(payload, sort_keys=True) == json.dumps(newer, sort_keys=True)


def test_the_store_role_writes_its_tables_and_nothing_else(store_db: StoreDb) -> None:
    with store_db.admin() as admin:
        admin.execute("CREATE TABLE public.cashier (amount numeric)")
        admin.execute("GRANT USAGE ON SCHEMA public TO PUBLIC")
    with psycopg.connect(store_db.dsn, autocommit=True) as conn:
        conn.execute("INSERT INTO gap (table_id, from_seq, to_seq, reason) VALUES ('t', 1, 1, 'x')")
        refused = [
            "CREATE TABLE public.mine (x int)",
            "INSERT INTO public.cashier VALUES (1)",
            "SELECT * FROM public.cashier",
            f"CREATE DATABASE other_{store_db.role}",
            "CREATE ROLE intruder",
            "ALTER ROLE CURRENT_USER SUPERUSER",
            "COPY gap FROM PROGRAM 'true'",
        ]
        for statement in refused:
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(statement)
    with psycopg.connect(store_db.pg.admin_dsn(), autocommit=True) as admin:
        roles = admin.execute(
            "SELECT rolsuper, rolcreatedb, rolcreaterole FROM pg_roles WHERE rolname = %s",
            (store_db.role,),
        ).fetchall()
    assert roles == [(False, False, False)]


def test_the_feeds_positions_are_kept_and_never_move_backwards(store_db: StoreDb) -> None:
    with psycopg.connect(store_db.dsn) as conn:
        store = Store(conn)
        assert store.positions() == {}
        store.keep_positions({"lammer/t": 7, "casino/pit_3/u": 3})
        store.keep_positions({"lammer/t": 6})  # never backwards
        assert store.positions() == {"lammer/t": 7, "casino/pit_3/u": 3}
