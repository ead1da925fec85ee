"""The floor bridge's own broker: bridge.conf (its probe listener, the bridge ``tables`` to
this controller's broker and the bridge ``floor``), bridge.acl and its systemd unit."""

from __future__ import annotations

from typing import Final

from contract.floor import bridge_status_topic
from deploy import floor
from deploy.broker_config.limits import (
    BRIDGE_BROKER_USER,
    BRIDGE_KEEPALIVE,
    BRIDGE_UNIT,
    LOCAL_KEEPALIVE,
    LOCAL_RESTART,
    PROBE_ROOT,
)
from deploy.broker_config.model import GENERATED_BY, Bridge, BrokerPlan
from deploy.broker_config.render import (
    Directive,
    Section,
    limits_section,
    process_section,
    render_sections,
)


def bridge_conf_sections(
    plan: BrokerPlan, bridge_password: str | None = None, local_password: str | None = None
) -> tuple[Section, ...]:
    """bridge.conf (the bridge broker) as sections, in file order; empty without a bridge.
    ``bridge_password``: the floor's (``credentials/bridge-<controller>``);
    ``local_password``: its user's on the tables' broker (``credentials/floor-bridge``);
    placeholders without them."""
    bridge = plan.bridge
    if bridge is None:
        return ()
    return (
        _bridge_process_section(plan),
        _bridge_security_section(plan, bridge),
        _bridge_listener_section(bridge),
        limits_section(bridged=True),
        _bridge_persistence_section(bridge),
        _local_bridge_section(plan, bridge, local_password),
        _bridge_section(plan, bridge_password),
    )


def _bridge_process_section(plan: BrokerPlan) -> Section:
    return Section(
        "Process: the floor bridge's own broker",
        (
            *(d for d in process_section(plan).directives if d.key == "user"),
            Directive("log_dest", "stderr", ("To the unit's journal, through the watchdog.",)),
            Directive("log_timestamp", "false"),
            Directive("log_type", "error"),
            Directive("log_type", "warning"),
            Directive("log_type", "notice", ("The bridges' connections and their failures.",)),
            Directive(
                "connection_messages",
                "false",
                ("Not a line per probe (one every 2 s): the watchdog logs what matters.",),
            ),
        ),
        (
            "Run by lammer bridge-watchdog (lammer-bridge.service), which restarts it when its",
            "probe gets no answer through the listener below.",
        ),
    )


def _bridge_security_section(plan: BrokerPlan, bridge: Bridge) -> Section:
    return Section(
        "Who may connect: the watchdog's probe, on loopback",
        (
            Directive(
                "per_listener_settings",
                "false",
            ),
            Directive(
                "allow_anonymous",
                "true",
                (
                    "One loopback listener and no password: the ACL lets an anonymous client",
                    f"only its own {PROBE_ROOT}/# (the probe's round trip). A bridge's",
                    "traffic is not checked against acl_file: the topic lines below bound it.",
                ),
            ),
            Directive("acl_file", str(plan.bridge_acl_path)),
        ),
    )


def _bridge_listener_section(bridge: Bridge) -> Section:
    endpoint = bridge.listen
    return Section(
        "Listener: the watchdog's probe",
        (
            Directive("listener", f"{endpoint.port} {endpoint.host}"),
            Directive("max_connections", "8"),
        ),
        ("Loopback only; nothing else connects to this broker.",),
    )


def _bridge_persistence_section(bridge: Bridge) -> Section:
    return Section(
        "Persistence: what waits for the floor",
        (
            Directive("persistence", "true"),
            Directive("persistence_location", f"{bridge.data_dir}/"),
            Directive(
                "autosave_on_changes",
                "true",
                (
                    "Saved after every change (autosave_interval 1 below): the tables' broker",
                    "hands a message over once this broker acknowledges it, so a queue that",
                    "waits for the floor must survive the watchdog's SIGKILL. A table",
                    "publishes a few messages a minute: a few small writes a minute.",
                ),
            ),
            Directive("autosave_interval", "1"),
        ),
    )


def _local_bridge_section(plan: BrokerPlan, bridge: Bridge, password: str | None) -> Section:
    """The bridge broker's connection to the tables' broker (loopback, plain)."""
    daemons = next(listener.endpoint for listener in plan.listeners)
    topics = _topic_lines(plan, "in", "out", "what goes to the floor, in from there.")
    directives = (
        Directive("connection", "tables"),
        Directive("address", f"{daemons.host}:{daemons.port}"),
        Directive(
            "bridge_protocol_version",
            "mqttv311",
        ),
        Directive(
            "cleansession",
            "false",
            (
                "A persistent session on the tables' broker: while this broker is down or",
                "restarting, the tables' messages wait there (QoS 1) and come here after.",
            ),
        ),
        Directive("remote_clientid", BRIDGE_BROKER_USER),
        Directive("remote_username", BRIDGE_BROKER_USER),
        Directive(
            "remote_password",
            password if password is not None else "<credentials>",
            (f"credentials/{BRIDGE_BROKER_USER}.",),
        ),
        Directive(
            "notifications",
            "true",
            (
                "The daemons learn when this broker is gone: 1 on connect, 0 as its will.",
                "(floor_resend acts on a 0 of any bridge status, this one's too.)",
            ),
        ),
        Directive("notification_topic", bridge.local_status_topic),
        Directive("keepalive_interval", str(LOCAL_KEEPALIVE)),
        Directive("restart_timeout", LOCAL_RESTART),
        Directive("start_type", "automatic"),
        Directive(
            "topic",
            f"{bridge_status_topic(bridge.controller)} out 1",
            ("The floor bridge's own status, to the daemons (floor_resend).",),
        ),
        *topics,
    )
    return Section(
        "Bridge to the tables' broker on this controller",
        directives,
        (
            f"As {BRIDGE_BROKER_USER}, granted in the tables' acl only what crosses to the floor",
            "and the requests that come back.",
        ),
    )


_FLOOR_SESSION: Final = (
    Directive(
        "round_robin",
        "true",
        (
            "Stay on the node that works (false would leave it again for the first one",
            "as soon as that is back: one more reconnect for nothing).",
        ),
    ),
    Directive(
        "bridge_protocol_version",
        "mqttv311",
        ("nats-server's MQTT listener speaks 3.1.1.",),
    ),
    Directive(
        "try_private",
        "false",
        ("The floor is not a Mosquitto: no bridge-private CONNECT flag.",),
    ),
    Directive(
        "cleansession",
        "false",
        (
            "A persistent session at both ends: QoS 1 messages wait here (persisted) while",
            "the floor is unreachable and go out once it is back; the floor keeps the",
            "bridge's subscription to the requests across a reconnect.",
        ),
    ),
)
"""The floor bridge's session: which node it stays on, its protocol, and what it keeps."""


def _bridge_section(plan: BrokerPlan, password: str | None = None) -> Section:
    """The floor bridge, last in the file (every option after ``connection`` is the
    bridge's). ``password`` is the bridge's (``credentials/bridge-<controller>``); without
    it the line holds a placeholder (``conf_sections`` for reading back the shape)."""
    bridge = plan.bridge
    if bridge is None:
        return Section("Floor bridge", (), ("None (broker-config --bridge).",))
    controller = bridge.controller
    topics = _topic_lines(plan, "out", "in", "its state and results out, its requests in.")
    directives = (
        Directive("connection", "floor"),
        Directive(
            "address",
            # Mosquitto 2.0 splits HOST:PORT at the last ':' and does not read [IPv6]:PORT.
            " ".join(f"{n.host}:{n.port}" for n in bridge.nodes),
            ("Every node of the floor cluster: when one fails the next is tried.",),
        ),
        *_bridge_tls(bridge),
        *_FLOOR_SESSION,
        *_floor_login(bridge, password),
        Directive(
            "bridge_attempt_unsubscribe",
            "false",
            ("The bridge never subscribes to the out topics on the floor.",),
        ),
        Directive("keepalive_interval", str(BRIDGE_KEEPALIVE)),
        Directive("restart_timeout", f"{bridge.retry[0]} {bridge.retry[1]}"),
        Directive("start_type", "automatic"),
        *topics,
    )
    return Section(
        f"Floor bridge: controller {controller} to {len(bridge.nodes)} floor nodes",
        directives,
        (
            "Each table's topics, QoS 1. In: only its requests, one level, and the resend",
            "requests readers send at their own name (Mosquitto does not check a bridge",
            "against acl_file: the topic lines are all that bounds what the floor may send",
            "here). Out: all the table publishes, never its requests.",
            "max_queued_messages and max_queued_bytes above bound what waits for the floor.",
        ),
    )


def _floor_login(bridge: Bridge, password: str | None) -> tuple[Directive, ...]:
    """How the floor bridge logs in to the floor, and the status it leaves there."""
    return (
        Directive("remote_clientid", floor.bridge_client_id(bridge.controller), ("No '.': NATS.",)),
        Directive("remote_username", bridge.user),
        Directive(
            "remote_password",
            password if password is not None else "<credentials>",
            (f"credentials/{bridge.user}; the floor holds only its bcrypt hash.",),
        ),
        Directive(
            "notifications",
            "true",
            (
                "The floor learns whether this controller is there: 1 (retained) on connect,",
                "0 as the bridge's will when it goes silent. Not under $SYS: NATS refuses it.",
            ),
        ),
        Directive("notification_topic", bridge_status_topic(bridge.controller)),
    )


def _topic_lines(plan: BrokerPlan, out: str, back: str, about: str) -> list[Directive]:
    """Each table's topic lines of a bridge, QoS 1: what crosses to the floor
    (``floor.BRIDGE_OUT``) in direction ``out``, the requests that come back
    (``floor.BRIDGE_IN``, ``floor.BRIDGE_IN_USER``) in direction ``back``; ``about`` follows
    the table's id in the comment above its lines."""
    topics: list[Directive] = []
    for t in plan.tables:
        comment: tuple[str, ...] = (f"Table {t.table_id}: {about}",)
        for level in floor.BRIDGE_OUT:
            topics.append(Directive("topic", f"{t.base}/{level} {out} 1", comment))
            comment = ()
        topics += [
            Directive("topic", f"{t.base}/{level} {back} 1")
            for level in (floor.BRIDGE_IN, *floor.BRIDGE_IN_USER)
        ]
    return topics


def _bridge_tls(bridge: Bridge) -> tuple[Directive, ...]:
    """The bridge's TLS lines: it verifies each node's certificate, and the name in it,
    with the floor CA, so its password goes only inside TLS and only to a node."""
    if bridge.ca is None:
        return ()
    return (
        Directive(
            "bridge_cafile",
            str(bridge.ca),
            (
                "The floor CA (floor-config's ca.crt): each node's certificate must be signed",
                "by it and name the node's address above (bridge_insecure stays false).",
            ),
        ),
        Directive("bridge_tls_version", "tlsv1.2"),
    )


def render_bridge_conf(
    plan: BrokerPlan, bridge_password: str | None = None, local_password: str | None = None
) -> str:
    """The text of bridge.conf, the floor bridge's own Mosquitto (docs/floor/cluster.md)."""
    head = "# Mosquitto for the floor bridge of this controller, beside the tables' broker."
    return render_sections(plan, head, bridge_conf_sections(plan, bridge_password, local_password))


def render_bridge_acl(plan: BrokerPlan) -> str:
    """The bridge broker's ACL: an anonymous client (the probe) may use its topics only."""
    return (
        "# Mosquitto access control of the floor bridge's own broker (bridge.conf).\n"
        f"# {GENERATED_BY}; do not edit: run it again.\n"
        "# Before any user line: what an anonymous client may do (allow_anonymous true on\n"
        "# its one loopback listener): the watchdog's probe, its own topics only.\n"
        f"topic readwrite {PROBE_ROOT}/#\n"
    )


def render_bridge_unit(plan: BrokerPlan) -> str:
    """``lammer-bridge.service``: the bridge broker run by its watchdog."""
    bridge = plan.bridge
    if bridge is None:
        raise ValueError("the bridge's unit is rendered only for a plan with a bridge")
    return f"""# lammer: the floor bridge of controller {bridge.controller}, in a Mosquitto
# of its own, run and watched by lammer bridge-watchdog. {GENERATED_BY}; do not edit.
#
#   install (as root):
#     install -m 0644 {plan.bridge_unit_path} /etc/systemd/system/
#     install -d -o {plan.broker_user} -g {plan.broker_user} -m 0700 {bridge.data_dir}
#     systemctl daemon-reload && systemctl enable --now {BRIDGE_UNIT}
#   check:   systemctl status {BRIDGE_UNIT}; journalctl -u {BRIDGE_UNIT}
#
# The tables' broker (mosquitto.service on {plan.conf_path}) has no bridge: whatever
# the floor link does, it serves the daemons and displays. The watchdog probes this
# broker (an MQTT round trip on {bridge.listen}) and, when it gets no answer in time,
# ends it: SIGTERM, then SIGKILL when that is ignored (Mosquitto 2.0.11 spinning on a
# failed TLS handshake ignores it), and starts it again (docs/floor/cluster.md).

[Unit]
Description=lammer floor bridge of controller {bridge.controller} (watched Mosquitto)
Documentation=man:mosquitto.conf(5)
After=network-online.target mosquitto.service
Wants=network-online.target

[Service]
Type=notify
NotifyAccess=main
ExecStart=/opt/lammer/bin/lammer bridge-watchdog --conf {plan.bridge_conf_path}
# The watchdog's own liveness: it says WATCHDOG=1 every few seconds while it runs.
WatchdogSec=30
Restart=always
RestartSec=2
TimeoutStopSec=20
User={plan.broker_user}
Group={plan.broker_user}
NoNewPrivileges=yes
ProtectSystem=strict
ReadWritePaths={bridge.data_dir}
ProtectHome=yes
PrivateTmp=yes
PrivateDevices=yes
ProtectKernelTunables=yes
ProtectKernelModules=yes
ProtectControlGroups=yes
RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6
CapabilityBoundingSet=
LockPersonality=yes
RestrictRealtime=yes
RestrictSUIDSGID=yes
SystemCallArchitectures=native

[Install]
WantedBy=multi-user.target
"""
