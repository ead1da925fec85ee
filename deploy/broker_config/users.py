"""The broker's users and their grants (what goes into the ACL): a daemon per table,
``display``, ``terminal``, ``records``, the devices of their own, and the bridge broker's user."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from contract.floor import bridge_status_topic, integrity_topic, software_topic
from contract.requests import RESPONSE_LEVEL, request_topic
from contract.topics import Topic
from deploy import floor
from deploy.broker_config.limits import BRIDGE_BROKER_USER
from deploy.broker_config.model import Grant, Table, User
from deploy.generators import DISPLAY, RECORDS, TERMINAL


def table_users(
    tables: Sequence[Table], devices: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())
) -> tuple[User, ...]:
    """Every user of the tables' broker, in ACL order (``devices``: the further displays'
    and terminals' own names)."""
    daemons = tuple(
        User(
            name=t.user,
            role="daemon",
            about=f"Table {t.table_id} ({t.config.table.game}): its daemon publishes its own "
            "base topic and reads its requests",
            # The floor bridge's status, for floor_resend (daemon.mqtt): nothing else
            # is ever published there, and no table may publish it.
            grants=(
                Grant("readwrite", f"{t.base}/#"),
                Grant("read", bridge_status_topic("+")),
            ),
        )
        for t in tables
    )
    display = User(
        name=DISPLAY,
        role="display",
        about="Displays: read every table but its requests, and the integrity alarms; "
        "publish only resend requests at their own name",
        grants=_display_grants(tables, DISPLAY),
    )
    terminal = User(
        name=TERMINAL,
        role="terminal",
        about="Pit terminals: read every table but its requests; publish requests only "
        '(mqtt-api.md "Requests")',
        grants=tuple(
            g
            for t in tables
            for g in (*readable_grants(t.base), Grant("write", request_topic(t.base, "+")))
        ),
    )
    records = _records_user(tables)
    displays, terminals = devices
    own_displays = tuple(
        User(
            name=f"{DISPLAY}-{name}",
            role="display",
            about=f"Display {name}: as {DISPLAY}, with a client id and a resend budget of its own",
            grants=_display_grants(tables, f"{DISPLAY}-{name}"),
        )
        for name in displays
    )
    own_terminals = tuple(
        User(
            name=f"{TERMINAL}-{name}",
            role="terminal",
            about=f"Pit terminal {name}: as {TERMINAL}, with a client id of its own",
            grants=terminal.grants,
        )
        for name in terminals
    )
    return (*daemons, display, terminal, records, *own_displays, *own_terminals)


def _records_user(tables: Sequence[Table]) -> User:
    """lammer records (docs/floor/records.md): reads every table, asks for resends
    (mqtt-api.md 1.3), and publishes the floor's integrity topics; nothing else."""
    return User(
        name=RECORDS,
        role="records",
        about="The floor's records and authenticator: read every table; publish resend and "
        "authenticate requests at its own name, the integrity alarms and the software "
        "status only",
        grants=(
            *(
                g
                for t in tables
                for g in (
                    Grant("read", f"{t.base}/#"),
                    resend_grant(t.base, RECORDS),
                    # lammer authenticate (records/authenticate.py) runs as records.
                    Grant("write", request_topic(t.base, "authenticate", RECORDS)),
                )
            ),
            Grant("write", integrity_topic("+")),
            Grant("write", software_topic("+")),
        ),
    )


def resend_grant(base: str, user: str) -> Grant:
    """``user`` may ask the table at ``base`` for resends at its own name only,
    ``<base>/request/resend/<user>`` (mqtt-api.md 1.4): the table knows who asks and budgets
    the copies per user (``daemon.resend``). Not the bare ``request/resend``, the
    terminal's, nor another user's name."""
    return Grant("write", request_topic(base, "resend", user))


def _display_grants(tables: Sequence[Table], user: str) -> tuple[Grant, ...]:
    # request/resend reveals nothing a reader cannot read (mqtt-api.md 1.3): a display
    # that lost messages asks the table for them (contract.feed), at its own name (1.4);
    # nothing else. The pit (lammer web) draws the integrity alarms lammer records
    # publishes here when it runs against this controller's broker (floor-config grants
    # the same on the floor).
    return (
        *(g for t in tables for g in (*readable_grants(t.base), resend_grant(t.base, user))),
        Grant("read", integrity_topic("+")),
        Grant("read", software_topic("+")),
    )


READ_GROUPS: Final = tuple(
    sorted({topic.split("/")[0] for topic in Topic if "/" in topic} | {RESPONSE_LEVEL})
)
"""The topic groups under a base topic that displays and terminals read (from the
contract's topics, and the answers); never ``request``."""


def readable_grants(base: str) -> tuple[Grant, ...]:
    """What a display or a terminal may read of one table: every topic the daemon
    publishes (``<base>/+``: availability, state, alarms, info; each group's topics), never
    the requests. Mosquitto 2.0 accepts any subscription and checks every message it
    delivers against these grants, so a subscriber to ``<base>/#`` gets the table and none
    of a flood of requests, which would fill a display's queue and hold its results behind."""
    return (
        Grant("read", f"{base}/+"),
        *(Grant("read", f"{base}/{group}/#") for group in READ_GROUPS),
    )


def bridge_broker_user(tables: Sequence[Table]) -> User:
    """The bridge broker's user on the tables' broker: it reads what goes to the floor and
    writes the requests that come in from it, and the bridges' status for the daemons."""
    grants: list[Grant] = []
    for t in tables:
        grants += [Grant("read", f"{t.base}/{level}") for level in floor.BRIDGE_OUT]
        grants.append(Grant("write", f"{t.base}/{floor.BRIDGE_IN}"))
        grants += [Grant("write", f"{t.base}/{level}") for level in floor.BRIDGE_IN_USER]
    grants.append(Grant("write", bridge_status_topic("+")))
    return User(
        name=BRIDGE_BROKER_USER,
        role="bridge",
        about="The floor bridge's own broker (bridge.conf): reads what crosses to the floor, "
        "writes the requests that come back and the bridges' status",
        grants=tuple(grants),
    )
