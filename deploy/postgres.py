"""A private PostgreSQL for the tests, the benchmarks and the demo (``lammer records``).

Never the machine's own service: ``initdb`` into a fresh folder, ``postgres`` on a port of
its own from ``deploy.broker.free_port`` (TCP on 127.0.0.1 only) and its unix socket in
that folder, nothing shared with another run, so tests stay independent under
pytest-xdist.

PostgreSQL refuses to run as root ("root" execution of the PostgreSQL server is not
permitted). Run as root (the sessions, CI containers), the cluster belongs to an
unprivileged system user: ``postgres``, which Debian's ``postgresql`` package creates
(``make system-deps`` installs it), else ``nobody``; its folder is made under the system's
temporary directory (a pytest ``tmp_path`` lives under ``/tmp/pytest-of-root``, mode 0700,
which another user cannot enter) and handed to that user. ``subprocess``'s ``user=``
switches the user for the child only: no ``su``/``sudo`` and no password. Run as anyone
else, the cluster is that user's own.

Authentication: ``trust`` on the unix socket (the folder is 0700: only its owner and root
can reach it) for the administrator, ``scram-sha-256`` on TCP, so a service's user logs in
with its password as it would on the floor.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from deploy import children
from deploy.broker import BrokerError, free_port

ADMIN = "lammer_admin"
"""The cluster's superuser (never ``root``, never ``postgres``: nothing is borrowed)."""

_START_TIMEOUT = 120.0
"""A bound on a failure only: initdb's server accepts within seconds on a quiet machine;
under load (four test workers on two cores) a start has taken tens of seconds."""


class PostgresError(BrokerError):
    """PostgreSQL is missing, would not initialise, or did not accept connections."""


def postgres_bindir() -> Path:
    """Where Debian's PostgreSQL binaries are (``/usr/lib/postgresql/<major>/bin``), the
    newest major first; ``pg_config`` decides when it is on PATH."""
    found = shutil.which("pg_config")
    if found:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            out = subprocess.run(  # noqa: S603  argv is PostgreSQL's own programs from its bindir, and our flags
                [found, "--bindir"], capture_output=True, text=True, check=True, timeout=10
            ).stdout.strip()
            if (Path(out) / "initdb").exists():
                return Path(out)
    majors = sorted(
        (p for p in Path("/usr/lib/postgresql").glob("*/bin") if (p / "initdb").exists()),
        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
        reverse=True,
    )
    if not majors:
        raise PostgresError(
            "PostgreSQL is not installed (make setup installs Debian's postgresql package)"
        )
    return majors[0]


def cluster_user() -> str | None:
    """The user the cluster runs as: ``None`` (this process's own) unless this is root."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            pwd.getpwnam(name)
            return name
    raise PostgresError("running as root and neither user postgres nor nobody exists")


@dataclass
class Postgres:
    """A private PostgreSQL cluster: ``start()`` initialises and starts it, ``stop()``
    stops it and removes its folder; ``restart()`` keeps the data.

    Call ``start()`` from a thread that outlives the cluster: the death signal is the
    starting *thread*'s (prctl(2), ``PR_SET_PDEATHSIG``), so a cluster started from an
    ``asyncio.to_thread`` worker stops when that worker ends."""

    port: int = field(default_factory=free_port)
    host: str = "127.0.0.1"
    user: str | None = field(default_factory=cluster_user)
    folder: Path | None = None
    process: subprocess.Popen[bytes] | None = None
    durable: bool = False
    """``fsync`` on, as a floor's server runs (a commit returns once its WAL is on disk);
    off by default: a test cluster loses nothing worth a disk flush. ``synchronous_commit``
    is on either way (a commit waits for its WAL write, flushed when ``fsync`` is on)."""

    def _folder(self) -> Path:
        if self.folder is None:
            raise RuntimeError("the cluster has no folder yet: start() first")
        return self.folder

    @property
    def data(self) -> Path:
        """The cluster's data directory."""
        return self._folder() / "data"

    @property
    def socket_dir(self) -> str:
        """The folder of the unix socket (``host=`` of a libpq connection string)."""
        return str(self._folder())

    def admin_dsn(self, dbname: str = "postgres") -> str:
        """The superuser's connection string, over the unix socket."""
        return f"host={self.socket_dir} port={self.port} user={ADMIN} dbname={dbname}"

    def dsn(self, user: str, password: str, dbname: str) -> str:
        """A user's connection string over TCP with a password (as on the floor)."""
        return (
            f"host={self.host} port={self.port} user={user} password={password} "
            f"dbname={dbname} connect_timeout=10"
        )

    def _run(self, *argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(  # noqa: S603  argv is PostgreSQL's own programs from its bindir, and our flags
            argv, capture_output=True, text=True, user=self.user, timeout=60, check=False
        )

    def start(self) -> None:  # initdb, settings, start, wait: one sequence
        """Initialise (the first time) and start the cluster; return once it answers."""
        bindir = postgres_bindir()
        if self.folder is None:
            self.folder = Path(tempfile.mkdtemp(prefix="lammer-pg-"))
            if self.user is not None:
                entry = pwd.getpwnam(self.user)
                os.chown(self.folder, entry.pw_uid, entry.pw_gid)
            done = self._run(
                str(bindir / "initdb"),
                "-D",
                str(self.data),
                "-U",
                ADMIN,
                "--auth-local=trust",
                "--auth-host=scram-sha-256",
                "-E",
                "UTF8",
                "--locale=C.UTF-8",
                "--no-sync",  # a test cluster: losing it in a power cut loses nothing
            )
            if done.returncode != 0:
                raise PostgresError(f"initdb failed: {done.stderr.strip()}")
        log = self.folder / "postgres.log"
        with log.open("ab") as log_file:
            self.process = subprocess.Popen(  # noqa: S603  argv is PostgreSQL's own programs from its bindir, and our flags
                [
                    str(bindir / "postgres"),
                    "-D",
                    str(self.data),
                    "-p",
                    str(self.port),
                    "-c",
                    f"listen_addresses={self.host}",
                    "-c",
                    f"unix_socket_directories={self.folder}",
                    "-c",
                    f"fsync={'on' if self.durable else 'off'}",
                    "-c",
                    "synchronous_commit=on",  # PostgreSQL's default, said: never async
                    "-c",
                    "max_connections=50",
                ],
                stdout=subprocess.DEVNULL,
                stderr=log_file,
                user=self.user,
                # Dies with us however we die (a killed test run leaves no server behind):
                # SIGINT, PostgreSQL's fast shutdown, which does not wait for the clients
                # (SIGTERM's smart one would). subprocess switches the user before this
                # runs, so the signal stays set.
                **children.supervised(death_signal=signal.SIGINT),
            )
        deadline = time.monotonic() + _START_TIMEOUT
        ready = str(bindir / "pg_isready")
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                text = log.read_text(errors="replace")
                self.process = None
                raise PostgresError(f"postgres exited: {text[-2000:]}")
            try:
                probe = subprocess.run(  # noqa: S603  argv is PostgreSQL's own programs from its bindir, and our flags
                    [ready, "-q", "-h", self.socket_dir, "-p", str(self.port), "-U", ADMIN],
                    check=False,
                    timeout=10,
                )
            except subprocess.TimeoutExpired:
                continue  # a probe that hangs is a "not yet", bounded by the deadline
            if probe.returncode == 0:
                return
            time.sleep(0.05)
        self.stop(remove=False)
        raise PostgresError(f"postgres did not accept connections within {_START_TIMEOUT:.0f} s")

    def stop(self, *, remove: bool = True) -> None:
        """Stop the server (fast shutdown); with ``remove``, delete its folder too."""
        if self.process is not None and self.process.poll() is None:
            # SIGINT is PostgreSQL's fast shutdown: clients are disconnected, not waited for.
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None
        if remove and self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None

    def restart(self) -> None:
        """Stop and start again on the same port with the same data."""
        self.stop(remove=False)
        self.start()
