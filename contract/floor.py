"""The floor's topics that are part of the contract (docs/floor/cluster.md).

A table controller's Mosquitto bridges its tables to the floor cluster; the bridge's own
state is retained on the floor under ``FLOOR_ROOT``, which the daemon (it republishes what
a lost bridge may have dropped), the pit and the floor's services all read.
"""

from __future__ import annotations

from typing import Annotated, Final, Literal

from pydantic import Field

from contract.payloads import PayloadModel, TableId, Text, Timestamp

FLOOR_ROOT: Final = "lammer-floor"
"""The root of the floor's own topics (never a table's prefix: ``check_base`` refuses it)."""

BRIDGE_STATUS_ROOT: Final = f"{FLOOR_ROOT}/bridge/"
"""The prefix of every bridge's status topic."""


def bridge_status_topic(controller: str) -> str:
    """Where the bridge's state is retained on the floor: ``1`` connected, ``0`` lost."""
    return f"{BRIDGE_STATUS_ROOT}{controller}"


# ---------------------------------------------------------------------------------------
# The integrity watch (mqtt-api.md 1.3, "Floor topics"): published by ``lammer records``.

INTEGRITY_ROOT: Final = f"{FLOOR_ROOT}/integrity/"
"""The prefix of every table's integrity topic (retained)."""

P_VALUE_PATTERN: Final = r"^[0-9]\.[0-9]e-[0-9]+$|^1$"
DECIMAL_PATTERN: Final = r"^(0|[1-9][0-9]*)(\.[0-9]+)?$"


def integrity_topic(table: str) -> str:
    """Where the records service retains a table's integrity alarms."""
    return f"{INTEGRITY_ROOT}{table}"


class IntegrityAlarm(PayloadModel):
    """A count of a table's outcomes that the par sheet makes implausible.

    ``p_value`` is the chance of a count at least this far out on an honest table, never
    understated, written with two significant digits rounded up (``"3.1e-13"``); ``expected``
    the par sheet's expected count, as a decimal string rounded to two places. Added to the
    spec's fields: ``side`` (``high``: too many, ``low``: too few, ``fit``: all rows
    together), ``rounds`` (the trials counted) and ``message`` (a sentence for the pit).
    """

    bet: Text
    row: Text
    window: Literal["day", "week", "all"]
    observed: Annotated[int, Field(ge=0)]
    expected: Annotated[str, Field(pattern=DECIMAL_PATTERN)]
    p_value: Annotated[str, Field(pattern=P_VALUE_PATTERN)]
    since: Timestamp
    side: Literal["high", "low", "fit"]
    rounds: Annotated[int, Field(ge=1)]
    message: Text


class IntegrityBody(PayloadModel):
    """``lammer-floor/integrity/<table>`` (retained): ``alarms``, empty when all is well."""

    table: TableId
    ts: Timestamp
    alarms: list[IntegrityAlarm]


# ---------------------------------------------------------------------------------------
# Software authentication (mqtt-api.md 1.4): published by ``lammer authenticate``.

SOFTWARE_ROOT: Final = f"{FLOOR_ROOT}/software/"
"""The prefix of every table's software topic (retained)."""

SOFTWARE_ALARM: Final = "SOFTWARE"
"""The alarm the pit shows for a table whose software is not ``approved``."""


def software_topic(table: str) -> str:
    """Where the floor's authenticator retains a table's software status."""
    return f"{SOFTWARE_ROOT}{table}"


class SoftwareBody(PayloadModel):
    """``lammer-floor/software/<table>`` (retained): the latest authentication of a table.

    ``status`` ``approved`` (its answer to a fresh seed matches the approved manifest
    ``manifest``), ``unknown`` (it matches none: ``differs`` names the first component
    that does not match the manifest of its version, or the first manifest) or ``silent``
    (no answer in time, or only answers to another seed); ``version`` is what its ``info``
    says; ``message`` a sentence for the pit.
    """

    table: TableId
    ts: Timestamp
    status: Literal["approved", "unknown", "silent"]
    version: Annotated[str, Field(max_length=200)] | None
    manifest: Annotated[str, Field(max_length=300)] | None
    differs: Annotated[str, Field(max_length=300)] | None
    message: Text
