"""The link to the MQTT broker: publish the journal's outbox in order, answer requests.

``MqttLink.run()`` keeps one connection to the broker for as long as the daemon runs
(mqtt-api.md). The link is three parts of one job each, composed by ``MqttLink``:

* the session (``daemon.mqtt.session``): connect, with TLS (``daemon.mqtt.broker``) and
  the will ``offline``; subscribe the requests, then say ``online``; reconnect after a
  backoff and log each outage once; follow the floor bridge's status; say ``offline``
  before a clean stop. ``survey`` (``daemon.mqtt.survey``) reads what the broker retains
  before the table starts;
* the publisher (``daemon.mqtt.publisher``): the retained state again on each connection,
  then ``Outbox.pending()`` in ``seq`` order, each message marked once acknowledged
  (PUBACK); ``notify()`` wakes it when the journal queued more; the copies of
  ``request/resend`` (``resend()``) and of ``floor_resend``;
* the inbox (``daemon.mqtt.inbox``): requests received, gated by the table's and each
  user's rate (``daemon.intake``), queued across connections and handed to ``on_request``
  one at a time; a flood left unread; a retained request cleared and answered with an
  error, never acted on.

Nothing is lost to an outage: unacknowledged messages stay pending in the journal and go
out, in order, on the next connection, and requests already received are still handed on.

MQTT 5 (the daemon only ever connects to its own controller's Mosquitto; the floor's
nats-server, which speaks 3.1.1 only, is reached through Mosquitto's bridge). Sessions:
the link connects with **clean start** and no session expiry (MQTT 5's clean session): a
request published while the daemon is not connected is not queued for it by the broker,
and gets no response; the pit terminal sees ``availability`` ``offline`` and sends it
again once ``online``. A stickperson's decision is made against the table as it is now;
a decision delivered minutes late could void a roll nobody means to void any more. The
will (``offline``, retained, QoS 1, no will delay) is the same as under 3.1.1.
"""

from daemon.mqtt.broker import BrokerSettings, TlsSettings
from daemon.mqtt.inbox import REQUEST_LEVELS, REQUEST_OPTIONS, REQUEST_QUEUE, RequestHandler
from daemon.mqtt.link import MqttLink
from daemon.mqtt.publisher import resent_properties
from daemon.mqtt.session import BRIDGE_STATUS, OFFLINE, ONLINE

__all__ = [
    "BRIDGE_STATUS",
    "OFFLINE",
    "ONLINE",
    "REQUEST_LEVELS",
    "REQUEST_OPTIONS",
    "REQUEST_QUEUE",
    "BrokerSettings",
    "MqttLink",
    "RequestHandler",
    "TlsSettings",
    "resent_properties",
]
