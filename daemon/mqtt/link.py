"""``MqttLink``: one table's link to its broker, made of the session, the publisher and
the inbox (``daemon.mqtt`` says what the link does; each part's module, how)."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable

from daemon.intake import SHED_AT, SHED_FOR, RequestGate
from daemon.mqtt.broker import BrokerSettings, TlsSettings
from daemon.mqtt.inbox import Inbox, RequestHandler
from daemon.mqtt.publisher import Publisher
from daemon.mqtt.session import Session
from daemon.mqtt.survey import survey
from daemon.outbox import Outbox, OutboxMessage
from foundation.backoff import Backoff


class MqttLink:
    """One table's connection to the broker. See ``daemon.mqtt`` for what it does.

    ``base_topic`` is ``<prefix>/<table_id>``; topics of ``OutboxMessage`` are relative to
    it. ``window`` is how many QoS 1 publishes may await their PUBACK at once (order is
    kept: they are written in ``seq`` order on one connection and marked in that order).
    ``timeout`` bounds a connect and each acknowledgement; a PUBACK that takes longer
    means the connection is dead, and it is dropped and made again.

    ``on_journal_error`` is told when the journal refuses to mark messages published;
    ``on_login`` ``True`` when the broker refuses the login after the start (the table
    raises ``MQTT_LOGIN_REFUSED``), ``False`` when it takes it again; ``on_published`` of
    the outbox messages the broker acknowledged, in seq order (the metrics).

    Its parts: ``session`` (the connection, made again whenever it drops:
    ``daemon.mqtt.session``), ``publisher`` (the outbox, and the copies:
    ``daemon.mqtt.publisher``) and ``inbox`` (the requests in: ``daemon.mqtt.inbox``).
    """

    def __init__(  # 23 settings, one a line (27 lines), then the parts built
        self,
        *,
        host: str,
        port: int,
        client_id: str,
        base_topic: str,
        outbox: Outbox,
        on_request: RequestHandler,
        username: str | None = None,
        password: str | None = None,
        tls: TlsSettings | None = None,
        keepalive: int = 30,
        backoff: Backoff | None = None,
        rng: random.Random | None = None,
        window: int = 20,
        timeout: float = 10.0,
        close_timeout: float = 2.0,
        floor_resend: float = 0.0,
        intake: RequestGate | None = None,
        shed_at: int | None = SHED_AT,
        shed_for: float = SHED_FOR,
        on_journal_error: Callable[[], None] | None = None,
        on_login: Callable[[bool], None] | None = None,
        on_published: Callable[[list[OutboxMessage]], None] | None = None,
    ) -> None:
        _check(base_topic, window, floor_resend)
        self._base = base_topic
        self._broker = BrokerSettings(
            host=host,
            port=port,
            client_id=client_id,
            username=username,
            password=password,
            tls=tls,
            keepalive=keepalive,
            timeout=timeout,
            close_timeout=close_timeout,
        )
        self._backoff = backoff or Backoff()
        self._rng = rng or random.Random()  # noqa: S311  reconnect jitter, not a secret
        self._wake = asyncio.Event()
        self.publisher = Publisher(
            base=base_topic,
            outbox=outbox,
            wake=self._wake,
            window=window,
            timeout=timeout,
            retry_every=self._backoff.maximum,
            floor_resend=floor_resend,
            on_journal_error=on_journal_error,
            on_published=on_published,
        )
        self.inbox = Inbox(
            base=base_topic,
            on_request=on_request,
            wake=self._wake,
            timeout=timeout,
            intake=intake,
            shed_at=shed_at,
            shed_for=shed_for,
        )
        self.session = Session(
            broker=self._broker,
            base=base_topic,
            publisher=self.publisher,
            inbox=self.inbox,
            wake=self._wake,
            window=window,
            backoff=self._backoff,
            rng=self._rng,
            floor_resend=floor_resend,
            on_login=on_login,
        )

    # -- the session ---------------------------------------------------------------------

    @property
    def connected(self) -> bool:
        """True while a connection to the broker is up (for the daemon's health check)."""
        return self.session.connected

    @property
    def availability_topic(self) -> str:
        """``<base>/availability``: ``online``, or ``offline`` (also the will message)."""
        return self.session.availability_topic

    @property
    def tcp_nodelay(self) -> bool | None:
        """Whether Nagle is off on the live connection's socket (None when not connected)."""
        return self.session.tcp_nodelay

    @property
    def available(self) -> bool:
        """What ``availability`` says: True for ``online`` (``set_available``)."""
        return self.session.available

    def set_available(self, available: bool) -> None:
        """Say ``online`` or ``offline`` on ``availability`` from now on (also after every
        reconnect): ``offline`` while the daemon runs but cannot keep a record (its journal
        refuses to write), and ``online`` again after."""
        self.session.set_available(available)

    async def run(self) -> None:
        """Keep the link up until cancelled or ``close()``d (``Session.run``)."""
        await self.session.run()

    async def close(self) -> None:
        """Publish ``offline``, disconnect, and let ``run()`` return. Idempotent."""
        await self.session.close()

    async def survey(
        self, keep: frozenset[str], *, quiet: float = 0.15, within: float = 3.0
    ) -> int | None:
        """Before the table starts: the highest ``seq`` the broker retains under the base
        topic, after clearing every retained topic not in ``keep``; None when the broker
        cannot be reached (``daemon.mqtt.survey``)."""
        return await survey(
            self._broker,
            self._base,
            keep,
            backoff=self._backoff,
            rng=self._rng,
            quiet=quiet,
            within=within,
        )

    # -- the publisher -------------------------------------------------------------------

    def notify(self) -> None:
        """New messages are in the outbox: wake the drain (sync; call from the loop)."""
        self._wake.set()

    def resend(self, messages: list[OutboxMessage]) -> None:
        """Publish ``messages`` again (``request/resend``): same topics and bytes, never
        retained, marked with the user property ``resent``, after the copies queued
        before them, and never ahead of the table's own pending messages."""
        self.publisher.resend(messages)

    @property
    def resend_backlog(self) -> int:
        """``request/resend`` copies queued and not yet published."""
        return self.publisher.backlog

    @property
    def published(self) -> int:
        """How many outbox messages this link has had acknowledged since it started."""
        return self.publisher.published

    @property
    def resent(self) -> int:
        """Messages published again because the floor bridge dropped (``floor_resend``)."""
        return self.publisher.resent

    @property
    def copies_sent(self) -> int:
        """Copies published for ``request/resend``."""
        return self.publisher.copies_sent

    # -- the inbox -----------------------------------------------------------------------

    @property
    def intake(self) -> RequestGate:
        """The rate the table serves requests at (``daemon.intake``); its counts."""
        return self.inbox.intake

    @property
    def user_gates(self) -> dict[str, RequestGate]:
        """Per user, the gate of its requests at the user level (``user_gate``)."""
        return self.inbox.user_gates

    def user_gate(self, user: str) -> RequestGate:
        """The gate of ``user``'s requests at the user level (``Inbox.user_gate``)."""
        return self.inbox.user_gate(user)

    @property
    def requests_overflowed(self) -> int:
        """Requests dropped because ``REQUEST_QUEUE`` were already waiting."""
        return self.inbox.requests_overflowed

    @property
    def sheds(self) -> int:
        """Times a request subscription was left unread for a flood (``daemon.intake``)."""
        return self.inbox.sheds


def _check(base_topic: str, window: int, floor_resend: float) -> None:
    """Raise ``ValueError`` for a base topic, window or ``floor_resend`` the link cannot use."""
    if not base_topic or any(ch in base_topic for ch in "+#\0") or base_topic.endswith("/"):
        raise ValueError(f"not a usable base topic: {base_topic!r}")
    if window < 1:
        raise ValueError(f"window must be at least 1, got {window}")
    if not 0 <= floor_resend <= 3600:
        raise ValueError(f"floor_resend must be 0 to 3600 seconds, got {floor_resend}")
