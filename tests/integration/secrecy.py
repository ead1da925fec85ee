"""Card secrecy checks over what the daemon published, journaled for MQTT and logged.

shuffler-icd.md, "Card data is secret until it is face up": poker hands are revealed at
``SETTLE``, a blackjack dealer's up card at once, the hole card and draws at ``END``; no
card before that "in a payload, a retained state, or a log line at info level"
(mqtt-api.md, "Published").
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from typing import Any

from tests.integration.harness import Table, card_pattern, device_records

INFO_AND_ABOVE = frozenset({"info", "warning", "error", "critical"})


def assert_no_card_before(table: Table, cards: Iterable[str], *, fact: str, round_id: int) -> None:
    """No card of ``cards`` in any message queued, or any log line at info and above
    written, before the daemon took ``fact`` (``RoundSettled``, ``DealerDone``) of
    ``round_id``."""
    pattern = card_pattern(cards)
    records = table.journal()
    reveal = [r for r in device_records(records, fact) if r["event"]["round_id"] == round_id]
    assert len(reveal) == 1, f"{fact} of round {round_id} journaled {len(reveal)} times"
    reveal_seq = reveal[0]["seq"]
    for record in records:
        if record["kind"] == "publish" and record["seq"] < reveal_seq:
            text = json.dumps(record["payload"])
            assert not pattern.search(text), f"a card before {fact}: {record['topic']} {text}"
    assert_no_card_in_log(table.log_events(), pattern, until_seq=reveal_seq)


def assert_no_card_in_log(
    events: Sequence[dict[str, Any]], pattern: re.Pattern[str], *, until_seq: int
) -> None:
    """No log line at info or above matches before the line of the fact ``until_seq``."""
    for event in events:
        if event.get("event") == "device event" and event.get("seq") == until_seq:
            return
        if event.get("level") in INFO_AND_ABOVE:
            line = json.dumps(event)
            assert not pattern.search(line), f"a hidden card in a log line: {line}"
    raise AssertionError(f"no log line for the fact with seq {until_seq}")
