"""A Mosquitto configuration for the tables of one table controller (``lammer broker-config``).

Only the right clients may act on a table (mqtt-api.md): a table's own daemon publishes its
state and answers its requests, displays only read, pit terminals read and send requests.
``plan_broker`` turns the tables' configurations and a few options into a ``BrokerPlan``;
``generate`` writes it into one directory:

    DIR/mosquitto.conf      0640 root:<broker group>   listeners, security, limits, persistence
    DIR/passwd              0600 <broker user>         one ``user:$7$...`` line per user, as
                                                       Debian's mosquitto_passwd 2.0 writes it
    DIR/acl                 0600 <broker user>         per user, the topics it may read or write
    DIR/credentials/        0700                       (the invoking user's: root in production)
    DIR/credentials/<user>  0600                       that user's password, one line

Users: ``lammer-<table id>`` per table (read and write its own base topic
``<prefix>/<table id>/#``, which holds its requests), ``display`` and ``display-<name>``
(read every table, publish only ``request/resend/<its own name>``, mqtt-api.md 1.4),
``terminal`` and ``terminal-<name>`` (read every table, publish only
``<prefix>/<table id>/request/+``) and ``records`` (read every table, publish
``request/resend/records`` and the integrity topics). Each user's own name is written
into its own grant (``resend_grant``) rather than as a ``pattern ... %u`` line: a pattern
applies to every user, the daemons' and the terminals' too, and the file stays one block
per user that ``read_acl`` can read back. Ownership is set only when run as root: Mosquitto
started as root drops to ``user`` (``--broker-user``, default ``mosquitto``) *before* it
reads passwd and acl (seen with 2.0.11: a root-only passwd is "Unable to open pwfile").

Idempotent, as the style guide asks of generators: the files are rendered from the
templates below, so the same tables give the same bytes and two runs can be diffed; a
password in ``credentials/`` is kept, and its passwd line too (kept byte for byte while it
still verifies, so passwd does not churn with new salts); ``generate`` returns what it
changed. To change one password, delete its credentials file and run again.

Nothing the configurations hold can add a line to a generated file: ``daemon.config``
refuses control characters, spaces and wildcards in table ids and prefixes, this module
refuses what cannot be a Mosquitto user name or a safe file value, and every rendered file
is read back the way Mosquitto 2.0 reads it and must mean exactly the plan (``read_acl``,
``read_conf``, ``read_passwd``) before anything is written.

Choices (also in docs/floor/broker.md):

* The daemons' listener is the ``[mqtt] host`` and ``port`` the configurations share, on
  loopback, plain, with a connection limit of its own (nothing on the network can crowd
  the daemons out). Configurations naming different brokers, a host that is not loopback
  or ``[mqtt.tls]`` are refused: the daemons and this broker share one controller.
* ``--listen HOST:PORT`` adds a listener for displays and terminals on the network; with
  ``--tls-cert/--tls-key/--tls-ca`` it is TLS (TLS 1.2 at least; default ``0.0.0.0:8883``).
  Passwords authenticate on every listener; no client certificates.
* Tables may have different prefixes: every grant names a table's own base topic. One base
  topic inside another (prefix ``lammer/t1`` for table ``x``, beside table ``t1``) is
  refused: ``t1``'s daemon could write the other table's state.

The floor bridge (``--bridge HOST:PORT[,HOST:PORT...]``) parses with ``parse_endpoint``
into a ``bridge`` field of ``BrokerPlan`` (``plan_broker`` checks it with the rest). It runs
in a Mosquitto of its own (issue 28: a 2.0.11 bridge that fails TLS can hang the broker it
is in), so ``mosquitto.conf`` has none and three more files are written:

    DIR/bridge.conf            0640 root:<broker group>   the bridge broker: one loopback
                                                       listener (the watchdog's probe), a
                                                       bridge ``tables`` to this broker as
                                                       user ``floor-bridge`` and the bridge
                                                       ``floor``
    DIR/bridge.acl             0600 <broker user>         the probe's topics only
    DIR/lammer-bridge.service  0644                       the unit: ``lammer bridge-watchdog``

The floor bridge is the last section of ``bridge.conf``, rendered by ``_bridge_section``
(every option after a ``connection`` line belongs to that bridge):
``address`` with every cluster node, ``cleansession false``, ``try_private false``,
``notifications false``, a ``remote_clientid`` without ``.`` or spaces, and ``topic`` lines
from ``BrokerPlan.tables`` (each base topic's state out, its ``request/+`` and
``request/resend/+`` in, QoS 1).
Mosquitto does not check a bridge's traffic against ``acl_file``, so those ``topic ... in``
lines are all that bounds what the floor may send: name each table's ``request/+``, never a
wildcard above it. Its password is kept as the users' are (a ``credentials/`` entry read
or made by ``_password_for``) and written as ``remote_password`` into ``mosquitto.conf``,
which is why that file is 0640 root:<broker group>; ``check_rendered`` reads both files
back like every other. The limits already serve a bridge: persistence keeps its
queue across a restart, and ``max_queued_messages`` is sized for a floor outage.

Errors: ``BrokerConfigError(DaemonError, ValueError)``, ``problems`` listing every one.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import os
import pwd
import re
import secrets
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Final, Literal

from contract.floor import bridge_status_topic, integrity_topic, software_topic
from contract.payloads import TOPICS
from contract.requests import request_topic
from daemon.config import TableConfig
from daemon.errors import DaemonError
from deploy import floor
from deploy.files import (
    Change,
    Owner,
    foreign_files,
    keep_or_make_password,
    make_dir,
    write_file,
)
from foundation.endpoints import Endpoint, parse_endpoint

# ---------------------------------------------------------------------------------------
# Limits (the reasons are written next to each in mosquitto.conf, see _limits_section)

REQUEST_MAX: Final = 4 * 1024
"""mqtt-api.md "Requests": a request payload is at most 4 KiB."""

LARGEST_PAYLOAD: Final = 32 * 1024
"""Bound of the largest payload a daemon publishes: ``state`` (and ``alarms``) with every
alarm a table can hold, at most 32 device codes per device plus the table's own alarms, each
as long as a 240-byte link-layer body allows with every character JSON-escaped
(``tests/deploy/test_broker_config.py`` builds it with the daemon's own builders: about
25 KB). Every other payload (a result, a board, a response to a 4 KiB request) is smaller."""

MESSAGE_SIZE_LIMIT: Final = 256 * 1024
"""``message_size_limit``: eight times ``LARGEST_PAYLOAD``. A publish above it is dropped
(its QoS 1 flow completed) without ending the connection, so a daemon is never thrown into
a reconnect loop by one oversized message of its own."""

MAX_PACKET_SIZE: Final = 2 * MESSAGE_SIZE_LIMIT
"""``max_packet_size``: a packet above it ends the connection before Mosquitto buffers it
(``message_size_limit`` alone is checked after the whole packet is read; MQTT allows
256 MB). Twice the message limit: room for any topic (65,535 bytes at most) and
properties, so a message under the limit never ends a connection."""

MAX_INFLIGHT_MESSAGES: Final = 20
"""``max_inflight_messages``: QoS 1 messages per client awaiting PUBACK, as the daemon's
own window (``MqttLink``); on a LAN or loopback round trip this never limits throughput."""

BRIDGE_INFLIGHT_MESSAGES: Final = 1
"""``max_inflight_messages`` with a floor bridge (Mosquitto 2.0 has no setting of its own
for a bridge). With a window of 20, a floor node killed under load had acknowledged some
messages of the window and not others; the bridge sent those again to the next node after
the later ones, so the floor saw a table's ``seq`` out of order. One message in flight keeps
the order; a table publishes a few messages a minute, far below one per round trip."""

MAX_QUEUED_MESSAGES: Final = 10_000
"""``max_queued_messages`` per client beyond those in flight (a slow display, a persistent
session while its client is away, a bridge while the floor is unreachable). A table
publishes about 10 messages a minute, so this holds about four hours of four tables."""

MAX_QUEUED_BYTES: Final = 16 * 1024 * 1024
"""``max_queued_bytes`` per client: bounds the memory one lagging client can hold."""

MAX_BRIDGE_NODES: Final = 16
"""A floor cluster of more nodes than this is not one this project configures (NATS
recommends 3 or 5 for JetStream)."""

BRIDGE_KEEPALIVE: Final = 15
"""``keepalive_interval`` of the floor bridge, in seconds: a floor node that died without a
word (power, network) is given up after about 1.5 times this, and the next one tried; the
floor publishes a silent controller's ``0`` as soon."""

BRIDGE_RESTART: Final = (1, 15)
"""``restart_timeout`` of the floor bridge: reconnects back off from 1 s to 15 s (with
Mosquitto's jitter), so a lost node is left within a second or two and a floor that is
down is not hammered by every controller at once."""

BRIDGE_LISTEN: Final = "127.0.0.1:1884"
"""``--bridge-listen``: the bridge broker's only listener (loopback), where the watchdog's
probe makes its round trip (``deploy.bridge_watchdog``)."""

LOCAL_KEEPALIVE: Final = 5
"""``keepalive_interval`` of the bridge broker's connection to the tables' broker: both
ends on loopback, so a bridge broker that stops answering is known to the tables' broker
(its will ``0`` to the daemons) within about 7.5 s."""

LOCAL_RESTART: Final = "1 5"
"""``restart_timeout`` of the bridge broker's connection to the tables' broker."""

BRIDGE_BROKER_USER: Final = "floor-bridge"
"""The bridge broker's user on the tables' broker (``credentials/floor-bridge``): it reads
what crosses to the floor and writes the requests that come back, nothing else."""

PROBE_ROOT: Final = "lammer-bridge/probe"
"""The only topics of the bridge broker's ACL: the watchdog's probe publishes one message
under it and must read it back (``deploy.bridge_watchdog``)."""

BRIDGE_UNIT: Final = "lammer-bridge.service"
"""The systemd unit broker-config writes for the bridge broker and its watchdog."""

LAN_MAX_CONNECTIONS: Final = 256
"""``max_connections`` of the network listener: displays and terminals of a few tables,
with room; well under the 1024 file descriptors a systemd service gets by default."""

AUTOSAVE_INTERVAL: Final = 60
"""``autosave_interval`` in seconds: at most a minute of queued messages lost at a power
cut (a clean stop saves everything; the daemons republish the retained state anyway)."""

PERSISTENT_CLIENT_EXPIRATION: Final = "7d"
"""``persistent_client_expiration``: the session of a client gone for a week is dropped."""


def daemons_max_connections(tables: int) -> int:
    """``max_connections`` of the daemons' loopback listener: each daemon plus room for a
    local screen and tools, at least 64."""
    return max(64, 2 * tables + 32)


# ---------------------------------------------------------------------------------------
# Errors and the plan


class BrokerConfigError(DaemonError, ValueError):
    """Tables or options that cannot make one broker configuration; ``problems`` lists
    every one, each a sentence naming the table or option."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems: tuple[str, ...] = tuple(problems)
        count = len(self.problems)
        header = f"{count} problem{'s' if count != 1 else ''}"
        super().__init__("\n  ".join([header, *self.problems]))


Access = Literal["read", "write", "readwrite"]
Role = Literal["daemon", "display", "terminal", "records", "bridge"]

DISPLAY: Final = "display"
TERMINAL: Final = "terminal"
RECORDS: Final = "records"
DEFAULT_TLS_LISTEN: Final = "0.0.0.0:8883"
DEFAULT_DATA_DIR: Final = Path("/var/lib/mosquitto")  # Debian's, owned by mosquitto
DEFAULT_BROKER_USER: Final = "mosquitto"
GENERATED_BY: Final = "Generated by `lammer broker-config`"


def daemon_user(table_id: str) -> str:
    """The Mosquitto user of a table's daemon: ``lammer-<table id>``."""
    return f"lammer-{table_id}"


@dataclass(frozen=True, slots=True)
class Grant:
    """One ACL line: ``topic <access> <topic>``."""

    access: Access
    topic: str


@dataclass(frozen=True, slots=True)
class User:
    """A Mosquitto user, what it is for (one line), and its grants in ACL order."""

    name: str
    role: Role
    about: str
    grants: tuple[Grant, ...]


@dataclass(frozen=True, slots=True)
class ListenerTls:
    """The TLS files of a listener (absolute paths, checked when planned)."""

    cert: Path
    key: Path
    ca: Path


@dataclass(frozen=True, slots=True)
class Listener:
    """A Mosquitto listener: for the daemons (loopback, plain) or the network."""

    endpoint: Endpoint
    purpose: Literal["daemons", "network"]
    max_connections: int
    tls: ListenerTls | None = None


@dataclass(frozen=True, slots=True)
class Table:
    """One table of the plan, from its configuration file."""

    config_path: Path
    config: TableConfig

    @property
    def table_id(self) -> str:
        """The table id (``[table] id``)."""
        return self.config.table.id

    @property
    def base(self) -> str:
        """The base topic ``<prefix>/<table id>``."""
        return self.config.base_topic

    @property
    def user(self) -> str:
        """Its daemon's Mosquitto user."""
        return daemon_user(self.table_id)


@dataclass(frozen=True, slots=True)
class Bridge:
    """The bridge to the floor cluster: its nodes' MQTT listeners, in the order tried, and
    the controller's name there (``deploy.floor`` derives its user, client id and status
    topic from it)."""

    nodes: tuple[Endpoint, ...]
    controller: str
    ca: Path | None = None
    """The floor CA (``--bridge-ca``): the bridge speaks TLS and verifies every node."""
    listen: Endpoint = field(default_factory=lambda: Endpoint("127.0.0.1", 1884))
    """The bridge broker's loopback listener (``--bridge-listen``): the watchdog's probe."""
    data_dir: Path = Path("/var/lib/lammer-bridge")
    """The bridge broker's persistence (``--data-dir``/bridge): its queue for the floor."""
    retry: tuple[int, int] = BRIDGE_RESTART
    """Seconds between two attempts to reach the floor, least and most
    (``--bridge-retry``, Mosquitto's ``restart_timeout``)."""

    @property
    def user(self) -> str:
        """The controller's user on the floor (its password: ``credentials/<user>``)."""
        return floor.bridge_user(self.controller)

    @property
    def local_status_topic(self) -> str:
        """Where the tables' broker holds whether the bridge broker is there (``1``, and
        its will ``0``): beside the floor status, so the daemons' ``floor_resend`` hears
        both. Never crosses to the floor."""
        return bridge_status_topic(f"{self.controller}.local")


@dataclass(frozen=True, slots=True)
class BrokerPlan:
    """Everything ``generate`` writes, decided and checked (``plan_broker``)."""

    out: Path
    tables: tuple[Table, ...]
    listeners: tuple[Listener, ...]
    users: tuple[User, ...]
    data_dir: Path
    broker_user: str
    bridge: Bridge | None = None

    @property
    def declaration_path(self) -> Path:
        """``DIR/floor-controller.json``: what floor-config needs of this controller."""
        return self.out / floor.DECLARATION_FILE

    @property
    def conf_path(self) -> Path:
        """``DIR/mosquitto.conf``."""
        return self.out / "mosquitto.conf"

    @property
    def bridge_conf_path(self) -> Path:
        """``DIR/bridge.conf``: the bridge broker's configuration."""
        return self.out / "bridge.conf"

    @property
    def bridge_acl_path(self) -> Path:
        """``DIR/bridge.acl``: the bridge broker's ACL (the probe's topic only)."""
        return self.out / "bridge.acl"

    @property
    def bridge_unit_path(self) -> Path:
        """``DIR/lammer-bridge.service``: its systemd unit, to install."""
        return self.out / BRIDGE_UNIT

    @property
    def passwd_path(self) -> Path:
        """``DIR/passwd``."""
        return self.out / "passwd"

    @property
    def acl_path(self) -> Path:
        """``DIR/acl``."""
        return self.out / "acl"

    @property
    def credentials_dir(self) -> Path:
        """``DIR/credentials``."""
        return self.out / "credentials"

    def credential_path(self, user: str) -> Path:
        """``DIR/credentials/<user>``: the user's password."""
        return self.credentials_dir / user


_SYSTEM_USER = re.compile(r"[a-z_][a-z0-9_-]{0,31}")


# ---------------------------------------------------------------------------------------
# Planning


def plan_broker(
    tables: Sequence[tuple[Path, TableConfig]],
    *,
    out: Path,
    listen: str | None = None,
    tls: tuple[Path, Path, Path] | None = None,
    data_dir: Path = DEFAULT_DATA_DIR,
    broker_user: str = DEFAULT_BROKER_USER,
    bridge: str | None = None,
    controller: str | None = None,
    bridge_ca: Path | None = None,
    displays: Sequence[str] = (),
    terminals: Sequence[str] = (),
    bridge_listen: str | None = None,
    bridge_retry: str | None = None,
) -> BrokerPlan:
    """Decide the broker for ``tables`` (each a configuration file and its contents).

    ``displays`` and ``terminals`` name further users ``display-NAME`` and
    ``terminal-NAME``, with the grants of ``display`` and ``terminal``: one for each device
    that connects at the same time as another of its kind (``client_id_users``).

    ``listen`` is the network listener (``HOST:PORT``), ``tls`` its certificate, key and
    CA; ``bridge`` the floor cluster's nodes (``HOST:PORT[,HOST:PORT...]``) and
    ``controller`` this controller's name there. Raises ``BrokerConfigError`` with every
    problem found (module docstring, choices).
    """
    problems: list[str] = []
    if not tables:
        problems.append("no table configuration given")
    entries = tuple(sorted((Table(p, c) for p, c in tables), key=lambda t: t.table_id))
    problems += _table_problems(entries)
    daemons = _daemons_endpoint(entries, problems)

    network: Listener | None = None
    listener_tls: ListenerTls | None = None
    if tls is not None:
        listener_tls = _check_tls(*tls, problems=problems)
    if listen is not None or tls is not None:
        try:
            endpoint = parse_endpoint(listen or DEFAULT_TLS_LISTEN)
        except ValueError as exc:
            problems.append(f"--listen: {exc}")
        else:
            network = Listener(endpoint, "network", LAN_MAX_CONNECTIONS, listener_tls)
            if daemons is not None:
                problems += _overlap_problems(daemons, endpoint)

    for what, path in (("--out", out), ("--data-dir", data_dir)):
        problem = _path_problem(path)
        if problem:
            problems.append(f"{what}: {problem}")
    if out.exists() and not out.is_dir():
        problems.append(f"--out: {out} is not a directory")
    if not _SYSTEM_USER.fullmatch(broker_user):
        problems.append(f"--broker-user: not a system user name: {broker_user!r}")
    problems += _foreign_file_problems(out)
    planned_bridge = _plan_bridge(bridge, controller, entries, problems, bridge_ca)
    planned_bridge = _bridge_broker(
        planned_bridge, bridge_listen, bridge_retry, data_dir, daemons, network, problems
    )
    devices = _device_names(displays, terminals, problems)
    if problems:
        raise BrokerConfigError(problems)
    assert daemons is not None  # noqa: S101  no problem means the tables named one broker
    listeners = (
        Listener(daemons, "daemons", daemons_max_connections(len(entries))),
        *(() if network is None else (network,)),
    )
    return BrokerPlan(
        out=out.absolute(),
        tables=entries,
        listeners=listeners,
        users=(
            *_users(entries, devices),
            *(() if planned_bridge is None else (_bridge_broker_user(entries),)),
        ),
        data_dir=data_dir.absolute(),
        broker_user=broker_user,
        bridge=planned_bridge,
    )


def _plan_bridge(  # noqa: C901  a flat list of checks, each appending its problem
    bridge: str | None,
    controller: str | None,
    tables: Sequence[Table],
    problems: list[str],
    ca: Path | None = None,
) -> Bridge | None:
    """The floor bridge of ``--bridge``, ``--controller`` and ``--bridge-ca``, checked
    (problems appended)."""
    if bridge is None:
        if controller is not None:
            problems.append("--controller names this controller on the floor: give --bridge too")
        if ca is not None:
            problems.append("--bridge-ca is the floor's CA: give --bridge too")
        return None
    if ca is None:
        # The floor's nodes listen with TLS only (floor-config): the bridge's password never
        # crosses the floor network in clear.
        problems.append(
            "--bridge needs --bridge-ca FILE: the floor CA (floor-config's ca.crt) that the "
            "bridge verifies every node with"
        )
    elif problem := _pem_problem(ca, "-----BEGIN CERTIFICATE-----"):
        problems.append(f"--bridge-ca: {problem}")
    if controller is None:
        problems.append("--bridge needs --controller NAME: this controller's name on the floor")
    elif problem := floor.controller_problem(controller):
        problems.append(f"--controller: {problem}")
    nodes: list[Endpoint] = []
    texts = bridge.split(",")
    if len(texts) > MAX_BRIDGE_NODES:
        problems.append(f"--bridge: at most {MAX_BRIDGE_NODES} nodes, got {len(texts)}")
        texts = []
    for text in texts:
        try:
            endpoint = parse_endpoint(text.strip())
        except ValueError as exc:
            problems.append(f"--bridge: {exc}")
            continue
        if endpoint in nodes:
            problems.append(f"--bridge: {endpoint} is given twice")
        elif endpoint.wildcard:
            problems.append(f"--bridge: {endpoint} is not a node's address")
        else:
            nodes.append(endpoint)
    for t in tables:
        if problem := floor.base_problem(t.base):
            problems.append(f"{t.table_id} ({t.config_path}): base topic {t.base!r} {problem}")
    if controller is None or floor.controller_problem(controller) or not nodes:
        return None
    return Bridge(tuple(nodes), controller, None if ca is None else ca.absolute())


def _bridge_broker(
    bridge: Bridge | None,
    listen: str | None,
    retry: str | None,
    data_dir: Path,
    daemons: Endpoint | None,
    network: Listener | None,
    problems: list[str],
) -> Bridge | None:
    """The bridge broker's listener, persistence and retry of ``--bridge-listen``,
    ``--data-dir`` and ``--bridge-retry``, checked (problems appended)."""
    if bridge is None:
        if listen is not None or retry is not None:
            problems.append(
                "--bridge-listen and --bridge-retry are the floor bridge's: give --bridge"
            )
        return None
    endpoint: Endpoint | None = None
    try:
        endpoint = parse_endpoint(listen or BRIDGE_LISTEN)
    except ValueError as exc:
        problems.append(f"--bridge-listen: {exc}")
    if endpoint is not None:
        taken = [daemons, None if network is None else network.endpoint]
        if not endpoint.loopback or ":" in endpoint.host:
            problems.append(
                f"--bridge-listen {endpoint}: the bridge broker listens on an IPv4 loopback "
                "address only (its watchdog's probe, on this controller)"
            )
            endpoint = None
        elif any(t is not None and t.port == endpoint.port for t in taken):
            problems.append(
                f"--bridge-listen {endpoint}: the tables' broker listens on that port already"
            )
            endpoint = None
    least, most = BRIDGE_RESTART
    if retry is not None:
        parts = retry.split(":")
        if len(parts) != 2 or not all(p.isdigit() for p in parts):
            problems.append(f"--bridge-retry: MIN:MAX in whole seconds, got {retry!r}")
        else:
            least, most = int(parts[0]), int(parts[1])
            if not 1 <= least <= most <= 3600:
                problems.append(f"--bridge-retry: 1 <= MIN <= MAX <= 3600, got {retry!r}")
    if endpoint is None:
        return None
    return replace(
        bridge, listen=endpoint, data_dir=data_dir.absolute() / "bridge", retry=(least, most)
    )


def _bridge_broker_user(tables: Sequence[Table]) -> User:
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


DEVICE_NAME: Final = re.compile(r"[a-z0-9][a-z0-9_-]{0,62}")
"""A display's or a terminal's own name (``--display``, ``--terminal``): its user is
``display-NAME`` or ``terminal-NAME``, which is also its MQTT client id."""


def _device_names(
    displays: Sequence[str], terminals: Sequence[str], problems: list[str]
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The names of ``--display`` and ``--terminal``, checked (problems appended)."""
    checked: list[tuple[str, ...]] = []
    for option, names in (("--display", displays), ("--terminal", terminals)):
        seen: set[str] = set()
        for name in names:
            if not DEVICE_NAME.fullmatch(name):
                problems.append(
                    f"{option} {name!r}: a name is 1 to 63 of a-z, 0-9, _ and -, "
                    "starting with a letter or digit"
                )
            elif name in seen:
                problems.append(f"{option} {name!r} is given twice")
            seen.add(name)
        checked.append(tuple(sorted(seen)))
    return checked[0], checked[1]


def _users(
    tables: Sequence[Table], devices: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())
) -> tuple[User, ...]:
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
            for g in (*readable_grants(t.base), Grant("write", f"{t.base}/request/+"))
        ),
    )
    # lammer records (docs/floor/records.md): reads every table, asks for resends
    # (mqtt-api.md 1.3), and publishes the floor's integrity topics; nothing else.
    records = User(
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
    sorted({topic.split("/")[0] for topic in TOPICS if "/" in topic} | {"response"})
)
"""The topic groups under a base topic that displays and terminals read (from the
contract's topics, and the answers); never ``request``."""


def readable_grants(base: str) -> tuple[Grant, ...]:
    """What a display or a terminal may read of one table: every topic the daemon
    publishes (``<base>/+``: availability, state, alarms, info; each group's topics), never
    the requests. Mosquitto 2.0 accepts any subscription and checks every message it
    delivers against these grants, so a subscriber to ``<base>/#`` gets the table and none
    of a flood of requests (issue 20: a display's queue fills with them, results behind)."""
    return (
        Grant("read", f"{base}/+"),
        *(Grant("read", f"{base}/{group}/#") for group in READ_GROUPS),
    )


def _table_problems(tables: Sequence[Table]) -> list[str]:
    problems: list[str] = []
    by_id: dict[str, list[Table]] = {}
    by_client: dict[str, list[Table]] = {}
    for t in tables:
        by_id.setdefault(t.table_id, []).append(t)
        by_client.setdefault(t.config.client_id, []).append(t)
        where = f"{t.table_id} ({t.config_path})"
        if ":" in t.table_id:
            problems.append(
                f"{where}: table id {t.table_id!r} cannot name a Mosquitto user "
                "(':' separates the user from its hash in passwd)"
            )
        size = len(t.user.encode())
        if size > 255:
            problems.append(
                f"{where}: user name {t.user!r} is {size} bytes in UTF-8, more than the 255 a "
                "file name (its credentials file) may have"
            )
        if t.config.mqtt.tls is not None:
            problems.append(
                f"{where}: [mqtt.tls] is set, but the daemons reach this broker on plain "
                "loopback: remove [mqtt.tls] (TLS is for the network listener)"
            )
    for table_id, same in by_id.items():
        if len(same) > 1:
            files = ", ".join(str(t.config_path) for t in same)
            problems.append(f"table id {table_id!r} is given more than once: {files}")
    for client_id, same in by_client.items():
        if len(same) > 1 and len({t.table_id for t in same}) > 1:
            ids = ", ".join(t.table_id for t in same)
            problems.append(
                f"tables {ids} use the same MQTT client id {client_id!r}: each would "
                "disconnect the other ([mqtt] client_id)"
            )
    for outer in tables:
        for inner in tables:
            if inner is not outer and inner.base.startswith(outer.base + "/"):
                problems.append(
                    f"table {outer.table_id}'s base topic {outer.base} holds table "
                    f"{inner.table_id}'s {inner.base}: {outer.table_id}'s daemon could "
                    f"write {inner.table_id}'s state ([mqtt] prefix)"
                )
    return problems


def _daemons_endpoint(tables: Sequence[Table], problems: list[str]) -> Endpoint | None:
    """The listener the daemons' configurations name (one, on loopback), or None."""
    named: dict[Endpoint, list[str]] = {}
    for t in tables:
        named.setdefault(Endpoint(t.config.mqtt.host, t.config.mqtt.port), []).append(t.table_id)
    if len(named) > 1:
        listed = "; ".join(f"{e} ({', '.join(ids)})" for e, ids in named.items())
        problems.append(
            "the tables name different brokers in [mqtt] host and port: "
            f"{listed}. One broker-config serves one broker: give the tables of one "
            "controller, with the same host and port"
        )
        return None
    if not named:
        return None
    (endpoint,) = named
    if not endpoint.loopback:
        ids = ", ".join(named[endpoint])
        problems.append(
            f"[mqtt] host {endpoint.host!r} of {ids} is not a loopback address: the daemons "
            "and this broker run on one controller (127.0.0.1); the network listener is "
            "--listen"
        )
        return None
    problem = _value_problem(endpoint.host)
    if problem:
        problems.append(f"[mqtt] host: {problem}")
        return None
    return endpoint


def _overlap_problems(daemons: Endpoint, network: Endpoint) -> list[str]:
    if network.port != daemons.port:
        return []
    if network.host == daemons.host:
        return [f"--listen {network} is the daemons' listener already ([mqtt] host and port)"]
    if network.wildcard or network.loopback:
        return [
            f"--listen {network} would also bind the daemons' listener {daemons}: "
            "choose another port"
        ]
    return []


def _pem_problem(path: Path, marker: str) -> str | None:
    """Why ``path`` is not a readable PEM file holding ``marker``, or None."""
    problem = _path_problem(path)
    if problem is not None:
        return problem
    try:
        text = path.read_text(encoding="ascii", errors="replace")
    except OSError as exc:
        return f"cannot read {path}: {exc.strerror}"
    if marker not in text:
        return f"{path} is not a PEM file holding {marker.strip('-')}"
    return None


def _check_tls(cert: Path, key: Path, ca: Path, *, problems: list[str]) -> ListenerTls:
    for option, path, marker in (
        ("--tls-cert", cert, "-----BEGIN CERTIFICATE-----"),
        ("--tls-key", key, "PRIVATE KEY-----"),
        ("--tls-ca", ca, "-----BEGIN CERTIFICATE-----"),
    ):
        problem = _path_problem(path)
        if problem is None:
            try:
                text = path.read_text(encoding="ascii", errors="replace")
            except OSError as exc:
                problem = f"cannot read {path}: {exc.strerror}"
            else:
                if marker not in text:
                    problem = f"{path} is not a PEM file holding {marker.strip('-')}"
        if problem is None and option == "--tls-key" and path.stat().st_mode & 0o007:
            mode = path.stat().st_mode & 0o777
            problem = f"{path} is readable by every user (mode {mode:04o}): chmod o-rwx {path}"
        if problem:
            problems.append(f"{option}: {problem}")
    return ListenerTls(cert.absolute(), key.absolute(), ca.absolute())


def _value_problem(value: str) -> str | None:
    """Why ``value`` cannot be one value of a generated line, or None."""
    if not value:
        return "must not be empty"
    if value != value.strip() or any(not c.isprintable() for c in value):
        return (
            "must be one line of printable characters without leading or trailing "
            f"spaces, got {value!r}"
        )
    return None


def _path_problem(path: Path) -> str | None:
    return _value_problem(str(path))


def _foreign_file_problems(out: Path) -> list[str]:
    return foreign_files(
        [
            out / "mosquitto.conf",
            out / "acl",
            out / "bridge.conf",
            out / "bridge.acl",
            out / BRIDGE_UNIT,
        ],
        marker=GENERATED_BY,
        tool="broker-config",
    )


# ---------------------------------------------------------------------------------------
# mosquitto.conf


@dataclass(frozen=True, slots=True)
class Directive:
    """One ``key value`` line of mosquitto.conf, with the comment lines written above it."""

    key: str
    value: str
    comment: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Section:
    """A titled group of directives."""

    title: str
    directives: tuple[Directive, ...]
    comment: tuple[str, ...] = ()


def conf_sections(plan: BrokerPlan, bridge_password: str | None = None) -> tuple[Section, ...]:
    """mosquitto.conf (the tables' broker) as sections, in file order. It has no bridge:
    the floor bridge runs in a broker of its own (``bridge_conf_sections``), so nothing the
    floor link does can stop this one serving its daemons and displays (issue 28).
    ``bridge_password`` is unused here (kept for the callers' shape)."""
    del bridge_password
    return (
        _process_section(plan),
        _security_section(plan),
        *(_listener_section(listener) for listener in plan.listeners),
        _limits_section(bridged=False),
        _persistence_section(plan),
        _bridge_note(plan),
    )


def bridge_conf_sections(
    plan: BrokerPlan, bridge_password: str | None = None, local_password: str | None = None
) -> tuple[Section, ...]:
    """bridge.conf (the bridge broker) as sections, in file order; empty without a bridge.
    ``bridge_password``: the floor's (``credentials/bridge-<controller>``);
    ``local_password``: its user's on the tables' broker (``credentials/floor-bridge``);
    placeholders without them."""
    bridge = plan.bridge
    if bridge is None:
        return ()
    return (
        _bridge_process_section(plan),
        _bridge_security_section(plan, bridge),
        _bridge_listener_section(bridge),
        _limits_section(bridged=True),
        _bridge_persistence_section(bridge),
        _local_bridge_section(plan, bridge, local_password),
        _bridge_section(plan, bridge_password),
    )


def _bridge_note(plan: BrokerPlan) -> Section:
    if plan.bridge is None:
        return Section(
            "Floor bridge",
            (),
            ("None (broker-config --bridge writes one, in a broker of its own: bridge.conf).",),
        )
    return Section(
        "Floor bridge",
        (),
        (
            "Not here: in a Mosquitto of its own (bridge.conf, lammer-bridge.service), which",
            f"logs in here as {BRIDGE_BROKER_USER} (grants in acl). A floor link that fails",
            "however it fails (a wrong CA, a node that never answers TLS, one that resets,",
            "a flapping floor) cannot stop this broker serving its daemons and displays;",
            "a watchdog restarts that one when it stops answering (docs/floor/cluster.md).",
        ),
    )


def _bridge_process_section(plan: BrokerPlan) -> Section:
    return Section(
        "Process: the floor bridge's own broker",
        (
            *(d for d in _process_section(plan).directives if d.key == "user"),
            Directive("log_dest", "stderr", ("To the unit's journal, through the watchdog.",)),
            Directive("log_timestamp", "false"),
            Directive("log_type", "error"),
            Directive("log_type", "warning"),
            Directive("log_type", "notice", ("The bridges' connections and their failures.",)),
            Directive(
                "connection_messages",
                "false",
                ("Not a line per probe (one every 2 s): the watchdog logs what matters.",),
            ),
        ),
        (
            "Run by lammer bridge-watchdog (lammer-bridge.service), which restarts it when its",
            "probe gets no answer through the listener below.",
        ),
    )


def _bridge_security_section(plan: BrokerPlan, bridge: Bridge) -> Section:
    return Section(
        "Who may connect: the watchdog's probe, on loopback",
        (
            Directive(
                "per_listener_settings",
                "false",
            ),
            Directive(
                "allow_anonymous",
                "true",
                (
                    "One loopback listener and no password: the ACL lets an anonymous client",
                    f"only its own {PROBE_ROOT}/# (the probe's round trip). A bridge's",
                    "traffic is not checked against acl_file: the topic lines below bound it.",
                ),
            ),
            Directive("acl_file", str(plan.bridge_acl_path)),
        ),
    )


def _bridge_listener_section(bridge: Bridge) -> Section:
    endpoint = bridge.listen
    return Section(
        "Listener: the watchdog's probe",
        (
            Directive("listener", f"{endpoint.port} {endpoint.host}"),
            Directive("max_connections", "8"),
        ),
        ("Loopback only; nothing else connects to this broker.",),
    )


def _bridge_persistence_section(bridge: Bridge) -> Section:
    return Section(
        "Persistence: what waits for the floor",
        (
            Directive("persistence", "true"),
            Directive("persistence_location", f"{bridge.data_dir}/"),
            Directive(
                "autosave_on_changes",
                "true",
                (
                    "Saved after every change (autosave_interval 1 below): the tables' broker",
                    "hands a message over once this broker acknowledges it, so a queue that",
                    "waits for the floor must survive the watchdog's SIGKILL. A table",
                    "publishes a few messages a minute: a few small writes a minute.",
                ),
            ),
            Directive("autosave_interval", "1"),
        ),
    )


def _local_bridge_section(plan: BrokerPlan, bridge: Bridge, password: str | None) -> Section:
    """The bridge broker's connection to the tables' broker (loopback, plain)."""
    daemons = next(listener.endpoint for listener in plan.listeners)
    topics: list[Directive] = []
    for t in plan.tables:
        comment: tuple[str, ...] = (f"Table {t.table_id}: what goes to the floor, in from there.",)
        for level in floor.BRIDGE_OUT:
            topics.append(Directive("topic", f"{t.base}/{level} in 1", comment))
            comment = ()
        topics.append(Directive("topic", f"{t.base}/{floor.BRIDGE_IN} out 1"))
        topics += [Directive("topic", f"{t.base}/{level} out 1") for level in floor.BRIDGE_IN_USER]
    directives = (
        Directive("connection", "tables"),
        Directive("address", f"{daemons.host}:{daemons.port}"),
        Directive(
            "bridge_protocol_version",
            "mqttv311",
        ),
        Directive(
            "cleansession",
            "false",
            (
                "A persistent session on the tables' broker: while this broker is down or",
                "restarting, the tables' messages wait there (QoS 1) and come here after.",
            ),
        ),
        Directive("remote_clientid", BRIDGE_BROKER_USER),
        Directive("remote_username", BRIDGE_BROKER_USER),
        Directive(
            "remote_password",
            password if password is not None else "<credentials>",
            (f"credentials/{BRIDGE_BROKER_USER}.",),
        ),
        Directive(
            "notifications",
            "true",
            (
                "The daemons learn when this broker is gone: 1 on connect, 0 as its will.",
                "(floor_resend acts on a 0 of any bridge status, this one's too.)",
            ),
        ),
        Directive("notification_topic", bridge.local_status_topic),
        Directive("keepalive_interval", str(LOCAL_KEEPALIVE)),
        Directive("restart_timeout", LOCAL_RESTART),
        Directive("start_type", "automatic"),
        Directive(
            "topic",
            f"{bridge_status_topic(bridge.controller)} out 1",
            ("The floor bridge's own status, to the daemons (floor_resend).",),
        ),
        *topics,
    )
    return Section(
        "Bridge to the tables' broker on this controller",
        directives,
        (
            f"As {BRIDGE_BROKER_USER}, granted in the tables' acl only what crosses to the floor",
            "and the requests that come back.",
        ),
    )


def _process_section(plan: BrokerPlan) -> Section:
    return Section(
        "Process",
        (
            Directive(
                "user",
                plan.broker_user,
                ("Started as root, Mosquitto drops to this user before it reads passwd and acl.",),
            ),
            Directive(
                "log_dest",
                "stderr",
                ("To the service's journal, which adds the time.",),
            ),
            Directive("log_timestamp", "false"),
            Directive("log_type", "error"),
            Directive("log_type", "warning"),
            Directive(
                "log_type",
                "notice",
                ("Notices name every connection and every client refused.",),
            ),
            Directive("log_type", "information"),
            Directive("connection_messages", "true"),
        ),
    )


def _security_section(plan: BrokerPlan) -> Section:
    return Section(
        "Who may connect, and what each user may do",
        (
            Directive(
                "per_listener_settings",
                "false",
                ("One password file and one ACL for every listener.",),
            ),
            Directive("allow_anonymous", "false"),
            Directive("password_file", str(plan.passwd_path)),
            Directive("acl_file", str(plan.acl_path)),
            Directive(
                "check_retain_source",
                "true",
                (
                    "A retained message goes out only while its publisher may still publish it:",
                    "a table taken off this broker takes its retained state with it.",
                ),
            ),
        ),
    )


def _listener_section(listener: Listener) -> Section:
    endpoint = listener.endpoint
    directives = [
        Directive("listener", f"{endpoint.port} {endpoint.host}"),
        Directive("max_connections", str(listener.max_connections)),
        Directive(
            "use_username_as_clientid",
            "true",
            (
                "Every client's id is its user name: nobody can connect with another",
                "user's client id and take its session over (a daemon's above all).",
                "One connection per user: a display or terminal of its own each",
                "(--display NAME, --terminal NAME).",
            ),
        ),
    ]
    if listener.purpose == "daemons":
        comment: tuple[str, ...] = (
            "The table daemons, at the [mqtt] host and port of their configurations:",
            "loopback only, so plain, with a connection limit of its own that nothing on",
            "the network can use up.",
        )
        title = "Listener: the table daemons"
    elif listener.tls is None:
        comment = (
            "Displays and pit terminals on the network. PLAIN: passwords and decisions",
            "cross the network in clear (give broker-config --tls-cert/--tls-key/--tls-ca).",
        )
        title = "Listener: displays and terminals"
    else:
        comment = (
            "Displays and pit terminals on the network, over TLS (1.2 at least); clients",
            "verify the broker with the CA below and log in with their password.",
        )
        title = "Listener: displays and terminals (TLS)"
        directives += [
            Directive("certfile", str(listener.tls.cert)),
            Directive("keyfile", str(listener.tls.key)),
            Directive("cafile", str(listener.tls.ca)),
            Directive("tls_version", "tlsv1.2"),
        ]
    return Section(title, tuple(directives), comment)


def _limits_section(*, bridged: bool = False) -> Section:
    return Section(
        "Limits",
        (
            Directive(
                "set_tcp_nodelay",
                "true",
                ("Nagle off: with it, about 0.5% of small messages stall 40 ms.",),
            ),
            Directive(
                "message_size_limit",
                str(MESSAGE_SIZE_LIMIT),
                (
                    'Requests are at most 4 KiB (mqtt-api.md "Requests"); the largest payload a',
                    "daemon publishes, `state` with every alarm a table can hold, is under "
                    f"{LARGEST_PAYLOAD // 1024} KiB.",
                    "A larger publish is dropped and its connection kept. Mosquitto's start-up",
                    "note to use max_packet_size instead is expected: both are set, each for",
                    "its own end.",
                ),
            ),
            Directive(
                "max_packet_size",
                str(MAX_PACKET_SIZE),
                (
                    "A larger packet ends its connection before Mosquitto buffers it; a message",
                    "under message_size_limit, whatever its topic, always fits.",
                ),
            ),
            Directive(
                "max_inflight_messages",
                str(BRIDGE_INFLIGHT_MESSAGES if bridged else MAX_INFLIGHT_MESSAGES),
                (
                    "QoS 1 messages awaiting PUBACK per client (the bridge too): one, so a",
                    "floor node that dies with a window of messages cannot have the next",
                    "node take them out of seq order (measured: with 20 it does).",
                )
                if bridged
                else ("QoS 1 messages awaiting PUBACK per client, as the daemon's own window.",),
            ),
            Directive(
                "max_queued_messages",
                str(MAX_QUEUED_MESSAGES),
                (
                    "Per client, beyond those in flight (a slow client, a persistent session",
                    "away, a bridge to an unreachable floor): four hours of four tables.",
                ),
            ),
            Directive(
                "max_queued_bytes",
                str(MAX_QUEUED_BYTES),
                ("The memory one lagging client may hold.",),
            ),
            Directive(
                "persistent_client_expiration",
                PERSISTENT_CLIENT_EXPIRATION,
                ("The session of a client gone this long (a retired display) is dropped.",),
            ),
        ),
    )


def _persistence_section(plan: BrokerPlan) -> Section:
    return Section(
        "Persistence",
        (
            Directive("persistence", "true"),
            Directive("persistence_location", str(plan.data_dir)),
            Directive(
                "autosave_interval",
                str(AUTOSAVE_INTERVAL),
                (
                    "Saved every minute and at every clean stop: retained state (a stopped",
                    "table's `offline` included), persistent sessions and their queued QoS 1",
                    "messages survive a broker restart. The daemons also republish their",
                    "retained state on every reconnect, so a power cut loses no table state.",
                ),
            ),
        ),
    )


def _bridge_section(plan: BrokerPlan, password: str | None = None) -> Section:
    """The floor bridge, last in the file (every option after ``connection`` is the
    bridge's). ``password`` is the bridge's (``credentials/bridge-<controller>``); without
    it the line holds a placeholder (``conf_sections`` for reading back the shape)."""
    bridge = plan.bridge
    if bridge is None:
        return Section("Floor bridge", (), ("None (broker-config --bridge).",))
    controller = bridge.controller
    topics: list[Directive] = []
    for t in plan.tables:
        comment: tuple[str, ...] = (
            f"Table {t.table_id}: its state and results out, its requests in.",
        )
        for level in floor.BRIDGE_OUT:
            topics.append(Directive("topic", f"{t.base}/{level} out 1", comment))
            comment = ()
        topics.append(Directive("topic", f"{t.base}/{floor.BRIDGE_IN} in 1"))
        topics += [Directive("topic", f"{t.base}/{level} in 1") for level in floor.BRIDGE_IN_USER]
    directives = (
        Directive("connection", "floor"),
        Directive(
            "address",
            # Mosquitto 2.0 splits HOST:PORT at the last ':' and does not read [IPv6]:PORT.
            " ".join(f"{n.host}:{n.port}" for n in bridge.nodes),
            ("Every node of the floor cluster: when one fails the next is tried.",),
        ),
        *_bridge_tls(bridge),
        Directive(
            "round_robin",
            "true",
            (
                "Stay on the node that works (false would leave it again for the first one",
                "as soon as that is back: one more reconnect for nothing).",
            ),
        ),
        Directive(
            "bridge_protocol_version",
            "mqttv311",
            ("nats-server's MQTT listener speaks 3.1.1.",),
        ),
        Directive(
            "try_private",
            "false",
            ("The floor is not a Mosquitto: no bridge-private CONNECT flag.",),
        ),
        Directive(
            "cleansession",
            "false",
            (
                "A persistent session at both ends: QoS 1 messages wait here (persisted) while",
                "the floor is unreachable and go out once it is back; the floor keeps the",
                "bridge's subscription to the requests across a reconnect.",
            ),
        ),
        Directive("remote_clientid", floor.bridge_client_id(controller), ("No '.': NATS.",)),
        Directive("remote_username", bridge.user),
        Directive(
            "remote_password",
            password if password is not None else "<credentials>",
            (f"credentials/{bridge.user}; the floor holds only its bcrypt hash.",),
        ),
        Directive(
            "notifications",
            "true",
            (
                "The floor learns whether this controller is there: 1 (retained) on connect,",
                "0 as the bridge's will when it goes silent. Not under $SYS: NATS refuses it.",
            ),
        ),
        Directive("notification_topic", bridge_status_topic(controller)),
        Directive(
            "bridge_attempt_unsubscribe",
            "false",
            ("The bridge never subscribes to the out topics on the floor.",),
        ),
        Directive("keepalive_interval", str(BRIDGE_KEEPALIVE)),
        Directive("restart_timeout", f"{bridge.retry[0]} {bridge.retry[1]}"),
        Directive("start_type", "automatic"),
        *topics,
    )
    return Section(
        f"Floor bridge: controller {controller} to {len(bridge.nodes)} floor nodes",
        directives,
        (
            "Each table's topics, QoS 1. In: only its requests, one level, and the resend",
            "requests readers send at their own name (Mosquitto does not check a bridge",
            "against acl_file: the topic lines are all that bounds what the floor may send",
            "here). Out: all the table publishes, never its requests.",
            "max_queued_messages and max_queued_bytes above bound what waits for the floor.",
        ),
    )


def _bridge_tls(bridge: Bridge) -> tuple[Directive, ...]:
    """The bridge's TLS lines: it verifies each node's certificate, and the name in it,
    with the floor CA, so its password goes only inside TLS and only to a node."""
    if bridge.ca is None:
        return ()
    return (
        Directive(
            "bridge_cafile",
            str(bridge.ca),
            (
                "The floor CA (floor-config's ca.crt): each node's certificate must be signed",
                "by it and name the node's address above (bridge_insecure stays false).",
            ),
        ),
        Directive("bridge_tls_version", "tlsv1.2"),
    )


def render_conf(plan: BrokerPlan, bridge_password: str | None = None) -> str:
    """The text of mosquitto.conf, the tables' broker (it has no bridge)."""
    head = "# Mosquitto for the lammer tables of this controller."
    return _render_sections(plan, head, conf_sections(plan, bridge_password))


def render_bridge_conf(
    plan: BrokerPlan, bridge_password: str | None = None, local_password: str | None = None
) -> str:
    """The text of bridge.conf, the floor bridge's own Mosquitto (docs/floor/cluster.md)."""
    head = "# Mosquitto for the floor bridge of this controller, beside the tables' broker."
    return _render_sections(plan, head, bridge_conf_sections(plan, bridge_password, local_password))


def render_bridge_acl(plan: BrokerPlan) -> str:
    """The bridge broker's ACL: an anonymous client (the probe) may use its topics only."""
    return (
        "# Mosquitto access control of the floor bridge's own broker (bridge.conf).\n"
        f"# {GENERATED_BY}; do not edit: run it again.\n"
        "# Before any user line: what an anonymous client may do (allow_anonymous true on\n"
        "# its one loopback listener): the watchdog's probe, its own topics only.\n"
        f"topic readwrite {PROBE_ROOT}/#\n"
    )


def render_bridge_unit(plan: BrokerPlan) -> str:
    """``lammer-bridge.service``: the bridge broker run by its watchdog."""
    bridge = plan.bridge
    if bridge is None:
        raise ValueError("the bridge's unit is rendered only for a plan with a bridge")
    return f"""# lammer: the floor bridge of controller {bridge.controller}, in a Mosquitto
# of its own, run and watched by lammer bridge-watchdog. {GENERATED_BY}; do not edit.
#
#   install (as root):
#     install -m 0644 {plan.bridge_unit_path} /etc/systemd/system/
#     install -d -o {plan.broker_user} -g {plan.broker_user} -m 0700 {bridge.data_dir}
#     systemctl daemon-reload && systemctl enable --now {BRIDGE_UNIT}
#   check:   systemctl status {BRIDGE_UNIT}; journalctl -u {BRIDGE_UNIT}
#
# The tables' broker (mosquitto.service on {plan.conf_path}) has no bridge: whatever
# the floor link does, it serves the daemons and displays. The watchdog probes this
# broker (an MQTT round trip on {bridge.listen}) and, when it gets no answer in time,
# ends it: SIGTERM, then SIGKILL when that is ignored (Mosquitto 2.0.11 spinning on a
# failed TLS handshake ignores it), and starts it again (docs/floor/cluster.md).

[Unit]
Description=lammer floor bridge of controller {bridge.controller} (watched Mosquitto)
Documentation=man:mosquitto.conf(5)
After=network-online.target mosquitto.service
Wants=network-online.target

[Service]
Type=notify
NotifyAccess=main
ExecStart=/opt/lammer/bin/lammer bridge-watchdog --conf {plan.bridge_conf_path}
# The watchdog's own liveness: it says WATCHDOG=1 every few seconds while it runs.
WatchdogSec=30
Restart=always
RestartSec=2
TimeoutStopSec=20
User={plan.broker_user}
Group={plan.broker_user}
NoNewPrivileges=yes
ProtectSystem=strict
ReadWritePaths={bridge.data_dir}
ProtectHome=yes
PrivateTmp=yes
PrivateDevices=yes
ProtectKernelTunables=yes
ProtectKernelModules=yes
ProtectControlGroups=yes
RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6
CapabilityBoundingSet=
LockPersonality=yes
RestrictRealtime=yes
RestrictSUIDSGID=yes
SystemCallArchitectures=native

[Install]
WantedBy=multi-user.target
"""


def _render_sections(plan: BrokerPlan, head: str, sections: Iterable[Section]) -> str:
    lines = [
        head,
        f"# {GENERATED_BY}; do not edit: run it again (it keeps the passwords and",
        "# says what it changed). lammer's docs/floor/broker.md says how to run it.",
        "# Tables:",
        *(f"#   {t.table_id} ({t.config.table.game}) at {t.base}" for t in plan.tables),
    ]
    for section in sections:
        lines += ["", f"# -- {section.title} " + "-" * max(3, 84 - len(section.title))]
        lines += [f"# {c}" for c in section.comment]
        for d in section.directives:
            lines += [f"# {c}" for c in d.comment]
            lines.append(f"{d.key} {d.value}")
    return "\n".join(lines) + "\n"


def read_conf(text: str) -> list[tuple[str, str]]:
    """The ``(key, value)`` of every option line, as Mosquitto 2.0 reads mosquitto.conf:
    comment (``#``) and blank lines skipped, the key up to the first space, the value the
    rest of the line without surrounding blanks."""
    out = []
    for raw in text.split("\n"):
        line = raw.rstrip(" \t\r\v\f")
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        key, _, value = line.strip().partition(" ")
        out.append((key, value.strip(" \t")))
    return out


# ---------------------------------------------------------------------------------------
# acl


def render_acl(plan: BrokerPlan) -> str:
    """The text of the ACL file: one ``user`` block per user, its grants under it."""
    lines = [
        "# Mosquitto access control for the lammer tables of this controller.",
        f"# {GENERATED_BY}; do not edit: run it again.",
        "# Every grant names a table's own base topic <prefix>/<table id> (mqtt-api.md",
        '# "Conventions"). No grant comes before the first user line, so a client without',
        "# a user name (refused anyway: allow_anonymous false) would be granted nothing.",
    ]
    for user in plan.users:
        lines += ["", f"# {user.about}.", f"user {user.name}"]
        lines += [f"topic {g.access} {g.topic}" for g in user.grants]
    return "\n".join(lines) + "\n"


def read_acl(text: str) -> dict[str | None, list[Grant]]:
    """The grants per user (None: anonymous) as Mosquitto 2.0's ACL file reader sees them.

    Lines end at LF; trailing white space is dropped; a line starting with ``#`` is a
    comment; ``user <name>`` (the rest of the line, blanks trimmed) starts a user's block;
    ``topic [read|write|readwrite|deny] <topic>`` adds a grant to the current block (the
    access word is optional). Raises ``ValueError`` for any other line, as Mosquitto
    refuses to start on one; ``pattern`` lines, which apply to every user, are refused too.
    """
    grants: dict[str | None, list[Grant]] = {}
    user: str | None = None
    for number, raw in enumerate(text.split("\n"), start=1):
        line = raw.rstrip(" \t\n\v\f\r")
        if not line or line.startswith("#"):
            continue
        head, _, rest = line.lstrip(" ").partition(" ")
        if head == "user":
            user = rest.strip(" \t")
            if not user:
                raise ValueError(f"line {number}: user without a name")
        elif head == "topic":
            access, _, topic = rest.lstrip(" ").partition(" ")
            topic = topic.strip(" \t")
            if not topic:
                access, topic = "readwrite", access
            if access not in ("read", "write", "readwrite"):
                raise ValueError(f"line {number}: access {access!r} is not granted here")
            grants.setdefault(user, []).append(Grant(access, topic))  # type: ignore[arg-type]
        elif head:
            raise ValueError(f"line {number}: not a user or topic line: {line[:60]!r}")
    return grants


def topic_filter_problem(topic: str) -> str | None:
    """Why ``topic`` is not a subscription filter Mosquitto accepts in an ACL, or None
    (MQTT 3.1.1 section 4.7: ``+`` and ``#`` fill a whole level, ``#`` last; at most
    65,535 bytes; no control characters, which Mosquitto's UTF-8 check refuses)."""
    if not topic or len(topic.encode()) > 65535:
        return "empty or longer than 65,535 bytes"
    if any(not c.isprintable() for c in topic):
        return "holds a control character"
    levels = topic.split("/")
    for i, level in enumerate(levels):
        if ("+" in level or "#" in level) and level not in ("+", "#"):
            return f"wildcard inside level {level!r}"
        if level == "#" and i != len(levels) - 1:
            return "'#' before the last level"
    return None


# ---------------------------------------------------------------------------------------
# passwd: mosquitto_passwd 2.0's format

PBKDF2_ITERATIONS: Final = 101
"""mosquitto_passwd 2.0's default (``$7$101$``): PBKDF2-HMAC-SHA512, 12-byte salt,
64-byte hash, both in standard base64. Few iterations; the generated passwords are
192-bit random, far beyond any offline guessing, so the hash adds nothing to defend."""

_SALT_BYTES: Final = 12
_HASH_BYTES: Final = 64


def hash_password(password: str, *, salt: bytes | None = None) -> str:
    """The passwd hash of ``password`` as ``mosquitto_passwd`` 2.0 writes it:
    ``$7$101$<salt>$<hash>`` (a random salt unless given)."""
    salt = secrets.token_bytes(_SALT_BYTES) if salt is None else salt
    if len(salt) != _SALT_BYTES:
        raise ValueError(f"salt must be {_SALT_BYTES} bytes, got {len(salt)}")
    digest = hashlib.pbkdf2_hmac("sha512", password.encode(), salt, PBKDF2_ITERATIONS)
    b64 = base64.b64encode
    return f"$7${PBKDF2_ITERATIONS}${b64(salt).decode()}${b64(digest).decode()}"


def verify_password(password: str, encoded: str) -> bool:
    """Whether ``encoded`` (a ``$7$`` passwd hash, any iteration count) is ``password``'s.
    Anything else (``$6$``, malformed) is False: it is written again as ``$7$``."""
    parts = encoded.split("$")
    if len(parts) != 5 or parts[0] != "" or parts[1] != "7" or not parts[2].isdigit():
        return False
    iterations = int(parts[2])
    if not 1 <= iterations <= 10_000_000:
        return False
    try:
        salt = base64.b64decode(parts[3], validate=True)
        expected = base64.b64decode(parts[4], validate=True)
    except (binascii.Error, ValueError):
        return False
    if len(salt) != _SALT_BYTES or len(expected) != _HASH_BYTES:
        return False
    digest = hashlib.pbkdf2_hmac("sha512", password.encode(), salt, iterations)
    return hmac.compare_digest(digest, expected)


def read_passwd(text: str) -> dict[str, str]:
    """User to hash, as Mosquitto 2.0 reads a password file: ``#`` lines and lines without
    ``:`` skipped, the user up to the first ``:`` and the hash up to the next, both without
    surrounding blanks."""
    users: dict[str, str] = {}
    for raw in text.split("\n"):
        if raw.startswith("#") or ":" not in raw:
            continue
        name, rest = raw.split(":", 1)
        users[name.strip(" \t")] = rest.split(":", 1)[0].strip(" \t\r\n")
    return users


def render_passwd(
    users: Iterable[User], passwords: Mapping[str, str], existing: Mapping[str, str]
) -> str:
    """passwd for ``users``: each one's line from ``existing`` (user to hash) while it still
    verifies against ``passwords``, otherwise hashed anew. Sorted by user, as a reader diffs."""
    lines = []
    for name in sorted(u.name for u in users):
        old = existing.get(name)
        kept = old is not None and verify_password(passwords[name], old)
        hashed = old if kept and old is not None else hash_password(passwords[name])
        lines.append(f"{name}:{hashed}")
    return "".join(f"{line}\n" for line in lines)


# ---------------------------------------------------------------------------------------
# Checking the rendered files, then writing them


def check_rendered(  # noqa: C901  reads back each rendered file, one check after another
    plan: BrokerPlan,
    conf: str,
    acl: str,
    passwd: str,
    bridge_password: str | None = None,
    bridge_conf: str = "",
    local_password: str | None = None,
) -> None:
    """Read each rendered file back as Mosquitto will and compare with the plan; raises
    ``BrokerConfigError`` if anything differs (a value that broke its line, a grant that is
    not one). Runs before anything is written."""
    problems: list[str] = []
    sections = conf_sections(plan, bridge_password)
    planned = [(d.key, d.value) for s in sections for d in s.directives]
    if read_conf(conf) != planned:
        problems.append("mosquitto.conf does not read back as planned")
    bridge_sections = bridge_conf_sections(plan, bridge_password, local_password)
    if read_conf(bridge_conf) != [(d.key, d.value) for s in bridge_sections for d in s.directives]:
        problems.append("bridge.conf does not read back as planned")
    try:
        grants = read_acl(acl)
    except ValueError as exc:
        problems.append(f"acl does not read back: {exc}")
    else:
        wanted: dict[str | None, list[Grant]] = {u.name: list(u.grants) for u in plan.users}
        if grants != wanted:
            problems.append("acl does not read back as planned")
        for user, user_grants in grants.items():
            for grant in user_grants:
                problem = topic_filter_problem(grant.topic)
                if problem:
                    problems.append(f"acl: {user}'s topic {grant.topic!r}: {problem}")
    if sorted(read_passwd(passwd)) != sorted(u.name for u in plan.users):
        problems.append("passwd does not read back as planned")
    for key, value in read_conf(conf) + read_conf(bridge_conf):
        if key == "topic":
            words = value.split(" ")
            if len(words) != 3 or words[1] not in ("in", "out") or words[2] != "1":
                problems.append(f"mosquitto.conf: bridge topic line {value!r} is not 'T in|out 1'")
            elif problem := topic_filter_problem(words[0]):
                problems.append(f"mosquitto.conf: bridge topic {words[0]!r}: {problem}")
    if problems:
        raise BrokerConfigError(problems)


@dataclass(frozen=True, slots=True)
class Wiring:
    """Whether a table's configuration logs its daemon in as this broker expects."""

    table: Table
    wired: bool
    reason: str  # why not (empty when wired)
    password_copy: Path  # where the hint puts the daemon's copy of its password


@dataclass(slots=True)
class Generated:
    """What ``generate`` wrote (``changes``, in order) and how each table is wired."""

    plan: BrokerPlan
    changes: list[Change] = field(default_factory=list)
    wiring: list[Wiring] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _broker_owner(plan: BrokerPlan) -> Owner | None:
    """The broker user's ids when we may chown (running as root), else None."""
    if os.geteuid() != 0:
        return None
    try:
        entry = pwd.getpwnam(plan.broker_user)
    except KeyError:
        raise BrokerConfigError(
            [
                f"--broker-user: no user {plan.broker_user!r} on this machine (Debian's "
                "mosquitto package creates 'mosquitto'): Mosquitto drops to it to read passwd"
            ]
        ) from None
    return Owner(entry.pw_uid, entry.pw_gid)


def generate(plan: BrokerPlan) -> Generated:
    """Write the plan's files (module docstring), keeping every password that exists.

    Credentials first, then passwd, acl and mosquitto.conf, each replaced atomically, so a
    run cut short leaves every file whole and the next run completes it. Raises
    ``BrokerConfigError`` for a credentials file that cannot be used, ``OSError`` when a
    file cannot be written.
    """
    result = Generated(plan)
    owner = _broker_owner(plan)
    make_dir(plan.out, 0o755, result.changes, fix_mode=False)
    make_dir(plan.credentials_dir, 0o700, result.changes, fix_mode=True)

    passwords = {u.name: _password_for(plan, u.name, result) for u in plan.users}
    known = {u.name for u in plan.users}
    bridge_password: str | None = None
    if plan.bridge is not None:
        bridge_password = _password_for(plan, plan.bridge.user, result)
        known.add(plan.bridge.user)
    for path in sorted(plan.credentials_dir.iterdir()):
        if path.name not in known:
            result.changes.append(
                Change(
                    path,
                    "left",
                    "no table given has this user: it is in neither passwd "
                    "nor acl any more; delete the file",
                )
            )

    try:
        existing = read_passwd(plan.passwd_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        existing = {}
    conf, acl = render_conf(plan, bridge_password), render_acl(plan)
    passwd = render_passwd(plan.users, passwords, existing)
    local_password = passwords.get(BRIDGE_BROKER_USER)
    bridge_conf = render_bridge_conf(plan, bridge_password, local_password)
    check_rendered(plan, conf, acl, passwd, bridge_password, bridge_conf, local_password)

    conf_owner = None if owner is None else Owner(0, owner.gid)
    detail = _passwd_detail(existing, passwd)
    result.changes.append(write_file(plan.passwd_path, passwd, 0o600, owner, detail=detail))
    result.changes.append(write_file(plan.acl_path, acl, 0o600, owner, show_diff=True))
    result.changes.append(write_file(plan.conf_path, conf, 0o640, conf_owner, show_diff=True))
    _write_bridge_broker(plan, bridge_conf, owner, result)
    if plan.bridge is not None and bridge_password is not None:
        declaration = _declaration(plan, plan.bridge, bridge_password)
        result.changes.append(
            write_file(plan.declaration_path, declaration.to_json(), 0o600, None, show_diff=True)
        )
    elif plan.declaration_path.exists():
        result.changes.append(
            Change(
                plan.declaration_path,
                "left",
                "no --bridge: this controller is not bridged to the floor any more; delete the "
                "file (and its controller from floor-config)",
            )
        )

    if not plan.data_dir.is_dir():
        result.notes.append(
            f"{plan.data_dir} (--data-dir) does not exist: create it, owned by "
            f"{plan.broker_user!r}, before the broker starts (it keeps its state there)"
        )
    if owner is None and plan.broker_user != _me():
        result.notes.append(
            f"passwd and acl are readable by {_me()} only: Mosquitto started as root reads "
            f"them as {plan.broker_user!r}; run broker-config as root, or chown them"
        )
    for listener in plan.listeners:
        if listener.purpose == "network" and listener.tls is None:
            result.notes.append(
                f"the network listener {listener.endpoint} is plain: passwords and decisions "
                "cross the network in clear (give --tls-cert, --tls-key and --tls-ca)"
            )
    result.wiring = [_wiring(t, passwords[t.user]) for t in plan.tables]
    return result


def _write_bridge_broker(
    plan: BrokerPlan, bridge_conf: str, owner: Owner | None, result: Generated
) -> None:
    """bridge.conf, bridge.acl and the unit with a bridge; without one, each left there is
    reported for deletion."""
    if plan.bridge is not None:
        conf_owner = None if owner is None else Owner(0, owner.gid)
        result.changes.append(
            write_file(plan.bridge_conf_path, bridge_conf, 0o640, conf_owner, show_diff=True)
        )
        result.changes.append(
            write_file(plan.bridge_acl_path, render_bridge_acl(plan), 0o600, owner)
        )
        result.changes.append(
            write_file(plan.bridge_unit_path, render_bridge_unit(plan), 0o644, None)
        )
        if not plan.bridge.data_dir.is_dir():
            result.notes.append(
                f"{plan.bridge.data_dir} does not exist: create it, owned by "
                f"{plan.broker_user!r}, before the bridge broker starts (its queue for the floor)"
            )
    else:
        for path in (plan.bridge_conf_path, plan.bridge_acl_path, plan.bridge_unit_path):
            if path.exists():
                result.changes.append(
                    Change(path, "left", "no --bridge: the bridge broker is not needed; delete it")
                )


def _declaration(plan: BrokerPlan, bridge: Bridge, password: str) -> floor.Declaration:
    """What floor-config is told of this controller; the bcrypt hash of the existing
    declaration is kept while it verifies (so the file does not churn with new salts)."""
    hashed: str | None = None
    try:
        old = floor.parse_declaration(plan.declaration_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, floor.FloorError):
        old = None
    if old is not None and floor.verify_password(password, old.password_bcrypt):
        hashed = old.password_bcrypt
    tables = tuple(
        floor.DeclaredTable(t.table_id, t.base, t.config.table.game) for t in plan.tables
    )
    return floor.Declaration(bridge.controller, hashed or floor.hash_password(password), tables)


def _me() -> str:
    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        return str(os.geteuid())


def _passwd_detail(existing: Mapping[str, str], new_text: str) -> str:
    new = read_passwd(new_text)
    added = sorted(set(new) - set(existing))
    removed = sorted(set(existing) - set(new))
    rehashed = sorted(u for u in set(new) & set(existing) if new[u] != existing[u])
    parts = []
    if added:
        parts.append("added " + ", ".join(added))
    if removed:
        parts.append("removed " + ", ".join(removed))
    if rehashed:
        parts.append("new hash for " + ", ".join(rehashed) + " (it did not match credentials/)")
    return "; ".join(parts)


def _password_for(plan: BrokerPlan, user: str, result: Generated) -> str:
    """The user's password: kept from its credentials file, or made and written there."""
    try:
        return keep_or_make_password(plan.credential_path(user), result.changes)
    except ValueError as exc:
        raise BrokerConfigError([str(exc)]) from exc


def _wiring(table: Table, password: str) -> Wiring:
    copy = table.config_path.absolute().parent / f"{table.table_id}.mqtt-password"
    mqtt = table.config.mqtt
    if mqtt.username != table.user:
        got = "not set" if mqtt.username is None else f"{mqtt.username!r}"
        return Wiring(table, False, f"[mqtt] username is {got}", copy)
    try:
        current = mqtt.read_password()
    except (OSError, UnicodeDecodeError) as exc:
        return Wiring(table, False, f"[mqtt] password_file cannot be read ({exc})", copy)
    if current is None:
        return Wiring(table, False, "[mqtt] password_file is not set", copy)
    if current != password:
        return Wiring(
            table, False, f"{mqtt.password_file} does not hold credentials/{table.user}", copy
        )
    return Wiring(table, True, "", copy)


def wiring_lines(wiring: Wiring, plan: BrokerPlan) -> list[str]:
    """How to wire a table that is not: copy its password for the daemon's user and add two
    lines to its ``[mqtt]`` (TOML strings, shell-quoted paths)."""
    t = wiring.table
    source = plan.credential_path(t.user)
    relative = wiring.password_copy.name
    return [
        f"install -m 0600 -o lammer -g lammer {shlex.quote(str(source))} "
        f"{shlex.quote(str(wiring.password_copy))}",
        f"username = {json.dumps(t.user, ensure_ascii=False)}",
        f"password_file = {json.dumps(relative, ensure_ascii=False)}",
    ]
