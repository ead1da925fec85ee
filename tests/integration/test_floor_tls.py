"""TLS on every hop of the floor, with a real 3-node nats-server cluster running
``lammer floor-config``'s files (its CA, each node's certificate) and a real Mosquitto
running ``broker-config --bridge --bridge-ca``'s.

A client that does not hold the floor CA is refused; plain MQTT or NATS on a TLS port is
refused; a route from a node whose certificate the floor CA did not sign is refused; the
bridge carries a table's messages out and its requests in over TLS; ``lammer web``'s MQTT
connection verifies the nodes with the CA it is given.
"""

from __future__ import annotations

import asyncio
import json
import socket
import ssl
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import aiomqtt
import pytest

from deploy.broker import free_port
from deploy.floor_cluster import FloorCluster, nats_server_path
from display.web.config import WebConfig
from display.web.server import make_state
from tests.helpers.pki import other_ca
from tests.integration.floor import Controller, FloorSubscriber, until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]


@pytest.fixture(scope="module")
def floor(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[FloorCluster, Controller]]:
    """The cluster and one controller bridged to it (its Mosquitto running, no daemon)."""
    root = tmp_path_factory.mktemp("floor-tls")
    cluster = FloorCluster(root / "cluster")
    ctl = Controller(root / "ctl", "tls", "CRAPS", cluster)
    ctl.configure()
    cluster.configure([ctl.declaration])
    cluster.start()
    ctl.broker.start()
    yield cluster, ctl
    ctl.broker.stop()
    cluster.stop()


def mqtt(
    cluster: FloorCluster, tls: ssl.SSLContext | None, user: str = "display"
) -> aiomqtt.Client:
    host, port = cluster.mqtt_endpoints[0]
    return aiomqtt.Client(
        host,
        port,
        username=user,
        password=cluster.password(user),
        identifier=f"test-{uuid.uuid4().hex[:10]}",
        timeout=5,
        tls_context=tls,
    )


async def test_the_bridge_carries_results_out_and_requests_in_over_tls(
    floor: tuple[FloorCluster, Controller],
) -> None:
    cluster, ctl = floor
    table = ctl.table.table_id
    watcher = FloorSubscriber(cluster, [f"lammer/{table}/#", "lammer-floor/#"], first=2, clean=True)
    await watcher.start()
    try:
        await until(
            lambda: any(
                m.topic == "lammer-floor/bridge/tls" and m.payload == b"1" for m in watcher.messages
            ),
            "the bridge connected",
        )
        # The node lists the bridge's connection with the TLS it speaks.
        bridges = [
            c
            for n in (1, 2, 3)
            for c in cluster.monitor(n, "/connz?limit=100")["connections"]
            if c.get("mqtt_client") == "lammer-bridge-tls"
        ]
        assert len(bridges) == 1
        assert bridges[0]["tls_version"] in ("1.2", "1.3")

        local = ctl.broker
        daemon = ctl.table.mqtt_login
        assert daemon is not None
        user, password_file = daemon
        password = password_file.read_text().strip()
        async with aiomqtt.Client(
            local.host, local.port, username=user, password=password, timeout=5
        ) as table_client:
            await table_client.subscribe(f"lammer/{table}/request/+", qos=1)
            body = json.dumps({"table": table, "seq": 7, "marker": uuid.uuid4().hex})
            await table_client.publish(f"lammer/{table}/craps/roll", body, qos=1)
            await until(
                lambda: any(m.payload == body.encode() for m in watcher.messages),
                "the roll on the floor",
            )
            request = json.dumps({"request_id": uuid.uuid4().hex})
            async with mqtt(cluster, cluster.tls_context(), user="terminal") as terminal:
                await terminal.publish(f"lammer/{table}/request/overturn", request, qos=1)
            async with asyncio.timeout(30):
                async for message in table_client.messages:
                    assert message.payload == request.encode()
                    break
    finally:
        await watcher.close()


async def test_a_bridge_given_another_ca_never_sends_its_password(
    floor: tuple[FloorCluster, Controller], tmp_path: Path
) -> None:
    """A controller configured with a CA that is not the floor's: Mosquitto refuses the
    node's certificate at the handshake, so no CONNECT (and no password) leaves it."""
    cluster, _ = floor
    foreign, _ = other_ca(tmp_path / "other")
    rogue = Controller(tmp_path / "rogue", "rogue", "CRAPS", cluster)
    rogue.configure("--bridge-ca", str(foreign))
    rogue.broker.start()
    try:
        await until(
            lambda: "certificate verify failed" in rogue.broker.log.read_text(errors="replace"),
            "the bridge refusing the node's certificate",
            within=60,
        )
        clients = [c for n in (1, 2, 3) for c in cluster.mqtt_clients(n)]
        assert "lammer-bridge-rogue" not in clients
    finally:
        rogue.broker.stop()


async def test_a_bridge_to_a_name_the_certificate_does_not_hold_is_refused(
    floor: tuple[FloorCluster, Controller], tmp_path: Path
) -> None:
    """The node's certificate names 127.0.0.1; a bridge that dials it as ``localhost``
    (the same node, the right CA) refuses it: the name is checked, not only the CA."""
    cluster, _ = floor
    host, port = cluster.mqtt_endpoints[0]
    assert host == "127.0.0.1"
    misnamed = Controller(tmp_path / "misnamed", "misnamed", "CRAPS", cluster)
    misnamed.configure("--bridge", f"localhost:{port}")
    misnamed.broker.start()
    try:
        await until(
            lambda: (
                "host name verification failed" in misnamed.broker.log.read_text(errors="replace")
            ),
            "the bridge refusing a certificate for another name",
            within=60,
        )
        clients = [c for n in (1, 2, 3) for c in cluster.mqtt_clients(n)]
        assert "lammer-bridge-misnamed" not in clients
    finally:
        misnamed.broker.stop()


async def test_a_client_without_the_floor_ca_is_refused(
    floor: tuple[FloorCluster, Controller], tmp_path: Path
) -> None:
    cluster, _ = floor
    host, port = cluster.mqtt_endpoints[0]
    # The system's CAs, then another CA whose certificate names the same address: the
    # handshake fails before a byte of MQTT (and of the password) is sent. (Checked with
    # the ssl module itself: paho leaves the socket of a failed handshake unclosed.)
    foreign, _ = other_ca(tmp_path / "other")
    for context in (ssl.create_default_context(), ssl.create_default_context(cafile=foreign)):
        with (
            socket.create_connection((host, port), timeout=10) as raw,
            pytest.raises(ssl.SSLCertVerificationError),
        ):
            context.wrap_socket(raw, server_hostname=host).close()
    # With the floor's CA the same user is let in.
    async with mqtt(cluster, cluster.tls_context()) as client:
        await client.subscribe("lammer-floor/#", qos=1)


async def test_plain_mqtt_on_the_tls_port_is_refused(
    floor: tuple[FloorCluster, Controller],
) -> None:
    cluster, _ = floor
    with pytest.raises(aiomqtt.MqttError):
        async with mqtt(cluster, None):
            pass


def test_plain_nats_on_the_route_port_is_refused(
    floor: tuple[FloorCluster, Controller],
) -> None:
    cluster, _ = floor
    node = cluster.node(1)
    route = (cluster.plan.credentials_dir / "route").read_text().strip()
    # The right route password, in clear: the node wants TLS first and closes the
    # connection (what it may send before, an INFO saying tls_required, is no answer).
    answer = b""
    with socket.create_connection((node.host, node.route_port), timeout=10) as s:
        try:
            s.sendall(f'CONNECT {{"user":"route","pass":"{route}"}}\r\nPING\r\n'.encode())
            while chunk := s.recv(4096):
                answer += chunk
        except (ConnectionResetError, BrokenPipeError):
            pass
    if answer.startswith(b"INFO "):
        assert json.loads(answer[5:].split(b"\r\n")[0])["tls_required"] is True
    assert b"PONG" not in answer, answer
    assert b"+OK" not in answer, answer


async def test_a_node_whose_certificate_the_floor_ca_did_not_sign_cannot_route_in(
    floor: tuple[FloorCluster, Controller], tmp_path: Path
) -> None:
    cluster, _ = floor
    _, cert = other_ca(tmp_path / "intruder")
    node = cluster.node(1)
    route = (cluster.plan.credentials_dir / "route").read_text().strip()
    conf = tmp_path / "intruder.conf"
    conf.write_text(
        json.dumps(
            {
                "server_name": "intruder",
                "listen": f"127.0.0.1:{free_port()}",
                "cluster": {
                    "name": cluster.plan.cluster,
                    "listen": f"127.0.0.1:{free_port()}",
                    "routes": [f"nats-route://route:{route}@127.0.0.1:{node.route_port}"],
                    "tls": {
                        "cert_file": str(cert),
                        "key_file": str(cert.with_suffix(".key")),
                        "ca_file": str(cluster.ca_path),  # it trusts the floor
                        "verify": True,
                    },
                },
            }
        )
    )
    log = tmp_path / "intruder.log"
    seen = len(cluster.log(1).read_bytes())
    with log.open("wb") as out:
        intruder = subprocess.Popen(  # noqa: ASYNC220 (started, never waited on here)
            [nats_server_path(), "-c", str(conf)], stdout=out, stderr=out
        )
    try:
        # The node refuses the handshake: the intruder has no certificate of the floor CA
        # (Go's TLS client does not even offer one the node's CA list does not name).
        await until(
            lambda: b"TLS route handshake error" in cluster.log(1).read_bytes()[seen:],
            "the route refused",
            within=60,
        )
        routes = cluster.monitor(1, "/routez")["routes"]
        assert all(r.get("remote_name") != "intruder" for r in routes), routes
    finally:
        intruder.terminate()
        intruder.wait(timeout=15)


async def test_lammer_web_reaches_the_floor_only_with_its_ca(
    floor: tuple[FloorCluster, Controller],
) -> None:
    cluster, _ = floor
    creds = cluster.plan.credentials_dir
    nodes = ",".join(f"{h}:{p}" for h, p in cluster.mqtt_endpoints)
    base = {
        "mqtt_host": nodes,
        "mqtt_user": "display",
        "mqtt_password_file": creds / "display",
        "keepalive": 6,
    }
    with_ca = make_state(WebConfig.model_validate({**base, "mqtt_ca_file": cluster.ca_path}))
    without = make_state(WebConfig.model_validate(base))
    tasks = [asyncio.create_task(s.follower.run()) for s in (with_ca, without)]
    try:
        await until(lambda: with_ca.follower.connected, "lammer web on the floor over TLS")
        # Plain: the node never answers its CONNECT (it waits for a TLS handshake, then
        # drops the connection), so the follower gives up on it and never subscribes.
        await until(lambda: without.follower.error is not None, "plain refused", within=60)
        assert not without.follower.connected
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
