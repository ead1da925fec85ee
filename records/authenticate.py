"""The floor's software authenticator (``lammer authenticate``, mqtt-api.md 1.4;
docs/auditors/software-authentication.md).

It holds the casino's approved release manifests (``contract.manifest``, each verified
against the approved public keys at start) and, on a schedule, asks every table it knows
(from the tables' retained ``info``) to authenticate its software with a fresh random seed
(``request/authenticate/records``). From each manifest's components (their SHA-256s) it
computes the answer it expects for that seed (``contract.software.seeded``) and publishes,
retained, ``lammer-floor/software/<table>`` (``contract.floor.SoftwareBody``):

* ``approved``: the table's digest is the one expected from a manifest (named);
* ``unknown``: it matches none: ``differs`` names the first component whose HMAC is not the
  one expected from the manifest of the table's version (or the first manifest);
* ``silent``: no answer to this round's seed within ``timeout``.

An answer is taken only for the seed just asked and the request's own ``request_id``: an
answer carrying an earlier seed (a replay of a recorded answer, which a table that no
longer runs the approved software could send) is refused, logged and counted, and the table
stays ``silent`` unless it answers the seed asked. The pit shows a ``SOFTWARE`` alarm for
every table not ``approved`` (display/web).

Choices where the issue is silent: a round every 600 s by default (``--interval``), 30 s
to answer (``--timeout``); a seed of 32 bytes from ``secrets``; the 64 most recent seeds
remembered to tell a replay from another asker's answer (a terminal's own
``request/authenticate`` answers on the same topic, and is ignored).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import secrets
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import aiomqtt
import structlog

from contract.floor import SoftwareBody, software_topic
from contract.manifest import Manifest
from contract.requests import request_topic
from contract.session import FLOOR_KEEPALIVE, observe_disconnect
from contract.software import first_difference, seeded
from contract.topics import Topic
from foundation.tls import client_context

log = structlog.get_logger("lammer.authenticate")

INTERVAL_S: Final = 600.0
TIMEOUT_S: Final = 30.0
SEED_BYTES: Final = 32
REMEMBERED_SEEDS: Final = 64


@dataclass(frozen=True, slots=True)
class Verdict:
    """What an answer (or its absence) says of a table's software."""

    status: str
    manifest: str | None
    differs: str | None
    message: str


def judge(
    answer: Mapping[str, Any], seed: bytes, manifests: Sequence[Manifest], version: str | None
) -> Verdict:
    """The verdict on a table's ``response/authenticate`` to ``seed``: ``approved`` when
    its digest is the one a manifest gives for the seed (and so are its components),
    else ``unknown`` with the first component that differs."""
    digest = answer.get("digest")
    raw = answer.get("components")
    macs: dict[str, str] = {}
    if isinstance(raw, list):
        for item in raw:
            if isinstance(item, dict) and isinstance(item.get("path"), str):
                macs[item["path"]] = str(item.get("hmac"))
    expected = []
    for manifest in manifests:
        parts, whole = seeded(manifest.parts(), seed)
        same = isinstance(digest, str) and hmac.compare_digest(digest, whole)
        if same and macs == {c.path: c.digest for c in parts}:
            return Verdict(
                "approved",
                manifest.name,
                None,
                f"software approved: release manifest {manifest.name} (lammer {manifest.version})",
            )
        expected.append((manifest, {c.path: c.digest for c in parts}))
    closest = next(((m, e) for m, e in expected if m.version == version), expected[0])
    found = first_difference(macs, closest[1])
    differs = None if found is None else found[0]
    what = "its digest is not the one expected" if found is None else found[1]
    return Verdict(
        "unknown",
        None,
        differs,
        f"software matches no approved release: {what} (against {closest[0].name})",
    )


@dataclass
class Asked:
    """A table asked in this round: the seed and request id, and its answer once here."""

    seed: str
    request_id: str
    answered: asyncio.Event = field(default_factory=asyncio.Event)


@dataclass
class Authenticator:
    """The tables known, the round in progress and what has been refused."""

    manifests: tuple[Manifest, ...]
    prefixes: tuple[str, ...]
    user: str = "records"
    tables: dict[str, tuple[str, str | None]] = field(default_factory=dict)
    """base topic -> (table id, the version its ``info`` says)."""
    asked: dict[str, Asked] = field(default_factory=dict)
    past_seeds: deque[str] = field(default_factory=lambda: deque(maxlen=REMEMBERED_SEEDS))
    replays_refused: int = 0
    rounds: int = 0
    last_status: dict[str, str] = field(default_factory=dict)
    """table id -> its latest status."""
    published: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    """What this round is to publish: (topic, body)."""

    def base_of(self, topic: str, suffix: str) -> str | None:
        """The table's base topic of ``<prefix>/<table>/<suffix>``, or None."""
        for prefix in self.prefixes:
            head = prefix + "/"
            if topic.startswith(head) and topic.endswith("/" + suffix):
                table = topic[len(head) : -len(suffix) - 1]
                if table and "/" not in table:
                    return f"{prefix}/{table}"
        return None

    def received(self, topic: str, payload: bytes) -> None:
        """A message: a table's ``info`` (learnt), or a ``response/authenticate``."""
        try:
            data = json.loads(payload) if payload else None
        except (UnicodeDecodeError, ValueError):
            return
        if not isinstance(data, dict):
            return
        base = self.base_of(topic, Topic.INFO)
        if base is not None:
            table = data.get("table")
            if isinstance(table, str):
                version = data.get("version")
                self.tables[base] = (table, version if isinstance(version, str) else None)
            return
        base = self.base_of(topic, "response/authenticate")
        if base is not None:
            self._answer(base, data)

    def _answer(self, base: str, data: Mapping[str, Any]) -> None:
        asked = self.asked.get(base)
        seed = data.get("seed")
        ours = asked is not None and data.get("request_id") == asked.request_id
        if asked is not None and ours and seed == asked.seed and not asked.answered.is_set():
            table, version = self.tables.get(base, (base.rsplit("/", 1)[-1], None))
            if data.get("status") != "ok":
                verdict = Verdict(
                    "unknown", None, None, f"the table refused to authenticate: {data.get('error')}"
                )
            else:
                verdict = judge(data, bytes.fromhex(asked.seed), self.manifests, version)
            self._publish(table, version, verdict)
            asked.answered.set()
            return
        if ours and asked is not None and seed == asked.seed:
            return  # the answer taken, delivered again (QoS 1): nothing new
        if ours or seed in self.past_seeds:
            # An answer to a seed not the one just asked: a replay, never taken.
            self.replays_refused += 1
            log.warning(
                "authentication answer refused: not to the seed just asked (a replay?)",
                table=base,
                request_id=str(data.get("request_id"))[:80],
                replays_refused=self.replays_refused,
            )

    def _publish(self, table: str, version: str | None, verdict: Verdict) -> None:
        body = SoftwareBody(
            table=table,
            ts=_now(),
            status=verdict.status,  # type: ignore[arg-type]  # judge() says one of three
            version=version,
            manifest=verdict.manifest,
            differs=verdict.differs,
            message=verdict.message,
        )
        self.published.append((software_topic(table), body.model_dump(mode="json")))
        self.last_status[table] = verdict.status
        level = log.info if verdict.status == "approved" else log.warning
        level("software status", table=table, status=verdict.status, message=verdict.message)

    def begin_round(self) -> list[tuple[str, str]]:
        """A fresh seed for every table known: the requests to publish (topic, payload)."""
        self.rounds += 1
        self.asked = {}
        requests = []
        for base in sorted(self.tables):
            seed = secrets.token_hex(SEED_BYTES)
            request_id = f"authenticate-{secrets.token_hex(8)}"
            self.asked[base] = Asked(seed, request_id)
            self.past_seeds.append(seed)
            body = {"operator": "lammer authenticate", "request_id": request_id, "seed": seed}
            topic = request_topic(base, "authenticate", self.user)
            requests.append((topic, json.dumps(body)))
        return requests

    def end_round(self, timeout: float) -> None:
        """Every table asked that has not answered is ``silent``."""
        for base, asked in self.asked.items():
            if not asked.answered.is_set():
                table, version = self.tables.get(base, (base.rsplit("/", 1)[-1], None))
                verdict = Verdict(
                    "silent",
                    None,
                    None,
                    f"no answer to a fresh seed within {timeout:g} s: its software is unverified",
                )
                self._publish(table, version, verdict)
        self.asked = {}


def _now() -> str:
    now = datetime.now(UTC)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"


@dataclass(frozen=True, slots=True)
class Settings:
    """How ``lammer authenticate`` connects and how often it asks."""

    host: str
    port: int
    user: str | None
    password: str | None
    prefixes: tuple[str, ...]
    manifests: tuple[Manifest, ...]
    interval: float = INTERVAL_S
    timeout: float = TIMEOUT_S
    discover: float = 2.0
    """Seconds to gather the tables' retained ``info`` before the first round."""
    client_id: str = "lammer-authenticate"
    ca_file: Path | None = None


async def run(settings: Settings, *, rounds: int | None = None) -> Authenticator:
    """Authenticate every table each ``interval`` until cancelled, or for ``rounds``
    rounds. Returns the authenticator (its counts) when ``rounds`` ends it."""
    auth = Authenticator(settings.manifests, settings.prefixes, settings.user or "records")
    async with aiomqtt.Client(
        settings.host,
        settings.port,
        identifier=settings.client_id,
        username=settings.user,
        password=settings.password,
        keepalive=FLOOR_KEEPALIVE,
        tls_context=client_context(settings.ca_file),
    ) as client:
        observe_disconnect(client)
        for prefix in settings.prefixes:
            await client.subscribe(f"{prefix}/+/{Topic.INFO}", qos=1)
            await client.subscribe(f"{prefix}/+/response/authenticate", qos=1)
        reader = asyncio.create_task(_read(client, auth), name="authenticate reader")
        try:
            await asyncio.sleep(settings.discover)  # the retained info arrives meanwhile
            done = 0
            while rounds is None or done < rounds:
                started = time.monotonic()
                await _round(client, auth, settings.timeout)
                done += 1
                if rounds is not None and done >= rounds:
                    break
                await asyncio.sleep(max(0.0, settings.interval - (time.monotonic() - started)))
        finally:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader
    return auth


async def _read(client: aiomqtt.Client, auth: Authenticator) -> None:
    async for message in client.messages:
        payload = message.payload if isinstance(message.payload, bytes) else b""
        auth.received(str(message.topic), payload)


async def _round(client: aiomqtt.Client, auth: Authenticator, answer_within: float) -> None:
    for topic, payload in auth.begin_round():
        await client.publish(topic, payload, qos=1)
    waits = [asyncio.create_task(a.answered.wait()) for a in auth.asked.values()]
    if waits:
        _, pending = await asyncio.wait(waits, timeout=answer_within)
        for task in pending:
            task.cancel()
    auth.end_round(answer_within)
    published, auth.published = auth.published, []
    for topic, body in published:
        await client.publish(topic, json.dumps(body), qos=1, retain=True)
    log.info(
        "authentication round done",
        round=auth.rounds,
        tables=len(published),
        replays_refused=auth.replays_refused,
    )
