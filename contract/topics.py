"""The names of a table's topics, and which of them each game publishes: one home.

Every topic under a table's base topic (mqtt-api.md) is a member of ``Topic``. It is a
``StrEnum``, so a member is the very string on the wire (``Topic.CRAPS_ROLL ==
"craps/roll"``, the same hash): a consumer compares a received topic with a member, and a
producer publishes to one, without spelling the name again. ``contract.payloads.TOPICS``
gives each JSON topic its model; ``availability`` is the one topic without JSON.

Which topics a game publishes (``game_topics``), the results a screen lists (``RESULTS``)
and the topics whose earlier messages a screen keeps (``HISTORY_TOPICS``, ``HISTORY``) are
declared here once and written into the browser's ``contract.js`` (``contract.esmodule``),
so the daemon, ``lammer web`` and the pages cannot disagree on them.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final

from rules.events import POKER_GAMES


class Topic(StrEnum):
    """A topic relative to a table's base topic (``lammer/<table>/``)."""

    AVAILABILITY = "availability"
    INFO = "info"
    STATE = "state"
    ALARMS = "alarms"
    COVER_ALL_PAYOUTS = "cover_all/payouts"
    COVER_ALL_RESULT = "cover_all/result"
    CRAPS_BOARD = "craps/board"
    CRAPS_ROLL = "craps/roll"
    CRAPS_RESULT = "craps/result"
    CRAPS_REVERSAL = "craps/reversal"
    BUST_BONUS_STATE = "bust_bonus/state"
    BUST_BONUS_RESULT = "bust_bonus/result"


COMMON_TOPICS: Final = (Topic.AVAILABILITY, Topic.INFO, Topic.STATE, Topic.ALARMS)
"""What every table publishes, whatever its game."""

FAMILY_TOPICS: Final[dict[str, tuple[Topic, ...]]] = {
    "poker": (Topic.COVER_ALL_PAYOUTS, Topic.COVER_ALL_RESULT),
    "BJ": (Topic.BUST_BONUS_STATE, Topic.BUST_BONUS_RESULT),
    "CRAPS": (Topic.CRAPS_BOARD, Topic.CRAPS_ROLL, Topic.CRAPS_RESULT, Topic.CRAPS_REVERSAL),
}
"""The game's own topics, by family: ``poker`` is every game with a Cover All Bonus."""


def family(game: str) -> str:
    """The family of a game code (``"UTH"`` -> ``"poker"``; ``"BJ"``, ``"CRAPS"``)."""
    if game in POKER_GAMES:
        return "poker"
    if game in FAMILY_TOPICS:
        return game
    raise ValueError(f"unknown game {game!r}")


def game_topics(game: str) -> frozenset[Topic]:
    """Every topic a table of ``game`` publishes under its base (requests' responses aside)."""
    return frozenset(COMMON_TOPICS + FAMILY_TOPICS[family(game)])


RESULTS: Final = (
    Topic.COVER_ALL_RESULT,
    Topic.BUST_BONUS_RESULT,
    Topic.CRAPS_RESULT,
    Topic.CRAPS_ROLL,
)
"""The topics a screen reads a table's last result from, in the order it prefers them."""

HISTORY_TOPICS: Final = frozenset(
    {
        Topic.COVER_ALL_RESULT,
        Topic.BUST_BONUS_RESULT,
        Topic.CRAPS_ROLL,
        Topic.CRAPS_RESULT,
        Topic.ALARMS,
    }
)
"""The topics whose earlier messages a screen keeps, besides the latest."""

HISTORY: Final = 50
"""Messages kept per table and history topic for the screens' history (the player display
shows the last 10, ``/pit/<id>`` the last 50): ``lammer web`` sends them to a page that
connects, which keeps as many. In memory, bounded."""

REQUEST: Final = "request"
"""The level under a table's base topic where requests arrive: ``request/<name>``
(mqtt-api.md "Requests"); ``request/<name>/<user>`` for a read-only user (1.4)."""


def request(name: str) -> str:
    """The topic of a request, relative to the base topic: ``request/<name>``."""
    return f"{REQUEST}/{name}"


def is_request(topic: str) -> bool:
    """Whether a topic relative to the base topic is a request's (``request/...``)."""
    return topic.startswith(REQUEST + "/")


def request_name(topic: str) -> str | None:
    """The ``<name>`` of ``request/<name>``: the rest of the topic after ``request/``
    (``resend/<user>`` at a user's own level), None for a topic that is not a request's."""
    head, sep, name = topic.partition("/")
    return name if head == REQUEST and sep else None
