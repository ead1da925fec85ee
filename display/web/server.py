"""The web server of ``lammer web``: pages, one WebSocket per page, the stickperson's actions.

Thin, as Home Assistant's ``http`` component and aiohttp's own examples are: it serves the
package's files, relays the store to the browsers and turns a logged-in stickperson's
action into an MQTT request. Everything that reaches it is treated as hostile:

* bounded input: request bodies (``client_max_size``), request lines and headers (the
  parser's limits), WebSocket messages (``max_msg_size``), the number of pages connected;
* table ids in URLs must match ``TABLE_ID_PATTERN`` (else 404);
* security headers on every response, a Content-Security-Policy that allows nothing but
  this origin (no inline script, no external font, image or connection);
* actions need a session (401 without), the session's CSRF token in ``X-CSRF-Token``, a
  same-origin ``Origin`` and a JSON body (403/415 otherwise); a refused action publishes
  nothing. Login needs the login token of ``/api/session`` (login CSRF) and is
  rate-limited per address and per user name (429 with ``Retry-After``).

Routes::

    GET  /                       -> /pit
    GET  /table/<id>             player display          GET /pit    pit view
    GET  /stick/<id>             stickperson terminal    GET /static/...
    GET  /reports                gaming-day reports (pit users; -> /login without a session)
    GET  /login[?next=/path]     log in, then back to the page that sent there
    GET  /ws[?table=<id>]        the live feed (one table, or every table)
    GET  /api/session            who is logged in; the CSRF token (or a login token)
    POST /api/login  /api/logout
    POST /api/users/<name>/unlock   a pit user lifts a name's login throttle
    POST /api/table/<id>/<roll_decision|void_roll|overturn>
    GET  /api/health             the broker link, tables seen, payloads dropped
    GET  /api/reports?day=&from=&to=&table=&area=   the report's data (pit users)
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import ipaddress
import json
import math
import re
import secrets
from collections import Counter
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Final

import structlog
from aiohttp import WSMsgType, web
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from yarl import URL

from contract.payloads import TABLE_ID_PATTERN
from contract.requests import REQUEST_MODELS, RequestBase
from contract.tasks import cancel_and_wait
from contract.vocabulary import lammer_version
from display.web.config import WebConfig
from display.web.relay import Follower, Hub, Terminal, TerminalUnavailable
from display.web.reports import ReportUnavailable, fetch, question, today, zone
from display.web.store import Store, wire
from display.web.throttle import ActionLimit
from display.web.users import (
    MAX_PASSWORD,
    NAME_PATTERN,
    RateLimit,
    Sessions,
    Users,
    device_cookie_name,
)

log = structlog.get_logger("lammer.web")

STATIC: Final = Path(__file__).parent / "static"
DEVICE_COOKIE_DAYS: Final = 365
"""How long a browser stays a known device of a user after a good login there."""
MAX_BODY: Final = 4096
"""Bytes of a request body: a login or an action is a few dozen."""
MAX_WS_MESSAGE: Final = 1024
"""Bytes of a WebSocket message from a browser: pages send nothing but pings."""
SESSION_COOKIE: Final = "lammer_session"
LOGIN_COOKIE: Final = "lammer_login"
TABLE: Final = "{table:" + TABLE_ID_PATTERN.strip("^$") + "}"

CSP: Final = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'none'; object-src 'none'; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'"
)
HSTS: Final = "max-age=31536000"
"""Strict-Transport-Security over HTTPS: a year, this host only (the pit's server may share
its domain with hosts that do not serve HTTPS)."""
SECURITY_HEADERS: Final = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
    "Permissions-Policy": "camera=(), microphone=(), geolocation=(), payment=(), usb=()",
}


# ---------------------------------------------------------------------------------------
# Action bodies: the contract's requests (contract.requests), less what is the server's

ACTIONS: Final[dict[str, type[RequestBase]]] = {
    name: REQUEST_MODELS[name] for name in ("roll_decision", "void_roll", "overturn", "alarm_ack")
}
"""What the browser may ask, each the contract's own request model: the server adds
``operator`` (the session's user, never the body's) and the terminal its ``request_id``."""

SERVER_FIELDS: Final = frozenset({"operator", "request_id"})
"""A request's fields that the server fills and a body may not carry."""


def _action(model: type[RequestBase], body: object, user: str) -> RequestBase:
    """The request a browser's body asks for, as ``user``: the body is a JSON object of the
    request's own fields (not ``operator`` or ``request_id``); a ``ValidationError`` or a
    ``ValueError`` with the field's name otherwise."""
    if not isinstance(body, dict):
        raise ValueError("body: must be a JSON object")
    for key in body:
        if key in SERVER_FIELDS or key not in model.model_fields:
            raise ValueError(f"{key}: not a field of this action (the operator is the session's)")
    return model.model_validate({**body, "operator": user})


ACTION_ROLES: Final[dict[str, str]] = {
    "roll_decision": "stick",
    "void_roll": "stick",
    "overturn": "stick",
    "alarm_ack": "pit",
}
"""The role a user needs for each action (the users file: ``lammer web adduser --role``):
a stickperson cannot acknowledge the pit's alarms, a pit user cannot decide a roll, unless
given both roles."""


class Login(BaseModel):
    """``POST /api/login``."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    user: Annotated[str, Field(min_length=1, max_length=64)]
    password: Annotated[str, Field(min_length=1, max_length=MAX_PASSWORD)]


# ---------------------------------------------------------------------------------------
# The application


@dataclass
class WebState:
    """What the handlers share (one per application)."""

    config: WebConfig
    store: Store
    hub: Hub
    follower: Follower
    terminal: Terminal
    users: Users
    sessions: Sessions
    # Login throttles (docs/floor/screens.md, security: the guess rate they allow).
    # A browser where the user logged in before (its device cookie) is judged by its own
    # count only, so guesses from elsewhere never lock the right person out of a known
    # terminal (OWASP's device cookies against lockout).
    per_address: RateLimit = field(default_factory=lambda: RateLimit(attempts=10))
    per_user: RateLimit = field(default_factory=lambda: RateLimit(attempts=20))
    per_device: RateLimit = field(default_factory=lambda: RateLimit(attempts=10))
    actions: ActionLimit = field(default_factory=ActionLimit)
    executor: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(max_workers=2, thread_name_prefix="argon2")
    )
    # The reports' queries (blocking psycopg) in threads of their own: a slow report never
    # holds up a login's hash.
    reports_executor: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(max_workers=2, thread_name_prefix="reports")
    )
    version: str = field(default_factory=lammer_version)
    request_timeout: float = 5.0
    pages_served: Counter[str] = field(default_factory=Counter)
    """Pages served, by page (the metrics: ``display.web.metrics``)."""
    websockets_opened: int = 0
    """WebSockets opened since the start (the metrics)."""


STATE: Final = web.AppKey("state", WebState)


def _error(status: int, message: str, **headers: str) -> web.Response:
    return web.json_response({"status": "error", "error": message}, status=status, headers=headers)


@web.middleware
async def _errors(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """API errors as JSON sentences; no traceback ever reaches a browser."""
    try:
        return await handler(request)
    except web.HTTPException as exc:
        if request.path.startswith("/api/") and exc.status >= 400:
            return _error(exc.status, exc.reason)
        raise
    except Exception:
        log.exception("request failed", path=request.path[:200])
        return _error(500, "internal error; see the server's log")


async def _security_headers(request: web.Request, response: web.StreamResponse) -> None:
    for name, value in SECURITY_HEADERS.items():
        response.headers.setdefault(name, value)
    if request.path.startswith("/api/"):
        response.headers["Cache-Control"] = "no-store"
    if request.secure:
        # Served over our own TLS (lammer web --tls-cert): browsers keep to HTTPS for a year.
        response.headers["Strict-Transport-Security"] = HSTS


def _page(name: str) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    path = STATIC / name

    async def handler(request: web.Request) -> web.StreamResponse:
        request.app[STATE].pages_served[path.stem] += 1
        return web.FileResponse(path, headers={"Cache-Control": "no-cache"})

    return handler


def _client_address(request: web.Request) -> str:
    peer = request.remote or "?"
    try:
        return str(ipaddress.ip_address(peer))
    except ValueError:
        return peer[:64]


def _same_origin(request: web.Request) -> bool:
    """A state-changing request must come from a page of this server: ``Origin`` (sent by
    every current browser on a POST) equals this host, and Fetch Metadata, when sent, says
    same-origin."""
    site = request.headers.get("Sec-Fetch-Site")
    if site is not None and site not in ("same-origin", "none"):
        return False
    origin = request.headers.get("Origin")
    if origin is None:
        return site is not None  # neither header: not a browser we serve
    return origin in (f"{request.scheme}://{request.host}", f"https://{request.host}")


async def _json_body(request: web.Request) -> Any:
    if request.content_type != "application/json":
        raise web.HTTPUnsupportedMediaType(reason="send JSON (Content-Type: application/json)")
    if request.content_length is not None and request.content_length > MAX_BODY:
        raise web.HTTPRequestEntityTooLarge(max_size=MAX_BODY, actual_size=request.content_length)
    raw = await request.content.read(MAX_BODY + 1)
    if len(raw) > MAX_BODY:
        raise web.HTTPRequestEntityTooLarge(max_size=MAX_BODY, actual_size=len(raw))
    try:
        return json.loads(raw)
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise web.HTTPBadRequest(reason="the body is not JSON") from None


def _cookie(response: web.StreamResponse, name: str, value: str, state: WebState) -> None:
    response.set_cookie(
        name,
        value,
        httponly=True,
        samesite="Strict",
        secure=state.config.cookies_secure,
        path="/",
        max_age=state.config.session_hours * 3600,
    )


async def session_info(request: web.Request) -> web.StreamResponse:
    """Who is logged in and the CSRF token; else a fresh login token (double-submit)."""
    state = request.app[STATE]
    session = state.sessions.get(request.cookies.get(SESSION_COOKIE))
    if session is not None:
        roles = sorted(state.users.roles(session.user))
        return web.json_response({"user": session.user, "csrf": session.csrf, "roles": roles})
    token = secrets.token_urlsafe(32)
    response = web.json_response(
        {"user": None, "login_token": token, "users_configured": state.users.configured}
    )
    _cookie(response, LOGIN_COOKIE, token, state)
    return response


async def login(  # a login's checks in order, each its answer
    request: web.Request,
) -> web.StreamResponse:
    """Check a user name and password; on success a new session cookie."""
    state = request.app[STATE]
    expected = request.cookies.get(LOGIN_COOKIE, "")
    sent = request.headers.get("X-CSRF-Token", "")
    if not _same_origin(request) or not expected or not hmac.compare_digest(expected, sent):
        return _error(403, "the login form has expired; reload the page")
    body = await _json_body(request)
    try:
        form = Login.model_validate(body)
    except ValidationError:
        return _error(400, "send a user name and a password")
    address = f"address:{_client_address(request)}"
    name = f"user:{form.user}"
    device_cookie = device_cookie_name(form.user)
    known = state.users.known_device(form.user, request.cookies.get(device_cookie))
    device = f"device:{known}"
    if known is not None:
        wait = state.per_device.retry_after([device])
    else:
        wait = max(state.per_address.retry_after([address]), state.per_user.retry_after([name]))
    if wait > 0:
        log.warning(
            "login refused: too many attempts",
            user=form.user[:64],
            address=address,
            known_device=known is not None,
        )
        return _error(
            429, "too many failed logins; wait and try again", **{"Retry-After": str(int(wait) + 1)}
        )
    loop = asyncio.get_running_loop()
    good = await loop.run_in_executor(state.executor, state.users.verify, form.user, form.password)
    if not good or not NAME_PATTERN.match(form.user):
        if known is not None:
            state.per_device.failed([device])
        else:
            state.per_address.failed([address])
            state.per_user.failed([name])
        log.warning(
            "login failed", user=form.user[:64], address=address, known_device=known is not None
        )
        return _error(401, "wrong user name or password")
    state.per_address.succeeded([address])
    if known is not None:
        state.per_device.succeeded([device])
    else:
        state.per_user.succeeded([name])
    session = state.sessions.create(form.user)
    log.info("login", user=form.user, address=address)
    roles = sorted(state.users.roles(session.user))
    response = web.json_response({"user": session.user, "csrf": session.csrf, "roles": roles})
    _cookie(response, SESSION_COOKIE, session.token, state)
    response.set_cookie(
        device_cookie,
        state.users.device_token(form.user, known),
        httponly=True,
        samesite="Strict",
        secure=state.config.secure_cookies,
        path="/api/login",
        max_age=DEVICE_COOKIE_DAYS * 86400,
    )
    response.del_cookie(LOGIN_COOKIE, path="/")
    return response


async def logout(request: web.Request) -> web.StreamResponse:
    """End the session."""
    state = request.app[STATE]
    token = request.cookies.get(SESSION_COOKIE)
    session = state.sessions.get(token)
    if session is None:
        return _error(401, "not logged in")
    if not _same_origin(request) or not hmac.compare_digest(
        session.csrf, request.headers.get("X-CSRF-Token", "")
    ):
        return _error(403, "refused: not sent by this server's page")
    state.sessions.end(token)
    response = web.json_response({"status": "ok"})
    response.del_cookie(SESSION_COOKIE, path="/")
    return response


async def unlock(request: web.Request) -> web.StreamResponse:
    """A pit user lifts the login throttle of a user name, so a stickperson locked out by
    someone's guesses gets back in at once from a new browser. The address throttles and the
    guesses' record stay; logged with who unlocked whom."""
    state = request.app[STATE]
    session = state.sessions.get(request.cookies.get(SESSION_COOKIE))
    if session is None:
        return _error(401, "log in first")
    if not _same_origin(request) or not hmac.compare_digest(
        session.csrf, request.headers.get("X-CSRF-Token", "")
    ):
        return _error(403, "refused: not sent by this server's page; reload it")
    if "pit" not in state.users.roles(session.user):
        log.warning("unlock refused: role", user=session.user)
        return _error(403, f"refused: {session.user} is not a pit user (adduser --role pit)")
    name = request.match_info["user"]
    if not NAME_PATTERN.match(name):
        return _error(400, "not a user name")
    state.per_user.succeeded([f"user:{name}"])
    log.warning("login throttle lifted", user=name, by=session.user)
    return web.json_response({"status": "ok", "unlocked": name})


async def action(request: web.Request) -> web.StreamResponse:
    """A stickperson's decision, published as MQTT user ``terminal`` with ``operator`` the
    logged-in user; the daemon's response is returned as it came."""
    state = request.app[STATE]
    table = request.match_info["table"]
    name = request.match_info["name"]
    session = state.sessions.get(request.cookies.get(SESSION_COOKIE))
    if session is None:
        log.warning("action refused: no session", table=table, action=name)
        return _error(401, "log in first")
    if not _same_origin(request) or not hmac.compare_digest(
        session.csrf, request.headers.get("X-CSRF-Token", "")
    ):
        log.warning("action refused: CSRF check", table=table, action=name, user=session.user)
        return _error(403, "refused: not sent by this server's page; reload it")
    wait = state.actions.retry_after(session.user, asyncio.get_running_loop().time())
    if wait > 0:
        # Not logged one by one: a flood would fill the log (the count is in /api/health).
        return _error(
            429,
            f"too many actions: at most {state.actions.rate:g} a second; wait and try again",
            **{"Retry-After": str(math.ceil(wait))},
        )
    model = ACTIONS.get(name)
    if model is None:
        return _error(404, "no such action")
    role = ACTION_ROLES[name]
    if role not in state.users.roles(session.user):
        log.warning("action refused: role", table=table, action=name, user=session.user, role=role)
        who = "a pit user" if role == "pit" else "a stickperson"
        return _error(
            403, f"refused: {session.user} is not {who} (lammer web adduser --role {role})"
        )
    body = await _json_body(request)
    try:
        parsed = _action(model, body, session.user)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "body"
        return _error(400, f"{where}: {first['msg']}")
    except ValueError as exc:
        return _error(400, str(exc))
    request_body = parsed.model_dump(mode="json", exclude={"request_id"})
    log.info("action", table=table, action=name, **request_body)
    try:
        answer = await state.terminal.request(table, name, request_body, wait=state.request_timeout)
    except TerminalUnavailable as exc:
        return _error(503, f"{exc}; try again")
    except TimeoutError:
        return _error(
            504, f"table {table} did not answer within {state.request_timeout:g} s; is it open?"
        )
    return web.json_response(
        {
            "status": answer["status"],
            "error": answer.get("error"),
            "request_id": answer.get("request_id"),
            "operator": session.user,
        }
    )


def _pit_user(request: web.Request) -> tuple[str | None, bool]:
    """The session's user (None: no session) and whether it has the pit role."""
    state = request.app[STATE]
    session = state.sessions.get(request.cookies.get(SESSION_COOKIE))
    if session is None:
        return None, False
    return session.user, "pit" in state.users.roles(session.user)


async def reports_page(request: web.Request) -> web.StreamResponse:
    """``/reports``: pit users only. Without a session, the login page (which comes back
    here); a session without the pit role (a stickperson) is refused with 403."""
    user, pit = _pit_user(request)
    if user is None:
        raise web.HTTPSeeOther(URL("/login").with_query(next=request.path_qs))
    if not pit:
        log.warning("reports refused: role", user=user)
        return web.FileResponse(
            STATIC / "denied.html", status=403, headers={"Cache-Control": "no-cache"}
        )
    request.app[STATE].pages_served["reports"] += 1
    return web.FileResponse(STATIC / "reports.html", headers={"Cache-Control": "no-cache"})


async def reports_data(request: web.Request) -> web.StreamResponse:
    """The report the page asks for (``display.web.reports``), as JSON; every failure is
    a sentence (400: the question; 503: no store configured, or it is down or refuses)."""
    state = request.app[STATE]
    user, pit = _pit_user(request)
    if user is None:
        return _error(401, "log in first")
    if not pit:
        return _error(403, f"refused: {user} is not a pit user (lammer web adduser --role pit)")
    config = state.config
    if config.records_db is None:
        return _error(
            503,
            "no records store is configured on this server "
            "(lammer web --records-db, or records_db in its configuration file)",
        )
    tz, tz_name = zone(config.records_timezone)
    try:
        asked = question(request.query, areas=config.areas, current=today(config.day_starts, tz))
    except ReportUnavailable as exc:
        return _error(exc.status, str(exc))
    loop = asyncio.get_running_loop()
    try:
        data = await loop.run_in_executor(
            state.reports_executor,
            lambda: fetch(
                config.records_db or "",
                asked,
                starts=config.day_starts,
                tz=tz,
                tz_name=tz_name,
                big_hit=config.records_big_hit,
            ),
        )
    except ReportUnavailable as exc:
        log.warning("report unavailable", user=user, error=str(exc))
        return _error(exc.status, str(exc))
    log.info("report", user=user, first=str(asked.first), last=str(asked.last))
    return web.json_response({"status": "ok", "areas": list(config.areas), **data})


HEALTH_FIELDS: Final[dict[str, str]] = {
    "version": "the web server's lammer version",
    "broker": "whether the display user's MQTT link is subscribed (true) or down (false)",
    "node": "the broker or floor node in use (HOST:PORT), null while the link is down",
    "terminal": "whether the terminal user's MQTT link (the stickperson's requests) is up",
    "integrity": "whether the subscription to lammer-floor/integrity/+ was granted (null: "
    "not tried yet; false: the broker refused it, by its ACL or while a floor node's "
    "JetStream elects leaders; the pit goes on without it and tries again every minute)",
    "tables": "how many tables the server has heard of",
    "pages": "how many pages are connected (WebSockets)",
    "actions_refused": "actions refused for a user's rate (429) since the server started",
    "dropped": "payloads dropped since the server started, by reason (not JSON, refused by "
    "the contract, another table's id, a table id a URL cannot carry)",
    "dropped_total": "the sum of dropped",
    "ignored": "messages ignored on purpose, by reason (another prefix, a request or "
    "response, a topic the screens do not read)",
    "gaps": "gaps the feed gave up on (seqs that will not come): each shown on its table's card",
    "duplicates_dropped": "messages the feed dropped as seqs already released (retained "
    "states republished, resent copies)",
    "refused": "messages the feed refused before they could count, by reason (too_large, "
    "not_json, invalid, wrong_table, unknown_topic): no seq taken, the genuine message still "
    "asked for; also counted in dropped",
    "refused_total": "the sum of refused",
}
"""Every field of ``GET /api/health`` and what it means (docs/reference/metrics.md is made
from this; a test asks the real server's answer for exactly these keys)."""


async def health(request: web.Request) -> web.StreamResponse:
    """The broker links, how many tables are known, and what was dropped (``HEALTH_FIELDS``)."""
    state = request.app[STATE]
    return web.json_response(
        {
            "version": state.version,
            "broker": state.follower.connected,
            "node": str(state.follower.nodes) if state.follower.connected else None,
            "terminal": state.terminal.connected,
            "integrity": state.follower.integrity,
            "tables": len(state.store.tables),
            "pages": len(state.hub.clients),
            "actions_refused": state.actions.refused,
            **state.store.counters(),
        }
    )


async def feed(request: web.Request) -> web.StreamResponse:
    """One page's WebSocket: hello, the picture, ``synced``, then every update."""
    state = request.app[STATE]
    table = request.query.get("table")
    if table is not None and not NAME_TABLE.match(table):
        raise web.HTTPNotFound()
    if state.hub.full:
        return web.Response(status=503, text="too many pages connected")
    ws = web.WebSocketResponse(
        max_msg_size=MAX_WS_MESSAGE, heartbeat=max(2.0, state.config.keepalive / 3)
    )
    await ws.prepare(request)
    state.websockets_opened += 1
    hello = wire(
        "hello",
        server=state.version,
        keepalive=state.config.keepalive,
        broker=state.follower.connected,
        table=table,
        dropped=sum(state.store.dropped.values()),
        areas=state.config.areas,
        attract=state.config.attract_seconds,
    )
    first = [hello, *state.store.snapshot(table), wire("synced")]
    client = state.hub.add(ws, table, first)
    writer = asyncio.create_task(client.write())
    try:
        async for message in ws:
            if message.type == WSMsgType.ERROR:
                break
            # A page sends nothing that matters; anything it sends is ignored.
    finally:
        state.hub.remove(client)
        writer.cancel()
        with contextlib.suppress(asyncio.CancelledError, ConnectionError):
            await writer
    return ws


NAME_TABLE: Final = re.compile(TABLE_ID_PATTERN)


async def _heartbeat(state: WebState) -> None:
    # A page shows "table closed" when it hears nothing for keepalive seconds; a tick
    # every third of it tells a live page that the server and its broker link are up.
    while True:
        await asyncio.sleep(state.config.keepalive / 3)
        state.hub.broadcast(
            wire("tick", broker=state.follower.connected, dropped=sum(state.store.dropped.values()))
        )


def build_app(state: WebState, *, background: bool = True) -> web.Application:
    """The aiohttp application. With ``background``, it runs the MQTT connections and the
    heartbeat while it runs (tests that feed the store themselves pass False)."""
    app = web.Application(middlewares=[_errors], client_max_size=MAX_BODY)
    app[STATE] = state
    app.on_response_prepare.append(_security_headers)
    app.router.add_get("/", _redirect_pit)
    app.router.add_get(f"/table/{TABLE}", _page("table.html"))
    app.router.add_get("/pit", _page("pit.html"))
    app.router.add_get(f"/pit/{TABLE}", _page("pit_table.html"))
    app.router.add_get(f"/stick/{TABLE}", _page("stick.html"))
    app.router.add_get("/reports", reports_page)
    app.router.add_get("/login", _page("login.html"))
    app.router.add_get("/ws", feed)
    app.router.add_get("/api/session", session_info)
    app.router.add_post("/api/login", login)
    app.router.add_post("/api/logout", logout)
    app.router.add_post("/api/users/{user}/unlock", unlock)
    app.router.add_post(f"/api/table/{TABLE}/{{name:[a-z_]{{1,32}}}}", action)
    app.router.add_get("/api/health", health)
    app.router.add_get("/api/reports", reports_data)
    app.router.add_static("/static/", STATIC, follow_symlinks=False, show_index=False)

    async def tasks(app: web.Application) -> Any:
        running = [asyncio.create_task(_heartbeat(state))]
        if background:
            running += [
                asyncio.create_task(state.follower.run()),
                asyncio.create_task(state.terminal.run()),
            ]
        yield
        # Asked again until they end: one cancellation can be lost (contract.tasks).
        stuck = await cancel_and_wait(running)
        if stuck:
            log.error("tasks did not stop", tasks=sorted(task.get_name() for task in stuck))
        state.executor.shutdown(wait=True)
        # A query in flight ends within the store's statement timeout; none waits to start.
        state.reports_executor.shutdown(wait=False, cancel_futures=True)

    async def close_pages(app: web.Application) -> None:
        # At shutdown, before the server waits for its connections to end: an open page
        # would otherwise hold a stop for the whole shutdown timeout (the page reconnects).
        for client in list(state.hub.clients):
            await client.ws.close(code=1001, message=b"server stopping")

    app.on_shutdown.append(close_pages)
    app.cleanup_ctx.append(tasks)
    return app


async def _redirect_pit(request: web.Request) -> web.StreamResponse:
    raise web.HTTPFound("/pit")


def make_state(config: WebConfig) -> WebState:
    """The shared state for ``config``: store, hub, both MQTT connections, users."""
    store = Store(config.prefix, controllers=config.controllers())
    hub = Hub()
    return WebState(
        config=config,
        store=store,
        hub=hub,
        follower=Follower(config, store, hub),
        terminal=Terminal(config),
        users=Users(config.users),
        sessions=Sessions(lifetime=config.session_hours * 3600.0),
    )
