"""The floor's users and their permissions: the controllers' bridges, ``display``,
``terminal`` and ``records``, as NATS subjects."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from contract.floor import FLOOR_ROOT, bridge_status_topic, integrity_topic, software_topic
from contract.requests import request_topic
from deploy import floor
from deploy.floor_config.model import MQTT_DELIVERY, Declared, FloorPlan
from deploy.generators import DISPLAY, RECORDS, TERMINAL


@dataclass(frozen=True, slots=True)
class FloorUser:
    """A user of the floor: name, what it is for, its password hash and permissions."""

    name: str
    about: str
    password_bcrypt: str
    publish_allow: tuple[str, ...]
    publish_deny: tuple[str, ...]
    subscribe_allow: tuple[str, ...]

    def as_nats(self) -> dict[str, Any]:
        """The entry of ``authorization.users``."""
        publish: dict[str, list[str]] = {}
        if self.publish_allow:
            publish["allow"] = list(self.publish_allow)
        if self.publish_deny:
            publish["deny"] = list(self.publish_deny)
        return {
            "user": self.name,
            "password": self.password_bcrypt,
            "allowed_connection_types": ["MQTT"],
            "permissions": {
                "publish": publish,
                "subscribe": {"allow": list(self.subscribe_allow)},
            },
        }


def _resend_subject(base: str, user: str) -> str:
    """``user``'s resend requests to the table at ``base``, at its own name only
    (mqtt-api.md 1.4: not the bare ``request/resend``, the terminal's)."""
    return floor.nats_subject(request_topic(base, "resend", user))


def _readers(plan: FloorPlan) -> tuple[str, ...]:
    subjects = [s for p in plan.prefixes for s in floor.nats_filter(f"{p}/#")]
    subjects += floor.nats_filter(f"{FLOOR_ROOT}/#")
    return (*subjects, MQTT_DELIVERY)


def floor_users(plan: FloorPlan, hashes: dict[str, str]) -> tuple[FloorUser, ...]:
    """Every user of the floor, in file order: the controllers', ``display``, ``terminal``
    and ``records``. ``hashes`` holds the bcrypt hash of each of those three."""
    users = [_controller_user(d) for d in plan.controllers]
    users.append(
        FloorUser(
            name=DISPLAY,
            about=(
                "Pit screens and the floor's systems: read every table; publish only "
                "resend requests at their own name (mqtt-api.md 1.4)"
            ),
            password_bcrypt=hashes[DISPLAY],
            publish_allow=tuple(_resend_subject(t.base, DISPLAY) for t in plan.tables),
            # No table yet: deny all (an empty allow list would allow everything).
            publish_deny=() if plan.tables else (">",),
            subscribe_allow=_readers(plan),
        )
    )
    users.append(
        FloorUser(
            name=TERMINAL,
            about='Pit terminals: read every table; publish requests only (mqtt-api.md "Requests")',
            password_bcrypt=hashes[TERMINAL],
            publish_allow=tuple(
                floor.nats_subject(f"{t.base}/{floor.BRIDGE_IN}") for t in plan.tables
            ),
            # No table yet: deny all (an empty allow list would allow everything).
            publish_deny=() if plan.tables else (">",),
            subscribe_allow=_readers(plan),
        )
    )
    users.append(_records_user(plan, hashes[RECORDS]))
    return tuple(users)


def _controller_user(declared: Declared) -> FloorUser:
    """A controller's bridge: publishes under its own tables' base topics, never their
    requests, and its bridge status; subscribes to its tables' requests only."""
    decl = declared.declaration
    bases = [floor.nats_subject(t.base) for t in decl.tables]
    return FloorUser(
        name=decl.user,
        about=(
            f"Controller {decl.controller} ({declared.path.name}): its tables "
            + ", ".join(t.id for t in decl.tables)
        ),
        password_bcrypt=decl.password_bcrypt,
        publish_allow=(
            *(f"{b}.>" for b in bases),
            floor.nats_subject(bridge_status_topic(decl.controller)),
        ),
        publish_deny=tuple(floor.nats_subject(request_topic(t.base, ">")) for t in decl.tables),
        subscribe_allow=(
            *(
                floor.nats_subject(f"{t.base}/{level}")
                for t in decl.tables
                for level in (floor.BRIDGE_IN, *floor.BRIDGE_IN_USER)
            ),
            MQTT_DELIVERY,
        ),
    )


def _records_user(plan: FloorPlan, hashed: str) -> FloorUser:
    """``records`` (lammer records, lammer authenticate): reads as ``display``; publishes
    the tables' resend and authenticate requests at its own name and the floor's topics."""
    return FloorUser(
        name=RECORDS,
        about="The floor's records (lammer records, lammer authenticate): read every "
        "table; publish resend and authenticate requests at its own name, the integrity "
        "alarms and the software status only",
        password_bcrypt=hashed,
        publish_allow=(
            *(_resend_subject(t.base, RECORDS) for t in plan.tables),
            # lammer authenticate runs as records (mqtt-api.md 1.4).
            *(
                floor.nats_subject(request_topic(t.base, "authenticate", RECORDS))
                for t in plan.tables
            ),
            floor.nats_subject(integrity_topic("+")),
            floor.nats_subject(software_topic("+")),
        ),
        publish_deny=(),
        subscribe_allow=_readers(plan),
    )
