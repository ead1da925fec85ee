"""The Python subscriber the integrators' page shows (docs/integrators/subscribing.md) runs
as it is written, against a real Mosquitto: the retained state at subscription first, then
the table's live messages once each and in seq order, though the broker delivered them out
of order, and its availability."""

from __future__ import annotations

import asyncio
import json
import re
import sys
from pathlib import Path

import aiomqtt

from deploy.broker import Broker

PAGE = Path(__file__).resolve().parents[2] / "docs" / "integrators" / "subscribing.md"
WAIT = 30.0
"""Seconds a line may take (a bound for a loaded machine, never what is tested)."""


def example() -> str:
    """The page's Python block, as a reader copies it."""
    blocks = re.findall(r"^```python\n(.*?)^```", PAGE.read_text(encoding="utf-8"), re.M | re.S)
    assert len(blocks) == 1
    return str(blocks[0])


def roll(seq: int, prev: int | None) -> bytes:
    """A table's craps/roll message with ``seq`` after ``prev``."""
    return json.dumps(
        {
            "table": "craps1",
            "seq": seq,
            "prev_seq": prev,
            "ts": "2026-12-01T20:31:07.412Z",
            "roll_id": seq,
            "dice": [3, 4],
            "total": 7,
            "status": "counted",
            "reason": None,
        }
    ).encode()


def board(seq: int, prev: int | None) -> bytes:
    """A table's craps/board message (the feed checks every message with the contract)."""

    def bet(numbers: list[int]) -> dict[str, object]:
        return {"pays": "34", "hit": [], "remaining": numbers, "complete": False, "chance": "1/3"}

    body = {
        "table": "craps1",
        "seq": seq,
        "prev_seq": prev,
        "ts": "2026-12-01T20:31:07.412Z",
        "paytable": 1,
        "betting_open": True,
        "numbers_hit": [],
        "all_small": bet([2, 3, 4, 5, 6]),
        "all_tall": bet([8, 9, 10, 11, 12]),
        "make_em_all": bet([2, 3, 4, 5, 6, 8, 9, 10, 11, 12]),
        "pending_roll": None,
    }
    return json.dumps(body).encode()


async def test_the_documented_python_subscriber_prints_every_message_once_in_order(
    tmp_path: Path, mosquitto_private: Broker
) -> None:
    script = tmp_path / "subscribe.py"
    script.write_text(example(), encoding="utf-8")
    base = "lammer/craps1"
    broker = mosquitto_private
    async with aiomqtt.Client(broker.host, broker.port) as table:
        await table.publish(f"{base}/availability", b"online", qos=1, retain=True)
        await table.publish(f"{base}/craps/board", board(5, 3), qos=1, retain=True)
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            str(script),
            broker.host,
            str(broker.port),
            base,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        stdout = proc.stdout
        assert stdout is not None
        lines: list[str] = []

        async def until(text: str) -> None:
            while not any(text in line for line in lines):
                line = await asyncio.wait_for(stdout.readline(), WAIT)
                assert line, f"the example ended: {lines}"
                lines.append(line.decode().rstrip("\n"))

        try:
            # Subscribed: the retained state and availability came first.
            await until("craps1 5 craps/board")
            await until("craps1 availability online")
            # Live, out of order: 7 starts the stream, then 11 before 9.
            for seq, prev in ((7, 5), (11, 9), (9, 7)):
                await table.publish(f"{base}/craps/roll", roll(seq, prev), qos=1)
            await until("craps1 11 craps/roll")
        finally:
            proc.kill()
            await proc.wait()
    released = [int(line.split()[1]) for line in lines if " craps/" in line]
    assert released == [5, 7, 9, 11], lines
    assert not any(" gap " in line for line in lines), lines
