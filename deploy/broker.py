"""A private Mosquitto for the demo, the tests and the benchmarks.

Never a shared broker: each user gets its own on a free port of 127.0.0.1, with its own
configuration. Every configuration the project starts has ``set_tcp_nodelay true``:
with Nagle on either side about 0.5% of messages stall 40 ms.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import random
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from daemon.errors import DaemonError
from deploy import children

START_BOUND_S = 120.0
"""How long a child started here may take to listen before it counts as failed: a bound
on a failure only (a broker listens within milliseconds; a machine loaded beyond its cores
has stalled a process start for tens of seconds)."""


class BrokerError(DaemonError, RuntimeError):
    """Mosquitto is missing, exited, or did not listen in time."""


class PortTaken(BrokerError):
    """What accepts connections on the port a child was started on is another process."""


def mosquitto_path() -> str:
    """The Mosquitto binary (Debian installs it in /usr/sbin, often not on PATH)."""
    found = shutil.which("mosquitto") or "/usr/sbin/mosquitto"
    if not Path(found).exists():
        raise BrokerError("mosquitto is not installed (make test and make demo install it)")
    return found


def listen_ports() -> range:
    """Ports to listen on for private brokers: below the kernel's ephemeral range
    (``net.ipv4.ip_local_port_range``, 32768 and up by default), which outgoing connections
    take their local port from. A port picked there and bound a moment later can be taken
    in between by any client's connection (a bridge's, say): "Address already in use".

    Under pytest-xdist each worker gets a block of its own (``worker_share``): a port one
    worker has picked and not yet bound is never picked by another."""
    low = 32768
    with contextlib.suppress(OSError, ValueError, IndexError):
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    if low - 10000 < 2000:  # an unusual range: anything unprivileged, as the kernel would
        return worker_share(range(1024, 65536))
    return worker_share(range(10000, low))


def worker_share(ports: range) -> range:
    """The block of ``ports`` of this pytest-xdist worker (``PYTEST_XDIST_WORKER`` gwI of
    ``PYTEST_XDIST_WORKER_COUNT``), or all of them outside such a worker or when a block
    would hold fewer than ``MIN_SHARE`` ports."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    count = os.environ.get("PYTEST_XDIST_WORKER_COUNT", "")
    if not (worker.startswith("gw") and worker[2:].isdigit() and count.isdigit()):
        return ports
    index, workers = int(worker[2:]), int(count)
    size = len(ports) // max(workers, 1)
    if index >= workers or size < MIN_SHARE:
        return ports
    start = ports.start + index * size
    return range(start, start + size)


MIN_SHARE = 2000
"""The fewest ports a worker's block holds (else every worker picks from all of them)."""

_handed_out: set[int] = set()


def handed_out(port: int) -> bool:
    """Whether this process has handed ``port`` out already (``free_port``,
    ``deploy.floor_cluster.free_ranges``): it may not be bound yet, as a floor's ten
    controllers pick their ports minutes before their brokers start, so a bind test
    alone would find it free and hand it out twice."""
    return port in _handed_out


def hand_out(ports: range | list[int]) -> None:
    """Record ``ports`` as handed out by this process (never handed out again)."""
    _handed_out.update(ports)


def free_port(*, rng: random.Random | None = None) -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago, from ``listen_ports()``, and
    never handed out before by this process."""
    rng = rng or random.Random()  # noqa: S311  picks a free test port, not a secret
    ports = listen_ports()
    for _ in range(200):
        port = rng.choice(ports)
        if handed_out(port):
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        hand_out([port])
        return port
    raise BrokerError("no free port on 127.0.0.1")


def broker_config(port: int, *, user: str | None = None) -> str:
    """The private broker's configuration: loopback only, no persistence, Nagle off.

    ``user``: the user Mosquitto runs as when started as root (its default switches to
    ``mosquitto``). A supervised broker keeps its starter's user: a change of user clears
    the parent-death signal (prctl(2), ``PR_SET_PDEATHSIG``) that stops it with the demo.
    """
    return (
        f"listener {port} 127.0.0.1\n"
        "allow_anonymous true\n"
        "persistence false\n"
        "set_tcp_nodelay true\n"
        "log_dest stderr\n"
        "log_type error\n"
        "log_type warning\n"
    ) + (f"user {user}\n" if user is not None else "")


def owns_listener(pid: int, port: int) -> bool | None:
    """Whether process ``pid`` holds a socket listening on TCP ``port`` (from
    ``/proc/net/tcp``, ``tcp6`` and the process's descriptors); None where /proc cannot
    tell. Told apart this way, a broker that exited on "Address already in use" is not
    taken for ready because another process accepts on its port."""
    try:
        lines = [
            line
            for table in ("/proc/net/tcp", "/proc/net/tcp6")
            for line in Path(table).read_text().splitlines()[1:]
        ]
        fds = list(Path(f"/proc/{pid}/fd").iterdir())
    except OSError:
        return None
    inodes = set()
    for line in lines:
        fields = line.split()
        local = fields[1].rpartition(":")[2] if len(fields) > 9 else ""
        if fields[3:4] == ["0A"] and local == f"{port:04X}":  # LISTEN, on that port
            inodes.add(f"socket:[{fields[9]}]")
    held = set()
    for fd in fds:
        with contextlib.suppress(OSError):
            held.add(os.readlink(fd))
    if fds and not held:
        return None  # its descriptors are not ours to read
    return bool(inodes & held)


def wait_serving(pid: int, host: str, port: int, *, timeout: float = 10.0) -> bool:
    """Whether process ``pid`` accepts connections on ``host:port`` within ``timeout`` s.
    Raises ``PortTaken`` when what accepts there is another process: a child that could
    not bind (and is exiting on "Address already in use") is never taken for ready."""
    if not wait_listening(host, port, timeout=timeout):
        return False
    if owns_listener(pid, port) is False:
        raise PortTaken(f"port {port} is another process's")
    return True


def wait_listening(host: str, port: int, *, timeout: float = 10.0) -> bool:
    """Whether something accepts connections on ``host:port`` within ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, port), timeout=0.2):
                return True
        except OSError:
            time.sleep(0.02)
    return False


@dataclass
class Broker:
    """A private Mosquitto on 127.0.0.1. ``stop()`` then ``start()`` simulate an outage on
    the same port, so clients reconnect to the same address.

    With ``config_file`` (``lammer broker-config``'s ``mosquitto.conf``, say) the broker runs
    that configuration as it is; ``host`` and ``port`` must then name one of its listeners.
    With ``supervised`` (the demo) it runs in a session of its own and dies with this
    process (``deploy.children``): Mosquitto takes SIGHUP as "reload", so a closed terminal
    must never be what is expected to stop it.
    """

    workdir: Path
    port: int = field(default_factory=free_port)
    host: str = "127.0.0.1"
    process: subprocess.Popen[bytes] | None = None
    config_file: Path | None = None
    supervised: bool = False

    @property
    def conf(self) -> Path:
        """The broker's configuration file: ``config_file``, or its own in ``workdir``."""
        return self.config_file or self.workdir / "mosquitto.conf"

    @property
    def log(self) -> Path:
        """Where the broker writes its errors and warnings."""
        return self.workdir / "mosquitto.log"

    def start(self) -> None:
        """Start the broker and return once it accepts connections."""
        if self.config_file is None:
            user = pwd.getpwuid(os.getuid()).pw_name if self.supervised else None
            self.conf.write_text(broker_config(self.port, user=user))
        options = (
            children.supervised()
            if self.supervised
            else children.SupervisedOptions(start_new_session=False, preexec_fn=None)
        )
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(  # noqa: S603  mosquitto_path() and a config file this module wrote
                [mosquitto_path(), "-c", str(self.conf)],
                stdout=log,
                stderr=subprocess.STDOUT,
                **options,
            )
        deadline = time.monotonic() + START_BOUND_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise BrokerError(f"mosquitto exited: {self.log.read_text(errors='replace')}")
            try:
                if wait_serving(self.process.pid, self.host, self.port, timeout=0.2):
                    return
            except PortTaken as exc:
                self.stop()
                raise PortTaken(
                    f"{exc}; mosquitto: {self.log.read_text(errors='replace')}"
                ) from None
        self.stop()
        raise BrokerError(
            f"mosquitto did not listen on port {self.port} within {START_BOUND_S:.0f} s"
        )

    def stop(self) -> None:
        """Stop the broker (clients see the connection drop)."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None
