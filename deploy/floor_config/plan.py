"""``plan_floor``: the options and the controllers' declarations, checked and decided into a
``FloorPlan`` (or ``FloorConfigError`` with every problem)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from deploy import floor
from deploy.floor_config import model
from deploy.floor_config.model import DEFAULT_PREFIX, MAX_NODES, FloorConfigError, FloorPlan, Node
from deploy.floor_config.validate import (
    ca_problems,
    foreign_file_problems,
    path_problems,
    read_declarations,
)
from foundation.endpoints import parse_endpoint


def plan_floor(
    declarations: Sequence[Path],
    *,
    out: Path,
    nodes: int,
    hosts: Sequence[str] | None = None,
    mqtt_port: int = model.DEFAULT_MQTT_PORT,
    route_port: int = model.DEFAULT_ROUTE_PORT,
    client_port: int = model.DEFAULT_CLIENT_PORT,
    monitor_port: int = model.DEFAULT_MONITOR_PORT,
    data_dir: Path = model.DEFAULT_DATA_DIR,
    cluster: str = model.DEFAULT_CLUSTER,
    install_dir: Path = model.DEFAULT_INSTALL_DIR,
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
    problems += ca_problems(ca_cert, ca_key)
    problems += path_problems(out, data_dir, install_dir)
    planned_nodes = _nodes(names, ports, problems)
    controllers = read_declarations(declarations, problems)
    problems += foreign_file_problems(out, len(planned_nodes))
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
