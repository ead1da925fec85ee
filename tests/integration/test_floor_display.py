"""``lammer display`` on the floor: the nats cluster's MQTT over TLS, as the ``display`` user,
given every node in order, the first of them dead."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
import time
from pathlib import Path

import aiomqtt
import pytest

from deploy.broker import free_port
from deploy.floor_cluster import FloorCluster
from tests.integration.floor import running_floor

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(420)]

LAMMER = str(Path(sys.executable).parent / "lammer")
GAMES = ("CRAPS", "UTH")
BOUND = 120  # --exit-after: a bound for a loaded machine, never what is waited for


async def every_table_on_the_floor(cluster: FloorCluster, bases: list[str]) -> None:
    """Wait until node 1 holds every table's retained availability and state (the floor is
    running when the display starts, as an operator finds it)."""
    host, port = cluster.mqtt_endpoints[0]
    want = {f"{base}/{sub}" for base in bases for sub in ("availability", "state")}
    async with asyncio.timeout(BOUND):
        while True:
            seen: set[str] = set()
            async with aiomqtt.Client(
                host,
                port,
                username="display",
                password=cluster.password("display"),
                tls_context=cluster.tls_context(),
            ) as client:
                for base in bases:
                    await client.subscribe(f"{base}/+", qos=1)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(2):
                        async for message in client.messages:
                            if message.retain:
                                seen.add(message.topic.value)
                            if want <= seen:
                                return


async def test_lammer_display_draws_the_floor_past_a_dead_node(tmp_path: Path) -> None:
    async with running_floor(tmp_path, GAMES, len(GAMES)) as (cluster, controllers):
        for i, controller in enumerate(controllers):
            await controller.start(interval=0.3, seed=i)
        await every_table_on_the_floor(cluster, [c.table.base for c in controllers])
        password = tmp_path / "display.password"
        password.write_text(cluster.password("display") + "\n")
        password.chmod(0o600)
        dead = f"127.0.0.1:{free_port()}"  # nothing listens: the display must go on
        first_live = cluster.mqtt_endpoints[0]
        argv = [LAMMER, "display", "--mqtt-host", f"{dead},{cluster.bridge_option}"]
        argv += ["--mqtt-user", "display", "--mqtt-password-file", str(password)]
        argv += ["--mqtt-ca-file", str(cluster.ca_path)]
        for controller in controllers:
            argv += ["--table", controller.table.table_id]
        # --once as the floor's display user: one frame once every table's retained state
        # has come (it may not publish the sync message: the retained burst's end instead).
        argv += ["--once", "--exit-after", str(BOUND)]
        started = time.monotonic()
        done = await asyncio.to_thread(
            subprocess.run, argv, capture_output=True, text=True, timeout=300, check=False
        )
        took = time.monotonic() - started
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"broker {first_live[0]}:{first_live[1]}: connected" in done.stdout, done.stdout
    for controller in controllers:
        assert f"Table {controller.table.table_id}" in done.stdout, done.stdout
    assert "Ultimate Texas Hold" in done.stdout, done.stdout
    assert "Craps" in done.stdout, done.stdout
    assert took < BOUND, f"--once waited its whole bound ({took:.0f} s): no sync\n{done.stdout}"
