"""mosquitto.conf of the tables' broker: its sections, the text rendered from them, and
``read_conf``, which reads a rendered file back as Mosquitto 2.0 does."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from deploy.broker_config.limits import (
    AUTOSAVE_INTERVAL,
    BRIDGE_BROKER_USER,
    BRIDGE_INFLIGHT_MESSAGES,
    LARGEST_PAYLOAD,
    MAX_INFLIGHT_MESSAGES,
    MAX_PACKET_SIZE,
    MAX_QUEUED_BYTES,
    MAX_QUEUED_MESSAGES,
    MESSAGE_SIZE_LIMIT,
    PERSISTENT_CLIENT_EXPIRATION,
)
from deploy.broker_config.model import GENERATED_BY, BrokerPlan, Listener


@dataclass(frozen=True, slots=True)
class Directive:
    """One ``key value`` line of mosquitto.conf, with the comment lines written above it."""

    key: str
    value: str
    comment: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Section:
    """A titled group of directives."""

    title: str
    directives: tuple[Directive, ...]
    comment: tuple[str, ...] = ()


def conf_sections(plan: BrokerPlan, bridge_password: str | None = None) -> tuple[Section, ...]:
    """mosquitto.conf (the tables' broker) as sections, in file order. It has no bridge:
    the floor bridge runs in a broker of its own (``bridge_conf_sections``), so nothing the
    floor link does can stop this one serving its daemons and displays.
    ``bridge_password`` is unused here (kept for the callers' shape)."""
    del bridge_password
    return (
        process_section(plan),
        _security_section(plan),
        *(_listener_section(listener) for listener in plan.listeners),
        limits_section(bridged=False),
        _persistence_section(plan),
        _bridge_note(plan),
    )


def _bridge_note(plan: BrokerPlan) -> Section:
    if plan.bridge is None:
        return Section(
            "Floor bridge",
            (),
            ("None (broker-config --bridge writes one, in a broker of its own: bridge.conf).",),
        )
    return Section(
        "Floor bridge",
        (),
        (
            "Not here: in a Mosquitto of its own (bridge.conf, lammer-bridge.service), which",
            f"logs in here as {BRIDGE_BROKER_USER} (grants in acl). A floor link that fails",
            "however it fails (a wrong CA, a node that never answers TLS, one that resets,",
            "a flapping floor) cannot stop this broker serving its daemons and displays;",
            "a watchdog restarts that one when it stops answering (docs/floor/cluster.md).",
        ),
    )


def process_section(plan: BrokerPlan) -> Section:
    return Section(
        "Process",
        (
            Directive(
                "user",
                plan.broker_user,
                ("Started as root, Mosquitto drops to this user before it reads passwd and acl.",),
            ),
            Directive(
                "log_dest",
                "stderr",
                ("To the service's journal, which adds the time.",),
            ),
            Directive("log_timestamp", "false"),
            Directive("log_type", "error"),
            Directive("log_type", "warning"),
            Directive(
                "log_type",
                "notice",
                ("Notices name every connection and every client refused.",),
            ),
            Directive("log_type", "information"),
            Directive("connection_messages", "true"),
        ),
    )


def _security_section(plan: BrokerPlan) -> Section:
    return Section(
        "Who may connect, and what each user may do",
        (
            Directive(
                "per_listener_settings",
                "false",
                ("One password file and one ACL for every listener.",),
            ),
            Directive("allow_anonymous", "false"),
            Directive("password_file", str(plan.passwd_path)),
            Directive("acl_file", str(plan.acl_path)),
            Directive(
                "check_retain_source",
                "true",
                (
                    "A retained message goes out only while its publisher may still publish it:",
                    "a table taken off this broker takes its retained state with it.",
                ),
            ),
        ),
    )


def _listener_section(listener: Listener) -> Section:
    endpoint = listener.endpoint
    directives = [
        Directive("listener", f"{endpoint.port} {endpoint.host}"),
        Directive("max_connections", str(listener.max_connections)),
        Directive(
            "use_username_as_clientid",
            "true",
            (
                "Every client's id is its user name: nobody can connect with another",
                "user's client id and take its session over (a daemon's above all).",
                "One connection per user: a display or terminal of its own each",
                "(--display NAME, --terminal NAME).",
            ),
        ),
    ]
    if listener.purpose == "daemons":
        comment: tuple[str, ...] = (
            "The table daemons, at the [mqtt] host and port of their configurations:",
            "loopback only, so plain, with a connection limit of its own that nothing on",
            "the network can use up.",
        )
        title = "Listener: the table daemons"
    elif listener.tls is None:
        comment = (
            "Displays and pit terminals on the network. PLAIN: passwords and decisions",
            "cross the network in clear (give broker-config --tls-cert/--tls-key/--tls-ca).",
        )
        title = "Listener: displays and terminals"
    else:
        comment = (
            "Displays and pit terminals on the network, over TLS (1.2 at least); clients",
            "verify the broker with the CA below and log in with their password.",
        )
        title = "Listener: displays and terminals (TLS)"
        directives += [
            Directive("certfile", str(listener.tls.cert)),
            Directive("keyfile", str(listener.tls.key)),
            Directive("cafile", str(listener.tls.ca)),
            Directive("tls_version", "tlsv1.2"),
        ]
    return Section(title, tuple(directives), comment)


def limits_section(*, bridged: bool = False) -> Section:
    return Section(
        "Limits",
        (
            Directive(
                "set_tcp_nodelay",
                "true",
                ("Nagle off: with it, about 0.5% of small messages stall 40 ms.",),
            ),
            Directive(
                "message_size_limit",
                str(MESSAGE_SIZE_LIMIT),
                (
                    'Requests are at most 4 KiB (mqtt-api.md "Requests"); the largest payload a',
                    "daemon publishes, `state` with every alarm a table can hold, is under "
                    f"{LARGEST_PAYLOAD // 1024} KiB.",
                    "A larger publish is dropped and its connection kept. Mosquitto's start-up",
                    "note to use max_packet_size instead is expected: both are set, each for",
                    "its own end.",
                ),
            ),
            Directive(
                "max_packet_size",
                str(MAX_PACKET_SIZE),
                (
                    "A larger packet ends its connection before Mosquitto buffers it; a message",
                    "under message_size_limit, whatever its topic, always fits.",
                ),
            ),
            Directive(
                "max_inflight_messages",
                str(BRIDGE_INFLIGHT_MESSAGES if bridged else MAX_INFLIGHT_MESSAGES),
                (
                    "QoS 1 messages awaiting PUBACK per client (the bridge too): one, so a",
                    "floor node that dies with a window of messages cannot have the next",
                    "node take them out of seq order (measured: with 20 it does).",
                )
                if bridged
                else ("QoS 1 messages awaiting PUBACK per client, as the daemon's own window.",),
            ),
            Directive(
                "max_queued_messages",
                str(MAX_QUEUED_MESSAGES),
                (
                    "Per client, beyond those in flight (a slow client, a persistent session",
                    "away, a bridge to an unreachable floor): four hours of four tables.",
                ),
            ),
            Directive(
                "max_queued_bytes",
                str(MAX_QUEUED_BYTES),
                ("The memory one lagging client may hold.",),
            ),
            Directive(
                "persistent_client_expiration",
                PERSISTENT_CLIENT_EXPIRATION,
                ("The session of a client gone this long (a retired display) is dropped.",),
            ),
        ),
    )


def _persistence_section(plan: BrokerPlan) -> Section:
    return Section(
        "Persistence",
        (
            Directive("persistence", "true"),
            Directive("persistence_location", str(plan.data_dir)),
            Directive(
                "autosave_interval",
                str(AUTOSAVE_INTERVAL),
                (
                    "Saved every minute and at every clean stop: retained state (a stopped",
                    "table's `offline` included), persistent sessions and their queued QoS 1",
                    "messages survive a broker restart. The daemons also republish their",
                    "retained state on every reconnect, so a power cut loses no table state.",
                ),
            ),
        ),
    )


def render_conf(plan: BrokerPlan, bridge_password: str | None = None) -> str:
    """The text of mosquitto.conf, the tables' broker (it has no bridge)."""
    head = "# Mosquitto for the lammer tables of this controller."
    return render_sections(plan, head, conf_sections(plan, bridge_password))


def render_sections(plan: BrokerPlan, head: str, sections: Iterable[Section]) -> str:
    lines = [
        head,
        f"# {GENERATED_BY}; do not edit: run it again (it keeps the passwords and",
        "# says what it changed). lammer's docs/floor/broker.md says how to run it.",
        "# Tables:",
        *(f"#   {t.table_id} ({t.config.table.game}) at {t.base}" for t in plan.tables),
    ]
    for section in sections:
        lines += ["", f"# -- {section.title} " + "-" * max(3, 84 - len(section.title))]
        lines += [f"# {c}" for c in section.comment]
        for d in section.directives:
            lines += [f"# {c}" for c in d.comment]
            lines.append(f"{d.key} {d.value}")
    return "\n".join(lines) + "\n"


def read_conf(text: str) -> list[tuple[str, str]]:
    """The ``(key, value)`` of every option line, as Mosquitto 2.0 reads mosquitto.conf:
    comment (``#``) and blank lines skipped, the key up to the first space, the value the
    rest of the line without surrounding blanks."""
    out = []
    for raw in text.split("\n"):
        line = raw.rstrip(" \t\r\v\f")
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        key, _, value = line.strip().partition(" ")
        out.append((key, value.strip(" \t")))
    return out
