"""``lammer web --tls-cert/--tls-key``: the real command on a real socket serves its pages
over HTTPS only, with HSTS and ``Secure`` cookies, to a client that verifies it; a plain
HTTP request to the port gets no page, and a key others may read is refused at start."""

from __future__ import annotations

import json
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.cookies import SimpleCookie
from pathlib import Path

import aiohttp
import pytest

from deploy.broker import free_port, wait_serving
from display.web.config import WebConfig
from display.web.server import HSTS, LOGIN_COOKIE, SESSION_COOKIE
from tests.conftest import CLI_BOUND_S
from tests.display.conftest import STICKPERSON, AuthBroker
from tests.helpers.pki import make_certificate

LAMMER = str(Path(sys.executable).parent / "lammer")


def web_argv(workdir: Path, broker: AuthBroker, port: int, *extra: str) -> list[str]:
    users = workdir / "users"
    if not users.exists():
        done = subprocess.run(
            [LAMMER, "web", "adduser", STICKPERSON[0], "--users", str(users)],
            input=(STICKPERSON[1] + "\n").encode(),
            capture_output=True,
            check=False,
        )
        assert done.returncode == 0, done.stderr.decode()
    return [
        LAMMER, "web", "--mqtt-host", broker.host, "--mqtt-port", str(broker.port),
        "--mqtt-user", "display", "--mqtt-password-file", str(broker.credentials / "display"),
        "--listen", f"127.0.0.1:{port}", "--users", str(users), *extra,
    ]  # fmt: skip


@dataclass
class HttpsWeb:
    """``lammer web`` over HTTPS, and the CA that verifies it."""

    proc: subprocess.Popen[bytes]
    port: int
    ca: Path
    log: Path

    @property
    def origin(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def client_tls(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.ca))


@pytest.fixture(scope="module")
def https_web(
    tmp_path_factory: pytest.TempPathFactory, auth_broker: AuthBroker
) -> Iterator[HttpsWeb]:
    workdir = tmp_path_factory.mktemp("web-tls")
    ca, cert, key = make_certificate(workdir / "tls")
    port = free_port()
    argv = web_argv(workdir, auth_broker, port, "--tls-cert", str(cert), "--tls-key", str(key))
    log = workdir / "web.log"
    with log.open("ab") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    web = HttpsWeb(proc, port, ca, log)
    # A bound on a failure only (the interpreter's imports alone took over 20 s on a
    # loaded machine: see start_web).
    deadline = time.monotonic() + 120
    while not wait_serving(proc.pid, "127.0.0.1", port, timeout=0.2):
        assert proc.poll() is None, log.read_text(errors="replace")
        assert time.monotonic() < deadline, log.read_text(errors="replace")
    yield web
    proc.terminate()
    proc.wait(timeout=10)
    assert proc.returncode == 0, log.read_text(errors="replace")


async def test_the_pages_come_over_https_with_hsts(https_web: HttpsWeb) -> None:
    async with aiohttp.ClientSession() as http:
        for path in ("/pit", "/table/t1", "/static/app.css", "/api/health"):
            async with http.get(https_web.origin + path, ssl=https_web.client_tls()) as response:
                assert response.status == 200, path
                assert response.headers["Strict-Transport-Security"] == HSTS
                assert "default-src 'none'" in response.headers["Content-Security-Policy"]


def _cookie(response: aiohttp.ClientResponse, name: str) -> SimpleCookie:
    jar = SimpleCookie()
    for header in response.headers.getall("Set-Cookie"):
        jar.load(header)
    assert name in jar, response.headers.getall("Set-Cookie")
    return jar


async def test_the_login_and_session_cookies_are_secure(https_web: HttpsWeb) -> None:
    tls = https_web.client_tls()
    # A jar that keeps cookies of an IP address (aiohttp's default jar does not).
    async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as http:
        async with http.get(https_web.origin + "/api/session", ssl=tls) as response:
            token = (await response.json())["login_token"]
            login = _cookie(response, LOGIN_COOKIE)[LOGIN_COOKIE]
            assert login["secure"] is True
            assert login["httponly"] is True
        user, password = STICKPERSON
        async with http.post(
            https_web.origin + "/api/login",
            data=json.dumps({"user": user, "password": password}),
            headers={
                "Content-Type": "application/json",
                "X-CSRF-Token": token,
                "Origin": https_web.origin,
            },
            ssl=tls,
        ) as response:
            assert response.status == 200, await response.text()
            session = _cookie(response, SESSION_COOKIE)[SESSION_COOKIE]
            assert session["secure"] is True
            assert session["httponly"] is True
            assert session["samesite"] == "Strict"


async def test_plain_http_on_the_https_port_gets_no_page(https_web: HttpsWeb) -> None:
    async with aiohttp.ClientSession() as http:
        with pytest.raises(aiohttp.ClientError):
            async with http.get(f"http://127.0.0.1:{https_web.port}/pit") as response:
                await response.read()


async def test_a_client_that_does_not_trust_the_certificate_is_refused(
    https_web: HttpsWeb,
) -> None:
    async with aiohttp.ClientSession() as http:
        with pytest.raises(aiohttp.ClientConnectorCertificateError):
            async with http.get(https_web.origin + "/pit", ssl=ssl.create_default_context()):
                pass


@pytest.mark.parametrize("problem", ["readable key", "key alone", "not a certificate"])
def test_unusable_tls_files_exit_2_in_one_sentence(
    tmp_path: Path, auth_broker: AuthBroker, problem: str
) -> None:
    _, cert, key = make_certificate(tmp_path / "tls")
    extra = ["--tls-cert", str(cert), "--tls-key", str(key)]
    says = {
        "readable key": "chmod 0600",
        "key alone": "give both",
        "not a certificate": "not a PEM certificate",
    }[problem]
    if problem == "readable key":
        key.chmod(0o644)
    elif problem == "key alone":
        extra = ["--tls-key", str(key)]
    else:
        extra = ["--tls-cert", str(key), "--tls-key", str(key)]
    argv = web_argv(tmp_path, auth_broker, free_port(), *extra)
    done = subprocess.run(argv, capture_output=True, text=True, timeout=CLI_BOUND_S, check=False)
    assert done.returncode == 2
    assert says in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("settings", "clear"),
    [
        ({"mqtt_host": "floor1,floor2"}, True),
        ({"mqtt_host": "10.0.0.5"}, True),
        ({"mqtt_host": "127.0.0.1"}, False),  # the controller's own broker, on this machine
        ({"mqtt_host": "localhost,[::1]"}, False),
        ({"mqtt_host": "floor1", "mqtt_ca_file": "ca.crt"}, False),
    ],
)
def test_a_password_sent_in_clear_off_the_machine_is_known(
    tmp_path: Path, settings: dict[str, str], clear: bool
) -> None:
    ca, _, _ = make_certificate(tmp_path)
    password = tmp_path / "display"
    password.write_text("secret\n")
    config = WebConfig.model_validate(
        {"mqtt_user": "display", "mqtt_password_file": password, **settings},
        context={"base_dir": ca.parent},
    )
    assert config.password_in_clear is clear
