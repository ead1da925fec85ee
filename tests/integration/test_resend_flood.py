"""Resend without amplification (issue 28), against a real table on a broker running
``lammer broker-config``'s files: a client with the ``display`` password (every pit
screen's) flooding ``request/resend/display``, paced and at full speed, gets at most its
copy budget (2,000 copies in any 60 s) while the table's results reach a display in order
and its link stays up; three screens asking the same range at once get it published once.
(bench/bench_resend_flood.py measures the results' delays beside a quiet run.)
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiomqtt
import pytest

from contract.requests import COPY_BUDGET
from tests.helpers.broker_access import Secured
from tests.integration.harness import Table

pytestmark = pytest.mark.integration

HISTORY = 400
"""Rolls played before the flood: about 1,000 messages the flood asks for again and again."""
DURING = 40
"""Rolls played during each half of the flood."""
PACED = 50.0
"""Requests a second, the paced half (issue 28's 50 a second)."""
PACED_FOR = 8.0
FULL_SPEED = 20_000
"""Requests in the full-speed half, QoS 0, as fast as the client writes them."""


@pytest.fixture
def secured(tmp_path: Path) -> Iterator[Secured]:
    (tmp_path / "secured").mkdir()
    s = Secured(tmp_path / "secured")
    yield s
    s.broker.stop()


def _rolls(first: int, count: int) -> str:
    rolls = range(first, first + count)
    return "".join(f"ROLL,{n},{n % 6 + 1},{(n // 6) % 6 + 1}\n" for n in rolls)


class Copies:
    """What a display saw of the copies: the arrival time of each message whose ``seq`` is
    at most ``last`` (everything the table had published before the flood: what the flood
    asks for), received live."""

    def __init__(self, last: int) -> None:
        self.last = last
        self.at: list[float] = []
        self.seqs: list[int] = []

    def take(self, message: aiomqtt.Message) -> None:
        payload = message.payload
        if message.retain or not isinstance(payload, bytes) or not payload.startswith(b"{"):
            return
        seq = json.loads(payload).get("seq")
        if isinstance(seq, int) and seq <= self.last:
            self.at.append(time.monotonic())
            self.seqs.append(seq)

    def most_in_a_minute(self) -> int:
        """The most copies that arrived within any 60 s (from one arrival on): a window
        slid over the times in order, so thousands of copies cost no quadratic count."""
        times = sorted(self.at)
        most = end = 0
        for i, start in enumerate(times):
            while end < len(times) and times[end] < start + 60.0:
                end += 1
            most = max(most, end - i)
        return most


def _decisions(table: Table, key: str) -> list[Any]:
    return [r[key] for r in table.journal("--kind", "decision") if key in r]


async def test_a_display_flooding_resends_gets_its_budget_and_the_table_plays_on(
    secured: Secured,
) -> None:
    # One user per connection (a client's id is its user name): the recorder is a pit
    # terminal, the flood is the display credential, the copies are counted by a display
    # of its own.
    table = secured.craps_table(secured.root / "table", extra=("--display", "counter"))
    answers: list[dict[str, Any]] = []
    try:
        await table.start(_rolls(1, HISTORY))
        await table.wait_published()
        last = max(table.recorder.seqs())
        copies = Copies(last)
        async with (
            secured.client("display-counter") as counter,
            secured.client("display") as flood,
        ):
            await counter.subscribe(f"{table.base}/#", qos=1)
            await flood.subscribe(f"{table.base}/response/resend", qos=1)

            async def count() -> None:
                async for message in counter.messages:
                    copies.take(message)

            async def read_answers() -> None:
                async for message in flood.messages:
                    payload = message.payload
                    assert isinstance(payload, bytes)
                    answers.append(json.loads(payload))

            watchers = [asyncio.create_task(count()), asyncio.create_task(read_answers())]
            topic = f"{table.base}/request/resend/display"

            def ask(i: int) -> bytes:
                # Everything the table published, in two parts of 1,000 seqs at most.
                first = 1 if i % 2 == 0 else max(1, last - 999)
                to = min(last, first + 999)
                body = {"operator": "flood", "request_id": i, "from_seq": first, "to_seq": to}
                return json.dumps(body).encode()

            try:
                # Paced: 50 requests a second while the table plays.
                mark = table.recorder.mark()
                await table.start_sim(_rolls(HISTORY + 1, DURING), wait=False)
                start = time.monotonic()
                for i in range(int(PACED * PACED_FOR)):
                    await flood.publish(topic, ask(i), qos=1)
                    await asyncio.sleep(max(0.0, start + (i + 1) / PACED - time.monotonic()))
                await table.wait_sim_done()
                played = list(range(HISTORY + 1, HISTORY + 1 + DURING))
                await table.wait_for(
                    lambda: _played(table, mark, played[0]) == played or None,
                    what="every roll of the paced half at the display",
                )
                # Full speed: as fast as the client writes them, QoS 0.
                mark = table.recorder.mark()
                await table.start_sim(_rolls(HISTORY + DURING + 1, DURING), wait=False)
                for i in range(FULL_SPEED):
                    await flood.publish(topic, ask(i), qos=0)
                await table.wait_sim_done()
                played = list(range(HISTORY + DURING + 1, HISTORY + 1 + 2 * DURING))
                await table.wait_for(
                    lambda: _played(table, mark, played[0]) == played or None,
                    what="every roll of the full-speed half at the display",
                )
                # The copies asked last have arrived: the table answers a request now.
                await table.wait_for(
                    lambda: table.recorder.on("response/resend") or None, what="an answer"
                )
            finally:
                for task in watchers:
                    task.cancel()
                await asyncio.gather(*watchers, return_exceptions=True)

        # The budget: the flood asked for ~700 copies a request, thousands of times.
        assert copies.at, "no copy at all: the flood was never served"
        assert copies.most_in_a_minute() <= COPY_BUDGET
        assert len(copies.seqs) <= COPY_BUDGET * (1 + int(time.monotonic() - start) // 60)
        # The table played on: every roll in order at the display, the link never dropped.
        table.recorder.check_order()
        events = [e["event"] for e in table.log_events()]
        assert not [e for e in events if e.startswith("mqtt connection lost")]
        assert [m.body for m in table.recorder.on("availability")] == ["online"]
        # Refusals past the budget: answered once (then once a minute, or after a request
        # served), the rest counted; never one record each.
        budget = [a for a in answers if str(a.get("error", "")).startswith("resend budget")]
        served = _decisions(table, "resend")
        spent = [r for r in served if r["sent"] > r.get("shared", 0)]  # published copies
        assert budget, "the budget never refused anything"
        assert len(budget) <= len(spent)  # one after each request that spent some
        rejected = _decisions(table, "rejected")
        asked = int(PACED * PACED_FOR) + FULL_SPEED
        assert len(rejected) + len(served) < asked / 50  # a few records, not one a request
        assert all(r.get("user") == "display" for r in served)
    finally:
        await table.close()


def _played(table: Table, mark: int, first: int) -> list[int]:
    """The roll ids from ``first`` on the display got after ``mark`` (not the copies of
    earlier rolls the flood asked for)."""
    ids = [b["roll_id"] for b in table.recorder.bodies("craps/roll", mark)]
    return [i for i in ids if i >= first]


async def test_the_same_range_asked_by_three_screens_at_once_is_published_once(
    secured: Secured,
) -> None:
    table = secured.craps_table(
        secured.root / "table", extra=("--display", "a", "--display", "b", "--display", "counter")
    )
    try:
        await table.start(_rolls(1, 30))
        await table.wait_published()
        last = max(table.recorder.seqs())
        published = len([s for s in table.recorder.seqs() if s <= last])
        copies = Copies(last)
        screens = ("display", "display-a", "display-b")
        async with (
            secured.client("display-counter") as counter,
            secured.client(screens[0]) as s0,
            secured.client(screens[1]) as s1,
            secured.client(screens[2]) as s2,
        ):
            await counter.subscribe(f"{table.base}/#", qos=1)

            async def count() -> None:
                async for message in counter.messages:
                    copies.take(message)

            def ask(name: str) -> bytes:
                body = {"operator": name, "request_id": name, "from_seq": 1, "to_seq": last}
                return json.dumps(body).encode()

            watcher = asyncio.create_task(count())
            try:
                mark = table.recorder.mark()
                await asyncio.gather(
                    *(
                        screen.publish(f"{table.base}/request/resend/{name}", ask(name), qos=1)
                        for name, screen in zip(screens, (s0, s1, s2), strict=True)
                    )
                )

                def three() -> list[dict[str, Any]] | None:
                    found = table.recorder.bodies("response/resend", mark)
                    return found if len(found) == 3 else None

                got = await table.wait_for(three, what="three answers")
                await table.wait_for(
                    lambda: len(copies.seqs) >= published or None, what="the copies"
                )
            finally:
                watcher.cancel()
                await asyncio.gather(watcher, return_exceptions=True)
        # Every screen is told the whole range was sent; each copy went out once.
        assert {(b["request_id"], b["status"], b["sent"]) for b in got} == {
            (name, "ok", published) for name in screens
        }
        assert sorted(copies.seqs) == sorted(s for s in table.recorder.seqs() if s <= last)
        served = _decisions(table, "resend")
        assert sorted(r["user"] for r in served) == sorted(screens)
        assert sorted(r.get("shared", 0) for r in served) == [0, published, published]
    finally:
        await table.close()
