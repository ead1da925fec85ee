"""The configuration of the floor cluster (``lammer floor-config``): nats-server nodes
(2.15.1, pinned in requirements-floor.txt) with JetStream and their MQTT listener, to which
every table controller bridges its tables, every hop over TLS.

``plan_floor`` turns the number of nodes, their hosts and ports, and the controllers'
declarations (``floor-controller.json``, written by ``lammer broker-config --bridge``)
into a ``FloorPlan``; ``generate`` writes it into one directory:

    DIR/floor-<i>/nats.conf    0600   node i's whole configuration (install it on node i
                                      as /etc/lammer/floor/nats.conf, 0640 root:nats)
    DIR/credentials/           0700
    DIR/credentials/display    0600   the floor's users' passwords, one line each
    DIR/credentials/terminal   0600
    DIR/credentials/records    0600
    DIR/credentials/route      0600   what the nodes log in to each other with
    DIR/ca.crt, DIR/ca/ca.key, DIR/floor-<i>/node.crt, DIR/floor-<i>/node.key
                                      the floor CA and each node's certificate
                                      (``deploy.floor_tls``): MQTT and routes over TLS

Users (every one may connect over MQTT only, ``allowed_connection_types``; the NATS client
port listens on loopback and nobody may use it):

* ``bridge-<controller>``, one per declaration: publishes under its own tables' base
  topics, never their ``request/``, and its bridge's status topic
  (``lammer-floor/bridge/<controller>``); subscribes to its tables' ``request/+`` and
  ``request/resend/+`` only.
  Its password stays on the controller: the declaration carries its bcrypt hash.
* ``display``: reads every table of every prefix declared (and ``lammer``), and the
  bridges' status; publishes only the declared tables' ``request/resend/display``
  (mqtt-api.md 1.3 and 1.4: a reader that lost messages asks for them again,
  ``contract.feed``, at its own name, so the table budgets it apart).
* ``terminal``: reads as ``display``; publishes the requests of the declared tables (the
  bare ``request/<name>``).
* ``records`` (``lammer records``): reads as ``display``; publishes the declared tables'
  ``request/resend/records`` and the floor's integrity topics
  (``lammer-floor/integrity/<table>``).

Each user's own name is written into its own permission: nats-server's config-file users
have no ``%u`` (its templates are for JWT accounts), and a subject per user says the same.

NATS permissions are subjects: an MQTT topic's ``/`` is a ``.``, ``+`` is ``*``, and a
filter ending in ``#`` is two subjects (``lammer/t1/#`` is ``lammer.t1`` and
``lammer.t1.>``, ``deploy.floor.nats_filter``). A QoS 1 subscription is delivered by
JetStream on ``$MQTT.sub.<id>``, so every user that subscribes is granted that too (MQTT
clients cannot subscribe to it themselves: nats-server refuses the filter).

The cluster: every node routes to every other (``cluster.routes``, logging in as
``route``), JetStream stores the MQTT sessions, the retained messages and the QoS 1
messages in flight with ``min(N, 3)`` replicas, so a cluster of three keeps working, and
loses nothing acknowledged, when one node dies. Nodes that share a host (a lab cluster on
one machine) get consecutive ports.

Idempotent, as broker-config: the files are rendered from one plan as JSON (which
nats-server reads, ``#`` comments included) with a comment above each part, so two runs can
be diffed; passwords are kept in ``credentials/`` and their bcrypt hashes in the node files
while they verify. Every value is written by ``json.dumps`` and must be printable without
an escape other than ``\"`` and ``\\`` (the only ones nats-server and JSON share); every
rendered file is read back (comments dropped, JSON parsed) and must be the plan, and is
parsed by ``nats-server -t`` when it is installed, before anything is written.

Errors: ``FloorConfigError`` (a ``deploy.generators.ProblemsError``, so a ``DaemonError`` and
a ``ValueError``), ``problems`` listing every one.

The package, a module per concern (each imports only the ones above it here):

    model       FloorPlan and what it is made of, the floor's figures; FloorConfigError
    validate    the checks of the declarations and of ``--out``, each a sentence
    plan        plan_floor
    users       the floor's users and their permissions
    render      a node's nats.conf: node_config, render_node, read_node
    check       check_rendered: every node file read back (and ``nats-server -t``)
    write       generate

What broker-config writes alike (the error, the readers' names, the kept credentials) is
``deploy.generators``.

Its public names are re-exported here: ``from deploy.floor_config import plan_floor``.
"""

from deploy.floor_config.check import check_rendered, installed_nats_server
from deploy.floor_config.model import TLS_TIMEOUT, FloorConfigError, FloorPlan, Node
from deploy.floor_config.plan import plan_floor
from deploy.floor_config.render import node_config, read_node, render_node
from deploy.floor_config.users import floor_users
from deploy.floor_config.write import Generated, generate
from deploy.generators import DISPLAY, TERMINAL

__all__ = [
    "DISPLAY",
    "TERMINAL",
    "TLS_TIMEOUT",
    "FloorConfigError",
    "FloorPlan",
    "Generated",
    "Node",
    "check_rendered",
    "floor_users",
    "generate",
    "installed_nats_server",
    "node_config",
    "plan_floor",
    "read_node",
    "render_node",
]
