"""The pit is not left blind to integrity alarms when a floor node refuses their
subscription: the refusal is said once, the subscription is tried again while the
connection lives, and the alarms are read once it is granted. A node refuses while
JetStream elects new leaders after another node's death (the floor test's failover), or
while its users' permissions lack the grant; here the nodes of a real nats-server cluster,
configured by floor-config, deny the display user and then lift the denial by a reload
(SIGHUP), as an operator's corrected configuration would. (Mosquitto grants every
SUBSCRIBE and filters what it delivers, so a controller's broker never refuses.) The
server's follower runs in the test's process."""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path

import aiomqtt
import pytest
from structlog.testing import capture_logs

from contract.floor import integrity_topic
from contract.tasks import cancel_and_wait
from deploy.floor import nats_subject
from deploy.floor_cluster import FloorCluster
from deploy.floor_config.render import read_node
from display.web import relay
from display.web.config import WebConfig
from display.web.relay import Follower, Hub
from display.web.store import Store
from foundation.backoff import Backoff
from tests.helpers.screens import SENTENCE, integrity
from tests.integration.floor import Controller, until

pytestmark = [pytest.mark.asyncio, pytest.mark.integration, pytest.mark.timeout(120)]

DENIED = nats_subject(integrity_topic("+"))


RELOADED = "Reloaded server configuration"


def reloads(cluster: FloorCluster) -> list[int]:
    """How many reloads each node has logged as done."""
    nodes = range(1, len(cluster.plan.nodes) + 1)
    return [cluster.log(i).read_text(errors="replace").count(RELOADED) for i in nodes]


async def set_grant(cluster: FloorCluster, granted: bool) -> None:
    """Deny the display user the integrity topics, or lift the denial; reload the nodes
    and wait until each has said its reload done: a node refuses a login made while it
    reloads its users (nats-server's "authentication error"), which is not under test."""
    for node in cluster.plan.nodes:
        path = cluster.plan.conf_path(node)
        config = read_node(path.read_text())
        (display,) = (u for u in config["authorization"]["users"] if u["user"] == "display")
        subscribe = display["permissions"]["subscribe"]
        assert ("deny" in subscribe) == granted
        if granted:
            del subscribe["deny"]
        else:
            subscribe["deny"] = [DENIED]
        path.write_text(json.dumps(config, indent=1))
    before = reloads(cluster)
    cluster.reload()
    await until(
        lambda: all(n > b for n, b in zip(reloads(cluster), before, strict=True)),
        "every node reloaded",
    )


async def test_a_refused_integrity_subscription_is_tried_again_until_granted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster = FloorCluster(tmp_path / "cluster")
    ctl = Controller(tmp_path / "ctl", "c9", "CRAPS", cluster)
    ctl.configure()
    cluster.configure([ctl.declaration])
    cluster.start()
    task: asyncio.Task[None] | None = None
    try:
        await set_grant(cluster, False)
        monkeypatch.setattr(relay, "RESUBSCRIBE", Backoff(initial=0.1, maximum=0.2))
        tried: list[str] = []
        subscribe = relay.subscribe

        async def counted(client: aiomqtt.Client, topic: str) -> None:
            tried.append(topic)
            await subscribe(client, topic)

        monkeypatch.setattr(relay, "subscribe", counted)
        host, port = cluster.mqtt_endpoints[0]
        creds = cluster.plan.credentials_dir
        config = WebConfig(
            mqtt_host=host,
            mqtt_port=port,
            mqtt_user="display",
            mqtt_password_file=creds / "display",
            mqtt_ca_file=cluster.ca_path,
            keepalive=6,
        )
        store = Store(config.prefix)
        follower = Follower(config, store, Hub(), rng=random.Random(7))
        with capture_logs() as logs:
            task = asyncio.create_task(follower.run())
            await until(lambda: follower.connected, "the follower subscribed")
            assert follower.integrity is False  # /api/health says so
            said = [e for e in logs if e["event"].startswith("integrity alarms not readable")]
            assert len(said) == 1, said
            assert f"refused the subscription to {integrity_topic('+')}" in said[0]["error"]
            # Tried again meanwhile (0.05 to 0.2 s apart here), never said again; the
            # software status, granted, is never said.
            await until(
                lambda: tried.count(integrity_topic("+")) >= 4,
                "the refused subscription tried again",
            )
            assert follower.integrity is False
            events = [e["event"] for e in logs]
            assert sum(e.startswith("integrity alarms not") for e in events) == 1
            assert not any(e.startswith("software status") for e in events)

            await set_grant(cluster, True)
            await until(lambda: follower.integrity, "the subscription granted after the reload")
            password = (creds / "records").read_text().strip()
            async with aiomqtt.Client(
                host,
                port,
                username="records",
                password=password,
                tls_context=cluster.tls_context(),
            ) as records:
                alarm = json.dumps(integrity("t9", minutes_ago=3)).encode()
                await records.publish(integrity_topic("t9"), alarm, qos=1, retain=True)
            await until(lambda: "t9" in store.integrity, "the alarm read on the same connection")
            assert SENTENCE in store.integrity["t9"]
            events = [e["event"] for e in logs]
            assert events.count("integrity alarms readable again") == 1
            assert events.count("subscribed") == 1  # one connection throughout
            assert "broker unreachable" not in events
    finally:
        if task is not None:
            await cancel_and_wait([task])
        cluster.stop()
