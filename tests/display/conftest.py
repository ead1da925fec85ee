"""Fixtures of the screens' tests: a Mosquitto with password-protected users, ``lammer web``
as a real subprocess, one Chromium for the session, and tables run by the integration
harness (real daemon, simulator on a pty) whose daemon logs in as an MQTT user.

Users of the broker, with the roles ``lammer broker-config`` gives them (which plans one
daemon user per table known up front; these tests make tables as they go): ``daemon``
writes under ``lammer/``, ``display`` only reads (the tables, and the integrity alarms),
``terminal`` reads and publishes ``request/...`` only, ``records`` publishes the integrity
alarms (``lammer-floor/integrity/<table>``) and the software status
(``lammer-floor/software/<table>``). Anonymous clients may only read: the
harness's recorder is one.
"""

from __future__ import annotations

import asyncio
import getpass
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from PIL import Image
from playwright.async_api import Browser, BrowserContext, Page, async_playwright, expect

from deploy.broker import Broker, free_port, wait_serving
from tests.helpers.browser import launch
from tests.integration.harness import Table

PASSWORDS = {
    "daemon": "daemon-secret-1",
    "display": "display-secret-2",
    "terminal": "term-3-secret",
    "records": "records-secret-4",
}
STICKPERSON = ("alice", "correct horse battery")
KEEPALIVE = 6
"""``lammer web --keepalive``: seconds of silence before a page shows "table closed"."""

# Playwright's expect waits 5 s by default: a page's answer after a server round trip (a
# login, a page load) has taken longer on a loaded machine. A bound on a failure only: an
# expectation met returns at once.
expect.set_options(timeout=15_000)

ACL = """\
# anonymous clients (the tests' recorders): read only
topic read lammer/#
topic readwrite test-probe/#

user daemon
topic readwrite lammer/#

user display
topic read lammer/#
topic read lammer-floor/integrity/+
topic read lammer-floor/software/+

user records
topic write lammer-floor/integrity/+
topic write lammer-floor/software/+

user terminal
topic read lammer/#
topic write lammer/+/request/#
"""


@dataclass
class AuthBroker(Broker):
    """A private Mosquitto whose users have passwords and an ACL (see the module docstring)."""

    credentials: Path = field(init=False)

    def start(self) -> None:
        """Write the password file, the ACL and one credentials file per user, then start."""
        self.credentials = self.workdir / "credentials"
        self.credentials.mkdir(exist_ok=True)
        passwd = self.workdir / "passwd"
        passwd.unlink(missing_ok=True)
        for user, password in PASSWORDS.items():
            flags = ["-c"] if not passwd.exists() else []
            subprocess.run(
                ["mosquitto_passwd", *flags, "-b", str(passwd), user, password],
                check=True,
                capture_output=True,
            )
            path = self.credentials / user
            path.write_text(password + "\n")
            path.chmod(0o600)
        passwd.chmod(0o600)
        (self.workdir / "acl").write_text(ACL)
        self.config_file = self.workdir / "mosquitto.conf"  # run as written here
        self.conf.write_text(
            f"listener {self.port} 127.0.0.1\n"
            # Started as root, Mosquitto drops to user mosquitto, which cannot read the
            # test's 0600 files: stay the user that runs the tests (a no-op otherwise).
            f"user {getpass.getuser()}\n"
            "allow_anonymous true\n"
            f"password_file {passwd}\n"
            f"acl_file {self.workdir / 'acl'}\n"
            "persistence false\n"
            "set_tcp_nodelay true\n"
            "log_dest stderr\nlog_type error\nlog_type warning\n"
        )
        super().start()


@pytest.fixture(scope="session")
def auth_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AuthBroker]:
    """One broker with users for the session."""
    broker = AuthBroker(tmp_path_factory.mktemp("auth-broker"))
    broker.start()
    yield broker
    broker.stop()


@dataclass
class WebServer:
    """``lammer web`` as a subprocess."""

    proc: subprocess.Popen[bytes]
    url: str
    log: Path
    users: Path

    def health(self) -> dict[str, Any]:
        """``GET /api/health``."""
        with urllib.request.urlopen(f"{self.url}/api/health", timeout=5) as response:  # noqa: S310  http to the test's own server
            body: dict[str, Any] = json.loads(response.read())
            return body

    def log_text(self) -> str:
        """What the server logged."""
        return self.log.read_text(errors="replace")


def start_web(
    workdir: Path, broker: AuthBroker, *extra: str, env: dict[str, str] | None = None
) -> WebServer:
    """Start ``lammer web`` as the display and terminal users, with one stickperson;
    ``env`` is added to the server's environment (``PGPASSFILE``)."""
    bin_dir = Path(sys.executable).parent
    users = workdir / "users"
    if not users.exists():
        done = subprocess.run(
            [str(bin_dir / "lammer"), "web", "adduser", STICKPERSON[0], "--users", str(users)],
            input=(STICKPERSON[1] + "\n").encode(),
            capture_output=True,
            check=False,
        )
        assert done.returncode == 0, done.stderr.decode()
    port = free_port()
    log = workdir / "web.log"
    argv = [
        str(bin_dir / "lammer"),
        "web",
        "--mqtt-host",
        broker.host,
        "--mqtt-port",
        str(broker.port),
        "--mqtt-user",
        "display",
        "--mqtt-password-file",
        str(broker.credentials / "display"),
        "--terminal-user",
        "terminal",
        "--terminal-password-file",
        str(broker.credentials / "terminal"),
        "--listen",
        f"127.0.0.1:{port}",
        "--users",
        str(users),
        "--keepalive",
        str(KEEPALIVE),
        *extra,
    ]
    with log.open("ab") as out:
        proc = subprocess.Popen(
            argv, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})}
        )
    server = WebServer(proc, f"http://127.0.0.1:{port}", log, users)
    # A bound on a failure only: on a loaded machine the interpreter's imports alone took
    # over 20 s (a run of seven helpers' tests beside it: an empty log at 20 s).
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert proc.poll() is None, server.log_text()
        if wait_serving(proc.pid, "127.0.0.1", port, timeout=0.2):
            health = server.health()
            if health["broker"] and health["terminal"]:
                return server
        time.sleep(0.05)
    proc.kill()
    raise AssertionError(f"lammer web did not come up:\n{server.log_text()}")


def stop_web(server: WebServer) -> None:
    """Stop the server (SIGTERM) and reap it."""
    if server.proc.poll() is None:
        server.proc.terminate()
        try:
            server.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.proc.kill()
            server.proc.wait()


@pytest.fixture(scope="session")
def web(tmp_path_factory: pytest.TempPathFactory, auth_broker: AuthBroker) -> Iterator[WebServer]:
    """One ``lammer web`` for the session (every test uses tables of its own)."""
    server = start_web(tmp_path_factory.mktemp("web"), auth_broker)
    yield server
    stop_web(server)
    assert server.proc.returncode == 0, server.log_text()


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def browser() -> AsyncIterator[Browser]:
    """Debian's Chromium, headless, once per session (never a downloaded browser); a fresh
    profile (Playwright gives every launch a new temporary user data folder)."""
    # The session's loop outlives every test: give it one executor thread, started now, so
    # the name lookups run in it are not taken for threads a test leaked.
    loop = asyncio.get_running_loop()
    loop.set_default_executor(ThreadPoolExecutor(max_workers=1, thread_name_prefix="session"))
    await loop.run_in_executor(None, time.monotonic)
    async with async_playwright() as playwright:
        launched = await launch(playwright)
        yield launched
        await launched.close()


@pytest_asyncio.fixture(loop_scope="session")
async def context(browser: Browser) -> AsyncIterator[BrowserContext]:
    """A browser context of the test's own (its own cookies), 1920x1080."""
    ctx = await browser.new_context(viewport={"width": 1920, "height": 1080})
    yield ctx
    await ctx.close()


@pytest_asyncio.fixture(loop_scope="session")
async def page(context: BrowserContext) -> AsyncIterator[Page]:
    """A page that fails the test on a JavaScript error or a refused resource (a CSP
    violation is a console error)."""
    errors: list[str] = []
    new = await context.new_page()
    new.on("pageerror", lambda exc: errors.append(str(exc)))
    new.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    yield new
    assert not errors, f"JavaScript errors: {errors}"


MakeTable = Callable[[str], Table]


@pytest_asyncio.fixture(loop_scope="session")
async def make_table(tmp_path: Path, auth_broker: AuthBroker) -> AsyncIterator[MakeTable]:
    """Tables of this test on the session's broker, their daemons logged in as user
    ``daemon``; all stopped at the end."""
    tables: list[Table] = []

    def make(game: str) -> Table:
        workdir = tmp_path / f"table{len(tables) + 1}"
        workdir.mkdir()
        # The daemon logs in as user daemon (the harness's recorder reads anonymously).
        login = ("daemon", auth_broker.credentials / "daemon")
        table = Table(workdir, auth_broker, game, mqtt_login=login)
        tables.append(table)
        return table

    yield make
    for table in tables:
        await table.close()


def screenshot_dir() -> Path:
    """Where the tests write their screenshots: ``$LAMMER_SCREENSHOTS`` or a temp folder."""
    chosen = os.environ.get("LAMMER_SCREENSHOTS")
    path = Path(chosen) if chosen else Path(tempfile.gettempdir()) / "lammer-screenshots"
    path.mkdir(parents=True, exist_ok=True)
    return path


async def shoot(page: Page, name: str) -> None:
    """A screenshot for people to look at (``screenshot_dir``), quantised to 64 colours:
    the pages' flat palette loses nothing a reader sees, and docs/screens/ stays small."""
    path = screenshot_dir() / f"{name}.png"
    await page.screenshot(path=str(path))
    with Image.open(path) as image:
        small = image.convert("RGB").quantize(colors=64)
    small.save(path, optimize=True)


async def settle(seconds: float = 0.0) -> None:
    """Yield to the loop (the harness's recorder runs in it)."""
    await asyncio.sleep(seconds)
