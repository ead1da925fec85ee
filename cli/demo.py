"""``lammer demo``: a small simulated casino floor on this machine.

Starts a private Mosquitto on a free port, three simulated tables (an Ultimate Texas
Hold'em table with a shuffler, a craps table with a dice reader, a blackjack table with
a card-reading shoe), each served on a pty by ``lammer-sim``, a ``lammer run`` daemon per
table, a demo stickperson who decides the dice reader's CHECK rolls over MQTT, the
terminal display, ``lammer web`` (the player displays, the pit view and the
stickperson terminal in a browser; its URLs and a stickperson's login are printed), and
``lammer records`` on a private PostgreSQL (``deploy.postgres``; skipped, with a line that
says so, where PostgreSQL is not installed): the command that prints the demo's report is
printed with the URLs, and ``lammer web`` reads the store as its read-only role, so its
``/reports`` page (a pit user's login, printed) shows the demo's gaming day.
Plays until Ctrl-C, or until ``--rounds N`` rounds (and rolls) are
done, then prints the final table and stops everything.

Everything lives in one work folder (``--workdir``, else a new temporary one that is
kept for inspection): configs, journals, logs.

No child outlives the demo. The broker, the simulators and the daemons run in sessions of
their own (``deploy.children``): the terminal's signals reach only the demo (and the
display, which is the terminal's), and the demo stops the rest in order: the daemons first,
so they publish ``offline`` while the broker is up, then the simulators, then the broker.
Ctrl-C (SIGINT), a closed terminal (SIGHUP) and SIGTERM all stop it so, with status 0; a
second signal while it stops is ignored (every wait is bounded). If the demo itself is
killed (SIGKILL), the kernel sends each child SIGTERM (``PR_SET_PDEATHSIG``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import aiomqtt

from cli.output import discard
from contract.requests import request_topic
from contract.session import UNBOUNDED, session
from contract.tasks import cancel_and_wait, exit_after
from contract.topics import Topic
from deploy.broker import START_BOUND_S, Broker, BrokerError, free_port, hand_out
from deploy.children import supervised
from deploy.postgres import Postgres, PostgresError

PREFIX = "lammer"

STOP_SIGNALS = (signal.SIGHUP, signal.SIGTERM)
"""Besides SIGINT (Ctrl-C): a closed terminal, and a polite kill."""

STOP_TIMEOUT = 10.0
"""Seconds each group of children (daemons, then simulators) has to stop before SIGKILL."""
STOP_DEADLINE = 120.0
"""Seconds from a Ctrl-C to the demo's exit whatever hangs: its own steps take at most
about 65 s (the clients, the daemons, the simulators, the broker, PostgreSQL)."""

WAIT = 10.0
"""Seconds the demo's own MQTT clients (stickperson, progress) wait for the broker."""


class Stopped(BaseException):
    """A stop signal arrived (raised by its handler wherever the demo was)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _raise_stopped(signum: int, frame: object) -> None:
    raise Stopped(signum)


@dataclass(frozen=True)
class DemoTable:
    """One simulated table of the demo."""

    table_id: str
    game: str
    device: str  # "shuffler" or "dice_reader"
    sim_args: tuple[str, ...]


TABLES = (
    DemoTable("uth-1", "UTH", "shuffler", ("shuffler", "--game", "UTH")),
    DemoTable(
        "craps-1", "CRAPS", "dice_reader", ("dice", "--check-rate", "0.15", "--noroll-rate", "0.05")
    ),
    DemoTable("bj-1", "BJ", "shuffler", ("shuffler", "--game", "BJ", "--decks", "6")),
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``lammer demo``."""
    parser.add_argument("--rounds", type=int, default=None, help="stop after N rounds/rolls")
    parser.add_argument(
        "--interval", type=float, default=3.0, help="seconds between rounds and rolls"
    )
    parser.add_argument("--seed", type=int, default=None, help="seed the simulators")
    parser.add_argument("--workdir", type=Path, default=None, help="where configs, logs go")
    parser.add_argument(
        "--web-port", type=int, default=8080, help="lammer web's port (a free one if taken)"
    )


def _bin(name: str) -> str:
    """A console script of this installation (the venv's ``bin``), else from PATH."""
    here = Path(sys.executable).parent / name
    return str(here) if here.exists() else (shutil.which(name) or name)


def _config(table: DemoTable, workdir: Path, port: int) -> str:
    device_section = "shuffler" if table.device == "shuffler" else "dice_reader"
    return (
        f'[table]\nid = "{table.table_id}"\ngame = "{table.game}"\n\n'
        f'[{device_section}]\nport = "{workdir / (table.table_id + "-" + table.device)}"\n\n'
        f'[mqtt]\nhost = "127.0.0.1"\nport = {port}\nprefix = "{PREFIX}"\n\n'
        f'[journal]\npath = "{workdir / (table.table_id + ".db")}"\n\n'
        "[bonus_craps]\npaytable = 1\n\n"
        "[bust_bonus]\ndecks = 6\ndealer_hits_soft_17 = false\n\n"
        '[logging]\nformat = "json"\nlevel = "info"\n'
    )


class Floor:
    """The processes of the demo, started and stopped together."""

    def __init__(
        self,
        workdir: Path,
        *,
        interval: float,
        rounds: int | None,
        seed: int | None,
        web_port: int = 8080,
    ):
        self.workdir = workdir
        self.interval = interval
        self.rounds = rounds
        self.seed = seed
        # The web port first, and handed out (deploy.broker.hand_out): it is bound only
        # once lammer web starts, so a bind test alone would find it free, and the broker's
        # or PostgreSQL's free_port() could pick it in the meantime.
        self.web_port = web_port if _port_free(web_port) else free_port()
        hand_out([self.web_port])
        self.broker = Broker(workdir, supervised=True)
        self.port = self.broker.port
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.stick_user = "stick"
        self.stick_password = secrets.token_urlsafe(9)
        self.pit_user = "pit"
        self.pit_password = secrets.token_urlsafe(9)
        self.postgres: Postgres | None = None
        self.records_db: str | None = None
        self.reader_db: str | None = None

    def _spawn(
        self, name: str, argv: list[str], env: dict[str, str] | None = None
    ) -> subprocess.Popen[bytes]:
        with (self.workdir / f"{name}.log").open("ab") as log:
            proc = subprocess.Popen(  # noqa: S603  argv is the demo's own: this venv's console scripts and their flags
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                **supervised(),
            )
        self.procs[name] = proc
        return proc

    def start(self) -> None:
        """Broker, then lammer web, simulators and daemons."""
        try:
            self.broker.start()
        except BrokerError as exc:
            raise SystemExit(f"lammer demo: {exc}") from exc
        # Before the tables, so nothing slow (the Argon2 hash of adduser) comes between the
        # daemons' start and the demo's counter subscribing: the rolls are not retained.
        # The store first: lammer web reads it (/reports).
        self._start_postgres()
        self._start_web()
        self._start_records()
        for i, t in enumerate(TABLES):
            link = self.workdir / f"{t.table_id}-{t.device}"
            argv = [_bin("lammer-sim"), *t.sim_args, "--link", str(link)]
            argv += ["--interval", str(self.interval)]
            if self.seed is not None:
                argv += ["--seed", str(self.seed + i)]
            if self.rounds is not None:
                argv += ["--rolls" if t.device == "dice_reader" else "--rounds", str(self.rounds)]
                argv += ["--linger"]  # keep the device connected for the final picture
            _wait_path(link, self._spawn(f"sim-{t.table_id}", argv))
        for t in TABLES:
            cfg = self.workdir / f"{t.table_id}.toml"
            cfg.write_text(_config(t, self.workdir, self.port))
            self._spawn(f"lammer-{t.table_id}", [_bin("lammer"), "run", "--config", str(cfg)])

    def _start_web(self) -> None:
        """``lammer web`` on the demo broker, with one stickperson and one pit user, and
        the store's reader for /reports (``urls()`` says where)."""
        users = self.workdir / "web-users"
        for name, password, role in (
            (self.stick_user, self.stick_password, "stick"),
            (self.pit_user, self.pit_password, "pit"),
        ):
            subprocess.run(  # noqa: S603  this venv's lammer, the demo's own user names and file
                [_bin("lammer"), "web", "adduser", "--role", role, name, "--users", str(users)],
                input=f"{password}\n".encode(),
                capture_output=True,
                check=True,
            )
        argv = [_bin("lammer"), "web", "--mqtt-port", str(self.port), "--prefix", PREFIX]
        argv += ["--listen", f"127.0.0.1:{self.web_port}", "--users", str(users)]
        env = None
        if self.reader_db is not None:
            argv += ["--records-db", self.reader_db]
            env = {**os.environ, "PGPASSFILE": str(self.workdir / "pgpass")}
        self._spawn("web", argv, env=env)

    def _start_postgres(self) -> None:
        """A private PostgreSQL with the store's database, its owner ``records`` (the
        service) and its reader ``records_reader`` (lammer web); none, said once, where
        PostgreSQL is not installed."""
        import psycopg

        from records.provision import provision, provision_reader

        try:
            self.postgres = Postgres()
            self.postgres.start()
        except PostgresError as exc:
            self.postgres = None
            _say(f"lammer demo: no records service: {exc}")
            return
        password = secrets.token_urlsafe(18)
        reader_password = secrets.token_urlsafe(18)
        with psycopg.connect(self.postgres.admin_dsn(), autocommit=True) as admin:
            provision(admin, database="lammer_records", role="records", password=password)
            provision_reader(
                admin,
                database="lammer_records",
                role="records_reader",
                password=reader_password,
                owner="records",
            )
        # The passwords in a pgpass file (0600), never on a command line.
        pgpass = self.workdir / "pgpass"
        pgpass.touch(mode=0o600)
        server = f"{self.postgres.host}:{self.postgres.port}:lammer_records"
        pgpass.write_text(
            f"{server}:records:{password}\n{server}:records_reader:{reader_password}\n"
        )
        where = f"host={self.postgres.host} port={self.postgres.port} dbname=lammer_records"
        self.records_db = f"{where} user=records"
        self.reader_db = f"{where} user=records_reader"

    def _start_records(self) -> None:
        """``lammer records`` on the private PostgreSQL (``_start_postgres``), if any."""
        if self.records_db is None:
            return
        argv = [_bin("lammer"), "records", "run", "--db", self.records_db]
        argv += ["--mqtt", f"127.0.0.1:{self.port}", "--mqtt-user", "", "--prefix", PREFIX]
        pgpass = self.workdir / "pgpass"
        self._spawn("records", argv, env={**os.environ, "PGPASSFILE": str(pgpass)})

    def urls(self) -> str:
        """The screens of the demo, for people to open."""
        root = f"http://127.0.0.1:{self.web_port}"
        lines = ["lammer demo: the screens (lammer web):"]
        lines += [f"  player display  {root}/table/{t.table_id}" for t in TABLES]
        lines.append(f"  pit             {root}/pit")
        lines.append(
            f"  stickperson     {root}/stick/craps-1  "
            f"(user {self.stick_user}, password {self.stick_password})"
        )
        if self.records_db is not None:
            lines.append(
                f"  reports         {root}/reports  "
                f"(pit user {self.pit_user}, password {self.pit_password})"
            )
            lines.append(
                f"  records report  PGPASSFILE={self.workdir / 'pgpass'} "
                f"lammer records report --db '{self.records_db}'"
            )
        return "\n".join(lines)

    def check(self) -> None:
        """Fail loudly if a daemon or the broker died."""
        if self.broker.process is None or self.broker.process.poll() is not None:
            raise SystemExit(f"lammer demo: the broker exited; see {self.broker.log}")
        for name, proc in self.procs.items():
            if proc.poll() is not None and not name.startswith("sim-"):
                tail = (self.workdir / f"{name}.log").read_text(errors="replace")[-2000:]
                raise SystemExit(f"lammer demo: {name} exited ({proc.returncode}):\n{tail}")

    def stop(self) -> None:
        """Daemons first (they publish offline), then simulators, then the broker; each
        group is sent SIGTERM at once and killed if it has not stopped in time."""
        daemons = [p for n, p in self.procs.items() if not n.startswith("sim-")]
        simulators = [p for n, p in self.procs.items() if n.startswith("sim-")]
        for group in (daemons, simulators):
            _terminate(group, timeout=STOP_TIMEOUT)
        self.broker.stop()
        if self.postgres is not None:
            self.postgres.stop()


def _port_free(port: int) -> bool:
    import socket

    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _terminate(procs: list[subprocess.Popen[bytes]], *, timeout: float) -> None:
    """SIGTERM every process still running, wait up to ``timeout`` s for all, SIGKILL the
    rest, and reap them all."""
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    deadline = time.monotonic() + timeout
    for proc in procs:
        try:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _wait_path(path: Path, proc: subprocess.Popen[bytes], timeout: float = START_BOUND_S) -> None:
    """Until the simulator ``proc`` has created its link ``path``; a generous bound, and
    no wait at all once the simulator has exited."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists():
            return
        if proc.poll() is not None:
            raise SystemExit(
                f"lammer demo: the simulator exited ({proc.returncode}) before creating {path}"
            )
        time.sleep(0.05)
    raise SystemExit(f"lammer demo: the simulator did not create {path} within {timeout:.0f} s")


async def stickperson(port: int, table_id: str, *, delay: float) -> None:
    """A demo stickperson: decides each pending CHECK roll after ``delay`` seconds
    (valid when both dice were read, invalid otherwise)."""
    base = f"{PREFIX}/{table_id}"
    decided: set[int] = set()
    while True:
        try:
            client = aiomqtt.Client(
                "127.0.0.1", port, identifier="demo-stickperson", timeout=UNBOUNDED
            )
            async with session(client, within=WAIT, close_within=WAIT):
                async with asyncio.timeout(WAIT):
                    await client.subscribe(f"{base}/craps/board", qos=1)
                async for message in client.messages:
                    board = json.loads(bytes(message.payload))
                    pending = board.get("pending_roll")
                    if not pending or pending["roll_id"] in decided:
                        continue
                    roll_id = pending["roll_id"]
                    decided.add(roll_id)
                    await asyncio.sleep(delay)
                    readable = 0 not in pending.get("dice", [0])
                    request = {
                        "operator": "demo-stickperson",
                        "request_id": f"demo-{roll_id}",
                        "roll_id": roll_id,
                        "decision": "valid" if readable else "invalid",
                    }
                    async with asyncio.timeout(WAIT):
                        await client.publish(
                            request_topic(base, "roll_decision"), json.dumps(request), qos=1
                        )
        except (aiomqtt.MqttError, OSError):  # TimeoutError is an OSError
            await asyncio.sleep(1)


# What counts as one round of each demo table, as its daemon publishes it.
_PROGRESS = {
    "uth-1": Topic.COVER_ALL_RESULT,
    "craps-1": Topic.CRAPS_ROLL,
    "bj-1": Topic.BUST_BONUS_RESULT,
}


async def progress(port: int, done: dict[str, set[int]]) -> None:
    """Count the rounds (and rolls) each daemon has published, by id."""
    while True:
        try:
            client = aiomqtt.Client(
                "127.0.0.1", port, identifier="demo-progress", timeout=UNBOUNDED
            )
            async with session(client, within=WAIT, close_within=WAIT):
                async with asyncio.timeout(WAIT):
                    for table_id, topic in _PROGRESS.items():
                        await client.subscribe(f"{PREFIX}/{table_id}/{topic}", qos=1)
                async for message in client.messages:
                    table_id = str(message.topic).split("/")[1]
                    body = json.loads(bytes(message.payload))
                    ident = body.get("round_id", body.get("roll_id"))
                    if isinstance(ident, int) and body.get("status") != "pending":
                        done.setdefault(table_id, set()).add(ident)
        except (aiomqtt.MqttError, OSError):
            await asyncio.sleep(1)


async def _supervise(floor: Floor, display: subprocess.Popen[bytes] | None) -> None:
    done: dict[str, set[int]] = {}
    tasks = [
        asyncio.create_task(stickperson(floor.port, "craps-1", delay=min(1.5, floor.interval))),
        asyncio.create_task(progress(floor.port, done)),
    ]
    try:
        while True:
            floor.check()
            if display is not None and display.poll() is not None:
                return
            if floor.rounds is not None and all(
                len(done.get(t.table_id, ())) >= floor.rounds for t in TABLES
            ):
                return
            await asyncio.sleep(0.2)
    finally:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            # Ctrl-C (asyncio.run cancels this task): the stop has begun, and it ends, at
            # the latest, STOP_DEADLINE after it (contract.tasks.exit_after: one line, status
            # 70), as lammer web's, display's and records' do. The stop's own steps are
            # bounded; asyncio.run's last wait for every task and its executor's threads is
            # not. (A demo started with SIGINT ignored, as a shell's background job is,
            # never sees a Ctrl-C at all: Python keeps an ignored SIGINT ignored.)
            exit_after(STOP_DEADLINE, "lammer demo")
        # Asked again until they end (a cancellation can be lost: contract.tasks), and
        # bounded all the same: a stop must never wait on a client for ever.
        await cancel_and_wait(tasks, within=STOP_TIMEOUT)


def run(args: argparse.Namespace) -> int:
    """Run the demo floor until Ctrl-C, a closed terminal, SIGTERM or ``--rounds``."""
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="lammer-demo-"))
    workdir.mkdir(parents=True, exist_ok=True)
    floor = Floor(
        workdir,
        interval=args.interval,
        rounds=args.rounds,
        seed=args.seed,
        web_port=args.web_port,
    )
    display_argv = [_bin("lammer"), "display", "--host", "127.0.0.1", "--port", str(floor.port)]
    display_argv += ["--prefix", PREFIX]
    for t in TABLES:
        display_argv += ["--table", t.table_id]
    _say(f"lammer demo: work folder {workdir} (configs, journals, logs)")
    display: subprocess.Popen[bytes] | None = None
    stopped_by: str | None = None
    for signum in STOP_SIGNALS:
        signal.signal(signum, _raise_stopped)
    try:
        floor.start()
        print(floor.urls(), flush=True)
        (workdir / "urls.txt").write_text(floor.urls() + "\n")
        if args.rounds is None:
            # The terminal is the display's: it stays in our session and gets its signals.
            display = subprocess.Popen(display_argv, **supervised(own_session=False))  # noqa: S603  this venv's lammer display, flags from the demo's plan
        asyncio.run(_supervise(floor, display))
        if args.rounds is not None:
            subprocess.run([*display_argv, "--once"], check=False, **supervised(own_session=False))  # noqa: S603  the same argv, once
    except KeyboardInterrupt:
        stopped_by = "SIGINT"
    except Stopped as exc:
        stopped_by = str(exc)
    finally:
        # Stopping is bounded; a second Ctrl-C (or the SIGHUP and SIGTERM of a closing
        # session) must not cut it short and leave children behind.
        for signum in (signal.SIGINT, *STOP_SIGNALS):
            signal.signal(signum, signal.SIG_IGN)
        if stopped_by is not None:
            _say(f"lammer demo: {stopped_by}: stopping the daemons, simulators and broker")
        if display is not None and display.poll() is None:
            display.send_signal(signal.SIGINT)
            try:
                display.wait(timeout=5)
            except subprocess.TimeoutExpired:
                display.kill()
                display.wait()
        floor.stop()
    _say(f"lammer demo: stopped; journals and logs are in {workdir}")
    return 0


def _say(text: str) -> None:
    """A line for the operator; nothing if the terminal is gone (a closed terminal gives
    EIO, a closed pipe EPIPE): stopping cleanly matters more than saying so."""
    try:
        print(text, flush=True)
    except OSError:
        with contextlib.suppress(OSError):
            discard(sys.stdout)  # nor a complaint at exit about what stayed buffered
