"""The private broker fixture really is a broker, and survives stop/start on one port."""

from __future__ import annotations

import socket

from tests.conftest import Broker


def _accepts(broker: Broker) -> bool:
    try:
        with socket.create_connection((broker.host, broker.port), timeout=0.5):
            return True
    except OSError:
        return False


def test_private_broker_stops_and_starts_on_the_same_port(mosquitto_private: Broker) -> None:
    port = mosquitto_private.port
    assert _accepts(mosquitto_private)
    assert "set_tcp_nodelay true" in mosquitto_private.conf.read_text()
    mosquitto_private.stop()
    assert not _accepts(mosquitto_private)
    mosquitto_private.start()
    assert mosquitto_private.port == port
    assert _accepts(mosquitto_private)
