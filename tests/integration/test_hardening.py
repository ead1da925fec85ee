"""What a hostile MQTT client cannot do to a running table: stop it, blind it, or make it
answer where it cannot (mqtt-api.md "Requests"). The real daemon, a real pty, a real
Mosquitto."""

from __future__ import annotations

import signal

import pytest

from tests.integration.conftest import MakeTable

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
    assert any(t["task"] == "mqtt drain" and t["stack"] for t in tasks)
    assert table.daemon.proc.poll() is None
    assert await table.stop_daemon(signal.SIGTERM) == 0
