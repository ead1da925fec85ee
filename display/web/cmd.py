"""``lammer web``: the table's screens in the browser; ``lammer web adduser NAME``.

``lammer web --mqtt-host H --mqtt-port P [--mqtt-user U --mqtt-password-file F]
[--terminal-user U --terminal-password-file F] [--listen HOST:PORT] [--users FILE]
[--prefix lammer] [--mqtt-ca-file CA] [--tls-cert F --tls-key F] [--records-db DSN]
[--config web.toml]`` serves ``/table/<id>``, ``/pit``, ``/stick/<id>`` and (pit users,
with ``--records-db``) ``/reports`` until SIGTERM or SIGINT. A bad configuration exits 2
with every problem.

``lammer web adduser [--role pit|stick ...] NAME --users FILE`` adds a user (or changes
the password and roles; the role is ``stick`` unless given: a stickperson), asking twice
on a terminal, or reading one line from standard input for scripts.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import getpass
import logging
import signal
import ssl
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING

import structlog

from contract.tasks import STOP_DEADLINE_S, cancel_and_wait, exit_after
from display.errors import ListenError, LoginRefused, UsersFileError, WebConfigError
from display.web.config import WebConfig, load_web_config
from display.web.users import ROLES, add_user, check_name, check_password

if TYPE_CHECKING:
    from display.web.server import WebState

SHUTDOWN_S = 5.0
"""Seconds a stopping server waits for requests in flight before it closes them."""

_OPTIONS = (
    ("--mqtt-host", "mqtt_host", str, "the broker's host (default 127.0.0.1)"),
    ("--mqtt-port", "mqtt_port", int, "the broker's port (default 1883)"),
    ("--mqtt-user", "mqtt_user", str, "the read-only display user"),
    ("--mqtt-password-file", "mqtt_password_file", Path, "file holding its password"),
    ("--terminal-user", "terminal_user", str, "the MQTT user that publishes requests"),
    ("--terminal-password-file", "terminal_password_file", Path, "file holding its password"),
    ("--prefix", "prefix", str, "topic prefix (default lammer)"),
    ("--listen", "listen", str, "HOST:PORT to serve (default 127.0.0.1:8080)"),
    ("--users", "users", Path, "the stickpersons' users file"),
    ("--keepalive", "keepalive", int, "seconds of silence before a page shows table closed"),
    ("--mqtt-ca-file", "mqtt_ca_file", Path, "MQTT over TLS: the CA the broker is verified with"),
    ("--tls-cert", "tls_cert", Path, "serve HTTPS with this certificate (with --tls-key)"),
    ("--tls-key", "tls_key", Path, "the certificate's private key (0600)"),
    ("--attract-seconds", "attract_seconds", int, "idle seconds before the attract view"),
    ("--records-db", "records_db", str, "/reports: the records store's read-only DSN"),
    ("--records-day-starts", "records_day_starts", str, "when a gaming day starts (06:00)"),
    ("--records-timezone", "records_timezone", str, "the floor's time zone (system's)"),
    ("--records-big-hit", "records_big_hit", int, "a big hit pays this to 1 or more (100)"),
    ("--metrics-listen", "metrics_listen", str, "serve Prometheus metrics on HOST:PORT (none)"),
    (
        "--metrics-allow-from",
        "metrics_allow_from",
        lambda text: [item.strip() for item in text.split(",") if item.strip()],  # a list
        "scrapers allowed besides this machine: ADDRESS[/BITS],...",
    ),
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``lammer web`` and its ``adduser`` subcommand."""
    parser.add_argument("--config", type=Path, help="web.toml with the same keys (a_b for --a-b)")
    for flag, dest, kind, help_text in _OPTIONS:
        parser.add_argument(flag, dest=dest, type=kind, default=None, help=help_text)
    sub = parser.add_subparsers(dest="web_command", metavar="adduser")
    add = sub.add_parser("adduser", help="add a user (stickperson, pit) to the users file")
    add.add_argument(
        "--role",
        dest="roles",
        action="append",
        choices=ROLES,
        help="pit (acknowledges alarms) or stick (decides rolls); repeat for both; default stick",
    )
    add.add_argument("name", help="the user name (it becomes the requests' operator)")
    add.add_argument(
        "--users",
        dest="adduser_users",
        metavar="FILE",
        type=Path,
        required=True,
        help="the users file to add to (created 0600; lammer web --users reads it)",
    )


def run(args: argparse.Namespace) -> int:
    """``lammer web`` (0 after a clean stop, 2 for a bad configuration) or ``adduser``."""
    if args.web_command == "adduser":
        return adduser(args.name, args.adduser_users, args.roles or ["stick"])
    overrides = {dest: getattr(args, dest) for _, dest, _, _ in _OPTIONS}
    try:
        config = load_web_config(args.config, overrides)
    except WebConfigError as exc:
        print(f"lammer web: {exc}", file=sys.stderr)
        return 2
    _configure_logging()
    try:
        asyncio.run(serve(config))
    except (UsersFileError, WebConfigError, ListenError, LoginRefused) as exc:
        print(f"lammer web: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        pass
    return 0


async def serve(  # the server's life in order, start to shutdown
    config: WebConfig,
    *,
    ready: asyncio.Event | None = None,
) -> None:
    """Serve until SIGTERM or SIGINT (or cancellation)."""
    from aiohttp import web

    from display.web.server import build_app, make_state

    state = make_state(config)
    app = build_app(state)
    runner = web.AppRunner(
        app,
        # The request parser's bounds: a request line, a header, the number of headers.
        max_line_size=4096,
        max_field_size=4096,
        max_headers=64,
        access_log=None,
        # A stop waits at most SHUTDOWN_S for requests in flight (pages are closed first,
        # and reconnect to the next server): SIGTERM from systemd or a killed demo ends it
        # promptly. (On the runner: aiohttp deprecates it on the site.)
        shutdown_timeout=SHUTDOWN_S,
    )
    await runner.setup()
    host, port = config.listen_address
    try:
        tls = config.http_tls()
    except (OSError, ssl.SSLError) as exc:
        raise WebConfigError(None, [f"tls_cert, tls_key: cannot be used: {exc}"]) from exc
    metrics = contextlib.AsyncExitStack()
    site = web.TCPSite(runner, host, port, ssl_context=tls)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()

    def stopping() -> None:
        if not stop.is_set():  # the last resort of a stop that hangs (contract.tasks)
            exit_after(STOP_DEADLINE_S, "lammer web")
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stopping)
    try:
        try:
            await site.start()
        except OSError as exc:
            raise ListenError(config.listen, exc) from exc
        await metrics.enter_async_context(_metrics_served(config, state))
        log = structlog.get_logger("lammer.web")
        if config.password_in_clear:
            log.warning(
                "MQTT passwords go in clear to a broker on the network: give mqtt_ca_file "
                "(the floor's ca.crt, or the broker's --tls-ca)",
                brokers=config.mqtt_host,
            )
        log.info(
            "serving",
            listen=config.listen,
            metrics=config.metrics_listen,
            scheme="https" if config.https else "http",
            version=state.version,
        )
        if ready is not None:
            ready.set()
        # Until stopped, or until a user's login is refused from the start (a wrong
        # password file: one sentence and exit 2, not "broker unreachable" forever).
        watches = (state.follower.login, state.terminal.login)
        waiting = [asyncio.create_task(stop.wait())]
        waiting += [asyncio.create_task(w.gave_up.wait()) for w in watches]
        try:
            await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
        finally:
            await cancel_and_wait(waiting)
        for watch in watches:
            if watch.refused is not None:
                raise watch.refused
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
        await metrics.aclose()
        await runner.cleanup()


@contextlib.asynccontextmanager
async def _metrics_served(config: WebConfig, state: WebState) -> AsyncIterator[None]:
    """The Prometheus listener (``metrics_listen``) while inside, if one is asked for."""
    settings = config.metrics()
    if settings is None:
        yield
        return
    from display.web.metrics import web_registry
    from metrics.endpoint import MetricsServer

    server = MetricsServer(web_registry(state), settings)
    try:
        await server.start()
    except OSError as exc:
        raise ListenError(str(settings), exc) from exc
    try:
        yield
    finally:
        await server.stop()


def _configure_logging() -> None:
    renderer: structlog.types.Processor = (
        structlog.dev.ConsoleRenderer()
        if sys.stderr.isatty()
        else structlog.processors.JSONRenderer()
    )
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.INFO),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        cache_logger_on_first_use=True,
    )


def adduser(name: str, users: Path, roles: list[str]) -> int:
    """Add ``name`` with ``roles`` to ``users`` (created 0600), or change its password and
    roles."""
    try:
        check_name(name)
        if sys.stdin.isatty():
            password = getpass.getpass(f"password for {name}: ")
            if getpass.getpass("again: ") != password:
                print("lammer web adduser: the two passwords differ", file=sys.stderr)
                return 1
        else:
            password = sys.stdin.readline().rstrip("\r\n")
        check_password(password)
        new = add_user(users, name, password, roles)
    except UsersFileError as exc:
        print(f"lammer web adduser: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"lammer web adduser: {users}: {exc.strerror}", file=sys.stderr)
        return 1
    what = "added" if new else "changed the password and roles of"
    print(f"{what} {name} ({', '.join(sorted(set(roles)))}) in {users}")
    return 0
