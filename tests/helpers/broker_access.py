"""A secured broker (passwords and ACL as broker-config writes them) and what its users see."""

from __future__ import annotations

import asyncio
import os
import pwd
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import aiomqtt
import pytest

from deploy.broker import Broker, free_port
from tests.conftest import CLI_BOUND_S
from tests.integration.harness import LAMMER, Table

DEADLINE = 20.0


def table_toml(table_id: str, port: int, prefix: str = "lammer") -> str:
    """A CRAPS table's configuration (no daemon runs it: only broker-config reads it)."""
    return (
        f'[table]\nid = "{table_id}"\ngame = "CRAPS"\n[dice_reader]\nport = "/dev/null"\n'
        f'[mqtt]\nhost = "127.0.0.1"\nport = {port}\nprefix = "{prefix}"\n'
    )


@dataclass
class Secured:
    """A broker-config directory and a broker running it; clients log in from its files."""

    root: Path
    port: int = field(default_factory=free_port)
    out: Path = field(init=False)
    broker: Broker = field(init=False)

    def __post_init__(self) -> None:
        self.out = self.root / "broker"
        run = self.root / "run"
        run.mkdir()
        (self.root / "data").mkdir()
        self.broker = Broker(run, port=self.port, config_file=self.out / "mosquitto.conf")

    def configure(self, *configs: Path, extra: tuple[str, ...] = ()) -> list[str]:
        """``lammer broker-config`` as the operator runs it; its report lines."""
        me = pwd.getpwuid(os.geteuid()).pw_name  # root here: Mosquitto keeps the tmp files
        done = subprocess.run(
            [
                LAMMER,
                "broker-config",
                "--out",
                str(self.out),
                "--data-dir",
                str(self.root / "data"),
                "--broker-user",
                me,
                *extra,
                *map(str, configs),
            ],
            capture_output=True,
            text=True,
            timeout=CLI_BOUND_S,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.splitlines()

    def table(self, table_id: str, prefix: str = "lammer") -> str:
        """Write a table configuration for this broker; its base topic."""
        (self.root / f"{table_id}.toml").write_text(table_toml(table_id, self.port, prefix))
        return f"{prefix}/{table_id}"

    def config(self, table_id: str) -> Path:
        """The configuration file written by ``table``."""
        return self.root / f"{table_id}.toml"

    def craps_table(
        self, workdir: Path, *, extra: tuple[str, ...] = (), recorder: str = "terminal"
    ) -> Table:
        """A CRAPS table in ``workdir`` (made here) logging in as its own user, the broker
        configured for it (``lammer broker-config`` with ``extra``) and started, the
        table's recorder logged in as ``recorder``."""
        workdir.mkdir()
        table = Table(workdir, self.broker, "CRAPS")
        self.configure(table.config_path, extra=extra)
        user = f"lammer-{table.table_id}"
        table.mqtt_login = (user, self.out / "credentials" / user)
        table.config_path.write_text(table.config_text())
        table.recorder.login = (recorder, self.password(recorder))
        self.broker.start()
        return table

    def start_with_a_lobby(self, table_id: str = "a") -> str:
        """One table and a second display (``display-lobby``) configured, the broker
        started; the table's base topic."""
        base = self.table(table_id)
        self.configure(self.config(table_id), extra=("--display", "lobby"))
        self.broker.start()
        return base

    def password(self, user: str) -> str:
        """The user's password, from its credentials file."""
        return (self.out / "credentials" / user).read_text().split("\n")[0]

    def client(
        self,
        user: str | None,
        *,
        password: str | None = None,
        port: int | None = None,
        identifier: str | None = None,
        tls: aiomqtt.TLSParameters | None = None,
        clean_session: bool = True,
    ) -> aiomqtt.Client:
        """A client logged in as ``user`` (None: anonymous) with its own password unless
        ``password`` is given."""
        if password is None and user is not None:
            password = self.password(user)
        return aiomqtt.Client(
            "127.0.0.1",
            port or self.port,
            username=user,
            password=password,
            identifier=identifier or f"test-{uuid.uuid4().hex[:10]}",
            tls_params=tls,
            clean_session=clean_session,
            timeout=30,
        )

    def log(self) -> str:
        """What the broker logged."""
        return self.broker.log.read_text(errors="replace")


@pytest.fixture
def secured(tmp_path: Path) -> Iterator[Secured]:
    """A secured broker of the test's own (``configure`` it, then ``broker.start()``)."""
    s = Secured(tmp_path)
    yield s
    s.broker.stop()


async def next_messages(
    client: aiomqtt.Client, until: str, *, within: float = DEADLINE
) -> list[tuple[str, bytes, bool]]:
    """(topic, payload, retain) of every message up to and including one on ``until``."""
    got: list[tuple[str, bytes, bool]] = []
    async with asyncio.timeout(within):
        async for message in client.messages:
            payload = message.payload
            data = payload if isinstance(payload, bytes) else str(payload).encode()
            got.append((message.topic.value, data, bool(message.retain)))
            if message.topic.value == until:
                return got
    raise AssertionError("the connection ended")  # pragma: no cover
