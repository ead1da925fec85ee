"""A Mosquitto configuration for the tables of one table controller (``lammer broker-config``).

Only the right clients may act on a table (mqtt-api.md): a table's own daemon publishes its
state and answers its requests, displays only read, pit terminals read and send requests.
``plan_broker`` turns the tables' configurations and a few options into a ``BrokerPlan``;
``generate`` writes it into one directory:

    DIR/mosquitto.conf      0640 root:<broker group>   listeners, security, limits, persistence
    DIR/passwd              0600 <broker user>         one ``user:$7$...`` line per user, as
                                                       Debian's mosquitto_passwd 2.0 writes it
    DIR/acl                 0600 <broker user>         per user, the topics it may read or write
    DIR/credentials/        0700                       (the invoking user's: root in production)
    DIR/credentials/<user>  0600                       that user's password, one line

Users: ``lammer-<table id>`` per table (read and write its own base topic
``<prefix>/<table id>/#``, which holds its requests), ``display`` and ``display-<name>``
(read every table, publish only ``request/resend/<its own name>``, mqtt-api.md 1.4),
``terminal`` and ``terminal-<name>`` (read every table, publish only
``<prefix>/<table id>/request/+``) and ``records`` (read every table, publish
``request/resend/records`` and the integrity topics). Each user's own name is written
into its own grant (``resend_grant``) rather than as a ``pattern ... %u`` line: a pattern
applies to every user, the daemons' and the terminals' too, and the file stays one block
per user that ``read_acl`` can read back. Ownership is set only when run as root: Mosquitto
started as root drops to ``user`` (``--broker-user``, default ``mosquitto``) *before* it
reads passwd and acl (seen with 2.0.11: a root-only passwd is "Unable to open pwfile").

Idempotent, as the style guide asks of generators: the files are rendered from the
templates of ``render`` and ``bridge``, so the same tables give the same bytes and two runs
can be diffed; a password in ``credentials/`` is kept, and its passwd line too (kept byte
for byte while it still verifies, so passwd does not churn with new salts); ``generate``
returns what it changed. To change one password, delete its credentials file and run again.

Nothing the configurations hold can add a line to a generated file: ``daemon.config``
refuses control characters, spaces and wildcards in table ids and prefixes, this package
refuses what cannot be a Mosquitto user name or a safe file value, and every rendered file
is read back the way Mosquitto 2.0 reads it and must mean exactly the plan (``read_acl``,
``read_conf``, ``read_passwd``) before anything is written.

Choices (also in docs/floor/broker.md):

* The daemons' listener is the ``[mqtt] host`` and ``port`` the configurations share, on
  loopback, plain, with a connection limit of its own (nothing on the network can crowd
  the daemons out). Configurations naming different brokers, a host that is not loopback
  or ``[mqtt.tls]`` are refused: the daemons and this broker share one controller.
* ``--listen HOST:PORT`` adds a listener for displays and terminals on the network; with
  ``--tls-cert/--tls-key/--tls-ca`` it is TLS (TLS 1.2 at least; default ``0.0.0.0:8883``).
  Passwords authenticate on every listener; no client certificates.
* Tables may have different prefixes: every grant names a table's own base topic. One base
  topic inside another (prefix ``lammer/t1`` for table ``x``, beside table ``t1``) is
  refused: ``t1``'s daemon could write the other table's state.

The floor bridge (``--bridge HOST:PORT[,HOST:PORT...]``) parses with ``parse_endpoint``
into a ``bridge`` field of ``BrokerPlan`` (``plan_broker`` checks it with the rest). It runs
in a Mosquitto of its own (a 2.0.11 bridge that fails TLS can hang the broker it
is in), so ``mosquitto.conf`` has none and three more files are written:

    DIR/bridge.conf            0640 root:<broker group>   the bridge broker: one loopback
                                                       listener (the watchdog's probe), a
                                                       bridge ``tables`` to this broker as
                                                       user ``floor-bridge`` and the bridge
                                                       ``floor``
    DIR/bridge.acl             0600 <broker user>         the probe's topics only
    DIR/lammer-bridge.service  0644                       the unit: ``lammer bridge-watchdog``

The floor bridge is the last section of ``bridge.conf``, rendered by ``_bridge_section``
(every option after a ``connection`` line belongs to that bridge):
``address`` with every cluster node, ``cleansession false``, ``try_private false``,
``notifications true``, a ``remote_clientid`` without ``.`` or spaces, and ``topic`` lines
from ``BrokerPlan.tables`` (each base topic's state out, its ``request/+`` and
``request/resend/+`` in, QoS 1).
Mosquitto does not check a bridge's traffic against ``acl_file``, so those ``topic ... in``
lines are all that bounds what the floor may send: name each table's ``request/+``, never a
wildcard above it. Its password is kept as the users' are (a ``credentials/`` entry read
or made by ``_password_for``) and written as ``remote_password`` into ``bridge.conf``,
which is why that file is 0640 root:<broker group>; ``check_rendered`` reads both files
back like every other. The limits already serve a bridge: persistence keeps its
queue across a restart, and ``max_queued_messages`` is sized for a floor outage.

Errors: ``BrokerConfigError`` (a ``deploy.generators.ProblemsError``, so a ``DaemonError``
and a ``ValueError``), ``problems`` listing every one.

The package, a module per concern (each imports only the ones above it here):

    limits      the broker's limits and the bridge's timings, each with its reason
    model       BrokerPlan and what it is made of; BrokerConfigError
    users       the users and their grants
    validate    the checks of the tables and options, each a sentence
    plan        plan_broker
    render      mosquitto.conf: its sections, render_conf, read_conf
    bridge      the bridge broker's bridge.conf, bridge.acl and unit (``_bridge_section``)
    acl         render_acl, read_acl
    passwords   passwd: hash_password, verify_password, read_passwd, render_passwd
    check       check_rendered: every file read back before anything is written
    write       generate, and how each table is wired

What floor-config writes alike (the error, the readers' names, the kept credentials) is
``deploy.generators``.

Its public names are re-exported here: ``from deploy.broker_config import plan_broker``.
"""

from deploy.broker_config.acl import read_acl, render_acl, topic_filter_problem
from deploy.broker_config.bridge import render_bridge_acl, render_bridge_conf, render_bridge_unit
from deploy.broker_config.check import check_rendered
from deploy.broker_config.limits import (
    BRIDGE_LISTEN,
    BRIDGE_RESTART,
    LARGEST_PAYLOAD,
    MAX_INFLIGHT_MESSAGES,
    MAX_PACKET_SIZE,
    MAX_QUEUED_MESSAGES,
    MESSAGE_SIZE_LIMIT,
    PROBE_ROOT,
    REQUEST_MAX,
)
from deploy.broker_config.model import (
    DEFAULT_BROKER_USER,
    DEFAULT_DATA_DIR,
    DEFAULT_TLS_LISTEN,
    BrokerConfigError,
    BrokerPlan,
    Grant,
    Listener,
    daemon_user,
)
from deploy.broker_config.passwords import (
    hash_password,
    read_passwd,
    render_passwd,
    verify_password,
)
from deploy.broker_config.plan import plan_broker
from deploy.broker_config.render import read_conf, render_conf
from deploy.broker_config.write import Generated, generate, wiring_lines

__all__ = [
    "BRIDGE_LISTEN",
    "BRIDGE_RESTART",
    "DEFAULT_BROKER_USER",
    "DEFAULT_DATA_DIR",
    "DEFAULT_TLS_LISTEN",
    "LARGEST_PAYLOAD",
    "MAX_INFLIGHT_MESSAGES",
    "MAX_PACKET_SIZE",
    "MAX_QUEUED_MESSAGES",
    "MESSAGE_SIZE_LIMIT",
    "PROBE_ROOT",
    "REQUEST_MAX",
    "BrokerConfigError",
    "BrokerPlan",
    "Generated",
    "Grant",
    "Listener",
    "check_rendered",
    "daemon_user",
    "generate",
    "hash_password",
    "plan_broker",
    "read_acl",
    "read_conf",
    "read_passwd",
    "render_acl",
    "render_bridge_acl",
    "render_bridge_conf",
    "render_bridge_unit",
    "render_conf",
    "render_passwd",
    "topic_filter_problem",
    "verify_password",
    "wiring_lines",
]
