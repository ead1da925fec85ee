"""``plan_broker``: the tables' configurations and the options, checked and decided into a
``BrokerPlan`` (or ``BrokerConfigError`` with every problem)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from daemon.config import TableConfig
from deploy import floor
from deploy.broker_config.limits import (
    BRIDGE_LISTEN,
    BRIDGE_RESTART,
    LAN_MAX_CONNECTIONS,
    MAX_BRIDGE_NODES,
    daemons_max_connections,
)
from deploy.broker_config.model import (
    DEFAULT_BROKER_USER,
    DEFAULT_DATA_DIR,
    DEFAULT_TLS_LISTEN,
    Bridge,
    BrokerConfigError,
    BrokerPlan,
    Listener,
    ListenerTls,
    Table,
)
from deploy.broker_config.users import bridge_broker_user, table_users
from deploy.broker_config.validate import (
    check_tls,
    daemons_endpoint,
    device_names,
    option_problems,
    overlap_problems,
    pem_problem,
    table_problems,
)
from foundation.endpoints import Endpoint, parse_endpoint


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
    problem found (the package docstring, choices).
    """
    problems: list[str] = []
    if not tables:
        problems.append("no table configuration given")
    entries = tuple(sorted((Table(p, c) for p, c in tables), key=lambda t: t.table_id))
    problems += table_problems(entries)
    daemons = daemons_endpoint(entries, problems)

    network = _network_listener(listen, tls, daemons, problems)
    problems += option_problems(out, data_dir, broker_user)
    planned_bridge = _plan_bridge(bridge, controller, entries, problems, bridge_ca)
    planned_bridge = _bridge_broker(
        planned_bridge, bridge_listen, bridge_retry, data_dir, daemons, network, problems
    )
    devices = device_names(displays, terminals, problems)
    if problems or daemons is None:
        # No problem means the tables named one broker: daemons is None only beside one.
        raise BrokerConfigError(problems or ["the tables name no broker ([mqtt] host, port)"])
    listeners = (
        Listener(daemons, "daemons", daemons_max_connections(len(entries))),
        *(() if network is None else (network,)),
    )
    return BrokerPlan(
        out=out.absolute(),
        tables=entries,
        listeners=listeners,
        users=(
            *table_users(entries, devices),
            *(() if planned_bridge is None else (bridge_broker_user(entries),)),
        ),
        data_dir=data_dir.absolute(),
        broker_user=broker_user,
        bridge=planned_bridge,
    )


def _network_listener(
    listen: str | None,
    tls: tuple[Path, Path, Path] | None,
    daemons: Endpoint | None,
    problems: list[str],
) -> Listener | None:
    """The network listener of ``--listen`` and ``--tls-*``, checked (problems appended);
    None without either."""
    listener_tls: ListenerTls | None = None
    if tls is not None:
        listener_tls = check_tls(*tls, problems=problems)
    if listen is None and tls is None:
        return None
    try:
        endpoint = parse_endpoint(listen or DEFAULT_TLS_LISTEN)
    except ValueError as exc:
        problems.append(f"--listen: {exc}")
        return None
    if daemons is not None:
        problems += overlap_problems(daemons, endpoint)
    return Listener(endpoint, "network", LAN_MAX_CONNECTIONS, listener_tls)


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
    elif problem := pem_problem(ca, "-----BEGIN CERTIFICATE-----"):
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
