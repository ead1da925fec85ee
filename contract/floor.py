"""The floor's topics that are part of the contract (README "The casino floor").

A table controller's Mosquitto bridges its tables to the floor cluster; the bridge's own
state is retained on the floor under ``FLOOR_ROOT``, which the daemon (it republishes what
a lost bridge may have dropped), the pit and the floor's services all read.
"""

from __future__ import annotations

from typing import Final

FLOOR_ROOT: Final = "lammer-floor"
"""The root of the floor's own topics (never a table's prefix: ``check_base`` refuses it)."""

BRIDGE_STATUS_ROOT: Final = f"{FLOOR_ROOT}/bridge/"
"""The prefix of every bridge's status topic."""


def bridge_status_topic(controller: str) -> str:
    """Where the bridge's state is retained on the floor: ``1`` connected, ``0`` lost."""
    return f"{BRIDGE_STATUS_ROOT}{controller}"
