"""contract.topics: the topic names and which game publishes which, against mqtt-api.md."""

from __future__ import annotations

import pytest

from contract.payloads import TOPICS
from contract.topics import HISTORY_TOPICS, RESULTS, Topic, family, game_topics
from daemon.publications import retained_topics


def test_every_json_topic_is_named_and_only_availability_is_not_json() -> None:
    assert set(TOPICS) == set(Topic) - {Topic.AVAILABILITY}
    assert "craps/roll" in {Topic.CRAPS_ROLL}  # the member is the string on the wire
    assert {"craps/roll": 1}[Topic.CRAPS_ROLL] == 1


@pytest.mark.parametrize("game", ["CSP", "FCP", "LIR", "MSP", "TCP", "UTH"])
def test_a_poker_table_publishes_cover_all(game: str) -> None:
    # mqtt-api.md: the poker games publish cover_all/payouts and cover_all/result.
    assert family(game) == "poker"
    assert game_topics(game) == {
        "availability",
        "info",
        "state",
        "alarms",
        "cover_all/payouts",
        "cover_all/result",
    }


def test_craps_and_blackjack_topics_and_what_is_retained() -> None:
    assert game_topics("CRAPS") >= {"craps/board", "craps/roll", "craps/result", "craps/reversal"}
    assert "cover_all/result" not in game_topics("CRAPS")
    # Retained (mqtt-api.md): the board, never a roll, a result or a reversal.
    assert retained_topics("CRAPS") == {"availability", "info", "state", "alarms", "craps/board"}
    assert retained_topics("BJ") == {
        "availability",
        "info",
        "state",
        "alarms",
        "bust_bonus/state",
        "bust_bonus/result",
    }


def test_an_unknown_game_is_refused_with_its_name() -> None:
    with pytest.raises(ValueError, match="'PAIGOW'"):
        game_topics("PAIGOW")


def test_results_and_history_are_topics_a_table_publishes() -> None:
    published = game_topics("UTH") | game_topics("BJ") | game_topics("CRAPS")
    assert set(RESULTS) <= published
    assert published >= HISTORY_TOPICS
    assert Topic.ALARMS in HISTORY_TOPICS
    assert Topic.CRAPS_BOARD not in HISTORY_TOPICS
