"""A private floor cluster on this machine, for the tests, the benchmarks and a demo.

``lammer floor-config`` writes the nodes' files (all on 127.0.0.1, consecutive ports from
a free range, JetStream in the work folder, the floor CA and each node's certificate: MQTT
and routes over TLS, as on a real floor); ``FloorCluster`` runs one ``nats-server`` per
node as a subprocess, and can kill a node (``SIGKILL``: the node dies with its
connections, as a machine that loses power does not even say goodbye) and start it again
on the same ports and storage. Never Debian's service, never a shared cluster.
"""

from __future__ import annotations

import json
import random
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deploy.broker import START_BOUND_S, BrokerError, hand_out, handed_out, listen_ports
from deploy.floor_config import FloorPlan, Node, generate, installed_nats_server, plan_floor
from foundation.tls import client_context


def nats_server_path() -> str:
    """The nats-server the floor runs: the pinned one in this venv (``make setup``
    installs it from requirements-floor.txt), never whichever is first on ``PATH``."""
    found = installed_nats_server()
    if found is None or found.parent != Path(sys.executable).parent:
        raise BrokerError(
            f"nats-server is not installed in {Path(sys.executable).parent} "
            "(make setup installs it from requirements-floor.txt)"
        )
    return str(found)


def _range_free(base: int, count: int) -> bool:
    for port in range(base, base + count):
        if handed_out(port):
            return False
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                return False
    return True


def free_ranges(nodes: int, kinds: int = 4, *, rng: random.Random | None = None) -> list[int]:
    """``kinds`` first ports, each of ``nodes`` consecutive ports free on 127.0.0.1 a
    moment ago (spaced so that no two ranges overlap)."""
    rng = rng or random.Random()  # noqa: S311  picks free test ports, not a secret
    ports = listen_ports()
    for _ in range(200):
        base = rng.randrange(ports.start, ports.stop - 64 * kinds)
        starts = [base + 64 * k for k in range(kinds)]
        if all(_range_free(start, nodes) for start in starts):
            for start in starts:
                hand_out(range(start, start + nodes))
            return starts
    raise BrokerError("no free range of ports on 127.0.0.1")


@dataclass
class FloorCluster:
    """``nodes`` nats-server nodes on 127.0.0.1 configured by floor-config for the
    controllers of ``declarations``; ``start()`` returns once every node is healthy."""

    workdir: Path
    declarations: Sequence[Path] = ()
    nodes: int = 3
    server: str | None = None
    """The nats-server binary (default ``nats_server_path()``; the benchmarks compare two)."""
    plan: FloorPlan = field(init=False)
    processes: dict[int, subprocess.Popen[bytes]] = field(default_factory=dict, init=False)
    _ports: list[int] = field(default_factory=list, init=False)

    def __post_init__(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._ports = free_ranges(self.nodes)
        self.configure(self.declarations)

    def configure(self, declarations: Sequence[Path]) -> None:
        """Run floor-config for ``declarations`` on the cluster's ports (again: its users
        change; a running node takes them with ``reload``)."""
        mqtt, route, client, monitor = self._ports
        self.declarations = list(declarations)
        self.plan = plan_floor(
            self.declarations,
            out=self.workdir / "floor",
            nodes=self.nodes,
            mqtt_port=mqtt,
            route_port=route,
            client_port=client,
            monitor_port=monitor,
            data_dir=self.workdir / "jetstream",
            # The nodes read their certificates where floor-config made them.
            install_dir=self.workdir / "floor",
        )
        generate(self.plan)

    def reload(self) -> None:
        """SIGHUP every running node: it reads its file again (users, permissions)."""
        for proc in self.processes.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGHUP)

    # -- what clients need --------------------------------------------------------------

    def node(self, index: int) -> Node:
        """Node ``index`` (1-based)."""
        return self.plan.nodes[index - 1]

    @property
    def mqtt_endpoints(self) -> list[tuple[str, int]]:
        """Every node's MQTT listener, in order."""
        return [(n.host, n.mqtt_port) for n in self.plan.nodes]

    @property
    def bridge_option(self) -> str:
        """The ``--bridge`` value for broker-config: every node."""
        return ",".join(f"{n.host}:{n.mqtt_port}" for n in self.plan.nodes)

    @property
    def ca_path(self) -> Path:
        """The floor CA (``ca.crt``) every client verifies the nodes with."""
        return self.plan.ca_path

    @property
    def bridge_args(self) -> list[str]:
        """broker-config's ``--bridge`` and ``--bridge-ca`` for this cluster."""
        return ["--bridge", self.bridge_option, "--bridge-ca", str(self.ca_path)]

    def tls_context(self) -> ssl.SSLContext:
        """A client's TLS context for the nodes: their certificates verified with the
        floor CA (and the name in them: 127.0.0.1)."""
        return client_context(self.ca_path)

    def password(self, user: str) -> str:
        """A floor user's password (``display``, ``terminal``)."""
        return (self.plan.credentials_dir / user).read_text().split("\n")[0]

    def log(self, index: int) -> Path:
        """Node ``index``'s log file."""
        return self.workdir / f"{self.node(index).name}.log"

    # -- lifecycle -------------------------------------------------------------------------

    def start(self, *, timeout: float = START_BOUND_S) -> None:
        """Start every node; returns once each reports healthy with JetStream."""
        for node in self.plan.nodes:
            self.start_node(node.index, wait=False)
        for node in self.plan.nodes:
            self.wait_healthy(node.index, timeout=timeout)

    def start_node(self, index: int, *, wait: bool = True, timeout: float = START_BOUND_S) -> None:
        """Start (or restart) node ``index`` on its ports and storage; with ``wait``,
        return once it serves MQTT with JetStream running (its replicas may still be
        catching up: ``healthy(index)`` says when they are current)."""
        running = self.processes.get(index)
        if running is not None and running.poll() is None:
            raise BrokerError(f"{self.node(index).name} is running")
        conf = self.plan.conf_path(self.node(index))
        with self.log(index).open("ab") as log:
            self.processes[index] = subprocess.Popen(  # noqa: S603  the pinned nats-server (or the test's) and our conf
                [self.server or nats_server_path(), "-c", str(conf)],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        if wait:
            self.wait_healthy(index, timeout=timeout, current=False)

    def kill_node(self, index: int, sig: int = signal.SIGKILL) -> None:
        """Stop node ``index`` with ``sig`` (default SIGKILL: no goodbye) and reap it."""
        proc = self.processes.get(index)
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(sig)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def stop(self) -> None:
        """Stop every node (SIGTERM, then SIGKILL after 15 s)."""
        for index in list(self.processes):
            self.kill_node(index, signal.SIGTERM)

    def alive(self, index: int) -> bool:
        """Whether node ``index``'s process runs."""
        proc = self.processes.get(index)
        return proc is not None and proc.poll() is None

    # -- monitoring ----------------------------------------------------------------------

    def monitor(self, index: int, path: str) -> Any:
        """GET ``path`` of node ``index``'s monitoring endpoint, as JSON."""
        node = self.node(index)
        url = f"http://{node.host}:{node.monitor_port}{path}"
        with urllib.request.urlopen(url, timeout=5) as response:
            return json.loads(response.read())

    def healthy(self, index: int, *, current: bool = True) -> bool:
        """Whether node ``index`` answers ``/healthz`` ok: every stream and consumer it
        holds current, or (``current=False``) JetStream running."""
        path = "/healthz" if current else "/healthz?js-server-only=true"
        try:
            return bool(self.monitor(index, path).get("status") == "ok")
        except (OSError, ValueError):
            return False

    def wait_healthy(
        self, index: int, *, timeout: float = START_BOUND_S, current: bool = True
    ) -> None:
        """Wait for node ``index`` to be healthy; ``BrokerError`` with its log if not."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            proc = self.processes.get(index)
            if proc is not None and proc.poll() is not None:
                break
            if self.healthy(index, current=current) and self._mqtt_listening(index):
                return
            time.sleep(0.05)
        tail = self.log(index).read_text(errors="replace").splitlines()[-30:]
        raise BrokerError(f"{self.node(index).name} not healthy:\n" + "\n".join(tail))

    def _mqtt_listening(self, index: int) -> bool:
        node = self.node(index)
        try:
            with socket.create_connection((node.host, node.mqtt_port), timeout=0.5):
                return True
        except OSError:
            return False

    def mqtt_clients(self, index: int) -> list[str]:
        """The MQTT client ids connected to node ``index`` now."""
        data = self.monitor(index, "/connz?limit=10000")
        return [c["mqtt_client"] for c in data.get("connections", []) if c.get("mqtt_client")]

    def rss_kib(self) -> dict[int, int]:
        """Each running node's resident memory (VmRSS, KiB)."""
        out = {}
        for index, proc in self.processes.items():
            if proc.poll() is not None:
                continue
            try:
                status = Path(f"/proc/{proc.pid}/status").read_text()
            except OSError:
                continue
            for line in status.splitlines():
                if line.startswith("VmRSS:"):
                    out[index] = int(line.split()[1])
        return out
