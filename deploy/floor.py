"""The floor's names, shared by ``lammer broker-config --bridge`` and ``lammer floor-config``.

A table controller's Mosquitto bridges its tables to the floor cluster (nats-server 2.15 with
its MQTT listener, docs/floor/cluster.md). Both generators must agree on every name
the other one writes, so they live here and nowhere else:

* the controller's name on the floor (``--controller``): letters, digits, ``-`` and ``_``,
  at most 48 characters, so it is one MQTT topic level, one NATS subject token, a file
  name and a Mosquitto client id at once;
* its floor user ``bridge-<controller>`` and MQTT client id ``lammer-bridge-<controller>``
  (NATS refuses ``.`` and spaces in MQTT client ids);
* the bridge's status topic ``lammer-floor/bridge/<controller>``: Mosquitto publishes
  ``1`` there (retained) when the bridge connects, and the floor publishes the bridge's
  will ``0`` when the controller goes silent;
* which topics of a table cross the bridge (``BRIDGE_OUT``, ``BRIDGE_IN``);
* how an MQTT topic is a NATS subject (``nats_subject``): each ``/`` is a ``.``; a filter
  ending in ``/#`` is two subjects to NATS, the level above and everything below
  (``lammer/t1/#`` is ``lammer.t1`` and ``lammer.t1.>``), so a grant of ``#`` names both;
* the controller declaration (``floor-controller.json``): what broker-config tells the
  floor about a controller (its user, the bcrypt hash of its password, its tables), and
  what floor-config reads. The password itself never leaves the controller.

Every value read from a declaration is hostile until ``parse_declaration`` has checked it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Final

import bcrypt

from contract.floor import FLOOR_ROOT
from contract.requests import USER_LEVEL
from contract.topics import GAME_LEVELS, request, response
from rules.events import TABLE_GAMES

DECLARATION_FORMAT: Final = "lammer-floor-controller/1"
DECLARATION_FILE: Final = "floor-controller.json"
DECLARATION_MAX_BYTES: Final = 1024 * 1024

BRIDGE_OUT: Final = ("+", *(f"{level}/+" for level in GAME_LEVELS), response("+"))
"""Below a table's base topic, what goes to the floor: ``availability``, ``state``,
``alarms``, ``info`` (one level), the games' topics and the answers to requests
(mqtt-api.md "Published" and "Requests"). Never ``request/+``: a request that came in
from the floor must not go back out."""

BRIDGE_IN: Final = request("+")
"""Below a table's base topic, what comes in from the floor: the requests (mqtt-api.md
"Requests"), one level, so nothing else reaches the table's broker."""

BRIDGE_IN_USER: Final = tuple(request(f"{name}/+") for name in sorted(USER_LEVEL))
"""Below a table's base topic, what else comes in from the floor: the requests read-only
users send at their own level (mqtt-api.md 1.4, ``request/resend/<user>``), one level
below each name, nothing deeper."""

BCRYPT_COST: Final = 4
"""nats-server takes a password as plain text or as a bcrypt hash, and checks it on
every CONNECT. The passwords are 192-bit random (``secrets``): no work factor adds to
that, while each step of it costs every reconnect after a node fails (cost 11, the NATS
tools' default, is about 100 ms of CPU per login here; 4 is the least bcrypt allows)."""

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,47}")
_BCRYPT = re.compile(r"\$2[aby]\$(0[4-9]|[12][0-9]|3[01])\$[./A-Za-z0-9]{53}")
BASE_MAX: Final = 128 + 1 + 64
"""A prefix is at most 128 characters, a table id 64 (``daemon.config``)."""


class FloorError(ValueError):
    """A name or a declaration the floor cannot use (the message says why)."""


def controller_problem(name: str) -> str | None:
    """Why ``name`` cannot name a controller on the floor, or None."""
    if not _NAME.fullmatch(name):
        return (
            "must be 1 to 48 letters, digits, '-' or '_', starting with a letter or digit "
            f"(one topic level, one NATS token, a file name), got {name!r}"
        )
    return None


def bridge_user(controller: str) -> str:
    """The controller's user on the floor: ``bridge-<controller>``."""
    return f"bridge-{controller}"


def bridge_client_id(controller: str) -> str:
    """The bridge's MQTT client id on the floor (no ``.``: NATS refuses it)."""
    return f"lammer-bridge-{controller}"


def base_problem(base: str) -> str | None:
    """Why ``base`` (``<prefix>/<table id>``) cannot cross to the floor, or None.

    Beyond what ``daemon.config`` refuses (``/ + #`` in a level, ``.``, spaces, control
    characters), NATS gives ``*`` and ``>`` a meaning in subjects and in permissions: a
    table id ``*`` would grant its controller every table. The floor's own root is not a
    table's.
    """
    if not base or len(base) > BASE_MAX:
        return f"must be 1 to {BASE_MAX} characters"
    levels = base.split("/")
    if len(levels) < 2 or any(not level for level in levels):
        return "must be levels separated by single '/' (<prefix>/<table id>)"
    if levels[0] == FLOOR_ROOT:
        return f"must not start with {FLOOR_ROOT!r} (the floor's own topics)"
    bad = sorted({c for c in base if c in '+#*>."\\' or c.isspace() or not c.isprintable()})
    if bad or base.startswith("$"):
        shown = ", ".join(repr(c) for c in bad) or "a leading '$'"
        return (
            "must not hold MQTT or NATS wildcards ('+', '#', '*', '>'), '.', quotes, "
            f"backslashes, spaces or control characters, nor start with '$' ({shown})"
        )
    return None


def nats_subject(topic: str) -> str:
    """The NATS subject of an MQTT topic or filter without ``#`` (``+`` is ``*``)."""
    return ".".join("*" if level == "+" else level for level in topic.split("/"))


def nats_filter(topic: str) -> tuple[str, ...]:
    """The NATS subjects an MQTT filter stands for: ``a/b/#`` is ``a.b`` and ``a.b.>``
    (MQTT's ``#`` also matches the level above it); others one subject."""
    if topic == "#":
        return (">",)
    if topic.endswith("/#"):
        parent = nats_subject(topic[:-2])
        return (parent, f"{parent}.>")
    return (nats_subject(topic),)


def hash_password(password: str) -> str:
    """The bcrypt hash nats-server checks ``password`` against (``BCRYPT_COST``)."""
    return bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=BCRYPT_COST)).decode()


def verify_password(password: str, hashed: str) -> bool:
    """Whether ``hashed`` (a bcrypt hash) is ``password``'s; False for anything else."""
    if not _BCRYPT.fullmatch(hashed):
        return False
    return bool(bcrypt.checkpw(password.encode(), hashed.encode()))


def is_bcrypt(text: str) -> bool:
    """Whether ``text`` has the shape of a bcrypt hash nats-server accepts."""
    return bool(_BCRYPT.fullmatch(text))


@dataclass(frozen=True, slots=True)
class DeclaredTable:
    """A table as a controller declares it to the floor."""

    id: str
    base: str
    game: str


@dataclass(frozen=True, slots=True)
class Declaration:
    """What the floor knows of one controller (``floor-controller.json``)."""

    controller: str
    password_bcrypt: str
    tables: tuple[DeclaredTable, ...]

    @property
    def user(self) -> str:
        """Its floor user."""
        return bridge_user(self.controller)

    def to_json(self) -> str:
        """The file's text: sorted keys, one table a line, as a reader diffs."""
        tables = ",\n".join(
            "    " + json.dumps({"base": t.base, "game": t.game, "id": t.id}, ensure_ascii=False)
            for t in self.tables
        )
        head = {
            "format": DECLARATION_FORMAT,
            "controller": self.controller,
            "user": self.user,
            "password_bcrypt": self.password_bcrypt,
        }
        lines = [
            f"  {json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}," for k, v in head.items()
        ]
        return "{\n" + "\n".join(lines) + '\n  "tables": [\n' + tables + "\n  ]\n}\n"


def parse_declaration(text: str) -> Declaration:  # noqa: C901  hostile input checked field by field, one raise each
    """A controller declaration, checked as hostile input; ``FloorError`` saying what is
    wrong otherwise (unknown keys included)."""
    if len(text.encode()) > DECLARATION_MAX_BYTES:
        raise FloorError(f"larger than {DECLARATION_MAX_BYTES} bytes")
    try:
        data: Any = json.loads(text)
    except ValueError as exc:
        raise FloorError(f"not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise FloorError("not a JSON object")
    expected = {"format", "controller", "user", "password_bcrypt", "tables"}
    if set(data) != expected:
        missing, extra = sorted(expected - set(data)), sorted(set(data) - expected)
        raise FloorError(f"keys: missing {missing}, unknown {extra}")
    if data["format"] != DECLARATION_FORMAT:
        raise FloorError(f"format must be {DECLARATION_FORMAT!r}, got {data['format']!r}")
    controller = data["controller"]
    if not isinstance(controller, str) or (problem := controller_problem(controller)):
        raise FloorError(f"controller: {problem or 'must be a string'}")
    if data["user"] != bridge_user(controller):
        raise FloorError(f"user must be {bridge_user(controller)!r}, got {data['user']!r}")
    hashed = data["password_bcrypt"]
    if not isinstance(hashed, str) or not is_bcrypt(hashed):
        raise FloorError("password_bcrypt: not a bcrypt hash ($2b$NN$ and 53 characters)")
    raw_tables = data["tables"]
    if not isinstance(raw_tables, list) or not raw_tables:
        raise FloorError("tables: must be a non-empty list")
    tables: list[DeclaredTable] = []
    for i, raw in enumerate(raw_tables):
        if not isinstance(raw, dict) or set(raw) != {"id", "base", "game"}:
            raise FloorError(f"tables[{i}]: must be an object with id, base and game")
        table_id, base, game = raw["id"], raw["base"], raw["game"]
        if not all(isinstance(v, str) for v in (table_id, base, game)):
            raise FloorError(f"tables[{i}]: id, base and game must be strings")
        if problem := base_problem(base):
            raise FloorError(f"tables[{i}].base {base!r}: {problem}")
        if not base.endswith("/" + table_id) or "/" in table_id:
            raise FloorError(f"tables[{i}]: base {base!r} must end with /{table_id}")
        if game not in TABLE_GAMES:
            raise FloorError(f"tables[{i}].game: not a game: {game!r}")
        tables.append(DeclaredTable(table_id, base, game))
    if len({t.base for t in tables}) != len(tables):
        raise FloorError("tables: a base topic is given twice")
    return Declaration(controller, hashed, tuple(tables))
