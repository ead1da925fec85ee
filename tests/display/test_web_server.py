"""``lammer web``'s server against hostile input: a real aiohttp server on a real socket, a
real Mosquitto, and a reader of the broker that proves what was (not) published.

A small stand-in answers requests here (the real daemon does in ``test_browser.py``): what
is tested is the server's gate, not the daemon's decisions.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import aiomqtt
import pytest
from aiohttp import WSMsgType
from aiohttp.test_utils import TestClient, TestServer
from yarl import URL

from display.web.config import WebConfig
from display.web.server import (
    CSP,
    HEALTH_FIELDS,
    SESSION_COOKIE,
    WebState,
    build_app,
    make_state,
)
from display.web.users import add_user
from tests.conftest import Broker

PASSWORD = "a long enough password"


async def _daemon_stand_in(broker: Broker, seen: list[dict[str, Any]]) -> None:
    """Records every request under ``lammer/`` and answers it ok."""
    async with aiomqtt.Client(broker.host, broker.port, timeout=30) as client:
        await client.subscribe("lammer/+/request/#", qos=1)
        async for message in client.messages:
            payload = message.payload
            assert isinstance(payload, bytes)
            body = json.loads(payload)
            topic = message.topic.value
            seen.append({"topic": topic, **body})
            table = topic.split("/")[1]
            answer = {
                "table": table,
                "seq": len(seen),
                "ts": "2026-06-15T20:31:07.412Z",
                "request_id": body.get("request_id"),
                "status": "ok",
                "error": None,
            }
            await client.publish(
                topic.replace("/request/", "/response/"), json.dumps(answer), qos=1
            )


class Web:
    """The server under test, its client, and what reached the broker."""

    def __init__(self, client: TestClient[Any, Any], state: WebState, seen: list[dict[str, Any]]):
        self.client = client
        self.state = state
        self.seen = seen

    @property
    def origin(self) -> str:
        """This server's origin, as a browser would send it."""
        return f"http://{self.client.host}:{self.client.port}"

    async def login(self, user: str = "alice", password: str = PASSWORD) -> tuple[int, Any]:
        """Fetch a login token, then log in; ``(status, body)``."""
        session = await (await self.client.get("/api/session")).json()
        response = await self.client.post(
            "/api/login",
            json={"user": user, "password": password},
            headers={"X-CSRF-Token": session["login_token"], "Origin": self.origin},
        )
        return response.status, await response.json()

    async def act(self, body: Any, *, csrf: str | None, origin: str | None = "self") -> Any:
        """POST an action for table t1."""
        headers = {}
        if csrf is not None:
            headers["X-CSRF-Token"] = csrf
        if origin is not None:
            headers["Origin"] = self.origin if origin == "self" else origin
        return await self.client.post(
            "/api/table/t1/roll_decision",
            data=json.dumps(body),
            headers=headers | {"Content-Type": "application/json"},
        )


@pytest.fixture
async def web(tmp_path: Path, mosquitto: Broker) -> AsyncIterator[Web]:
    users = tmp_path / "users"
    add_user(users, "alice", PASSWORD)
    config = WebConfig(mqtt_host=mosquitto.host, mqtt_port=mosquitto.port, users=users, keepalive=6)
    state = make_state(config)
    seen: list[dict[str, Any]] = []
    stand_in = asyncio.create_task(_daemon_stand_in(mosquitto, seen))
    client = TestClient(TestServer(build_app(state)))
    await client.start_server()
    try:
        async with asyncio.timeout(10):
            while not (state.follower.connected and state.terminal.connected):  # noqa: ASYNC110
                await asyncio.sleep(0.02)
        yield Web(client, state, seen)
    finally:
        await client.close()
        stand_in.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await stand_in


GOOD = {"roll_id": 205, "decision": "valid"}


async def test_security_headers_on_pages_files_and_api(web: Web) -> None:
    for path in (
        "/table/t1",
        "/pit",
        "/pit/t1",
        "/stick/t1",
        "/login",
        "/static/app.css",
        "/static/js/feed.js",
    ):
        response = await web.client.get(path)
        assert response.status == 200, path
        assert response.headers["Content-Security-Policy"] == CSP
        assert response.headers["X-Content-Type-Options"] == "nosniff"
        assert response.headers["X-Frame-Options"] == "DENY"
    api = await web.client.get("/api/health")
    assert api.headers["Cache-Control"] == "no-store"
    # Exactly the fields declared (and documented: docs/reference/metrics.md).
    assert set(await api.json()) == set(HEALTH_FIELDS)
    assert api.headers["Content-Security-Policy"] == CSP
    # Nothing but this origin: no http(s) source anywhere in the policy.
    assert "http" not in CSP
    assert "*" not in CSP
    assert "'unsafe-inline'" not in CSP


async def test_pages_reference_nothing_outside_the_server(web: Web) -> None:
    static = Path(__file__).parents[2] / "display" / "web" / "static"
    vendor = static / "vendor"  # axe-core: injected by the browser tests, loaded by no page
    for path in static.rglob("*"):
        if vendor in path.parents:
            continue
        if path.suffix in (".html", ".js", ".css"):
            text = path.read_text()
            assert "vendor/" not in text, path
            assert "http://" not in text, path
            assert "https://" not in text, path
            if path.suffix == ".css":
                assert "@import" not in text, path
                assert "url(" not in text, path
            if path.suffix == ".html":
                # Inline scripts and styles would be refused by the CSP anyway.
                assert "<script>" not in text, path
                assert "style=" not in text, path


@pytest.mark.parametrize(
    "path",
    [
        "/table/t.1",
        "/table/t%201",
        "/table/" + "x" * 65,
        "/stick/t%2F1",
        "/table/..%2Fpit",
        "/static/../display/web/server.py",
        "/static/%2e%2e/server.py",
        "/api/table/t.1/roll_decision",
    ],
)
async def test_bad_table_ids_and_paths_are_not_found(web: Web, path: str) -> None:
    response = await web.client.get(path)
    assert response.status in (403, 404), (path, response.status)


async def test_ws_with_a_bad_table_id_is_refused(web: Web) -> None:
    response = await web.client.get("/ws?table=a.b")
    assert response.status == 404


async def test_an_action_without_a_session_is_401_and_publishes_nothing(web: Web) -> None:
    for csrf in (None, "guess"):
        response = await web.act(GOOD, csrf=csrf)
        assert response.status == 401
        assert (await response.json())["status"] == "error"
    status, session = await web.login()
    assert status == 200
    for csrf, origin in (
        (None, "self"),
        ("wrong", "self"),
        (session["csrf"], "http://evil.example"),
    ):
        response = await web.act(GOOD, csrf=csrf, origin=origin)
        assert response.status == 403, (csrf, origin)
    # A forged cookie is no session either.
    web.client.session.cookie_jar.clear()
    web.client.session.cookie_jar.update_cookies({"lammer_session": "forged"}, URL(web.origin))
    assert (await web.act(GOOD, csrf=session["csrf"])).status == 401
    # Ordering barrier: a good action after the refused ones is the first to be published.
    status, session = await web.login()
    response = await web.act(GOOD, csrf=session["csrf"])
    assert response.status == 200, await response.text()
    answer = await response.json()
    assert answer["status"] == "ok"
    assert answer["operator"] == "alice"
    assert [(r["topic"], r["operator"]) for r in web.seen] == [
        ("lammer/t1/request/roll_decision", "alice")
    ]


async def test_the_operator_is_the_session_user_never_the_body(web: Web) -> None:
    _, session = await web.login()
    response = await web.act({**GOOD, "operator": "mallory"}, csrf=session["csrf"])
    assert response.status == 400  # unknown field: the body cannot name the operator
    response = await web.act({"roll_id": True, "decision": "valid"}, csrf=session["csrf"])
    assert response.status == 400  # strict: true is no roll id
    assert web.seen == []


async def test_bodies_are_bounded_and_json_only(web: Web) -> None:
    _, session = await web.login()
    headers = {"X-CSRF-Token": session["csrf"], "Origin": web.origin}
    big = await web.client.post(
        "/api/table/t1/roll_decision",
        data=json.dumps({**GOOD, "pad": "x" * 10_000}),
        headers=headers | {"Content-Type": "application/json"},
    )
    assert big.status == 413
    form = await web.client.post(
        "/api/table/t1/roll_decision", data="roll_id=205&decision=valid", headers=headers
    )
    assert form.status == 415  # what a cross-site form could send
    deep = await web.client.post(
        "/api/table/t1/roll_decision",
        data="[" * 3000,
        headers=headers | {"Content-Type": "application/json"},
    )
    assert deep.status == 400
    long_header = await web.client.get("/pit", headers={"X-Long": "y" * 10_000})
    assert long_header.status in (400, 431)
    assert web.seen == []


async def test_login_needs_its_token_and_is_rate_limited(web: Web) -> None:
    no_token = await web.client.post(
        "/api/login", json={"user": "alice", "password": PASSWORD}, headers={"Origin": web.origin}
    )
    assert no_token.status == 403
    for _ in range(10):
        status, body = await web.login(password="wrong password!")
        assert status == 401
        assert body["error"] == "wrong user name or password"
    status, body = await web.login()  # even the right password now waits
    assert status == 429
    assert "too many" in body["error"]
    unknown_status, _ = await web.login(user="nobody")
    assert unknown_status == 429  # per address: names do not reset the count


async def test_session_cookie_is_httponly_and_samesite_strict(web: Web) -> None:
    session = await web.client.get("/api/session")
    cookie = session.headers["Set-Cookie"]
    assert "HttpOnly" in cookie
    assert "SameSite=Strict" in cookie
    body = await session.json()
    response = await web.client.post(
        "/api/login",
        json={"user": "alice", "password": PASSWORD},
        headers={"X-CSRF-Token": body["login_token"], "Origin": web.origin},
    )
    cookies = response.headers.getall("Set-Cookie")
    login_cookie = next(c for c in cookies if c.startswith("lammer_session="))
    assert "HttpOnly" in login_cookie
    assert "SameSite=Strict" in login_cookie
    # The session token is never in a body a script can read.
    token = login_cookie.split(";")[0].split("=", 1)[1]
    assert token not in await response.text()


async def test_ws_messages_from_a_page_are_bounded(web: Web) -> None:
    async with web.client.ws_connect(f"/ws?table=ws-{uuid.uuid4().hex[:8]}") as ws:
        hello = await ws.receive_json(timeout=5)
        assert hello["t"] == "hello"
        assert hello["keepalive"] == 6
        assert (await ws.receive_json(timeout=5))["t"] == "synced"
        await ws.send_str("x" * 5000)
        closing = await ws.receive(timeout=5)
        assert closing.type in (WSMsgType.CLOSE, WSMsgType.CLOSED, WSMsgType.CLOSING)
        assert ws.close_code == 1009  # message too big


async def test_bad_payloads_never_reach_a_page_and_are_counted(web: Web, mosquitto: Broker) -> None:
    table = f"bad-{uuid.uuid4().hex[:8]}"  # no other test's retained state under it
    async with web.client.ws_connect(f"/ws?table={table}") as ws:
        assert (await ws.receive_json(timeout=5))["t"] == "hello"
        assert (await ws.receive_json(timeout=5))["t"] == "synced"
        # The broker is this worker's, shared with earlier tests whose retained payloads
        # (some bad on purpose) the server may have counted already: count from here.
        before = sum(web.state.store.dropped.values())
        health_before = (await (await web.client.get("/api/health")).json())["dropped_total"]
        async with aiomqtt.Client(mosquitto.host, mosquitto.port) as client:
            base = f"lammer/{table}"
            good = {
                "table": table,
                "seq": 7,
                "ts": "2026-06-15T20:31:07.412Z",
                "roll_id": 5,
                "dice": [3, 4],
                "total": 7,
                "status": "counted",
                "reason": None,
            }
            bad = [
                b"not json",
                json.dumps({k: v for k, v in good.items() if k != "dice"}).encode(),
                json.dumps({**good, "table": "other"}).encode(),
                json.dumps({**good, "seq": "7"}).encode(),
                json.dumps({**good, "dice": [3, 9]}).encode(),
                json.dumps(good).replace('"seq": 7', '"seq": NaN').encode(),
                b"[" * 5000,
                b"x" * 70_000,
            ]
            for payload in bad:
                await client.publish(f"{base}/craps/roll", payload, qos=1)
            await client.publish(f"{base}/availability", b"maybe", qos=1)
            await client.publish(f"{base}/craps/roll", json.dumps(good), qos=1)
        message = await ws.receive_json(timeout=5)
        assert message["t"] == "msg"
        assert message["payload"] == good
    assert sum(web.state.store.dropped.values()) - before == len(bad) + 1
    health = await (await web.client.get("/api/health")).json()
    assert health["dropped_total"] - health_before == len(bad) + 1


class Browser:
    """A browser on its own loopback address (127.0.0.x is this machine's too), with its
    own cookies: what a terminal on the casino LAN looks like to the server."""

    def __init__(self, web: Web, address: str) -> None:
        self.web = web
        self.origin = web.origin
        self.session = aiohttp.ClientSession(
            base_url=web.origin,
            connector=aiohttp.TCPConnector(local_addr=(address, 0)),
            cookie_jar=aiohttp.CookieJar(unsafe=True),  # cookies for an IP address host
        )

    async def login(self, user: str = "alice", password: str = PASSWORD) -> int:
        # A new login each time, as after a logout: the device cookie stays, the session goes.
        self.session.cookie_jar.clear(lambda cookie: cookie.key == SESSION_COOKIE)
        async with self.session.get("/api/session") as response:
            token = (await response.json())["login_token"]
        async with self.session.post(
            "/api/login",
            json={"user": user, "password": password},
            headers={"X-CSRF-Token": token, "Origin": self.origin},
        ) as response:
            return response.status

    async def close(self) -> None:
        await self.session.close()


async def test_guesses_from_three_addresses_never_lock_the_right_person_out_of_a_known_terminal(
    web: Web,
) -> None:
    # Issue 20: 20 wrong guesses spread over three addresses locked the user, and the right
    # password got 429 for five minutes in the middle of a game.
    stick = Browser(web, "127.0.0.5")
    attackers = [Browser(web, f"127.0.0.{n}") for n in (2, 3, 4)]
    newcomer = Browser(web, "127.0.0.6")
    try:
        assert await stick.login() == 200  # the stickperson's terminal, before the attack
        statuses = [await attackers[i % 3].login(password=f"guess {i:04d}") for i in range(30)]
        assert statuses[:20] == [401] * 20  # 20 guesses per user name, from anywhere
        assert set(statuses[20:]) == {429}  # then every address waits, whatever it sends
        assert await attackers[0].login() == 429  # even the right password gains nothing
        assert await stick.login() == 200  # the known terminal still logs in
        assert await newcomer.login() == 429  # a browser never used by alice waits
    finally:
        for browser in (stick, *attackers, newcomer):
            await browser.close()


async def test_a_known_terminal_has_its_own_guess_limit(web: Web) -> None:
    stick = Browser(web, "127.0.0.7")
    try:
        assert await stick.login() == 200
        statuses = [await stick.login(password=f"typo {i:02d} wrong") for i in range(11)]
        assert statuses == [401] * 10 + [429]
    finally:
        await stick.close()


async def test_a_device_cookie_is_bound_to_its_user_and_to_the_password(
    web: Web, tmp_path: Path
) -> None:
    users = web.state.users
    token = users.device_token("alice")
    assert users.known_device("alice", token) == token.split(".")[0]
    assert users.known_device("bob", token) is None  # another user's cookie is nothing
    assert users.known_device("alice", token[:-1] + ("0" if token[-1] != "0" else "1")) is None
    assert users.known_device("alice", "not a cookie") is None
    assert users.known_device("alice", None) is None
    add_user(users.path or tmp_path / "users", "alice", "a brand new password")
    users.verify("alice", "a brand new password")  # reloads the file
    assert users.known_device("alice", token) is None  # a new password retires old devices


async def test_actions_per_user_are_limited_and_refused_ones_publish_nothing(web: Web) -> None:
    # A script with alice's session posts 30 actions at once: the first 5 (the burst) are
    # published, the rest answered 429 with Retry-After and never reach the broker.
    _, session = await web.login()
    started = time.monotonic()
    statuses = [
        (await web.act({**GOOD, "roll_id": 300 + i}, csrf=session["csrf"])) for i in range(30)
    ]
    took = time.monotonic() - started
    codes = [r.status for r in statuses]
    assert codes[:5] == [200] * 5
    refused = [r for r in statuses if r.status == 429]
    # The burst, then 2 a second: no more got through than the time the posts took refills
    # (a loaded machine posts the 30 slower, and refills more meanwhile).
    assert 30 - len(refused) <= 5 + int(2 * took) + 1, took
    assert len(refused) >= 1, took
    assert all(int(r.headers["Retry-After"]) >= 1 for r in refused)
    assert "at most 2 a second" in (await refused[0].json())["error"]
    published = sorted(b["roll_id"] for b in web.seen)
    assert published == sorted(300 + i for i, code in enumerate(codes) if code == 200)
    health = await (await web.client.get("/api/health")).json()
    assert health["actions_refused"] == len(refused)


async def test_a_pit_user_unlocks_a_stickperson_locked_out_by_guesses(web: Web) -> None:
    # Issue 20: "a pit user can unlock a stickperson". Guesses lock alice's name for any
    # browser alice never used; pat (pit) lifts it, and alice logs in from a new one.
    users = web.state.users.path
    assert users is not None
    add_user(users, "pat", "pit user's password", roles=("pit",))
    attackers = [Browser(web, f"127.0.0.{n}") for n in (8, 11, 12)]
    newcomer = Browser(web, "127.0.0.9")
    pit = Browser(web, "127.0.0.10")
    try:
        guesses = [await attackers[i % 3].login(password=f"guess {i:03d}!") for i in range(20)]
        assert guesses == [401] * 20
        assert await newcomer.login() == 429
        assert await pit.login("pat", "pit user's password") == 200
        csrf = (await (await pit.session.get("/api/session")).json())["csrf"]
        headers = {"X-CSRF-Token": csrf, "Origin": pit.origin}
        async with pit.session.post("/api/users/alice/unlock", headers=headers) as answer:
            assert answer.status == 200
            assert await answer.json() == {"status": "ok", "unlocked": "alice"}
        assert await newcomer.login() == 200
        # A stickperson cannot lift it: alice (stick) tries for another name.
        stick_csrf = (await (await newcomer.session.get("/api/session")).json())["csrf"]
        async with newcomer.session.post(
            "/api/users/bob/unlock",
            headers={"X-CSRF-Token": stick_csrf, "Origin": newcomer.origin},
        ) as answer:
            assert answer.status == 403
            assert "alice is not a pit user" in (await answer.json())["error"]
        # Without the page's CSRF token, nothing.
        async with pit.session.post(
            "/api/users/alice/unlock", headers={"Origin": pit.origin}
        ) as answer:
            assert answer.status == 403
    finally:
        for browser in (*attackers, newcomer, pit):
            await browser.close()
