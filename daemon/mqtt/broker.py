"""How the link reaches its broker: the address, the login, TLS and the bounds that every
connection of the link (the session's and the survey's) is made with."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import aiomqtt
import structlog

from contract.session import session

log = structlog.get_logger("lammer.mqtt")


class TlsSettings(Protocol):
    """TLS to the broker (``daemon.config.TlsSection`` fits): the CA that signed the
    broker's certificate (None: the system store), and a client certificate if it asks."""

    @property
    def ca_file(self) -> Path | None: ...
    @property
    def cert_file(self) -> Path | None: ...
    @property
    def key_file(self) -> Path | None: ...


@dataclass(frozen=True)
class BrokerSettings:
    """Where the broker is and how to log in. ``timeout`` bounds a connect and each
    acknowledgement; ``close_timeout`` a disconnect and what a stop still sends."""

    host: str
    port: int
    client_id: str
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    tls: TlsSettings | None = None
    keepalive: int = 30
    timeout: float = 10.0
    close_timeout: float = 2.0

    @property
    def address(self) -> str:
        """``host:port``, as the logs and errors say it."""
        return f"{self.host}:{self.port}"

    def tls_params(self) -> aiomqtt.TLSParameters | None:
        """The client's TLS parameters, None without TLS."""
        if self.tls is None:
            return None
        return aiomqtt.TLSParameters(
            ca_certs=str(self.tls.ca_file) if self.tls.ca_file else None,
            certfile=str(self.tls.cert_file) if self.tls.cert_file else None,
            keyfile=str(self.tls.key_file) if self.tls.key_file else None,
        )

    def connected(
        self, client: aiomqtt.Client, *, within: float | None = None
    ) -> contextlib.AbstractAsyncContextManager[aiomqtt.Client]:
        """``async with client``, each way bounded (``session``): a broker that does not
        answer is an outage, not a hang."""
        return session(
            client,
            within=self.timeout if within is None else within,
            close_within=self.close_timeout,
            on_close_error=_log_close_error,
        )


def _log_close_error(exc: BaseException) -> None:
    log.debug("mqtt disconnect after an error failed", error=str(exc))
