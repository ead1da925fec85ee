"""The ACL file: rendered from the plan's users, and read back as Mosquitto 2.0 reads it."""

from __future__ import annotations

from deploy.broker_config.model import GENERATED_BY, BrokerPlan, Grant


def render_acl(plan: BrokerPlan) -> str:
    """The text of the ACL file: one ``user`` block per user, its grants under it."""
    lines = [
        "# Mosquitto access control for the lammer tables of this controller.",
        f"# {GENERATED_BY}; do not edit: run it again.",
        "# Every grant names a table's own base topic <prefix>/<table id> (mqtt-api.md",
        '# "Conventions"). No grant comes before the first user line, so a client without',
        "# a user name (refused anyway: allow_anonymous false) would be granted nothing.",
    ]
    for user in plan.users:
        lines += ["", f"# {user.about}.", f"user {user.name}"]
        lines += [f"topic {g.access} {g.topic}" for g in user.grants]
    return "\n".join(lines) + "\n"


def read_acl(text: str) -> dict[str | None, list[Grant]]:
    """The grants per user (None: anonymous) as Mosquitto 2.0's ACL file reader sees them.

    Lines end at LF; trailing white space is dropped; a line starting with ``#`` is a
    comment; ``user <name>`` (the rest of the line, blanks trimmed) starts a user's block;
    ``topic [read|write|readwrite|deny] <topic>`` adds a grant to the current block (the
    access word is optional). Raises ``ValueError`` for any other line, as Mosquitto
    refuses to start on one; ``pattern`` lines, which apply to every user, are refused too.
    """
    grants: dict[str | None, list[Grant]] = {}
    user: str | None = None
    for number, raw in enumerate(text.split("\n"), start=1):
        line = raw.rstrip(" \t\n\v\f\r")
        if not line or line.startswith("#"):
            continue
        head, _, rest = line.lstrip(" ").partition(" ")
        if head == "user":
            user = rest.strip(" \t")
            if not user:
                raise ValueError(f"line {number}: user without a name")
        elif head == "topic":
            access, _, topic = rest.lstrip(" ").partition(" ")
            topic = topic.strip(" \t")
            if not topic:
                access, topic = "readwrite", access
            if access not in ("read", "write", "readwrite"):
                raise ValueError(f"line {number}: access {access!r} is not granted here")
            grants.setdefault(user, []).append(Grant(access, topic))  # type: ignore[arg-type]
        elif head:
            raise ValueError(f"line {number}: not a user or topic line: {line[:60]!r}")
    return grants


def topic_filter_problem(topic: str) -> str | None:
    """Why ``topic`` is not a subscription filter Mosquitto accepts in an ACL, or None
    (MQTT 3.1.1 section 4.7: ``+`` and ``#`` fill a whole level, ``#`` last; at most
    65,535 bytes; no control characters, which Mosquitto's UTF-8 check refuses)."""
    if not topic or len(topic.encode()) > 65535:
        return "empty or longer than 65,535 bytes"
    if any(not c.isprintable() for c in topic):
        return "holds a control character"
    levels = topic.split("/")
    for i, level in enumerate(levels):
        if ("+" in level or "#" in level) and level not in ("+", "#"):
            return f"wildcard inside level {level!r}"
        if level == "#" and i != len(levels) - 1:
            return "'#' before the last level"
    return None
