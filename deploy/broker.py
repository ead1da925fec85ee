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


class BrokerError(DaemonError, RuntimeError):
    """Mosquitto is missing, exited, or did not listen in time."""


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
    in between by any client's connection (a bridge's, say): "Address already in use"."""
    low = 32768
    with contextlib.suppress(OSError, ValueError, IndexError):
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    if low - 10000 < 2000:  # an unusual range: anything unprivileged, as the kernel would
        return range(1024, 65536)
    return range(10000, low)


def free_port(*, rng: random.Random | None = None) -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago, from ``listen_ports()``."""
    rng = rng or random.Random()  # noqa: S311  picks a free test port, not a secret
    ports = listen_ports()
    for _ in range(200):
        port = rng.choice(ports)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
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
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise BrokerError(f"mosquitto exited: {self.log.read_text(errors='replace')}")
            if wait_listening(self.host, self.port, timeout=0.2):
                return
        self.stop()
        raise BrokerError(f"mosquitto did not listen on port {self.port} within 10 s")

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
