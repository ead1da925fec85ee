"""A node's nats.conf: the configuration as data (``node_config``), its text with a comment
above each part (``render_node``), and read back (``read_node``, ``existing_hashes``)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Final

from deploy.floor_config.model import (
    GENERATED_BY,
    MAX_FILE_STORE,
    MAX_MEMORY_STORE,
    MAX_PAYLOAD,
    MQTT_ACK_WAIT,
    MQTT_DELIVERY,
    MQTT_MAX_ACK_PENDING,
    ROUTE,
    TLS_TIMEOUT,
    FloorPlan,
    Node,
)
from deploy.floor_config.users import FloorUser
from foundation.endpoints import is_loopback


def node_config(
    plan: FloorPlan, node: Node, users: Sequence[FloorUser], route: tuple[str, str]
) -> dict[str, Any]:
    """Node ``node``'s configuration as the JSON object nats-server reads. ``route`` is the
    route user's (password, bcrypt hash)."""
    password, hashed = route
    others = [n for n in plan.nodes if n is not node]
    tls = plan.node_tls(node, installed=True)
    ca = str(plan.install_dir / "ca.crt")
    local = url_host(node.host if is_loopback(node.host) else "127.0.0.1")
    return {
        "server_name": node.name,
        "listen": f"{local}:{node.client_port}",
        "http": f"{local}:{node.monitor_port}",
        "max_payload": MAX_PAYLOAD,
        "jetstream": {
            "store_dir": str(plan.data_dir / node.name),
            "max_memory_store": MAX_MEMORY_STORE,
            "max_file_store": MAX_FILE_STORE,
        },
        "cluster": {
            "name": plan.cluster,
            "listen": f"{url_host(node.bind)}:{node.route_port}",
            "authorization": {"user": ROUTE, "password": hashed},
            "routes": [
                f"nats-route://{ROUTE}:{password}@{url_host(n.host)}:{n.route_port}" for n in others
            ],
            "tls": {
                "cert_file": str(tls.cert),
                "key_file": str(tls.key),
                "ca_file": ca,
                "verify": True,
                "timeout": TLS_TIMEOUT,
            },
        },
        "mqtt": {
            "listen": f"{url_host(node.bind)}:{node.mqtt_port}",
            "stream_replicas": plan.replicas,
            "ack_wait": MQTT_ACK_WAIT,
            "max_ack_pending": MQTT_MAX_ACK_PENDING,
            "tls": {"cert_file": str(tls.cert), "key_file": str(tls.key), "timeout": TLS_TIMEOUT},
        },
        "authorization": {"users": [u.as_nats() for u in users]},
    }


def url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


_COMMENTS: Final = {
    "server_name": ("This node's name in the cluster.",),
    "listen": ("NATS clients: loopback only, and no user may use it (every user is MQTT-only).",),
    "http": ("Monitoring (/healthz, /varz, /connz, /jsz): loopback only.",),
    "jetstream": (
        "Stores the MQTT sessions, the retained messages and the QoS 1 messages in flight,",
        "replicated across the nodes (mqtt.stream_replicas).",
    ),
    "cluster": (
        "Every node routes to every other, logging in as `route` (credentials/route), over",
        "TLS both ways: each node shows its certificate and checks the other's (floor CA).",
    ),
    "mqtt": (
        "Controllers' bridges, pit screens and terminals, over TLS only (they verify this",
        "node with ca.crt; their passwords authenticate them). Replicas: with 3, one node",
        "may die and nothing acknowledged is lost.",
    ),
    "authorization": (
        "Who may do what (lammer's docs/floor/cluster.md). MQTT topics are NATS subjects:",
        "'/' is '.', '+' is '*', and 'a/b/#' is both 'a.b' and 'a.b.>'. QoS 1 deliveries",
        f"come on {MQTT_DELIVERY}, granted to every user that subscribes.",
    ),
}


def render_node(
    plan: FloorPlan, node: Node, config: dict[str, Any], users: Sequence[FloorUser]
) -> str:
    """The text of a node's nats.conf: a JSON object, a comment above each part."""
    lines = [
        f"# nats-server 2.15 configuration of {node.name}, node {node.index} of "
        f"{len(plan.nodes)} of the floor cluster {plan.cluster}.",
        f"# {GENERATED_BY}; do not edit: run it again (it keeps the passwords and says",
        "# what it changed). lammer's docs/floor/cluster.md says how to install it.",
        "# Controllers:",
        *(
            f"#   {c.declaration.controller}: "
            + ", ".join(f"{t.id} ({t.game})" for t in c.declaration.tables)
            for c in plan.controllers
        ),
        "{",
    ]
    keys = list(config)
    for i, key in enumerate(keys):
        lines += [f"  # {c}" for c in _COMMENTS.get(key, ())]
        comma = "," if i < len(keys) - 1 else ""
        if key == "authorization":
            lines.append('  "authorization": {"users": [')
            entries = config[key]["users"]
            for j, (user, entry) in enumerate(zip(users, entries, strict=True)):
                lines.append(f"    # {user.about}.")
                sep = "," if j < len(entries) - 1 else ""
                lines.append("    " + json.dumps(entry, ensure_ascii=False) + sep)
            lines.append("  ]}" + comma)
            continue
        text = json.dumps(config[key], ensure_ascii=False, indent=2)
        text = text.replace("\n", "\n  ")
        lines.append(f"  {json.dumps(key)}: {text}{comma}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def read_node(text: str) -> Any:
    """A node file as data: ``#`` comment lines dropped, the rest parsed as JSON."""
    kept = [line for line in text.split("\n") if not line.lstrip().startswith("#")]
    return json.loads("\n".join(kept))


def existing_hashes(plan: FloorPlan) -> dict[str, str]:
    """The bcrypt hash of each user (and of the route) in the node files that exist."""
    found: dict[str, str] = {}
    for node in plan.nodes:
        try:
            data = read_node(plan.conf_path(node).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError):
            continue
        if not isinstance(data, dict):
            continue
        users = data.get("authorization", {}).get("users", [])
        for entry in users if isinstance(users, list) else []:
            if isinstance(entry, dict) and isinstance(entry.get("user"), str):
                found.setdefault(entry["user"], str(entry.get("password", "")))
        route = data.get("cluster", {}).get("authorization", {}).get("password")
        if isinstance(route, str):
            found.setdefault(ROUTE, route)
    return found
