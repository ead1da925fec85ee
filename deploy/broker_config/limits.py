"""The broker's limits and the bridge's timings, each with the reason for its figure
(the same reasons are written next to each in mosquitto.conf: ``render.limits_section``)."""

from __future__ import annotations

from typing import Final

REQUEST_MAX: Final = 4 * 1024
"""mqtt-api.md "Requests": a request payload is at most 4 KiB."""

LARGEST_PAYLOAD: Final = 32 * 1024
"""Bound of the largest payload a daemon publishes: ``state`` (and ``alarms``) with every
alarm a table can hold, at most 32 device codes per device plus the table's own alarms, each
as long as a 240-byte link-layer body allows with every character JSON-escaped
(``tests/deploy/test_broker_config.py`` builds it with the daemon's own builders: about
25 KB). Every other payload (a result, a board, a response to a 4 KiB request) is smaller."""

MESSAGE_SIZE_LIMIT: Final = 256 * 1024
"""``message_size_limit``: eight times ``LARGEST_PAYLOAD``. A publish above it is dropped
(its QoS 1 flow completed) without ending the connection, so a daemon is never thrown into
a reconnect loop by one oversized message of its own."""

MAX_PACKET_SIZE: Final = 2 * MESSAGE_SIZE_LIMIT
"""``max_packet_size``: a packet above it ends the connection before Mosquitto buffers it
(``message_size_limit`` alone is checked after the whole packet is read; MQTT allows
256 MB). Twice the message limit: room for any topic (65,535 bytes at most) and
properties, so a message under the limit never ends a connection."""

MAX_INFLIGHT_MESSAGES: Final = 20
"""``max_inflight_messages``: QoS 1 messages per client awaiting PUBACK, as the daemon's
own window (``MqttLink``); on a LAN or loopback round trip this never limits throughput."""

BRIDGE_INFLIGHT_MESSAGES: Final = 1
"""``max_inflight_messages`` with a floor bridge (Mosquitto 2.0 has no setting of its own
for a bridge). With a window of 20, a floor node killed under load had acknowledged some
messages of the window and not others; the bridge sent those again to the next node after
the later ones, so the floor saw a table's ``seq`` out of order. One message in flight keeps
the order; a table publishes a few messages a minute, far below one per round trip."""

MAX_QUEUED_MESSAGES: Final = 10_000
"""``max_queued_messages`` per client beyond those in flight (a slow display, a persistent
session while its client is away, a bridge while the floor is unreachable). A table
publishes about 10 messages a minute, so this holds about four hours of four tables."""

MAX_QUEUED_BYTES: Final = 16 * 1024 * 1024
"""``max_queued_bytes`` per client: bounds the memory one lagging client can hold."""

MAX_BRIDGE_NODES: Final = 16
"""A floor cluster of more nodes than this is not one this project configures (NATS
recommends 3 or 5 for JetStream)."""

BRIDGE_KEEPALIVE: Final = 15
"""``keepalive_interval`` of the floor bridge, in seconds: a floor node that died without a
word (power, network) is given up after about 1.5 times this, and the next one tried; the
floor publishes a silent controller's ``0`` as soon."""

BRIDGE_RESTART: Final = (1, 15)
"""``restart_timeout`` of the floor bridge: reconnects back off from 1 s to 15 s (with
Mosquitto's jitter), so a lost node is left within a second or two and a floor that is
down is not hammered by every controller at once."""

BRIDGE_LISTEN: Final = "127.0.0.1:1884"
"""``--bridge-listen``: the bridge broker's only listener (loopback), where the watchdog's
probe makes its round trip (``deploy.bridge_watchdog``)."""

LOCAL_KEEPALIVE: Final = 5
"""``keepalive_interval`` of the bridge broker's connection to the tables' broker: both
ends on loopback, so a bridge broker that stops answering is known to the tables' broker
(its will ``0`` to the daemons) within about 7.5 s."""

LOCAL_RESTART: Final = "1 5"
"""``restart_timeout`` of the bridge broker's connection to the tables' broker."""

BRIDGE_BROKER_USER: Final = "floor-bridge"
"""The bridge broker's user on the tables' broker (``credentials/floor-bridge``): it reads
what crosses to the floor and writes the requests that come back, nothing else."""

PROBE_ROOT: Final = "lammer-bridge/probe"
"""The only topics of the bridge broker's ACL: the watchdog's probe publishes one message
under it and must read it back (``deploy.bridge_watchdog``)."""

BRIDGE_UNIT: Final = "lammer-bridge.service"
"""The systemd unit broker-config writes for the bridge broker and its watchdog."""

LAN_MAX_CONNECTIONS: Final = 256
"""``max_connections`` of the network listener: displays and terminals of a few tables,
with room; well under the 1024 file descriptors a systemd service gets by default."""

AUTOSAVE_INTERVAL: Final = 60
"""``autosave_interval`` in seconds: at most a minute of queued messages lost at a power
cut (a clean stop saves everything; the daemons republish the retained state anyway)."""

PERSISTENT_CLIENT_EXPIRATION: Final = "7d"
"""``persistent_client_expiration``: the session of a client gone for a week is dropped."""


def daemons_max_connections(tables: int) -> int:
    """``max_connections`` of the daemons' loopback listener: each daemon plus room for a
    local screen and tools, at least 64."""
    return max(64, 2 * tables + 32)
