"""``lammer demo`` as a user runs it: a real subprocess that starts a broker, three
simulated tables and their daemons, plays a few rounds and prints the final picture."""

from __future__ import annotations

import fcntl
import http.cookiejar
import json
import os
import re
import select
import signal
import subprocess
import sys
import termios
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from deploy.broker import free_port
from tests.conftest import sigint_as_from_a_terminal

# lammer demo starts its own brokers, cluster and web server in child processes.
pytestmark = pytest.mark.service

LAMMER = str(Path(sys.executable).parent / "lammer")

UP_WITHIN_S = 300
"""How long the demo may take to be up (a broker, initdb and PostgreSQL, two Argon2
``adduser`` runs, lammer web, lammer records, three simulators, three daemons, one after
another) and to show what a test waits for: a bound on a failure only, on a loaded machine
(one ``adduser`` took over 30 s at load 13)."""

XDIST = ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT")
"""Kept in a demo's environment: its ``free_port()`` then picks from this worker's block of
ports (``deploy.broker.worker_share``), never one another worker has handed out."""

STOPPED_WITHIN_S = 180
"""How long a demo's children may take to stop once it is asked to (or killed): its own
steps are bounded (a display 5 s, daemons 10 s, simulators 10 s, the broker 5 s, PostgreSQL
20 s; lammer web ends itself within 20 s): a bound on a hang only, on a loaded machine."""


def web_port() -> list[str]:
    """``--web-port`` on a free port: the demo's default, 8080, is one port for every test
    running at once (pytest-xdist) and for anyone's demo on the machine."""
    return ["--web-port", str(free_port())]


def test_demo_plays_rounds_on_three_tables_and_stops_cleanly(tmp_path: Path) -> None:
    workdir = tmp_path / "floor"
    argv = [LAMMER, "demo", "--rounds", "2", "--interval", "0", "--seed", "7", *web_port()]
    done = subprocess.run(
        [*argv, "--workdir", str(workdir)],
        capture_output=True,
        text=True,
        # Its start (UP_WITHIN_S), two rounds, and its stop (demo.STOP_DEADLINE, 120 s).
        timeout=UP_WITHIN_S + 200,
        check=False,
        env={
            "COLUMNS": "100",
            "PATH": "/usr/bin:/bin:/usr/sbin",
            **{name: os.environ[name] for name in XDIST if name in os.environ},
        },
    )
    assert done.returncode == 0, done.stdout + done.stderr
    for table in ("uth-1", "craps-1", "bj-1"):
        assert f"Table {table}" in done.stdout
    assert done.stdout.count("online") >= 3
    # lammer web ran beside them, and its three kinds of page were printed.
    for page in ("/table/uth-1", "/pit", "/stick/craps-1"):
        assert page in done.stdout
    assert '"serving"' in (workdir / "web.log").read_text()
    # lammer records ran beside them on a private PostgreSQL, and said how to report, and
    # where the reports page is, with a pit user's login.
    assert "lammer records report --db" in done.stdout
    assert "/reports  (pit user pit, password " in done.stdout
    assert '"subscribed"' in (workdir / "records.log").read_text()
    # Every daemon journaled what it published, and stopped cleanly (offline after SIGTERM).
    for table, topic in (("uth-1", "cover_all/result"), ("bj-1", "bust_bonus/result")):
        export = subprocess.run(
            [LAMMER, "journal", str(workdir / f"{table}.db"), "--kind", "publish"],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        rows = [json.loads(line) for line in export.stdout.splitlines()]
        results = {r["payload"]["round_id"] for r in rows if r["topic"] == topic}
        assert len(results) >= 2, f"{table}: {results}"
        seqs = [r["seq"] for r in rows]
        assert seqs == sorted(seqs)
    logs = {p.name: p.read_text() for p in workdir.glob("lammer-*.log")}
    assert len(logs) == 3
    for name, text in logs.items():
        assert '"table stopped"' in text, name


# ---------------------------------------------------------------------------------------
# Process lifetime: no child outlives the demo, however it is stopped.


def _proc_stat(pid: int) -> tuple[str, int, int] | None:
    """(state, ppid, start time) of a process, or None once it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[1].split()
    return fields[0], int(fields[1]), int(fields[19])


def descendants(root: int) -> dict[int, int]:
    """Every process below ``root``, as pid -> start time (to tell a reused pid apart)."""
    children: dict[int, list[int]] = {}
    starts: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (stat := _proc_stat(int(entry.name))) is not None:
            children.setdefault(stat[1], []).append(int(entry.name))
            starts[int(entry.name)] = stat[2]
    found: dict[int, int] = {}
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found[child] = starts[child]
            todo.append(child)
    return found


def _cmdline(pid: int) -> str | None:
    """The command line of a process, or None once it is gone (it may exit and be reaped
    between any two reads of /proc)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    return raw.replace(b"\0", b" ").decode(errors="replace")


def still_running(pids: dict[int, int]) -> list[str]:
    """Those of ``pids`` still running (not reused, not a zombie), with their command."""
    alive = []
    for pid, start in pids.items():
        stat = _proc_stat(pid)
        if stat is None or stat[2] != start or stat[0] == "Z":
            continue
        if (cmdline := _cmdline(pid)) is not None:
            alive.append(f"{pid}: {cmdline}")
    return alive


def hang_report(pid: int, children: dict[int, int]) -> str:
    """What a process that does not stop is doing: each thread's kernel wait channel and
    state, and which of ``children`` still run."""
    threads = []
    for task in sorted(Path(f"/proc/{pid}/task").glob("*")):
        try:
            comm = (task / "comm").read_text().strip()
            wchan = (task / "wchan").read_text().strip()
            state = (task / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        threads.append(f"{task.name} {comm} {state} {wchan}")
    return f"threads: {threads}; children still running: {still_running(children)}"


def mentioning(text: str) -> list[str]:
    """Running processes whose command line holds ``text`` (the demo's work folder)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        cmdline = _cmdline(int(entry.name))
        stat = _proc_stat(int(entry.name))
        if cmdline is not None and text in cmdline and stat is not None and stat[0] != "Z":
            found.append(f"{entry.name}: {cmdline}")
    return found


def floor_running(workdir: Path) -> bool:
    """Every demo daemon has logged that its table runs."""
    logs = [workdir / f"lammer-{table}.log" for table in ("uth-1", "craps-1", "bj-1")]
    return all(log.exists() and '"table running"' in log.read_text() for log in logs)


def device_events(workdir: Path) -> int:
    """The fewest device events any demo daemon has logged so far."""
    logs = [workdir / f"lammer-{table}.log" for table in ("uth-1", "craps-1", "bj-1")]
    return min(log.read_text().count('"device event"') if log.exists() else 0 for log in logs)


def wait_until(check: Callable[[], bool], what: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + UP_WITHIN_S
    while not check():
        assert proc.poll() is None, f"the demo exited ({proc.returncode}) before: {what}"
        assert time.monotonic() < deadline, f"gave up waiting for: {what}"
        time.sleep(0.1)


class DemoReports:
    """The demo's ``/reports`` as its printed pit user sees it (``urls.txt``)."""

    def __init__(self, urls: str) -> None:
        found = re.search(
            r"reports +(http://[0-9.:]+)/reports +\(pit user (\S+), password (\S+)\)", urls
        )
        assert found is not None, urls
        self.root, self.user, self.password = found.groups()
        self.opener = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar())
        )
        self.logged_in = False

    def _json(self, path: str, body: dict[str, str] | None = None, token: str = "") -> Any:
        request = urllib.request.Request(  # noqa: S310  http to the demo's own server
            f"{self.root}{path}",
            data=None if body is None else json.dumps(body).encode(),
            headers={
                "Content-Type": "application/json",
                "Origin": self.root,
                "X-CSRF-Token": token,
            },
        )
        with self.opener.open(request, timeout=30) as response:
            return json.loads(response.read())

    def has_rounds(self) -> bool:
        """Whether the report of the gaming day now holds a round (logs in first)."""
        if not self.logged_in:
            token = self._json("/api/session")["login_token"]
            self._json("/api/login", {"user": self.user, "password": self.password}, token)
            self.logged_in = True
        try:
            data = self._json("/api/reports")
        except urllib.error.HTTPError as exc:
            # Until the service has made its tables: the store refuses, in a sentence.
            if exc.code != 503:
                raise
            return False
        return any(day["rounds"] or day["rolls"] for day in data["days"])


class DemoOnTerminal:
    """``lammer demo`` as a user runs it: on a terminal of its own (a pty as the controlling
    terminal of its session, the live display drawing on it), read as a terminal would."""

    def __init__(self, workdir: Path, *, shell: bool = False) -> None:
        self.workdir = workdir
        self.master, slave = os.openpty()

        def controlling_terminal() -> None:
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        argv = [LAMMER, "demo", "--interval", "0.5", "--workdir", str(workdir), *web_port()]
        if shell:  # a shell leads the session, and stays: its exit would hang up the terminal
            argv = ["bash", "-c", '"$@"; sleep 60', "-", *argv]
        self.proc = subprocess.Popen(
            argv,
            stdin=slave,
            stdout=slave,
            stderr=slave,
            start_new_session=True,
            preexec_fn=controlling_terminal,
            env={**os.environ, "TERM": "xterm", "COLUMNS": "120", "LINES": "40"},
        )
        os.close(slave)

    def read(self) -> None:
        """Take what the display drew (it must never block on a full terminal)."""
        while select.select([self.master], [], [], 0)[0]:
            try:
                os.read(self.master, 65536)
            except OSError:
                return

    def wait_running(self) -> dict[int, int]:
        """Wait until the whole floor runs; its processes (``descendants``)."""

        def running() -> bool:
            self.read()
            return floor_running(self.workdir)

        wait_until(running, "three tables running", self.proc)
        children = descendants(self.proc.pid)
        commands = " ".join(still_running(children))
        for part in ("mosquitto", "lammer-sim shuffler", "lammer-sim dice", "lammer run"):
            assert part in commands
        assert "lammer display" in commands
        return children

    def wait_exit(self) -> int:
        deadline = time.monotonic() + STOPPED_WITHIN_S
        while self.proc.poll() is None and time.monotonic() < deadline:
            self.read()
            time.sleep(0.05)
        return self.proc.wait(timeout=1)

    def close(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        os.close(self.master)


def test_a_closed_terminal_leaves_no_child_running(tmp_path: Path) -> None:
    # The terminal closes: SIGHUP to its foreground process group. Mosquitto takes SIGHUP
    # as "reload" and outlived the demo; the daemons died of it without closing journals.
    workdir = tmp_path / "floor"
    demo = DemoOnTerminal(workdir)
    try:
        children = demo.wait_running()
        os.killpg(demo.proc.pid, signal.SIGHUP)
        assert demo.wait_exit() == 0
    finally:
        demo.close()
    assert still_running(children) == []
    assert mentioning(str(workdir)) == []
    # The daemons were stopped, not hung up on: each closed its journal and said so.
    for table in ("uth-1", "craps-1", "bj-1"):
        assert '"table stopped"' in (workdir / f"lammer-{table}.log").read_text(), table


def test_children_die_with_a_killed_demo(tmp_path: Path) -> None:
    # SIGKILL gives the demo no chance to stop anything: the kernel tells each child,
    # the display included (PR_SET_PDEATHSIG), and each stops on its own. The demo runs
    # under a shell, as from a prompt: its death does not hang up the terminal.
    workdir = tmp_path / "floor"
    demo = DemoOnTerminal(workdir, shell=True)  # noqa: S604  the helper's flag: run the demo under a shell, as typed
    try:
        children = demo.wait_running()
        [demo_pid] = [pid for pid, start in children.items() if " demo " in (_cmdline(pid) or "")]
        os.kill(demo_pid, signal.SIGKILL)  # the demo alone, not its group
        del children[demo_pid]
        # Each child stops on its own (the kernel's SIGTERM); this bounds a hang only.
        # lammer web once outlived 90 s: a cancellation lost to Python 3.11's wait_for kept
        # its MQTT links reconnecting (contract.tasks); a stuck stop now ends itself within
        # STOP_DEADLINE_S (20 s) of the signal.
        deadline = time.monotonic() + STOPPED_WITHIN_S
        while still_running(children) and time.monotonic() < deadline:
            demo.read()
            time.sleep(0.1)
    finally:
        demo.close()
    assert still_running(children) == []
    assert mentioning(str(workdir)) == []


def test_ctrl_c_stops_everything_with_no_unretrieved_mqtt_error(tmp_path: Path) -> None:
    workdir = tmp_path / "floor"
    argv = [LAMMER, "demo", "--rounds", "1000", "--interval", "0.5", "--workdir", str(workdir)]
    proc = subprocess.Popen(
        [*argv, *web_port()],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        preexec_fn=sigint_as_from_a_terminal,
    )
    try:
        wait_until(lambda: floor_running(workdir), "three tables running", proc)
        # A few frames and requests on the way: every table has journaled device events.
        wait_until(lambda: device_events(workdir) >= 3, "a few frames at every table", proc)
        children = descendants(proc.pid)
        # broker, lammer web, 3 simulators, 3 daemons, lammer records and its PostgreSQL
        # (whose own processes, "postgres: checkpointer", the backends and the like, are its
        # business). Those are told apart by their parent, the postmaster, not by their
        # title: a backend just forked (a connection of lammer web's or records') has the
        # postmaster's command line, or none, until it retitles itself "postgres: ...".
        postmaster = [
            pid
            for pid in children
            if (stat := _proc_stat(pid)) is not None
            and stat[1] == proc.pid
            and "/postgres " in (_cmdline(pid) or "")
        ]
        assert len(postmaster) == 1, still_running(children)
        floor = {
            pid: start
            for pid, start in children.items()
            if (stat := _proc_stat(pid)) is None or stat[1] != postmaster[0]
        }
        running = still_running(floor)
        assert len(running) == 10, still_running(children)
        # lammer web reads the store as its reader: the printed pit user sees the demo's
        # rounds on /reports (its data, /api/reports).
        reports = DemoReports((workdir / "urls.txt").read_text())
        wait_until(reports.has_rounds, "rounds on /reports", proc)
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C: the terminal's foreground group
        # The demo bounds its own stop (three groups of 10 s, the broker, PostgreSQL; and at
        # the latest it exits 70 after demo.STOP_DEADLINE, 120 s); this only bounds a hang.
        # What the demo and its children are doing 100 s in, if it has not stopped, is kept
        # for the failure's message.
        hung = ""
        try:
            out, err = proc.communicate(timeout=100)
        except subprocess.TimeoutExpired:
            hung = hang_report(proc.pid, children)
            out, err = proc.communicate(timeout=80)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    assert proc.returncode == 0, (err, hung)
    assert not hung, hung
    assert b"never retrieved" not in err
    assert b"Traceback" not in err
    assert b"stopped; journals and logs are in" in out
    assert still_running(children) == []
    assert mentioning(str(workdir)) == []
    for log in workdir.glob("*.log"):
        assert "never retrieved" not in log.read_text(), log.name
    for table in ("uth-1", "craps-1", "bj-1"):
        text = (workdir / f"lammer-{table}.log").read_text()
        assert '"table stopped"' in text, table
        # The daemons stopped while the broker was still up: offline was published.
        assert "could not publish offline" not in text, table
