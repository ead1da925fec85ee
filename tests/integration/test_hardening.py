"""What a hostile MQTT client cannot do to a running table: stop it, blind it, or make it
answer where it cannot (mqtt-api.md "Requests"). The real daemon, a real pty, a real
Mosquitto."""

from __future__ import annotations

import signal

import pytest

from tests.integration.conftest import MakeTable
from tests.integration.harness import retained_snapshot

pytestmark = pytest.mark.integration


async def test_requests_no_table_can_answer_do_not_stop_it(make_table: MakeTable) -> None:
    table = make_table("CRAPS")
    rec = table.recorder
    await table.start("CHECK,1,1,6,ON_CHIPS\n")
    await table.wait_topic("craps/board", lambda b: b["pending_roll"] is not None)
    mark = rec.mark()
    # A name one byte too long for a response topic once ended the daemon at every start.
    await rec.publish("request/" + "x" * 65_000, b'{"operator": "mallory"}')
    await rec.publish("request/", b'{"operator": "mallory"}')
    await rec.publish("request/overturn", b"[" * 100_000)
    answer = await table.request(
        "roll_decision", {"operator": "Ann", "roll_id": 1, "decision": "valid"}
    )
    assert answer["status"] == "ok"
    # Only the answers to answerable requests went out; the table is online and running.
    responses = sorted({m.topic for m in rec.messages[mark:] if m.topic.startswith("response/")})
    assert responses == ["response/overturn", "response/roll_decision"]
    assert table.daemon is not None
    assert table.daemon.proc.poll() is None
    assert rec.on("availability")[-1].body == "online"
    dropped = [r["dropped_requests"] for r in table.journal() if "dropped_requests" in r]
    assert dropped[0]["first"]["name_length"] == 65_000
    assert sum(d["count"] for d in dropped) <= 2  # the second drop waits for its minute
    # Nothing poisonous stays queued: it stops and starts again cleanly.
    assert await table.stop_daemon(signal.SIGTERM) == 0
    table.start_daemon()
    await table.wait_for(lambda: rec.on("availability")[-1].body == "online", what="online")
    assert await table.stop_daemon(signal.SIGTERM) == 0


async def test_sigusr1_logs_what_every_task_waits_for_and_keeps_running(
    make_table: MakeTable,
) -> None:
    # What a stuck daemon is doing, without stopping it (a SIGTERM that once did not stop
    # the daemon was found this way: aiomqtt's wait_for swallowed the cancellation).
    table = make_table("CRAPS")
    await table.start("ROLL,1,3,4\n")
    assert table.daemon is not None
    table.daemon.proc.send_signal(signal.SIGUSR1)
    await table.wait_for(
        lambda: any(e["event"] == "task" for e in table.log_events()), what="the task dump"
    )
    tasks = [e for e in table.log_events() if e["event"] == "task"]
    assert any(t["task"] == "driver-dice_reader" and t["stack"] for t in tasks)
    assert table.daemon.proc.poll() is None
    assert await table.stop_daemon(signal.SIGTERM) == 0


async def test_a_table_id_used_again_for_another_game_continues_seq_and_clears_the_old(
    make_table: MakeTable,
) -> None:
    # t9 ran as UTH; now it runs as CRAPS with a new journal: seq would start at 1 under
    # the old retained cover_all/* with higher seqs, and displays dropping seen seqs would
    # drop the new table.
    first = make_table("UTH")
    await first.start(
        "DECK,OK\nHAND,5,P1,AsKs\nHAND,5,DL,2c3d\nHAND,5,CM,QsJsTs4h5h\nROUND,5,2\nSETTLE,5\n"
    )
    await first.wait_topic("cover_all/result", lambda b: b["round_id"] == 5)
    await first.wait_published()
    old_high = max(r["seq"] for r in first.journal())
    assert await first.stop_daemon(signal.SIGTERM) == 0
    await first.stop_sim()
    again = make_table("CRAPS")
    again.table_id = first.table_id  # the same table id, another game, a new journal
    again.recorder = type(again.recorder)(again.broker, again.base)
    again.config_path.write_text(again.config_text())
    await again.start("ROLL,1,2,3\n")
    await again.wait_topic("craps/roll", lambda b: b["roll_id"] == 1)
    await again.wait_published()
    seqs = [r["seq"] for r in again.journal()]
    assert min(seqs) > old_high  # above every seq the broker held
    snapshot = await retained_snapshot(again.broker, again.base)
    assert "cover_all/result" not in snapshot  # cleared: not this game's
    assert "cover_all/payouts" not in snapshot
    assert snapshot["craps/board"].body["seq"] > old_high
    assert snapshot["info"].body["game"] == "CRAPS"
